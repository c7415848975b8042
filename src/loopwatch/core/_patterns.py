"""Patterns: the kinds of loop a verdict names, each declared once with everything that depends on it.

A rule (a detector class) lists the patterns it reports in its ``patterns`` attribute, one :class:`Pattern` each:
the name verdicts carry, its default ladder (what the ``default`` preset escalates by), its message templates, its
specificity rank (which pattern speaks when two fire at the same action and level) and the facts of a finding that
become a verdict's evidence::

    class SlowPollDetector(Detector[SlowPollState]):
        patterns = (
            Pattern("slow_poll", "You have polled {tool} {count} times...", ladder=Ladder.of(nudge=5)),
        )

Defining the class registers its patterns in :data:`REGISTRY`; two rules that report the same pattern name the same
declaration. The presets, the message templates, the configuration (``loopwatch.toml``) and the engine read the
registry, so a ladder or a message for a pattern nobody declared is a :class:`~loopwatch.errors.ConfigError` naming
the declared ones. The engine's limits (``limit``) and the loop judge (``judged_loop``) report patterns of their own,
declared here: no ladder escalates them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from ._errors import ConfigError
from ._ladder import Ladder

__all__ = [
    "JUDGED_LOOP",
    "LIMIT",
    "REGISTRY",
    "STOP_MESSAGE",
    "STORE_ERROR",
    "Pattern",
    "Registry",
    "unknown_choice",
]

STOP_MESSAGE: Final = "Stopping this run: {reason}. The loop was not going to end by itself."
"""The template of a stop, unless a pattern has its own."""

RESERVED_EVIDENCE: Final = frozenset({"indices", "args", "repeated", "unit", "ignored_nudges", "refusals_ignored"})
"""The evidence the engine writes into a finding's verdict itself: no fact may take these names."""

_NAME: Final = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Pattern:
    """A kind of loop, as a rule declares it.

    ``message`` is the nudge's template (level 1, and each level without a template of its own);
    ``block_message`` and ``stop_message`` are those of a refused call and of a stop (``None``: the pattern's
    nudge template, then ``{reason}``). Templates use ``str.format`` fields from the finding (see
    :mod:`loopwatch.core._messages`). ``ladder`` is the default ladder (``None``: no ladder escalates this pattern).
    ``specificity``: when two patterns fire at the same action and level, the higher rank speaks (an error retry
    says more than the bare repeat it also is). ``evidence``: the finding facts copied, in this order, into a
    verdict's ``evidence``.
    """

    name: str
    message: str
    ladder: Ladder | None = None
    block_message: str | None = None
    stop_message: str | None = STOP_MESSAGE
    specificity: int = 0
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"a pattern's name is lowercase letters, digits and underscores, got {self.name!r}", field="name"
            )
        for field, template in (
            ("message", self.message),
            ("block_message", self.block_message),
            ("stop_message", self.stop_message),
        ):
            if not isinstance(template, str) and not (template is None and field != "message"):
                raise ConfigError(f"{self.name}: expected a template string, got {template!r}", field=field)
        if self.ladder is not None and not isinstance(self.ladder, Ladder):
            raise ConfigError(f"{self.name}: expected a Ladder or None, got {self.ladder!r}", field="ladder")
        if not isinstance(self.specificity, int) or isinstance(self.specificity, bool) or self.specificity < 0:
            raise ConfigError(f"{self.name}: expected an integer >= 0, got {self.specificity!r}", field="specificity")
        if not isinstance(self.evidence, tuple) or not all(isinstance(key, str) for key in self.evidence):
            raise ConfigError(f"{self.name}: expected a tuple of fact names, got {self.evidence!r}", field="evidence")
        reserved = sorted(RESERVED_EVIDENCE.intersection(self.evidence))
        if reserved or len(set(self.evidence)) != len(self.evidence):
            what = f"names the engine's own evidence {reserved}" if reserved else "names a fact twice"
            raise ConfigError(f"{self.name}: the evidence {what}", field="evidence")

    @property
    def templates(self) -> dict[int | str, str]:
        """The templates by level or action, as :class:`~loopwatch.core.Messages` looks them up."""
        table: dict[int | str, str] = {1: self.message}
        if self.block_message is not None:
            table["block"] = self.block_message
        if self.stop_message is not None:
            table["stop"] = self.stop_message
        return table

    def __repr__(self) -> str:
        ladder = "no ladder" if self.ladder is None else repr(self.ladder)
        return f"Pattern({self.name!r}, {ladder}, specificity={self.specificity}, evidence={self.evidence!r})"


