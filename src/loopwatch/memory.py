"""The behavioral preset's memory protocol: what a forced finish taught, written down and read back.

The ``behavioral`` preset reproduces a published design (a rolling window of similar actions: replan at 3, explore
at 5, force-done at 8) whose protocol also keeps a memory across tasks:

- after a force-done, a *learnings* entry: which tool looped, how many times, the final normalised arguments, a
  root-cause hypothesis and a recommendation;
- when force-done fires more than twice in one session, an *issues* entry;
- before the next task, the learnings are read back.

Here that is a sink and a reader. :class:`ForceDoneMemory` is an audit sink (``Guard(sinks=[...])``) that turns each
force-done stop into a learnings entry, in the design's own format::

    ## Behavioral Loop Detection — 2026-05-04
    - Task run-42: browser_click looped 8 times. Final normalized args: {"page":"checkout.html","selector":"#pay"}.
    - Root cause hypothesis: ...
    - Recommendation: ...

and writes it to a :class:`MarkdownMemory` (``learnings.md`` and ``issues.md`` in ``.claude/context/memory/`` by
default) or to any other loopwatch sink (:class:`SinkMemory`: records ``memory.learnings`` / ``memory.issues``).
:class:`RecallingGuard` reads the learnings back: the first nudge of a later run that loops on the same tool carries
what was learned about that tool; :meth:`MarkdownMemory.briefing` gives the recent learnings as text for a prompt
before a task starts.

Entries are built from the audit record (already redacted: no secret reaches the files). The hypothesis and the
recommendation are worded from what the record shows (the tool, its arguments, the nudges that went unheeded);
``explain=`` takes your own function (an LLM, say) instead.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from ._guard import Guard
from .core._checked import file_path, integer_at_least
from .core._events import Event
from .core._fingerprint import normalized_args
from .core._verdict import Verdict
from .redact import Redactor
from .sinks import AuditWriteError, Sink

__all__ = [
    "DEFAULT_FOLDER",
    "ForceDoneMemory",
    "Learning",
    "MarkdownMemory",
    "Memory",
    "RecallingGuard",
    "SinkMemory",
    "explain_force_done",
    "parse_learnings",
]

Kind = Literal["learnings", "issues"]
DEFAULT_FOLDER: Final = os.path.join(".claude", "context", "memory")
HEADING: Final = "Behavioral Loop Detection"
FORCE_DONE: Final = "FORCE_DONE"

Explain = Callable[[Mapping[str, Any]], "tuple[str, str]"]
"""``(audit record of the force-done) -> (root-cause hypothesis, recommendation)``."""


class Memory(Protocol):
    """Where entries go: ``append(kind, entry)`` with ``kind`` ``"learnings"`` or ``"issues"``; ``read(kind)`` gives
    back what was written (``""`` when it cannot be read back)."""

    def append(self, kind: Kind, entry: str) -> None: ...

    def read(self, kind: Kind) -> str: ...


@dataclass(frozen=True)
class Learning:
    """One learnings entry."""

    date: str
    task: str
    tool: str
    count: int
    args: str
    hypothesis: str
    recommendation: str

    def markdown(self) -> str:
        """The entry in the design's format (a heading and three bullets)."""
        return (
            f"## {HEADING} — {self.date}\n"
            f"- Task {self.task}: {self.tool} looped {self.count} times. Final normalized args: {self.args}.\n"
            f"- Root cause hypothesis: {self.hypothesis}\n"
            f"- Recommendation: {self.recommendation}\n"
        )


_ENTRY: Final = re.compile(
    rf"^## {HEADING} — (?P<date>[^\n]*)\n"
    r"- Task (?P<task>.*?): (?P<tool>\S+) looped (?P<count>\d+) times\. Final normalized args: (?P<args>.*)\.\n"
    r"- Root cause hypothesis: (?P<hypothesis>.*)\n"
    r"- Recommendation: (?P<recommendation>.*)$",
    re.MULTILINE,
)


def parse_learnings(text: str) -> list[Learning]:
    """The learnings entries of ``text`` (a ``learnings.md``), in file order; anything else is skipped."""
    return [
        Learning(
            date=m["date"].strip(),
            task=m["task"],
            tool=m["tool"],
            count=int(m["count"]),
            args=m["args"],
            hypothesis=m["hypothesis"].strip(),
            recommendation=m["recommendation"].strip(),
        )
        for m in _ENTRY.finditer(text)
    ]


