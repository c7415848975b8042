"""The configuration reference page of the documentation, generated from the code at build time (a MkDocs hook,
tools/docs_hooks.py): the settings of loopwatch.config's schema, the patterns as the rules declare them (default
ladder, specificity, evidence) and their ladders per preset, the limits, the message templates, and every preset's
rules with the parameters their classes take (names, types and defaults read from the signatures; the values each
preset sets read from the rules themselves).

    python tools/config_reference.py        # prints the page
"""

from __future__ import annotations

import inspect
import re
import sys
import typing
from collections.abc import Iterable
from typing import Any

from loopwatch._presets import PRESETS, preset
from loopwatch.core import detectors
from loopwatch.core._configured import constructor_hints, constructor_signature
from loopwatch.core._patterns import REGISTRY
from loopwatch.core._policy import Ladder

TOP_SETTINGS: dict[str, str] = {
    "preset": "the preset the configuration starts from (default `default`)",
    "ignore_keys": "argument keys left out of every call fingerprint (for example a progress counter the agent sends)",
    "reset_on_user": "whether a user message resets the loop counters (limits keep counting)",
    "hard_evidence": "block and stop only on the same unit repeated with nothing changed, after an unheeded nudge; "
    "every other finding only nudges (`default`: true; the other presets keep their documented behaviour)",
    "stop_after_refusals": "stop the run when a refused call is made again this many times in a row (`default`: 3; "
    "`false`: only the ladders stop)",
    "ladders": "per pattern, when to nudge, block and stop (below); a table replaces that pattern's whole ladder",
    "limits": "budgets that end a run whatever it does (below); the table replaces the preset's limits",
    "messages": "the text the model sees, per pattern and level (below)",
    "detectors": "parameters of the preset's rules, by rule name (below); `enabled = false` drops a rule",
    "tools": "per tool name: `exempt`, `ignore_keys`, `keep_keys`, and its own `ladders`",
}
LADDER_SETTINGS: dict[str, str] = {
    "nudge": "the count (or a list of counts) at which the model gets a nudge",
    "block": "the count from which the looping call is refused",
    "stop": "the count at which the run is stopped",
    "rungs": "instead of `nudge`/`block`/`stop`: every rung, in order, as a table (below), for rungs with a message, "
    "reason, status or partial flag of their own",
    "renotify": "nudge again at every count, not once per level",
    "metric": '`"count"` (the finding\'s count) or `"detections"` (how many times the rule fired)',
    "restrike": "a new streak of the pattern reaching a rung within this many events of the last verdict of the "
    "previous one stops the run (the warning did not help); not with `hard_evidence`",
}
RUNG_SETTINGS: dict[str, str] = {
    "at": "the count from which the rung applies (required)",
    "action": '`"nudge"`, `"block"` or `"stop"` (required)',
    "message": "the template the model sees at this rung (else the pattern's message)",
    "reason": "the template of the verdict's reason for operators (else the finding's own)",
    "status": 'the status of a stop (else `"LOOP_DETECTED"`)',
    "partial": "a stop that ends the run with partial results (`true`/`false`)",
}
LIMIT_SETTINGS: dict[str, str] = {
    "max_iterations": "tool calls in a run",
    "max_runtime": "seconds since the run's first event",
    "max_cost": "spend, in the currency of the `usage` events",
    "cost_warn_at": "share of `max_cost` at which the model gets one warning (`false`: none); default 0.8",
    "max_tokens": "input plus output tokens",
    "max_consecutive_failures": "failed tool results in a row",
}
TOOL_SETTINGS: dict[str, str] = {
    "exempt": "no loop detection for this tool (limits still count it)",
    "ignore_keys": "argument keys left out of this tool's fingerprint",
    "keep_keys": "only these argument keys count in this tool's fingerprint",
    "ladders": "this tool's own ladder for a pattern (same keys as `[ladders.X]`)",
}


_DESIGNS: dict[str, str] = {
    "000": "the turn-similarity design",
    "001": "the call-signature design",
    "002": "Ralph Orchestrator",
    "003": "the doom-loop design",
    "004": "the behavioral design",
}


def user_text(text: str) -> str:
    """A docstring for users: the published designs by name, reStructuredText's double backticks as Markdown's."""

    def design(match: re.Match[str]) -> str:
        name = _DESIGNS.get(match.group(1), "a published design") + ("'s" if match.group(2) else "")
        return name[0].upper() + name[1:] if match.group(0)[0] == "S" else name

    return _SEED.sub(design, text).replace("``", "`")


_SEED = re.compile(r"[Ss]eed (\d{3})('s)?")


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    heads = list(headers)
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _code(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"`{text}`"


def _type_name(hint: Any) -> str:
    if hint is inspect.Parameter.empty:
        return ""
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(hint))
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        return " or ".join(_type_name(a) for a in typing.get_args(hint) if a is not type(None)) + " (or none)"
    return getattr(hint, "__name__", str(hint).replace("typing.", ""))


def _ladder(ladder: Ladder | None) -> str:
    if ladder is None:
        return "–"
    text = repr(ladder)
    return text.removeprefix("Ladder(").removesuffix(")") or "silent"


