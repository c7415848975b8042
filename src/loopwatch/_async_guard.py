"""The async twin of :class:`~loopwatch.Guard` (:class:`AsyncGuard`, exported by :mod:`loopwatch`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core._events import Event
    from .core._policy import Policy
    from .core._verdict import Verdict


class AsyncGuard:
    """The async twin of :class:`Guard`: the same verdicts, awaitable methods.

    Detection is CPU work done inline. Webhook sinks queue their I/O in their own threads, so awaiting
    ``observe`` never waits on the network; a JSONL audit sink writes (and fsyncs) inline, by design: the
    record exists before the verdict is returned. With a ``store`` (SQLite, Redis...) or a ``judge`` (an LLM
    call), every call runs in a worker thread, so the event loop never waits on the store or the model.
    """

    def __init__(self, preset: str | Policy | None = None, **kwargs: Any) -> None:
        from ._guard import Guard  # here: loopwatch._guard imports this module, and has Guard by the time one is made

        self._guard = Guard(preset, **kwargs)

    @property
    def policy(self) -> Policy:
        return self._guard.policy

    @property
    def stats(self) -> dict[str, int]:
        return self._guard.stats

    def __repr__(self) -> str:
        return f"Async{self._guard!r}"

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._guard.store is None and self._guard.judge is None:
            return fn(*args, **kwargs)
        import asyncio  # only async callers pay for importing it

        return await asyncio.to_thread(fn, *args, **kwargs)

    async def observe(self, session: str, event: Event | Mapping[str, Any], *, swarm: str | None = None) -> Verdict:
        verdict: Verdict = await self._call(self._guard.observe, session, event, swarm=swarm)
        return verdict

    async def reset(self, session: str, *, limits: bool = False) -> None:
        await self._call(self._guard.reset, session, limits=limits)

    async def forget(self, session: str) -> None:
        await self._call(self._guard.forget, session)

    async def snapshot(self, session: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._call(self._guard.snapshot, session)
        return data

    async def restore(self, data: Mapping[str, Any], session: str | None = None) -> None:
        await self._call(self._guard.restore, data, session)

    async def sessions(self) -> list[str]:
        names: list[str] = await self._call(self._guard.sessions)
        return names

    async def swarm_snapshot(self, swarm: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._call(self._guard.swarm_snapshot, swarm)
        return data

    async def restore_swarm(self, data: Mapping[str, Any]) -> None:
        await self._call(self._guard.restore_swarm, data)

    async def clear_swarm(self, swarm: str) -> None:
        await self._call(self._guard.clear_swarm, swarm)

    async def evict_idle(self, max_idle_seconds: float) -> int:
        return self._guard.evict_idle(max_idle_seconds)