class MarkdownMemory:
    """``learnings.md`` and ``issues.md`` in ``folder`` (created when first written). Each entry is appended in one
    write and flushed to disk; a failure raises :class:`~loopwatch.sinks.AuditWriteError` (counted by the guard)."""

    def __init__(self, folder: str | os.PathLike[str] = DEFAULT_FOLDER) -> None:
        self.folder = file_path(folder, "folder")
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MarkdownMemory({str(self.folder)!r})"

    def path(self, kind: Kind) -> Path:
        return self.folder / f"{kind}.md"

    def append(self, kind: Kind, entry: str) -> None:
        path = self.path(kind)
        with self._lock:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                fresh = not path.exists() or path.stat().st_size == 0
                with open(path, "a", encoding="utf-8") as out:
                    out.write(("" if fresh else "\n") + entry)
                    out.flush()
                    os.fsync(out.fileno())
            except OSError as exc:
                raise AuditWriteError(f"cannot write the {kind} entry: {exc.strerror or exc}", path=str(path)) from exc

    def read(self, kind: Kind) -> str:
        try:
            return self.path(kind).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def learnings(self, tool: str | None = None) -> list[Learning]:
        """The learnings written so far (about ``tool`` only, when given), oldest first."""
        found = parse_learnings(self.read("learnings"))
        return [entry for entry in found if tool is None or entry.tool == tool]

    def briefing(self, last: int = 5) -> str:
        """The last ``last`` learnings as markdown, to read before a task starts (``""`` when there are none)."""
        entries = self.learnings()[-last:]
        if not entries:
            return ""
        return "Loops detected in earlier tasks:\n\n" + "\n".join(entry.markdown() for entry in entries)


class SinkMemory:
    """Entries as records for any loopwatch sink (JSONL, a webhook...): ``{"event": "memory.learnings" or
    "memory.issues", "entry": markdown, ...}``. They cannot be read back from there."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def __repr__(self) -> str:
        return f"SinkMemory({self.sink!r})"

    def append(self, kind: Kind, entry: str) -> None:
        self.sink.emit({"event": f"memory.{kind}", "ts": datetime.now(timezone.utc).timestamp(), "entry": entry})

    def read(self, kind: Kind) -> str:
        return ""


def explain_force_done(record: Mapping[str, Any]) -> tuple[str, str]:
    """A root-cause hypothesis and a recommendation worded from a force-done's audit record."""
    evidence = record.get("evidence") if isinstance(record.get("evidence"), Mapping) else {}
    assert isinstance(evidence, Mapping)
    tool = str(evidence.get("tool") or "the tool")
    count = record.get("count")
    reason = str(record.get("reason") or "")
    unheeded = re.search(r"after (\d+) nudges?", reason)
    nudges = f"the {unheeded.group(1)} nudges to replan and to explore" if unheeded else "the nudges"
    hypothesis = (
        f"{tool} was called {count} times in a row with near-identical arguments and {nudges} did not change the "
        f"approach: the agent most likely did not get the result it expected from {tool} and had no other plan."
    )
    recommendation = (
        f"Say in the task prompt what to do when {tool} does not give the expected result (another tool or method, "
        f"or when to stop and report), and check that {tool}'s output tells the agent whether it worked."
    )
    return hypothesis, recommendation


def _date(record: Mapping[str, Any]) -> str:
    ts = record.get("ts")
    when = (
        datetime.fromtimestamp(ts, timezone.utc)
        if isinstance(ts, (int, float)) and not isinstance(ts, bool)
        else datetime.now(timezone.utc)
    )
    return when.date().isoformat()


def _normalized(evidence: Mapping[str, Any]) -> str:
    args = evidence.get("args")
    if isinstance(args, Mapping):
        return normalized_args(args)
    call = evidence.get("call")
    return str(call)[:200] if call else "{}"


