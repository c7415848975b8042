"""Limits: iterations, runtime, cost, tokens and consecutive failures (the ralph preset's SafetyGuard), composable.

``max_iterations(50) | max_cost(5.0)`` is a :class:`Limits` holding both. Limits are pure: runtime is
measured from event timestamps (``ts``) or from the time the guard stamps on each event with its
injectable clock. Limits keep counting through resets.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from dataclasses import dataclass

from ._checked import positive_number
from ._configured import Configured
from ._errors import ConfigError
from ._session_state import UsageCounters as UsageCounters  # what a limit reads: a session's own counters


@dataclass(frozen=True, slots=True)
class LimitHit:
    """A limit reached (``warning=False``: stop with ``status``) or nearly reached (``warning=True``)."""

    status: str
    value: float | int  # (an int stays one in the evidence: the compiled engine would read a `float` as a double)
    limit: float | int
    reason: str
    warning: bool = False


class Limit(Configured):
    """Base class of one limit; ``a | b`` composes limits."""

    status = "LIMIT"

    def __or__(self, other: Limit | Limits) -> Limits:
        return Limits((self,)) | other

    def check(self, usage: UsageCounters) -> LimitHit | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __iter__(self) -> Iterator[Limit]:
        """A single limit also works where a :class:`Limits` is expected (``limits=max_cost(5.0)``)."""
        return iter((self,))

    def __repr__(self) -> str:
        defaults = {
            name: p.default
            for name, p in inspect.signature(type(self).__init__).parameters.items()
            if p.kind is p.KEYWORD_ONLY
        }
        args = ", ".join(
            f"{v!r}" if i == 0 else f"{k}={v!r}"
            for i, (k, v) in enumerate(self._params().items())
            if i == 0 or k not in defaults or defaults[k] != v  # keyword arguments left at their default are omitted
        )
        return f"{_FACTORY_NAMES.get(type(self).__name__, type(self).__name__)}({args})"


def _positive_int(value: int, name: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value < math.inf
        or value != int(value)
    ):
        raise ConfigError(f"must be a positive integer, got {value!r}", field=name)
    return int(value)


class MaxIterations(Limit):
    """Stop after ``n`` agent actions (tool calls and assistant messages)."""

    status = "MAX_ITERATIONS"

    def __init__(self, n: int) -> None:
        self.n = _positive_int(n, "max_iterations")

    def check(self, usage: UsageCounters) -> LimitHit | None:
        it = usage.iterations
        if it >= self.n:
            return LimitHit(self.status, it, self.n, f"{it} iterations reached the limit of {self.n}")
        return None


class MaxRuntime(Limit):
    """Stop once ``seconds`` have passed since the session's first event."""

    status = "MAX_RUNTIME"

    def __init__(self, seconds: float = 4 * 3600) -> None:
        self.seconds = positive_number(seconds, "max_runtime")

    def check(self, usage: UsageCounters) -> LimitHit | None:
        first, last = usage.first_ts, usage.last_ts
        if first is None or last is None:
            return None
        elapsed = last - first
        if elapsed >= self.seconds:
            return LimitHit(self.status, elapsed, self.seconds, f"ran {elapsed:.0f} s, limit {self.seconds:.0f} s")
        return None


class MaxCost(Limit):
    """Stop when spend reaches ``amount``; warn (a nudge) once at ``warn_at`` of it (default 80%)."""

    status = "MAX_COST"

    def __init__(self, amount: float = 10.0, *, warn_at: float | None = 0.8) -> None:
        self.amount = positive_number(amount, "max_cost")
        if warn_at is not None and (
            isinstance(warn_at, bool) or not isinstance(warn_at, (int, float)) or not 0 < warn_at < 1
        ):
            raise ConfigError(f"must be between 0 and 1, got {warn_at!r}", field="warn_at")
        self.warn_at = warn_at

    def check(self, usage: UsageCounters) -> LimitHit | None:
        cost = usage.cost
        if cost >= self.amount:
            return LimitHit(self.status, cost, self.amount, f"spent {cost:.4g}, limit {self.amount:.4g}")
        if self.warn_at is not None and cost >= self.warn_at * self.amount:
            share = f"{self.warn_at:.0%}"
            return LimitHit(self.status, cost, self.amount, f"spent {cost:.4g}, {share} of {self.amount:.4g}", True)
        return None


