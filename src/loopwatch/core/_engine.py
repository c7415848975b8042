"""The pure detection core: events -> steps (fingerprints) -> detectors -> policy -> verdict.

:class:`Engine` holds a :class:`~loopwatch.core.Policy` and no session data; every call takes the
session's state (a typed ``SessionState`` made by :meth:`Engine.new_session`, written as JSON by :meth:`Engine.dump`)
and updates it in place. It never reads a clock, a file or the network: its driver passes ``now`` in, and a way to
count the session's swarm-wide calls (:data:`~loopwatch.core._swarm_tally.SwarmCounter`). :meth:`Engine.evaluate` gives
the verdict with the audit records it calls for; :meth:`Engine.judged` does the same with a loop judge's answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ._audit import judge_record, verdict_records
from ._decide import Decision, Judged, decide, strength
from ._errors import ConfigError, StateError
from ._events import Event, Reset, ToolCall
from ._failure_signs import infer_failure as infer_failure  # documented here: whether a tool failed
from ._fingerprint import call_payload, payload_fingerprint, project
from ._limits import LimitHit
from ._messages import render
from ._patterns import REGISTRY
from ._policy import Policy
from ._session_state import (
    STATE_VERSION,
    LadderState,
    SessionState,
    packed_layout,
    read_packed,
    read_session,
    session_json,
    session_packed,
)
from ._steps import account_usage, step_of
from ._swarm_tally import SwarmCounter
from ._tools import ignored_keys
from ._verdict import LOOP_DETECTED, Action, Verdict, ok
from .detectors._base import Detector, Finding, Step, signature_of
from .detectors._state import flat_get
from .detectors._swarm import SwarmDetector

if TYPE_CHECKING:
    from ._judge import JudgeAnswer, LoopJudge


class Evaluation(NamedTuple):
    """An event's verdict and the audit records it calls for (none for ``ok``, nor for a session stopped before)."""

    verdict: Verdict
    records: tuple[dict[str, Any], ...] = ()


