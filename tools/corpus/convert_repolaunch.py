#!/usr/bin/env python3
"""Convert RepoLaunch logs (SWE-bench-Live/RepoLaunch-trajectory-archive) to loopwatch trajectories.

Each ``<lang>/playground/<instance>/setup.log`` and ``organize.log`` is one run (phase ``setup`` or
``organize``). A log is a Python ``logging`` file; the agent's turns are LangChain ``pretty_repr`` blocks:

    2026-04-30 03:22:26,527 -
    ================================== Ai Message ==================================

    Thought: ...
    Action: <command>apt-get update</command>

     -- <step_cost> input_tok: ..., output_tok: ..., cost_usd: ... </step_cost>

    2026-04-30 03:22:33,980 -
    ================================ Human Message =================================

    Observation:
    <command echo and output>
    root@host:/testbed $

    exit code: 0

A log holds several conversations, each a fresh agent context started by a ``----------Start X
conversation----------`` line: ``setup`` and ``verify`` (setup.log; a second trial repeats them), ``rebuild``,
``test``, ``parse log`` and ``unit test`` (organize.log). Every Ai Message is one model reply; the action is
read from it exactly as RepoLaunch's action parser for that conversation does (the first ``<tag>...</tag>`` of
the first tag, in the conversation's priority order, that has non-empty content). Mapping:

- a reply with an action -> ``assistant`` step with ``tool`` = the action name (``command``, ``search``,
  ``python``, ``submit``, ``stop``, ``issue``, ``analyze``), ``args`` (``command`` for shell commands; see
  ``action_args``), ``text`` = the reply without the action element (its Thought) and without
  ``-- <step_cost> ... </step_cost>`` lines (cost annotations: the logger appends one, and replies themselves
  often carry copies of earlier ones);
- the next Human Message -> ``tool`` step with the observation (the ``Observation:`` prefix removed).
  ``is_error``: for shell commands the logged ``exit code: N`` (N != 0); for other actions true for an explicit
  harness rejection or error message, false for an explicit success message (``REJECTIONS``/``SUCCESSES``),
  otherwise null; the rebuild conversation's accepted ``submit`` has no Human Message, its result is the
  harness line ``Verification PASSED ...`` (false); a rejected one is answered by ``ENFORCED VERIFICATION
  FAILED ...`` (true);
- a reply with no parsable action -> ``assistant`` step without ``tool``; the harness's format complaint that
  follows -> ``user`` step with ``is_error`` true;
- the start of each conversation -> ``system`` step (``Start setup conversation``) with ``new_context`` true
  (the model starts from a fresh context there: loop tracking starts afresh), and a harness exception
  (``!!! Exception: ...``, ``Traceback ...``) -> ``system`` step. Other harness log lines (file relevance,
  base image choice, container start, timings) are not steps.

Terminal actions (``stop``, an accepted ``submit``) have no logged result: their call is not followed by a
``tool`` step.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_common import (
    Blob,
    Converted,
    GitSource,
    Record,
    SourceError,
    Step,
    Tally,
    call_step,
    common_arguments,
    decode,
    finish,
    limited,
    load_json,
    message_step,
    result_step,
)

SOURCE = "repolaunch"
REPOSITORY = "SWE-bench-Live/RepoLaunch-trajectory-archive"
COMMIT = "e068854f5e74252b1f312036aade64e5eda1ebdf"

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - ")
HEADER = re.compile(r"=+ (Ai|Human) Message =+\s*$")
START = re.compile(r"-{5,}Start (.+?) conversation-{5,}\s*$")
EXCEPTION = ("!!! Exception", "Traceback (most recent call last)")
# Messages RepoLaunch itself logs; a timestamped line with any other text belongs to the message before it
# (tool output can contain timestamped lines of its own, e.g. Zephyr's twister).
HARNESS_PREFIXES = (
    "----------",
    "Agent submitted commands:",
    "Automatically verifying",
    "Verification PASSED",
    "Verification FAILED",
    "Verification failed due to",
    "The setup is successful",
    "Rerunning test command:",
    "Running print command:",
    "Test output saved",
    "No test output",
    "setup state:",
    "Duration:",
    "Setup completed successfully",
    "Image ",
    "Result saved to:",
    "Failed to cleanup",
    "Loading image",
    "Using language:",
    "Setting up environment",
    "Repo root in the host",
    "No language-specific server",
    "Language-specific server",
    "Docker attempt",
    "All 3 Docker attempts",
    "Waiting ",
    "Session started",
    "Starting bash session",
    "Selected base image",
    "Located related files",
    "Potential files",
    "File: ",
    "Start determine relevance",
    *EXCEPTION,
)

# Per conversation, the action tags in the order RepoLaunch's parser tries them (launch/agent/**). ``stop`` in
# the setup conversation only needs "<stop>" and "</stop>" somewhere in the reply.
ACTION_ORDER: dict[str, tuple[str, ...]] = {
    "setup": ("command", "search", "stop"),
    "verify": ("command", "issue"),
    "rebuild": ("command", "search", "submit"),
    "test": ("submit", "python", "command", "search"),
    "parse log": ("submit", "python", "analyze"),
    "unit test": ("submit", "python", "command", "search"),
}

# Harness answers to a non-command action that say it was refused or failed (is_error true) ...
REJECTIONS = (
    "No improved parser available",
    "Your last parser did not return any test case",
    "Your submission cannot be parsed",
    "You have not yet provided a valid parser",
    "Your parser did not succeed",
    "Your parser did not extract any test status",
    "Your python parser script should return",
    "Your python parser must return",
    "Error testing parser:",
    "No parser script available",
    "You submit your answer with <submit>",  # only sent when the submission is refused
    "ENFORCED VERIFICATION FAILED",
    "The correct way to submit is",
    "Unknown action",
)
# ... or that it worked (is_error false).
SUCCESSES = (
    "Below is the execution result of your Python script",
    "Test results for improved parser",
    "Verification PASSED",
)
FORMAT_COMPLAINTS = ("Please using following format", "Please use the following format")
EXIT_CODE = re.compile(r"\nexit code: (-?\d+)\s*$")
COST_LINE = re.compile(r"^[ \t]*-- <step_cost>[^\n]*</step_cost>[ \t]*(?:\n|\Z)", re.MULTILINE)


@dataclass
class LogRecord:
    kind: str  # "ai", "human" or "harness"
    line: int  # 1-based line of the record's timestamp
    text: str  # body (ai/human) or the log message (harness)


def split_records(text: str) -> Iterator[LogRecord]:
    """The log's records: Ai/Human message blocks and RepoLaunch's own log lines, in file order."""
    lines = text.split("\n")
    current: LogRecord | None = None
    body: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stamp = TIMESTAMP.match(line)
        record: LogRecord | None = None
        if stamp:
            rest = line[stamp.end() :]
            header = HEADER.match(rest) or (
                HEADER.match(lines[i + 1]) if rest.strip() == "" and i + 1 < len(lines) else None
            )
            if header:
                record = LogRecord("ai" if header.group(1) == "Ai" else "human", i + 1, "")
                if not HEADER.match(rest):
                    i += 1  # the header is on the next line
            elif rest.startswith(HARNESS_PREFIXES):
                record = LogRecord("harness", i + 1, rest)
        if record is not None:
            if current is not None:
                current.text += "\n".join(body)
                yield current
            current, body = record, []
        elif current is not None:
            body.append(line)
        i += 1
    if current is not None:
        current.text += "\n".join(body)
        yield current


def message_body(raw: str) -> str:
    """A message block's content: pretty_repr puts one blank line after the header."""
    return raw[1:] if raw.startswith("\n") else raw


