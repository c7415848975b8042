"""Progress bars for the long commands (``scan``, ``eval``): on a terminal only, on standard error, with a known
total (bytes to read, runs to judge), the share done, and the time left. Drawn by rich (the ``cli`` extra);
nothing without it, nothing when standard error is not a terminal (a pipe, a file, CI's log), nothing with
``--no-progress``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

Unit = Literal["bytes", "runs"]


class Progress:
    """One bar: :meth:`start` sets its total (``None``: unknown), :meth:`advance` moves it. Thread-safe. A bar
    that is not drawn (no terminal, no rich) does nothing."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar = bar
        self._task = task
        self._lock = threading.Lock()

    @property
    def drawn(self) -> bool:
        return self._bar is not None

    def start(self, total: int | None) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(self._task, total=total, completed=0)

    def advance(self, amount: int = 1) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(self._task, advance=amount)

    def describe(self, text: str) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(self._task, description=text)


@contextmanager
def progress_bar(label: str, unit: Unit, *, enabled: bool = True, total: int | None = None) -> Iterator[Progress]:
    """A bar labelled ``label`` counting ``unit``; a do-nothing :class:`Progress` when it cannot be drawn."""
    if not enabled or not sys.stderr.isatty():
        yield Progress()
        return
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import (
            Progress as RichProgress,
        )
    except ImportError:
        yield Progress()
        return
    amount = DownloadColumn(binary_units=True) if unit == "bytes" else MofNCompleteColumn()
    columns = (
        TextColumn(label),
        BarColumn(),
        TaskProgressColumn(),
        amount,
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
    )
    with RichProgress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=total)
        yield Progress(bar, task)