class ForceDoneMemory:
    """An audit sink writing the memory protocol's entries: a learnings entry for each force-done stop, an issues
    entry when force-done fires more than ``issues_after`` times in one session.

    ``memory``: where entries go (default: :class:`MarkdownMemory` in ``.claude/context/memory``). ``task_of``: the
    task id of a record (default: its guard session). ``session_of``: the session force-dones are counted in
    (default: the record's swarm, else the process that runs this sink, ``pid N``). ``explain``: the hypothesis and
    recommendation (default: :func:`explain_force_done`).
    """

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        task_of: Callable[[Mapping[str, Any]], str] | None = None,
        session_of: Callable[[Mapping[str, Any]], str] | None = None,
        explain: Explain | None = None,
        issues_after: int = 2,
    ) -> None:
        integer_at_least(issues_after, 0, "issues_after")
        self.memory: Memory = memory if memory is not None else MarkdownMemory()
        self.task_of = task_of or (lambda record: str(record.get("session")))
        process = f"pid {os.getpid()}"
        self.session_of = session_of or (lambda record: str(record.get("swarm") or process))
        self.explain = explain or explain_force_done
        self.issues_after = issues_after
        self.force_dones: dict[str, list[tuple[str, str]]] = {}  # session -> (task, tool) of each force-done
        self._lock = threading.Lock()
        self._redactor = Redactor(enabled=True)

    def __repr__(self) -> str:
        return f"ForceDoneMemory({self.memory!r}, issues_after={self.issues_after})"

    def emit(self, record: Mapping[str, Any]) -> None:
        if record.get("event") != "loop.stop" or record.get("status") != FORCE_DONE:
            return
        record = self._redactor(record)  # like every sink: its own redacted copy, no secret in the files
        evidence = record.get("evidence") if isinstance(record.get("evidence"), Mapping) else {}
        assert isinstance(evidence, Mapping)
        hypothesis, recommendation = self.explain(record)
        learning = Learning(
            date=_date(record),
            task=self.task_of(record),
            tool=str(evidence.get("tool") or "?"),
            count=int(record.get("count") or 0),
            args=_normalized(evidence),
            hypothesis=" ".join(hypothesis.split()),
            recommendation=" ".join(recommendation.split()),
        )
        self.memory.append("learnings", learning.markdown())
        session = self.session_of(record)
        with self._lock:
            seen = self.force_dones.setdefault(session, [])
            seen.append((learning.task, learning.tool))
            crossed = len(seen) == self.issues_after + 1
            seen_now = list(seen)
        if crossed:
            self.memory.append("issues", _issue(learning.date, session, seen_now))

    def close(self) -> None:
        return None


def _issue(date: str, session: str, seen: list[tuple[str, str]]) -> str:
    tasks = ", ".join(dict.fromkeys(task for task, _ in seen))
    tools = ", ".join(dict.fromkeys(tool for _, tool in seen))
    return (
        f"## {HEADING} — {date}\n"
        f"- Session {session}: force-done fired {len(seen)} times (tasks {tasks}; tools {tools}).\n"
        f"- Root cause hypothesis: the agents of this session keep looping on {tools}: the tasks or the tools, not "
        "one unlucky run, are the likely cause.\n"
        "- Recommendation: review the learnings entries of these tasks and change the tool (its output, its "
        "errors) or the task prompts before running more tasks.\n"
    )


class RecallingGuard(Guard):
    """A :class:`~loopwatch.Guard` that keeps the memory protocol: force-done stops are written to ``memory``
    (with a :class:`ForceDoneMemory` sink added to the guard's sinks), and the first nudge of a run about a tool
    that looped before carries what was learned about it (the last learnings entry for that tool).

    Takes every argument a ``Guard`` takes, plus ``memory`` (default: :class:`MarkdownMemory` in
    ``.claude/context/memory``) and ``recorder`` (the sink that writes it, to pass ``issues_after`` or ``explain``).
    The preset defaults to ``behavioral``.
    """

    def __init__(
        self,
        preset: Any = None,
        *,
        memory: MarkdownMemory | None = None,
        recorder: ForceDoneMemory | None = None,
        sinks: Iterable[Sink] = (),
        max_recalled: int = 10_000,
        **kwargs: Any,
    ) -> None:
        self.memory = memory if memory is not None else MarkdownMemory()
        self.recorder = recorder if recorder is not None else ForceDoneMemory(self.memory)
        if preset is None and kwargs.get("policy") is None:
            preset = "behavioral"
        super().__init__(preset, sinks=[*sinks, self.recorder], **kwargs)
        self._recalled: OrderedDict[str, None] = OrderedDict()  # sessions whose first nudge has been given
        self._max_recalled = max_recalled
        self._recall_lock = threading.Lock()

    def observe(self, session: str, event: Event | Mapping[str, Any], *, swarm: str | None = None) -> Verdict:
        verdict = super().observe(session, event, swarm=swarm)
        if verdict.action != "nudge" or not verdict.message:
            return verdict
        with self._recall_lock:
            if session in self._recalled:
                return verdict
            self._recalled[session] = None
            while len(self._recalled) > self._max_recalled:
                self._recalled.popitem(last=False)
        tool = verdict.evidence.get("tool")
        if not isinstance(tool, str):
            return verdict
        learned = self.memory.learnings(tool)
        if not learned:
            return verdict
        last = learned[-1]
        note = (
            f"{verdict.message}\n\nAn earlier run ({last.task}, {last.date}) looped on {tool} {last.count} times. "
            f"Root cause then: {last.hypothesis} Recommendation: {last.recommendation}"
        )
        return replace(verdict, message=note, evidence={**verdict.evidence, "recalled": asdict(last)})