def drop_cost_footers(text: str) -> str:
    """The text without its ``-- <step_cost> ... </step_cost>`` lines (cost annotations, not reasoning)."""
    return COST_LINE.sub("", text).strip()


def parse_action(conversation: str, reply: str) -> tuple[str, str | None, tuple[int, int] | None] | None:
    """(action, content, span of the element in ``reply``) as RepoLaunch would parse the reply, or None."""
    offset = 0
    if "<think>" in reply:
        cut = reply.find("</think>")
        # RepoLaunch takes reply.split("</think>")[1]; without a closing tag that raises, and no action is read
        if cut < 0:
            return None
        offset = cut + len("</think>")
        end = reply.find("</think>", offset)
        cleaned = reply[offset:] if end < 0 else reply[offset:end]
    else:
        cleaned = reply
    for tag in ACTION_ORDER[conversation]:
        if tag == "stop" and conversation == "setup":
            if "<stop>" in cleaned and "</stop>" in cleaned:
                m = re.search(r"<stop>.*?</stop>", cleaned, re.DOTALL)
                span = (m.start() + offset, m.end() + offset) if m else None
                return "stop", None, span
            continue
        m = re.search(f"<{tag}>(.*?)</{tag}>", cleaned, re.DOTALL)
        if m and m.group(1):
            return tag, m.group(1), (m.start() + offset, m.end() + offset)
    return None