class MaxTokens(Limit):
    """Stop when input + output tokens reach ``n``."""

    status = "MAX_TOKENS"

    def __init__(self, n: int) -> None:
        self.n = _positive_int(n, "max_tokens")

    def check(self, usage: UsageCounters) -> LimitHit | None:
        tokens = usage.tokens
        if tokens >= self.n:
            return LimitHit(self.status, tokens, self.n, f"{tokens} tokens reached the limit of {self.n}")
        return None


class MaxConsecutiveFailures(Limit):
    """Stop after ``n`` failed tool results in a row."""

    status = "MAX_CONSECUTIVE_FAILURES"

    def __init__(self, n: int = 5) -> None:
        self.n = _positive_int(n, "max_consecutive_failures")

    def check(self, usage: UsageCounters) -> LimitHit | None:
        failures = usage.failures
        if failures >= self.n:
            return LimitHit(self.status, failures, self.n, f"{failures} consecutive failures (limit {self.n})")
        return None


class Limits:
    """A set of limits checked together; the first one reached wins (a stop beats a warning)."""

    def __init__(self, limits: tuple[Limit, ...] = ()) -> None:
        if isinstance(limits, list):
            limits = tuple(limits)
        if not isinstance(limits, tuple) or not all(isinstance(limit, Limit) for limit in limits):
            shown = limits if isinstance(limits, tuple) else type(limits).__name__
            raise ConfigError(f"expected a tuple of limits (max_iterations(40), ...), got {shown!r}", field="limits")
        self.limits = limits

    def __or__(self, other: Limit | Limits) -> Limits:
        if not isinstance(other, (Limit, Limits)):
            return NotImplemented
        extra = other.limits if isinstance(other, Limits) else (other,)
        return Limits(self.limits + extra)

    def __bool__(self) -> bool:
        return bool(self.limits)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.limits)

    def __repr__(self) -> str:
        return " | ".join(repr(limit) for limit in self.limits) if self.limits else "Limits()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Limits) and self.limits == other.limits

    def __hash__(self) -> int:
        return hash(self.limits)

    @staticmethod
    def new_usage() -> UsageCounters:
        return UsageCounters()

    def check(self, usage: UsageCounters) -> LimitHit | None:
        warning: LimitHit | None = None
        for limit in self.limits:
            hit = limit.check(usage)
            if hit is not None and not hit.warning:
                return hit
            warning = warning or hit
        return warning


_FACTORY_NAMES = {
    "MaxIterations": "max_iterations",
    "MaxRuntime": "max_runtime",
    "MaxCost": "max_cost",
    "MaxTokens": "max_tokens",
    "MaxConsecutiveFailures": "max_consecutive_failures",
}


def max_iterations(n: int = 100) -> MaxIterations:
    """Stop after ``n`` agent actions (default 100, the ralph preset)."""
    return MaxIterations(n)


def max_runtime(seconds: float = 4 * 3600) -> MaxRuntime:
    """Stop after ``seconds`` of wall time (default 4 hours, the ralph preset)."""
    return MaxRuntime(seconds)


def max_cost(amount: float = 10.0, *, warn_at: float | None = 0.8) -> MaxCost:
    """Stop at ``amount`` spent (default $10, the ralph preset), warning at 80%."""
    return MaxCost(amount, warn_at=warn_at)


def max_tokens(n: int) -> MaxTokens:
    """Stop after ``n`` tokens."""
    return MaxTokens(n)


def max_consecutive_failures(n: int = 5) -> MaxConsecutiveFailures:
    """Stop after ``n`` failed tool results in a row (default 5, the ralph preset)."""
    return MaxConsecutiveFailures(n)
