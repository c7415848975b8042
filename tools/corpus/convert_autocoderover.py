#!/usr/bin/env python3
"""Convert AutoCodeRover (ACR) SWE-bench Lite runs (nus-apr/auto-code-rover, results/) to loopwatch trajectories.

The results were deleted from the repository later; they are read from commit da4c0433 (2024-06-10). A run is
``results/<run>/<category>/<instance>_<timestamp>/``. ACR (the April 2024 version, ``app/inference.py``'s
layered mode) works in two stages, and the run's complete message thread is the last
``debug_agent_write_patch_<K>.json`` (the context-retrieval thread copied into the patch-writing agent, plus its
tries):

1. context retrieval, in rounds: the model answers in free text which search APIs to call (``search_class``,
   ``search_method_in_file``, ...) or where the bug is; a proxy model turns that text into JSON
   (``agent_proxy_<round>.json``); ACR runs the calls and sends back one message ``Result of <call>:\\n<output>``
   per call, then "Let's analyze collected context first"; the model's analysis; then "Based on your analysis,
   answer below questions ...". If the proxy finds no valid call: "The search API calls seem not valid ...".
   When the answer names only bug locations, ACR looks each one up itself and either sends "Here are the code
   in buggy locations: ..." (retrieval ends) or "The buggy locations is not precise ..." (the round is retried).
2. patch writing: "Write a patch for the issue ..."; the model's patch; ACR's verdict ("Your edit could not be
   applied to the program ... Please try again.", "Written an applicable patch, but it did not resolve the issue
   ... Please try again." in the validation runs, "Extracted a patch ...", "Written a patch that resolves the
   issue. Congratulations!"), up to 3 tries.

Mapping (the thread's messages in order; the system prompt, the issue and the other prompt messages before the
model's first reply are the task, not steps):

- a reply whose round ran search calls -> one ``assistant`` call step per call (``tool`` = the API name,
  ``args`` = its arguments from ``tool_call_layers.json``; the reply is the ``text`` of the first call), each
  followed by a ``tool`` step with that call's part of the results message; ``is_error`` = not ``call_ok``;
- a reply whose round named only bug locations -> an ``assistant`` call step ``bug_locations`` with
  ``args.bug_locations`` = what the proxy extracted, followed by a ``tool`` step with ACR's answer
  (``is_error`` true for "not precise", false for "Here are the code in buggy locations"); the look-ups ACR ran
  for it are listed on that tool step as ``harness_calls`` (func_name, arguments, call_ok);
- any other reply (analysis, a round the proxy could not parse, a patch) -> ``assistant`` step without ``tool``;
- any other ACR message -> ``user`` step; ``is_error`` true for the rejections above ("seem not valid", "could
  not be applied", "did not resolve the issue"), otherwise null.
"""

from __future__ import annotations

import argparse
import json
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
    natural_key,
    result_step,
    shorten,
)

SOURCE = "autocoderover"
REPOSITORY = "nus-apr/auto-code-rover"
COMMIT = "da4c04338dc7d4130da8383157f0aec5abe0f146"
RUNS = ("acr-run-1", "acr-run-2", "acr-run-3", "acr-val-only", "acr-val-sbfl")
NOT_RUN_DIRS = ("new_eval_results", "old_eval_results")
RUN_DIR = re.compile(r"^(?P<instance>.+)_(?P<ts>\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d)$")
NEEDED = re.compile(
    r"^(debug_agent_write_patch_\d+|agent_proxy_\d+|tool_call_layers|extract_status|cost)\.json$|^problem_statement\.txt$"
)

RESULTS = "Result of "
BUG_OK = "Here are the code in buggy locations"
BUG_REJECTED = "The buggy locations is not precise"
API_INVALID = "The search API calls seem not valid"
PATCH_PROMPT = "Write a patch for the issue"
# ACR messages that refuse what the model just did (user steps with is_error true)
REJECTIONS = (
    API_INVALID,
    BUG_REJECTED,
    "Your edit could not be applied to the program",
    "Written an applicable patch, but it did not resolve the issue",
)
KNOWN_MESSAGES = (
    *REJECTIONS,
    RESULTS,
    BUG_OK,
    PATCH_PROMPT,
    "Let's analyze collected context first",
    "Based on your analysis, answer below questions",
    "Extracted a patch.",
    "Written a patch that resolves the issue",
)


def split_results(path: str, text: str, calls: list[dict[str, Any]]) -> list[str]:
    """The per-call outputs of one collated ``Result of <call>:\\n<output>\\n\\n...`` message, in call order."""
    starts: list[int] = []
    pos = 0
    for call in calls:
        needle = f"{RESULTS}{call.get('func_name')}("
        j = text.find(needle, pos)
        while j > 0 and text[j - 2 : j] != "\n\n":
            j = text.find(needle, j + 1)
        if j < 0:
            raise SourceError(path, f"no '{needle}...' section for call {len(starts) + 1} of {len(calls)}")
        starts.append(j)
        pos = j + len(needle)
    outputs = []
    for k, start in enumerate(starts):
        segment = text[start : starts[k + 1] if k + 1 < len(starts) else len(text)]
        header_end = segment.find(":\n")
        if header_end < 0:
            raise SourceError(path, f"cannot find the end of the header {segment[:60]!r}")
        output = segment[header_end + 2 :]
        outputs.append(output[:-2] if output.endswith("\n\n") else output.rstrip("\n"))
    return outputs