def reply_thought(reply: str, span: tuple[int, int] | None) -> str:
    """The reply without the parsed action element (and an ``Action:`` label right before it)."""
    if span is None:
        return reply.strip()
    before = re.sub(r"Action:\s*$", "", reply[: span[0]])
    return (before.rstrip() + "\n" + reply[span[1] :].lstrip()).strip()


SUBMIT_PARTS = ("test_command", "print_command", "parser")


def action_args(conversation: str, action: str, content: str | None) -> dict[str, Any]:
    if action == "command":
        return {"command": content}
    if action == "search":
        return {"query": content}
    if action == "python":
        return {"script": content}
    if action == "issue":
        return {"issue": content}
    if action == "analyze":
        return {"analysis": content}
    if action == "stop":
        return {}
    # submit
    if conversation == "rebuild":
        return {"command": content}  # the rebuild commands, which the harness runs
    if conversation == "test":
        parts = {p: re.search(f"<{p}>(.*?)</{p}>", content or "", re.DOTALL) for p in SUBMIT_PARTS}
        if all(parts.values()):
            return {p: m.group(1).strip() for p, m in parts.items() if m}
    return {"text": content}


def result_error(action: str, observation: str) -> bool | None:
    if action == "command":
        m = EXIT_CODE.search(observation)
        if m:
            return int(m.group(1)) != 0
    head = observation.lstrip()
    if head.startswith(REJECTIONS):
        return True
    if head.startswith(SUCCESSES):
        return False
    return None


@dataclass
class Conversion:
    steps: list[Step] = field(default_factory=list)
    conversations: list[dict[str, Any]] = field(default_factory=list)
    language_name: str | None = None
    unparsed_replies: int = 0


def convert_log(path: str, text: str) -> Conversion:
    conv = Conversion()
    steps = conv.steps
    conversation: str | None = None
    pending: tuple[str, str] | None = None  # (action, conversation) of a call awaiting its result
    pending_message = False  # a reply without action awaits the harness's complaint
    for rec in split_records(text):
        if rec.kind == "harness":
            if rec.text.startswith("Using language:") and conv.language_name is None:
                conv.language_name = rec.text.split(":", 1)[1].strip()
            start = START.match(rec.text)
            if start:
                conversation = start.group(1)
                if conversation not in ACTION_ORDER:
                    raise SourceError(path, f"unknown conversation {conversation!r}", rec.line)
                conv.conversations.append({"name": conversation, "first_step": len(steps), "log_line": rec.line})
                steps.append(message_step("system", f"Start {conversation} conversation", new_context=True))
                pending, pending_message = None, False
            elif rec.text.startswith("Verification PASSED") and pending == ("submit", "rebuild"):
                steps.append(result_step("submit", rec.text.strip(), False))
                pending = None
            elif rec.text.startswith(EXCEPTION):
                steps.append(message_step("system", rec.text.strip()))
                pending, pending_message = None, False
            continue
        if conversation is None:
            raise SourceError(path, f"{rec.kind} message before any conversation started", rec.line)
        body = message_body(rec.text)
        if rec.kind == "ai":
            reply = body.rstrip()
            parsed = parse_action(conversation, reply)
            if parsed is None:
                steps.append(message_step("assistant", drop_cost_footers(reply)))
                conv.unparsed_replies += 1
                pending, pending_message = None, True
            else:
                action, content, span = parsed
                thought = drop_cost_footers(reply_thought(reply, span))
                steps.append(call_step(action, action_args(conversation, action, content), thought))
                pending, pending_message = (action, conversation), False
            continue
        # a Human Message
        content = body.rstrip("\n")
        observation = content[len("Observation:") :].lstrip("\n") if content.startswith("Observation:") else content
        if pending is not None:
            steps.append(result_step(pending[0], observation, result_error(pending[0], observation)))
        elif pending_message:
            is_error = True if observation.lstrip().startswith(FORMAT_COMPLAINTS) else None
            steps.append(message_step("user", content, is_error))
        else:
            is_error = True if content.lstrip().startswith(REJECTIONS) else None
            steps.append(message_step("user", content, is_error))
        pending, pending_message = None, False
    if not any(s["role"] == "assistant" for s in steps):
        raise SourceError(path, "no agent replies in the log")
    return conv