class Registry:
    """The declared patterns by name, in the order they were declared, and the rules that report each.

    Filled as rule classes are defined (:meth:`declare`); read when a policy, a message table, a configuration or
    an engine is built, never per event.
    """

    def __init__(self, builtins: str | None = None) -> None:
        self._patterns: dict[str, Pattern] = {}
        self._reporters: dict[str, list[str]] = {}
        self.specificity: Final[dict[str, int]] = {}
        """Each pattern's specificity rank, kept as patterns are declared (the engine's tie-break reads it)."""
        self._builtins = builtins
        """The package whose import declares the built-in rules' patterns, imported before the registry is first
        read (``None``: nothing to import, or already imported)."""

    def _declared(self) -> dict[str, Pattern]:
        """The declared patterns, the built-in rules' included: reading the registry never depends on which rule
        modules happen to have been imported."""
        if self._builtins is not None:
            package, self._builtins = self._builtins, None
            import importlib  # the rules import this module: theirs is imported on first read, not at import

            importlib.import_module(package)
        return self._patterns

    def register(self, pattern: Pattern, *, by: str | None = None) -> Pattern:
        """Add ``pattern`` (reported by the rule class named ``by``); the same name declared otherwise is an error."""
        if not isinstance(pattern, Pattern):
            raise ConfigError(f"expected a Pattern, got {pattern!r}", field="patterns")
        known = self._patterns.get(pattern.name)
        if known is not None and known != pattern:
            reporters = ", ".join(self._reporters[pattern.name]) or "loopwatch"
            raise ConfigError(
                f"pattern {pattern.name!r} is already declared otherwise (by {reporters}): a rule that reports it "
                "names that declaration",
                field="patterns",
            )
        self._patterns.setdefault(pattern.name, pattern)
        self._reporters.setdefault(pattern.name, [])
        if by is not None and by not in self._reporters[pattern.name]:
            self._reporters[pattern.name].append(by)
        self.specificity[pattern.name] = pattern.specificity
        return self._patterns[pattern.name]

    def declare(self, patterns: Iterable[Pattern | str], *, by: str) -> tuple[Pattern, ...]:
        """The patterns of rule class ``by``, registered: a :class:`Pattern`, or the name of a declared one."""
        if isinstance(patterns, (str, Pattern)):
            raise ConfigError(f"{by}.patterns: expected a tuple of patterns, got {patterns!r}", field="patterns")
        out = []
        for item in patterns:
            if isinstance(item, str):
                item = self.get(item, field=f"{by}.patterns")
            out.append(self.register(item, by=by))
        return tuple(out)

    def get(self, name: object, *, field: str | None = None, escalated: bool = False) -> Pattern:
        """The pattern called ``name``; else a :class:`ConfigError` naming the declared patterns (with
        ``escalated=True``, only those a ladder escalates)."""
        pattern = self._declared().get(name) if isinstance(name, str) else None
        choices = self.escalated() if escalated else self.names()
        if pattern is None:
            hint = "" if isinstance(name, str) else " (a pattern is named by a string)"
            raise ConfigError(unknown_choice(name, choices, "pattern") + hint, field=field)
        if escalated and pattern.ladder is None:
            raise ConfigError(
                f"pattern {name!r} is not escalated by a ladder (ladders are for {_listing(choices)})", field=field
            )
        return pattern

    def names(self) -> tuple[str, ...]:
        """Every declared pattern's name: those a ladder escalates in the order they were declared, then the
        others (the loop judge's, the limits')."""
        return (*self.escalated(), *(name for name, p in self._declared().items() if p.ladder is None))

    def escalated(self) -> tuple[str, ...]:
        """The patterns with a default ladder: those a ladder can be set for."""
        return tuple(name for name, pattern in self._declared().items() if pattern.ladder is not None)

    def reported_by(self, name: str) -> tuple[str, ...]:
        """The rule classes that declared pattern ``name`` (empty for the engine's and the judge's own)."""
        self._declared()
        return tuple(self._reporters.get(name, ()))

    def templates(self) -> dict[str, dict[int | str, str]]:
        """Every declared pattern's templates by level or action."""
        return {name: self._declared()[name].templates for name in self.names()}

    def evidence(self) -> dict[str, tuple[str, ...]]:
        """Every declared pattern's evidence facts."""
        return {name: pattern.evidence for name, pattern in self._declared().items()}

    def as_mapping(self) -> Mapping[str, Pattern]:
        """A read-only view of the declared patterns by name."""
        return MappingProxyType(self._declared())

    def __contains__(self, name: object) -> bool:
        return name in self._declared()

    def __iter__(self) -> Iterator[Pattern]:
        return iter(tuple(self._declared().values()))

    def __len__(self) -> int:
        return len(self._declared())

    def __repr__(self) -> str:
        return f"Registry(patterns={list(self._declared())})"


def unknown_choice(key: object, choices: Iterable[str], what: str) -> str:
    """``unknown <what> <key>; did you mean ...? (expected one of ...)``: the message of a name not among
    ``choices``."""
    listed = list(choices)
    if not listed:
        return f"unknown {what} {key!r} (there are none)"
    import difflib  # only when a name is wrong: a hook run never loads it

    close = difflib.get_close_matches(str(key), listed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {key!r}{hint} (expected one of {_listing(listed)})"


def _listing(choices: Iterable[str]) -> str:
    return ", ".join(repr(c) for c in choices)


REGISTRY: Final = Registry(builtins="loopwatch.core.detectors")
"""The declared patterns: loopwatch's rules declare theirs as they are defined (importing
:mod:`loopwatch.core.detectors` declares them all), and so does any rule class of your own."""

JUDGED_LOOP: Final = REGISTRY.register(
    Pattern(
        "judged_loop",
        "You appear to be going in circles: {reason}. Step back, summarise what you have learned so far, and "
        "change your approach instead of repeating it.",
        stop_message=None,
    )
)
"""A loop judge's nudge (:mod:`loopwatch.core._judge`): never escalated by a ladder."""

LIMIT: Final = REGISTRY.register(Pattern("limit", "{reason}.", stop_message="{reason}."))
"""A limit reached (:mod:`loopwatch.core._limits`): its warning nudges, its limit stops, without a ladder."""

STORE_ERROR: Final = REGISTRY.register(Pattern("store_error", "{reason}", stop_message=None))
"""A tool call refused because the guard's store (or service) failed, with ``on_store_error="block"`` (fail closed):
never escalated by a ladder."""
