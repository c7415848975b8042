"""The async twin of the SQLite store: the same methods as coroutines, run in a thread pool of its own."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

from . import SwarmTally, Versioned, storable
from ._sqlite_store import PAGE, SqliteStore, config_error

_T = TypeVar("_T")


class AsyncSqliteStore:
    """The async twin of :class:`SqliteStore`: the same methods as coroutines, run in a small thread pool
    of this store's own (``threads`` threads, each with its connection), so the event loop never waits on
    SQLite. The sync store is :attr:`sync`.

    A call whose awaiting task is cancelled still completes in its thread: a compare-and-set may have been
    written (the next load shows it)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        timeout: float = 5.0,
        synchronous: str = "normal",
        clock: Callable[[], float] = time.time,
        url: str | None = None,
        threads: int = 4,
    ) -> None:
        if threads < 1:
            raise config_error(f"threads must be at least 1, not {threads!r}")
        self.sync = SqliteStore(path, ttl=ttl, timeout=timeout, synchronous=synchronous, clock=clock, url=url)
        self.threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.sync.url

    @property
    def ttl(self) -> float | None:
        return self.sync.ttl

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    async def _call(self, function: Callable[..., _T], *args: Any) -> _T:
        with self._executor_lock:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor  # the async store only

                self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="loopwatch-sqlite")
            executor = self._executor
        import asyncio  # the async twin only: the sync store (a hook process) never imports it

        return await asyncio.get_running_loop().run_in_executor(executor, partial(function, *args))

    async def load(self, session: str) -> Versioned | None:
        return await self._call(self.sync.load, session)

    async def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        return await self._call(self.sync.compare_and_set, session, expected, state, token)

    async def delete(self, session: str) -> None:
        await self._call(self.sync.delete, session)

    async def sessions(self) -> AsyncIterator[tuple[str, Versioned]]:
        """Every live session with its state, read a page at a time (``async for``)."""
        after: str | None = None
        while True:
            page = await self._call(self.sync._sessions_page, after)
            for item in page:
                yield item
            if len(page) < PAGE:
                return
            after = storable(page[-1][0])

    async def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        return await self._call(self.sync.swarm_add, swarm, fingerprint, worker, tool)

    async def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        return await self._call(self.sync.swarm_counts, swarm)

    async def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        await self._call(self.sync.swarm_restore, swarm, counts)

    async def swarm_clear(self, swarm: str) -> None:
        await self._call(self.sync.swarm_clear, swarm)

    async def health(self) -> bool:
        try:
            return await self._call(self.sync.health)
        except Exception:  # the pool itself failed (interpreter shutting down): never raise
            return False

    async def expire(self) -> int:
        return await self._call(self.sync.expire)

    async def close(self) -> None:
        """Stop the pool (after the calls under way) and close the connections; the store reopens on next use."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:  # let the calls under way finish, without blocking the event loop
            import asyncio

            await asyncio.get_running_loop().run_in_executor(None, partial(executor.shutdown, wait=True))
        self.sync.close()
