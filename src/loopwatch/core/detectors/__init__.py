"""Loop detectors. Each is a small class with a public factory and a readable ``repr``."""

from ._base import Detector, Finding, Step
from ._cycle import CycleDetector, cycle
from ._failures import (
    ErrorRetryDetector,
    FailureStreakDetector,
    FeedbackRepeatDetector,
    TestFixDetector,
    error_retry,
    failure_streak,
    feedback_repeat,
    test_fix_cycle,
)
from ._fuzzy import BehavioralDetector, DoomLoopDetector, behavioral, doom_loop
from ._ledger import SelfReportDetector, self_report
from ._monologue import MonologueDetector, monologue
from ._progress import NoProgressDetector, no_progress
from ._repeat import RepeatDetector, repeat
from ._rerun import RerunDetector, rerun
from ._revisit import RevisitDetector, revisit
from ._semantic import RephraseDetector, rephrase
from ._swarm import SwarmDetector, swarm
from ._text import ChantingDetector, SimilarTextDetector, chanting, similar_text

__all__ = [
    "BehavioralDetector",
    "ChantingDetector",
    "CycleDetector",
    "Detector",
    "DoomLoopDetector",
    "ErrorRetryDetector",
    "FailureStreakDetector",
    "FeedbackRepeatDetector",
    "Finding",
    "MonologueDetector",
    "NoProgressDetector",
    "RepeatDetector",
    "RephraseDetector",
    "RerunDetector",
    "RevisitDetector",
    "SelfReportDetector",
    "SimilarTextDetector",
    "Step",
    "SwarmDetector",
    "TestFixDetector",
    "behavioral",
    "chanting",
    "cycle",
    "doom_loop",
    "error_retry",
    "failure_streak",
    "feedback_repeat",
    "monologue",
    "no_progress",
    "repeat",
    "rephrase",
    "rerun",
    "revisit",
    "self_report",
    "similar_text",
    "swarm",
    "test_fix_cycle",
]