def settings_section() -> str:
    parts = ["## Settings", "", _table(("setting", "what it does"), TOP_SETTINGS.items())]
    parts += ["", "### `[ladders.PATTERN]`", "", _table(("key", "what it does"), LADDER_SETTINGS.items())]
    parts += [
        "",
        'Each rung of `rungs = [{ at = 1, action = "nudge", message = "..." }, ...]`:',
        "",
        _table(("key", "what it does"), RUNG_SETTINGS.items()),
    ]
    parts += ["", "### `[limits]`", "", _table(("key", "limit"), LIMIT_SETTINGS.items())]
    parts += ["", "### `[tools.NAME]`", "", _table(("key", "what it does"), TOOL_SETTINGS.items())]
    return "\n".join(parts)


def patterns_section() -> str:
    declared = []
    for pattern in REGISTRY.names():
        found = REGISTRY.get(pattern)
        reporters = ", ".join(f"{name}" for name in REGISTRY.reported_by(pattern)) or "–"
        evidence = ", ".join(f"`{key}`" for key in found.evidence) or "–"
        ladder = _ladder(found.ladder) if found.ladder is not None else "no ladder"
        declared.append([f"`{pattern}`", reporters, ladder, str(found.specificity), evidence])
    intro = (
        "Ladders and messages are keyed by pattern. Each rule declares the patterns it reports: its default ladder "
        "(`nudge@3` = a nudge at the third occurrence), its messages (below), its specificity (when two patterns "
        "fire at the same action and level, the higher one speaks) and the facts a verdict's `evidence` carries. A "
        "ladder or a message for any other name is an error naming these. `judged_loop` (a loop judge's nudge) and "
        "`limit` (a limit's warning or stop) take messages but no ladder."
    )
    names = list(PRESETS)
    policies = {name: preset(name) for name in names}
    rows = []
    for pattern in REGISTRY.escalated():
        rows.append([f"`{pattern}`", *(_ladder(policies[n].ladders.get(pattern)) for n in names)])
    per_preset = (
        "The ladder of each pattern in each preset (`–`: the preset has no ladder for it, its rules never report it):"
    )
    return "\n".join(
        [
            "## Patterns and their default ladders",
            "",
            intro,
            "",
            _table(("pattern", "reported by", "default ladder", "specificity", "evidence"), declared),
            "",
            per_preset,
            "",
            _table(["pattern", *names], rows),
        ]
    )


def messages_section() -> str:
    rows = []
    for pattern, levels in REGISTRY.templates().items():
        for level, template in levels.items():
            rows.append([f"`{pattern}`", f"`{level}`", template])
    intro = (
        "The default templates, per pattern and level (a level number or `nudge`, `block`, `stop`). Fields in braces "
        "are filled in: `{tool}`, `{count}`, `{error}`, `{reason}`, `{call}` and the others each template uses; an "
        "unknown field is left as written."
    )
    return "\n".join(["## Messages", "", intro, "", _table(("pattern", "level", "template"), rows)])


def detectors_section() -> str:
    parts = ["## Rules and their parameters", ""]
    parts.append(
        "`[detectors.NAME]` changes a rule of the chosen preset. The parameters are those of the rule's class (a typo "
        "is an error naming the closest one); the last column gives each parameter's value in the presets that have "
        "the rule."
    )
    seen: dict[str, list[tuple[str, Any]]] = {}
    for name in PRESETS:
        for detector in preset(name).detectors:
            seen.setdefault(detector.name, []).append((name, detector))
    for rule, found in seen.items():
        cls = type(found[0][1])
        doc = inspect.getdoc(cls) or ""
        summary = user_text(doc.split("\n\n", 1)[0].replace("\n", " "))
        parts += ["", f"### `{rule}` ({cls.__name__})", "", summary, ""]
        factory = getattr(detectors, rule, None)
        if callable(factory):
            shown = ", ".join(inspect.signature(factory).parameters)
            parts += [f"In Python: `loopwatch.core.detectors.{rule}({shown})`.", ""]
        signature = constructor_signature(cls)
        try:
            hints = constructor_hints(cls)
        except (NameError, TypeError):
            hints = {}
        rows = []
        for param in signature.parameters.values():
            if param.kind not in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD):
                continue
            values = []
            for preset_name, detector in found:
                value = detector._params().get(param.name, param.default)
                if value != param.default:
                    values.append(f"{preset_name}: {_code(value)}")
            default = "" if param.default is inspect.Parameter.empty else _code(param.default)
            rows.append(
                [f"`{param.name}`", _type_name(hints.get(param.name, param.annotation)), default, "; ".join(values)]
            )
        parts.append(_table(("parameter", "type", "default", "set by presets"), rows) if rows else "No parameters.")
        parts += ["", "In presets: " + ", ".join(f"`{n}`" for n, _ in found) + "."]
    return "\n".join(parts)


def page() -> str:
    """The whole page, in Markdown."""
    return (
        "\n\n".join(
            [
                "# Configuration reference",
                "This page is generated from loopwatch's code each time the documentation is built: what it lists is "
                "what the configuration accepts. How to write a configuration, and where loopwatch finds it: "
                "[Configuration](../configuration.md).",
                settings_section(),
                patterns_section(),
                detectors_section(),
                messages_section(),
            ]
        )
        + "\n"
    )


if __name__ == "__main__":
    sys.stdout.write(page())