@dataclass
class Instance:
    lang: str
    name: str
    logs: dict[str, Blob] = field(default_factory=dict)
    result: Blob | None = None


def outcome_from_result(path: str, data: bytes | None, tally: Tally) -> dict[str, Any]:
    try:
        result = load_json(path, data)
    except SourceError as exc:
        tally.warn("result.json unreadable", f"{exc} (outcome left unknown)")
        state = "missing blob" if data is None else "malformed"
        return {"completed": None, "organize_completed": None, "exception": None, "result_json": state}
    exception = result.get("exception")
    return {
        "completed": result.get("completed"),
        "organize_completed": result.get("organize_completed"),
        "exception": None if exception is None else str(exception)[:500],
        "result_json": "present",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser, default_sample=250, default_out="corpus/repolaunch.jsonl.gz")
    args = parser.parse_args(argv)
    git = GitSource(args.mirror, args.commit or COMMIT)

    configs: dict[str, dict[str, Any]] = {}
    instances: dict[tuple[str, str], Instance] = {}
    for blob in git.tree():
        parts = blob.path.split("/")
        if len(parts) == 2 and parts[1] == "config.json":
            configs[parts[0]] = load_json(blob.path, git.read(blob))
        elif len(parts) == 4 and parts[1] == "playground":
            inst = instances.setdefault((parts[0], parts[2]), Instance(parts[0], parts[2]))
            if parts[3] in ("setup.log", "organize.log"):
                inst.logs[parts[3].removesuffix(".log")] = blob
            elif parts[3] == "result.json":
                inst.result = blob

    tally = Tally()
    candidates = limited(
        [(inst, phase) for key in sorted(instances) for inst in [instances[key]] for phase in sorted(inst.logs)],
        args.limit,
    )
    results = list({inst.result.path: inst.result for inst, _ in candidates if inst.result is not None}.values())
    outcomes = {b.path: outcome_from_result(b.path, data, tally) for b, data in git.read_many(results)}
    by_log = {inst.logs[phase].path: (inst, phase) for inst, phase in candidates}

    converted: list[Converted] = []
    for blob, data in git.read_many([inst.logs[phase] for inst, phase in candidates]):
        inst, phase = by_log[blob.path]
        run_id = f"{SOURCE}/{inst.lang}/{inst.name}/{phase}"
        try:
            if data is None:
                raise SourceError(blob.path, "the blob is missing from the mirror (not part of the fetched snapshot)")
            conv = convert_log(blob.path, decode(data))
        except SourceError as exc:
            tally.skip(exc)
            continue
        if inst.result is None:
            outcome: dict[str, Any] = {"completed": None, "organize_completed": None, "exception": None}
            outcome["result_json"] = "absent"
        else:
            outcome = dict(outcomes[inst.result.path])
        # the phase's own success is the run's outcome (what `loopwatch eval` reads as "resolved")
        phase_done = outcome.get("completed" if phase == "setup" else "organize_completed")
        outcome["resolved"] = phase_done if isinstance(phase_done, bool) else None
        config = configs.get(inst.lang, {})
        model = str(config.get("model_config", {}).get("model", "")).removeprefix("azure/") or None
        repo = inst.name.rsplit("-", 1)[0].replace("__", "/", 1)
        os_name = config.get("os", "linux")
        task = (
            f"Set up a {os_name} environment in which the tests of {repo} build and run ({inst.lang})"
            if phase == "setup"
            else f"Find the minimal rebuild and test commands and write a test-log parser for {repo} ({inst.lang})"
        )
        record: Record = {
            "id": run_id,
            "source": SOURCE,
            "task": task,
            "steps": conv.steps,
            "labels": {
                "outcome": outcome,
                "human": None,
                "derived": None,
                "meta": {
                    "agent": "RepoLaunch",
                    "model": model,
                    "phase": phase,
                    "language": inst.lang,
                    "language_name": conv.language_name,
                    "os": os_name,
                    "run": inst.lang,
                    "instance_id": inst.name,
                    "conversations": conv.conversations,
                    "replies_without_action": conv.unparsed_replies,
                    "source_file": f"{REPOSITORY}@{git.commit[:12]}:{blob.path}",
                    "is_error_method": "shell commands: logged exit code != 0; other actions: explicit harness "
                    "rejection/error (true) or success (false) message; otherwise null",
                },
            },
        }
        converted.append(Converted.of(run_id, record, conv.steps))

    finish(converted, tally, args, source=SOURCE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