class Engine:
    """Runs a policy's detectors over one session's events; see the module docstring."""

    def __init__(self, policy: Policy, *, replay: bool = False) -> None:
        if not isinstance(policy, Policy):  # (not checked by the compiled build: Policy is a Python class)
            raise ConfigError(
                f"expected a Policy (loopwatch.preset() gives one), got {type(policy).__name__}", field="policy"
            )
        self.policy = policy
        self.replay = replay
        """Judging a recording: no verdict reaches the agent, so a refused call that ran anyway was not refused."""
        self._detectors, self._tools = policy.detectors, policy.tools  # (the tools' settings: read at every event)
        self._limited = bool(policy.limits)  # (asked once: Limits.__bool__ is Python)
        self._reprs = [repr(d) for d in policy.detectors]
        self._undecided = [i for i, d in enumerate(policy.detectors) if type(d).suspicion is not Detector.suspicion]
        """The rules that can be undecided (see :meth:`Detector.suspicion`): asked only when nothing fired."""
        self._evidence = REGISTRY.evidence()
        """Per pattern, the finding facts its verdicts carry as evidence (declared with the pattern)."""
        self.counts_swarms = any(isinstance(d, SwarmDetector) for d in policy.detectors)
        """Does the policy have a rule that reads swarm-wide counts (else no call is ever counted)?"""
        # per step kind, the detectors that look at it: (index into the session's detector states, the detector,
        # how its state is kept: _OWN, or shared while fresh and _KEPT_FRESH by steps of this kind or _ASK)
        self._by_kind = {
            kind: [(i, d, _sharing(d, kind)) for i, d in enumerate(policy.detectors) if kind in d.kinds]
            for kind in ("call", "result", "message", "delta", "usage")
        }
        self._fresh = [d.new_state() if d.fresh_shared else None for d in policy.detectors]
        """Per rule that shares a fresh state (:attr:`Detector.fresh_shared`), that state: what a session's ``None``
        stands for (never changed)."""

    # -- session state ---------------------------------------------------------------------------------

    def new_session(self) -> SessionState:
        return SessionState(detectors=self._new_states())

    def _new_states(self) -> list[Any]:
        """Fresh rule states for a session (``None`` for a rule that shares its fresh state)."""
        return list(tuple(None if d.fresh_shared else d.new_state() for d in self._detectors))  # no room to spare

    def _state(self, session: SessionState, i: int) -> Any:
        """The session's state of rule ``i`` (the shared fresh state for ``None``: read it, never change it)."""
        state = session.detectors[i]
        return self._fresh[i] if state is None else state

    def reset(self, session: SessionState, *, limits: bool = False) -> None:
        """Clear loop state (streaks, ladders, a stop); limits keep counting unless ``limits=True``."""
        session.detectors = self._new_states()
        session.ladders = ()
        session.stopped = None
        if limits:
            session.reset_usage()
            session.warned = ()

    def _reset_for_user(self, session: SessionState) -> None:
        states = session.detectors
        for i, detector in enumerate(self._detectors):
            if detector.reset_on_user:
                states[i] = None if detector.fresh_shared else detector.new_state()
        session.ladders = ()

    def dump(self, session: SessionState) -> dict[str, Any]:
        """The JSON form of a session (the ``doom-loop`` design's toJSON)."""
        states = [d.dump_state(self._state(session, i)) for i, d in enumerate(self._detectors)]
        return session_json(session, states, self.policy.name)

    @cached_property
    def layout(self) -> str:
        """The layout of the sessions this engine packs (:func:`~._session_state.packed_layout`)."""
        return packed_layout(self._detectors)

    def pack(self, session: SessionState) -> tuple[Any, ...]:
        """The packed form of a session, for a store (:func:`~._session_state.session_packed`)."""
        return session_packed(session, self._detectors, self.layout)

    def unpack(self, packed: Any) -> SessionState:
        """A session from its packed form (:meth:`pack`); raises :class:`StateError` when it is not one this engine
        packs (damaged data), :class:`~loopwatch.errors.OtherLayoutError` when it was packed with other rules (another
        policy's, a loopwatch whose rules keep other fields)."""
        try:
            return read_packed(packed, self._detectors, self.layout)
        except StateError:  # another layout (OtherLayoutError), said as it is
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"not a packed session state of this policy: {exc}") from exc

    def load(self, data: Mapping[str, Any]) -> SessionState:
        """A session from its JSON form (the ``doom-loop`` design's restoreFrom); raises :class:`StateError`.

        A snapshot of this policy taken before it gained rules, or while it held rules it has since retired
        (:attr:`Policy.retired`), loads: the new rules start afresh, the retired rules' states are dropped."""
        try:
            if data.get("v") != STATE_VERSION:
                raise StateError(f"unsupported state version {data.get('v')!r}")
            states = list(data["detectors"])
            if data.get("policy") == self.policy.name:
                for gone in sorted(self.policy.retired, key=lambda retired: -retired.position):
                    # taken while the policy held a rule it no longer does: that rule's state goes
                    held = states[gone.position] if len(states) > gone.position else None
                    if isinstance(held, Mapping) and held.keys() == gone.keys:
                        del states[gone.position]
                if len(states) < len(self._detectors):
                    # taken before this policy gained rules (new rules go last): they start afresh
                    states += [d.dump_state(d.new_state()) for d in self._detectors[len(states) :]]
            if len(states) != len(self._detectors):
                raise StateError("the snapshot was taken with a different set of detectors")
            loaded = [d.load_state(dict(s)) for d, s in zip(self._detectors, states, strict=True)]
            for i, detector in enumerate(self._detectors):
                if detector.fresh_shared and detector.is_fresh(loaded[i]):
                    loaded[i] = None
            return read_session(data, loaded)
        except StateError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"not a loopwatch session state: {exc}") from exc

    # -- observing -------------------------------------------------------------------------------------

    def evaluate(
        self,
        state: SessionState,
        event: Event,
        *,
        session: str,
        now: float | None = None,
        swarm: str | None = None,
        count_swarm: SwarmCounter | None = None,
    ) -> Evaluation:
        """Judge one event of the session named ``session`` (its state ``state``, updated in place): the verdict
        and its audit records (``loop.nudge``/``block``/``stop``, ``limit.warning``, ``session.terminated``),
        stamped ``now`` and with the session's ``swarm`` name. ``count_swarm`` counts a call in the session's
        swarm (see :meth:`observe`)."""
        was_stopped = state.stopped is not None
        verdict = self.observe(state, event, now=now, worker=session, count_swarm=count_swarm)
        if verdict.action == "ok" or was_stopped:
            return tuple.__new__(Evaluation, (verdict, ()))  # Evaluation(verdict), not through its Python __new__
        return tuple.__new__(Evaluation, (verdict, verdict_records(session, event, verdict, now, swarm)))

    def judged(
        self,
        verdict: Verdict,
        answer: JudgeAnswer,
        judge: LoopJudge,
        *,
        session: str,
        event: Event,
        suspicion: str,
        now: float | None = None,
        swarm: str | None = None,
    ) -> Evaluation:
        """A loop judge's ``answer`` about an undecided ``ok`` (``verdict``, its suspicion ``suspicion``): a
        ``judged_loop`` nudge when the judge says "loop" with at least its ``min_confidence``, else ``verdict``;
        with the ``judge.verdict`` record (and the nudge's)."""
        answered = {"loop": answer.loop, "confidence": answer.confidence, "reason": answer.reason}
        said = judge_record(session, verdict.index, now, judge=repr(judge), suspicion=suspicion, **answered)
        if not answer.loop or answer.confidence < judge.min_confidence:
            return Evaluation(verdict, (said,))
        reason = f"the loop judge says: {answer.reason or 'the agent is going in circles'}"
        template = self.policy.messages.template("judged_loop", 1, "nudge")
        nudge = Verdict(
            action="nudge",
            index=verdict.index,
            pattern="judged_loop",
            count=1,
            level=1,
            message=render(template, {"reason": answer.reason or "the same thing again", "count": 1}),
            reason=reason,
            detector=repr(judge),
            evidence={"undecided": suspicion, "undecided_by": verdict.detector, "judge": answered},
        )
        return Evaluation(nudge, (said, *verdict_records(session, event, nudge, now, swarm)))

    def observe(
        self,
        session: SessionState,
        event: Event,
        *,
        now: float | None = None,
        worker: str | None = None,
        count_swarm: SwarmCounter | None = None,
    ) -> Verdict:
        """Judge one event of ``session`` and return the verdict.

        ``worker`` names the session's worker when the event does not (swarm-wide counts use it).
        ``count_swarm``: for a session in a swarm, counts a call in the swarm (``count_swarm(fingerprint, worker,
        tool)``, kept by the session backend) and gives the tally the swarm rule reads; called once for every
        tool call (a stopped session's and an exempt tool's too: the swarm made them), never when the policy has
        no swarm rule.
        """
        index = session.index
        session.index = index + 1
        stopped = session.stopped
        if stopped is not None and not isinstance(event, Reset):
            if count_swarm is not None and isinstance(event, ToolCall) and self.counts_swarms:
                count_swarm(self.call_fingerprint(event), event.worker or worker or "default", event.tool)
            return Verdict(**{**stopped, "index": index})
        step = step_of(session, event, index, self._projected)
        if step.worker is None:
            step.worker = worker
        if count_swarm is not None and step.kind == "call" and self.counts_swarms:
            step.swarm = count_swarm(step.call_fp or "", step.worker or "default", step.tool or "")
        account_usage(session, step, now)
        if step.kind == "reset":
            self.reset(session)
            return ok(index)
        if step.kind == "message" and step.role == "user" and self.policy.reset_on_user and _human(event.worker):
            # a person's new prompt starts afresh; a reply seen lately (a harness's canned complaint, the fixed
            # prompts of its rounds, "continue" again) is not new information
            signature = signature_of(step)
            recent = session.last_user
            if signature not in recent:
                self._reset_for_user(session)
            session.last_user = (*(s for s in recent if s != signature), signature)[-_RECENT_REPLIES:]
        refusals = self._refusals(session, step)
        best = _stronger(self._run_detectors(session, step), self._check_limits(session, index))
        if best is not None and best.action == "block" and step.kind == "call":
            best = self._refused(session, step, best, refusals)
        if best is None:
            return self._undecided_ok(session, index) if self._undecided else ok(index)
        session.last = (index, best.action, best.pattern, best.level)
        if best.action == "stop":
            session.stopped = {k: v for k, v in best.to_json().items() if k in _STOP_FIELDS}
        return best

    def _refusals(self, session: SessionState, step: Step) -> int:
        """How many times in a row the call of this step was refused and made again anyway. Live, each refusal
        reached the agent (the call did not run, or, where an integration cannot refuse, the refusal was shown to
        the model); in a replay (:attr:`replay`) a result for a refused call means the recorded agent never saw
        the refusal: the count starts over."""
        refused = session.refused
        if refused is None:
            return 0
        if step.kind == "result":
            if self.replay and step.call_index == refused[0]:
                session.refused = None
            return 0
        if step.kind != "call":
            return 0
        if step.call_fp != refused[1]:
            session.refused = None
            return 0
        return refused[2] + 1

    def _refused(self, session: SessionState, step: Step, block: Verdict, refusals: int) -> Verdict:
        """Remember a refused call; the ``stop_after_refusals``-th time the same call comes back after being refused
        (the refusals were seen and ignored), the run is stopped."""
        session.refused = (step.index, step.call_fp, refusals)
        limit = self.policy.stop_after_refusals
        if limit is None or refusals < limit:
            return block
        ignored = block.evidence.get("ignored_nudges", [])
        reason = f"{block.reason}; refused {refusals} times and called again each time"
        evidence = {**block.evidence, "refusals_ignored": refusals, "ignored_nudges": ignored}
        template = self.policy.messages.template(block.pattern or "", block.level + 1, "stop")
        message = render(template, {"reason": reason, "count": block.count, "tool": step.tool or ""})
        return replace(
            block, action="stop", level=block.level + 1, status=LOOP_DETECTED, reason=reason, message=message,
            evidence=evidence,
        )  # fmt: skip

    def _undecided_ok(self, session: SessionState, index: int) -> Verdict:
        """``ok``, with ``evidence["undecided"]`` when a rule is undecided about this step (for a judge)."""
        for i in self._undecided:
            state = session.detectors[i]
            suspicion = self._detectors[i].suspicion(self._fresh[i] if state is None else state, index)
            if suspicion is not None:
                return Verdict(index=index, detector=self._reprs[i], evidence={"undecided": suspicion})
        return ok(index)

    def call_fingerprint(self, event: ToolCall) -> str:
        """The exact fingerprint the engine gives ``event`` (what swarm-wide counts are kept by, what
        ``loopwatch explain`` shows)."""
        payload, _ = call_payload(self._projected(event.tool, event.args))
        return payload_fingerprint(event.tool, payload)

    def _projected(self, tool: str, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """The arguments the fingerprints see: without the keys that do not change what the call does (the
        tool's known annotations, see :mod:`loopwatch.core._tools`, and the tool's or the policy's ignored keys); only
        the tool's ``keep_keys`` when it has them."""
        settings = self._tools.get(tool)
        keep = settings.keep_keys if settings else None
        if keep is not None:
            return project(args, keep_keys=keep)
        ignore = settings.ignore_keys if settings and settings.ignore_keys else self.policy.ignore_keys
        known = ignored_keys(tool, args)
        return project(args, ignore_keys=known.union(ignore) if known else ignore)

    def _exempt(self, step: Step) -> bool:
        settings = self._tools.get(step.tool) if step.tool else None
        return settings is not None and settings.exempt

    def _run_detectors(self, session: SessionState, step: Step) -> Verdict | None:
        if step.tool is not None and self._exempt(step):
            return None
        states = session.detectors
        best: Judged | None = None  # the strongest answer so far (see strength), made a verdict only at the end
        for i, detector, sharing in self._by_kind[step.kind]:
            if sharing is _OWN:
                finding = detector.observe(states[i], step)
            else:
                state = states[i]
                if state is None:  # fresh: made only for a step that may change it
                    if sharing is _KEPT_FRESH or detector.keeps_fresh(step):
                        continue
                    state = states[i] = detector.new_state()
                finding = detector.observe(state, step)
                if detector.is_fresh(state):
                    states[i] = None
            if finding is None:
                continue
            judged = self._judge(session, step, finding, self._reprs[i])
            if judged is not None and (best is None or judged.rank > best.rank):  # a tie: the earlier rule's
                best = judged
        if best is None:
            return None
        return self._verdict(step, best.finding, best.decision, best.detector, best.nudges)

    def _judge(self, session: SessionState, step: Step, finding: Finding, detector: str) -> Judged | None:
        """The ladder's answer to ``finding`` (its state kept up to date), with what its verdict will be made of:
        the verdict itself is made only for the strongest answer to the step (:meth:`_run_detectors`)."""
        ladder = self.policy.ladder(finding.pattern, step.tool)
        if ladder is None:
            return None
        ladder_state: LadderState | None = flat_get(session.ladders, finding.pattern)
        if ladder_state is None:
            ladder_state = LadderState(finding.key)
            session.ladders = (*session.ladders, finding.pattern, ladder_state)
        decision = decide(ladder, ladder_state, finding, step.index, hard_evidence=self.policy.hard_evidence)
        if decision is None:
            return None
        rank = strength(decision.action, decision.level, finding.pattern, finding.count)
        return Judged(rank, finding, decision, detector, ladder_state.nudges)

    def _verdict(
        self, step: Step, finding: Finding, decision: Decision, detector: str, nudges: tuple[tuple[int, int], ...] = ()
    ) -> Verdict:
        fields = {"count": finding.count, "reason": finding.reason, "tool": step.tool or "", **finding.facts}
        template = decision.rung.message or self.policy.messages.template(
            finding.pattern, decision.level, decision.action
        )
        status = decision.rung.status or (LOOP_DETECTED if decision.action == "stop" else None)
        evidence: dict[str, Any] = {"indices": list(finding.indices)}
        for key in self._evidence.get(finding.pattern, ()):
            if key in finding.facts:
                evidence[key] = finding.facts[key]
        if step.kind == "call" and step.args is not None:
            evidence["args"] = step.args
        reason = render(decision.rung.reason, fields) if decision.rung.reason else finding.reason
        if decision.action != "nudge":
            # what repeated, how often, and which warnings it ignored: what an operator needs to trust a stop
            evidence["repeated"] = {"pattern": finding.pattern, "count": finding.count, "hard": finding.hard}
            evidence["unit"] = finding.facts.get("call") or finding.facts.get("error") or finding.key
            ignored = [{"index": index, "level": level} for index, level in nudges if index < step.index]
            evidence["ignored_nudges"] = ignored
            if ignored and not decision.rung.reason:  # a rung's own reason (a preset's documented text) stays as is
                steps = ", ".join(str(n["index"]) for n in ignored)
                plural = "s" if len(ignored) > 1 else ""
                reason += f" (after {len(ignored)} nudge{plural} at step{plural} {steps} went unheeded)"
        return Verdict(
            action=decision.action,
            index=step.index,
            pattern=finding.pattern,
            count=finding.count,
            level=decision.level,
            loop_start=finding.loop_start,
            status=status,
            message=render(template, fields),
            reason=reason,
            detector=detector,
            evidence=evidence,
            partial=decision.rung.partial,
        )

    def _check_limits(self, session: SessionState, index: int) -> Verdict | None:
        if not self._limited:
            return None
        hit = self.policy.limits.check(session)
        if hit is None:
            return None
        if hit.warning:
            if hit.status in session.warned:
                return None
            session.warned = (*session.warned, hit.status)
        return self._limit_verdict(hit, index)

    def _limit_verdict(self, hit: LimitHit, index: int) -> Verdict:
        action: Action = "nudge" if hit.warning else "stop"
        template = self.policy.messages.template("limit", 1 if hit.warning else 2, action)
        return Verdict(
            action=action,
            index=index,
            pattern="limit",
            count=int(hit.value) if float(hit.value).is_integer() else 0,
            level=1 if hit.warning else 2,
            status=hit.status,
            message=render(template, {"reason": hit.reason}),
            reason=hit.reason,
            detector=repr(next(lim for lim in self.policy.limits if lim.status == hit.status)),
            evidence={"value": hit.value, "limit": hit.limit},
        )


_OWN: Final = "own"
"""A rule whose sessions each keep a state of their own."""
_KEPT_FRESH: Final = "kept fresh"
"""A rule whose fresh state is shared (:attr:`Detector.fresh_shared`), on a kind of step that keeps it fresh."""
_ASK: Final = "ask"
"""A rule whose fresh state is shared, on a kind of step that may change it (:meth:`Detector.keeps_fresh` says)."""


def _sharing(detector: Detector[Any], kind: str) -> str:
    if not detector.fresh_shared:
        return _OWN
    return _KEPT_FRESH if kind in detector.fresh_kinds else _ASK


_RECENT_REPLIES: Final = 4
"""User replies remembered: one of them again is not a new prompt."""
_HUMANS: Final = frozenset({"user", "human", "customer", "client", "operator", "person"})


def _human(worker: str | None) -> bool:
    """Is a ``user`` message a person's? In a multi-agent transcript the other agents' turns are often recorded
    as ``user`` messages with the agent's name (``Validation_Expert``): they are not a new prompt."""
    return worker is None or worker.strip().lower() in _HUMANS


_STOP_FIELDS: Final = (
    "action",
    "pattern",
    "count",
    "level",
    "loop_start",
    "status",
    "message",
    "reason",
    "detector",
    "partial",
)


def _stronger(a: Verdict | None, b: Verdict | None) -> Verdict | None:
    """The verdict that should win (see :func:`~loopwatch.core._decide.strength`; a tie: ``a``)."""
    if a is None or b is None:
        return a if b is None else b
    return b if strength(b.action, b.level, b.pattern, b.count) > strength(a.action, a.level, a.pattern, a.count) else a
