"""Loop detectors. Each is a small class with a public factory and a readable ``repr``."""

from .base import Detector, Finding, Step
from .cycle import CycleDetector, cycle
from .failures import (
    ErrorRetryDetector,
    FailureStreakDetector,
    FeedbackRepeatDetector,
    TestFixDetector,
    error_retry,
    failure_streak,
    feedback_repeat,
    test_fix_cycle,
)
from .fuzzy import BehavioralDetector, DoomLoopDetector, behavioral, doom_loop
from .ledger import SelfReportDetector, self_report
from .progress import NoProgressDetector, no_progress
from .repeat import RepeatDetector, repeat
from .rerun import RerunDetector, rerun
from .revisit import RevisitDetector, revisit
from .semantic import RephraseDetector, rephrase
from .swarm import SwarmDetector, swarm
from .text import (
    ChantingDetector,
    MonologueDetector,
    SimilarTextDetector,
    chanting,
    monologue,
    similar_text,
)

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