def proxy_answer(path: str, proxy: Any) -> dict[str, Any]:
    """The JSON the proxy model produced in its last attempt of a round."""
    try:
        content = proxy[-1][-1]["content"]
        answer = json.loads(content)
    except (IndexError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise SourceError(path, f"no JSON answer from the proxy model ({exc})") from None
    if not isinstance(answer, dict):
        raise SourceError(path, "the proxy model's answer is not a JSON object")
    return answer


@dataclass
class Conversion:
    steps: list[Step] = field(default_factory=list)
    rounds: int = 0
    patch_tries: int = 0
    prompt_messages: int = 0


def convert_thread(
    run_dir: str,
    thread_path: str,
    thread: list[dict[str, Any]],
    layers: list[list[dict[str, Any]]],
    proxies: dict[int, Any],
    tally: Tally,
) -> Conversion:
    conv = Conversion()
    steps = conv.steps
    if not isinstance(thread, list) or not all(isinstance(m, dict) and "role" in m for m in thread):
        raise SourceError(thread_path, "expected a list of {role, content} messages")
    first = next((i for i, m in enumerate(thread) if m["role"] == "assistant"), None)
    if first is None:
        raise SourceError(thread_path, "no model reply in the thread")
    conv.prompt_messages = first
    layer = 0
    i = first
    while i < len(thread):
        msg = thread[i]
        role, content = msg["role"], str(msg.get("content") or "")
        nxt = thread[i + 1] if i + 1 < len(thread) and thread[i + 1]["role"] == "user" else None
        nxt_text = str(nxt.get("content") or "") if nxt else ""
        if role == "assistant" and nxt is not None and nxt_text.startswith(RESULTS):
            if layer >= len(layers):
                raise SourceError(run_dir + "/tool_call_layers.json", f"no layer for retrieval round {layer}")
            calls = layers[layer]
            for k, (call, output) in enumerate(zip(calls, split_results(thread_path, nxt_text, calls), strict=True)):
                tool = str(call.get("func_name"))
                steps.append(call_step(tool, dict(call.get("arguments") or {}), content if k == 0 else ""))
                ok = call.get("call_ok")
                steps.append(result_step(tool, output, (not ok) if isinstance(ok, bool) else None))
            layer += 1
            conv.rounds += 1
            i += 2
            continue
        if role == "assistant" and nxt is not None and nxt_text.startswith((BUG_OK, BUG_REJECTED)):
            proxy_path = f"{run_dir}/agent_proxy_{layer}.json"
            if layer not in proxies:
                raise SourceError(proxy_path, "missing (needed for the bug locations of this round)")
            answer = proxy_answer(proxy_path, proxies[layer])
            steps.append(call_step("bug_locations", {"bug_locations": answer.get("bug_locations")}, content))
            result = result_step("bug_locations", nxt_text, nxt_text.startswith(BUG_REJECTED))
            result["harness_calls"] = layers[layer] if layer < len(layers) else None
            steps.append(result)
            layer += 1
            conv.rounds += 1
            i += 2
            continue
        if role == "assistant":
            steps.append(message_step("assistant", content))
            if nxt is not None and nxt_text.startswith(API_INVALID):
                layer += 1  # the round opened a tool-call layer that stays empty
                conv.rounds += 1
            i += 1
            continue
        if role == "user":
            if content.startswith(PATCH_PROMPT):
                conv.patch_tries = sum(1 for m in thread[i + 1 :] if m["role"] == "assistant")
            elif not content.startswith(KNOWN_MESSAGES):
                tally.warn("unknown ACR message", f"{thread_path}: message {i}: unrecognised text {content[:60]!r}")
            steps.append(message_step("user", content, True if content.startswith(REJECTIONS) else None))
        else:
            steps.append(message_step(role, content))
        i += 1
    if layer != len(layers) - 1:
        tally.warn(
            "layer count",
            f"{run_dir}/tool_call_layers.json: {len(layers)} layers for {layer} retrieval rounds "
            "(expected one more, for write_patch)",
        )
    return conv


@dataclass
class RunDir:
    run: str
    category: str
    name: str
    instance: str
    files: dict[str, Blob] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"results/{self.run}/{self.category}/{self.name}"


def convert_run(rd: RunDir, data: dict[str, bytes | None], tally: Tally) -> tuple[list[Step], dict[str, Any], str]:
    debug = sorted((n for n in rd.files if n.startswith("debug_agent_write_patch_")), key=natural_key)
    if not debug:
        raise SourceError(rd.path, "no debug_agent_write_patch_<K>.json (the run's full thread)")
    thread_path = f"{rd.path}/{debug[-1]}"
    thread = load_json(thread_path, data[debug[-1]])
    layers_path = f"{rd.path}/tool_call_layers.json"
    layers = load_json(layers_path, data.get("tool_call_layers.json")) if "tool_call_layers.json" in rd.files else []
    if not isinstance(layers, list):
        raise SourceError(layers_path, "expected a list of layers")
    proxies = {}
    for name in rd.files:
        m = re.match(r"agent_proxy_(\d+)\.json$", name)
        if m:
            proxies[int(m.group(1))] = load_json(f"{rd.path}/{name}", data[name])
    conv = convert_thread(rd.path, thread_path, thread, layers, proxies, tally)
    extra: dict[str, Any] = {"rounds": conv.rounds, "patch_tries": conv.patch_tries}
    extra["prompt_messages_dropped"] = conv.prompt_messages
    extra["thread_file"] = debug[-1]
    for name, key in (("extract_status.json", "extract_status"), ("cost.json", "cost")):
        if name in rd.files:
            try:
                extra[key] = load_json(f"{rd.path}/{name}", data[name])
            except SourceError as exc:
                tally.warn(f"{name} unreadable", str(exc))
    problem = decode(data["problem_statement.txt"] or b"") if "problem_statement.txt" in rd.files else ""
    return conv.steps, extra, problem


def group_blobs(git: GitSource, rds: list[RunDir]) -> Iterator[tuple[RunDir, dict[str, bytes | None]]]:
    """Each run dir with the contents of its files, reading all of them through one git process."""
    order = [(rd, name, blob) for rd in rds for name, blob in sorted(rd.files.items())]
    current: RunDir | None = None
    contents: dict[str, bytes | None] = {}
    stream = git.read_many([blob for _rd, _name, blob in order])
    for (rd, name, _blob), (_b, data) in zip(order, stream, strict=True):
        if current is not None and rd is not current:
            yield current, contents
            contents = {}
        current = rd
        contents[name] = data
    if current is not None:
        yield current, contents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser, default_sample=200, default_out="corpus/autocoderover.jsonl.gz")
    args = parser.parse_args(argv)
    git = GitSource(args.mirror, args.commit or COMMIT)

    rds: dict[str, RunDir] = {}
    reports: dict[str, dict[str, Any]] = {}
    stats: dict[str, dict[str, Any]] = {}
    for run in RUNS:
        for blob in git.tree(f"results/{run}/"):
            parts = blob.path.split("/")
            if parts[2:] == ["new_eval_results", "report.json"]:
                reports[run] = load_json(blob.path, git.read(blob))
            elif parts[2:] == ["stats.json"]:
                stats[run] = load_json(blob.path, git.read(blob))
            elif len(parts) == 5 and parts[2] not in NOT_RUN_DIRS and NEEDED.match(parts[4]):
                m = RUN_DIR.match(parts[3])
                if not m:
                    continue
                key = "/".join(parts[:4])
                rd = rds.setdefault(key, RunDir(run, parts[2], parts[3], m.group("instance")))
                rd.files[parts[4]] = blob
        if run not in reports:
            raise SystemExit(f"error: results/{run}/new_eval_results/report.json not found at {git.commit}")

    tally = Tally()
    candidates = limited([rds[k] for k in sorted(rds)], args.limit)
    converted: list[Converted] = []
    for rd, data in group_blobs(git, candidates):
        run_id = f"{SOURCE}/{rd.run}/{rd.instance}"
        try:
            steps, extra, problem = convert_run(rd, data, tally)
        except SourceError as exc:
            tally.skip(exc)
            continue
        report = reports[rd.run]
        cost = extra.pop("cost", None)
        model = cost.get("model") if isinstance(cost, dict) else stats.get(rd.run, {}).get("model")
        outcome = {
            "resolved": rd.instance in report.get("resolved", []),
            "patch_generated": rd.instance in report.get("generated", []),
            "patch_applied": rd.instance in report.get("applied", []),
            "category": rd.category,
            "extract_status": (extra.pop("extract_status", {}) or {}).get("extract_status"),
        }
        record: Record = {
            "id": run_id,
            "source": SOURCE,
            "task": shorten(problem) if problem else rd.instance,
            "steps": steps,
            "labels": {
                "outcome": outcome,
                "human": None,
                "derived": None,
                "meta": {
                    "agent": "AutoCodeRover (April 2024, layered context retrieval + write_patch)",
                    "model": model,
                    "run": rd.run,
                    "category": rd.category,
                    "instance_id": rd.instance,
                    "run_dir": rd.name,
                    "acr_commit": cost.get("commit") if isinstance(cost, dict) else None,
                    **extra,
                    "source_file": f"{REPOSITORY}@{git.commit[:12]}:{rd.path}/{extra['thread_file']}",
                    "is_error_method": "search calls: not call_ok; bug_locations: ACR's verdict; user steps: true "
                    "for ACR's rejections, otherwise null",
                },
            },
        }
        converted.append(Converted.of(run_id, record, steps))

    finish(converted, tally, args, source=SOURCE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
