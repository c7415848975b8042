"""Failures: the same error retried (:class:`ErrorRetryDetector`), failure streaks across tools
(:class:`FailureStreakDetector`), test-fix cycles (:class:`TestFixDetector`) and repeated harness complaints
(:class:`FeedbackRepeatDetector`), one private module each; what a failure says (its error lines, excerpt and
sketch) is in ``_failure_text``."""

from __future__ import annotations

from ._error_retry import ErrorRetryDetector, ErrorRetryState, Streak, error_retry
from ._failure_streak import FailureStreakDetector, FailureStreakState, SearchItem, failure_streak
from ._failure_text import error_bits, error_bits_of, error_excerpt, error_words, excerpt_of
from ._feedback import FeedbackRepeatDetector, FeedbackState, feedback_repeat
from ._test_fix import TestFixDetector, TestFixState, is_test_command, test_fix_cycle

__all__ = [
    "ErrorRetryDetector",
    "ErrorRetryState",
    "FailureStreakDetector",
    "FailureStreakState",
    "FeedbackRepeatDetector",
    "FeedbackState",
    "SearchItem",
    "Streak",
    "TestFixDetector",
    "TestFixState",
    "error_bits",
    "error_bits_of",
    "error_excerpt",
    "error_retry",
    "error_words",
    "excerpt_of",
    "failure_streak",
    "feedback_repeat",
    "is_test_command",
    "test_fix_cycle",
]
