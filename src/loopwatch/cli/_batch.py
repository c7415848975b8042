"""Scanning many files, in one process or several (``loopwatch scan -j N``).

Work is cut into tasks of one file each; a big JSONL file is cut into ``N`` interleaved shares, each parsed by one
worker only (a file of trajectories by its lines, an event stream by its sessions). A shared file with a bad record
is scanned again in this process, in one piece, so that the output is the same as with one process. Workers rebuild
the policy from its :class:`~loopwatch._policy_spec.PolicySpec` (a preset name and a config file), scan, and send
back small results: each run's :class:`~loopwatch.cli._summary.RunDigest`, and the run itself only when the caller
wants it (for example the runs with loops, for the HTML report). Results come back in input order, file by file, so
memory stays flat however many files there are.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from .._policy_spec import PolicySpec
from ..core._policy import Policy
from ..errors import InputError
from ..readers import ErrorHandler, Format, Run, expand_paths, read_file, read_meter
from ._scan import RunReport, scan_runs
from ._summary import RunDigest, digest_run

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

_SPLIT_BYTES: Final = 2_000_000
"""Files at least this big are shared between workers (when their format allows)."""
AUTO_BYTES: Final = 4_000_000
"""Without ``-j``, an input of at least this many bytes (on disk: compressed, for gzip files) is scanned with one
process per CPU, one per :data:`_SPLIT_BYTES` of it at most; a smaller one in this process. Below it the gain is
small for the CPU it costs (workers sharing a file each read it whole: a 3 MB corpus file took 1.5 s instead of
1.8 s with two, for 40% more CPU time)."""


class ScanProgress(Protocol):
    """What :func:`scan_files` tells a progress bar: the bytes it will read (``None`` when unknown: standard
    input), then the bytes read as they are read (by every worker)."""

    def start(self, total: int | None) -> None: ...

    def advance(self, read: int) -> None: ...


@dataclass
class Scanned:
    """One scanned run: its report and digest, and the run itself when it was asked for."""

    report: RunReport
    digest: RunDigest
    run: Run | None


KeepRun = Callable[[RunReport], bool]


def _never(report: RunReport) -> bool:
    return False


def keep_all(report: RunReport) -> bool:
    """``keep`` for :func:`scan_files`: send back every run (the HTML report chooses which to keep)."""
    return True


def with_loops(report: RunReport) -> bool:
    """``keep`` for :func:`scan_files`: send back the runs that have a non-ok verdict."""
    return bool(report.verdicts)


@dataclass(frozen=True)
class _Task:
    path: str
    format: Format | None
    part: tuple[int, int] | None


def _scan_task(task: _Task, policy: Policy, keep: KeepRun, on_error: ErrorHandler) -> Iterator[tuple[int, Scanned]]:
    runs = read_file(task.path, format=task.format, on_error=on_error, part=task.part)
    share, shares = task.part or (0, 1)
    current: list[Run] = []

    def tap() -> Iterator[Run]:
        for run in runs:
            current[:] = [run]
            yield run

    for n, report in enumerate(scan_runs(policy, tap(), on_error)):
        run = current[0]
        yield n * shares + share, Scanned(report, digest_run(run, report), run if keep(report) else None)


def _worker(
    spec: PolicySpec, task: _Task, keep: KeepRun
) -> tuple[list[tuple[int, Scanned]], list[tuple[str, str, int | None]]]:
    """One task in a worker process: results with their run ordinals, and errors as plain tuples."""
    errors: list[tuple[str, str, int | None]] = []

    def on_error(error: InputError) -> None:
        errors.append((error.reason, error.path, error.line))

    policy = _policy_cache(spec)
    with read_meter(_count_worker_bytes) if _WORKER_COUNTER else contextlib.nullcontext():
        return list(_scan_task(task, policy, keep, on_error)), errors


@contextlib.contextmanager
def _stopping(poller: _Poller | None) -> Iterator[None]:
    try:
        yield
    finally:
        if poller is not None:
            poller.stop()


_POLICIES: dict[PolicySpec, Policy] = {}


def _policy_cache(spec: PolicySpec) -> Policy:
    policy = _POLICIES.get(spec)
    if policy is None:
        policy = _POLICIES[spec] = spec.build()
    return policy


def _splittable(paths: Sequence[str]) -> bool:
    return any(os.path.isfile(p) and os.path.getsize(p) >= _SPLIT_BYTES for p in paths)


def _tasks(paths: Sequence[str], format: Format | None, jobs: int) -> list[list[_Task]]:
    """Per file, the tasks that read it (several for a big file when there are several workers)."""
    out = []
    for path in paths:
        size = os.path.getsize(path) if path != "-" and os.path.isfile(path) else 0
        if jobs > 1 and size >= _SPLIT_BYTES:
            out.append([_Task(path, format, (k, jobs)) for k in range(jobs)])
        else:
            out.append([_Task(path, format, None)])
    return out


def scan_files(
    paths: Sequence[str],
    spec: PolicySpec,
    *,
    format: Format | None = None,
    jobs: int | None = 1,
    keep: KeepRun = _never,
    on_error: ErrorHandler,
    on_file: Callable[[str], None] | None = None,
    progress: ScanProgress | None = None,
) -> Iterator[Scanned]:
    """Every run of every file in ``paths`` (expanded as :func:`~loopwatch.readers.expand_paths` does),
    scanned with ``spec``'s policy, in input order, by ``jobs`` processes (``None``: :func:`auto_jobs`).
    ``keep(report)`` says which runs to send back whole; ``on_file(path)`` is called as each file is done;
    ``progress`` is told the bytes to read and read."""
    files = expand_paths(paths, on_error)
    if jobs is None:
        jobs = auto_jobs(files)
    single = jobs <= 1 or (len(files) <= 1 and not _splittable(files)) or "-" in files  # stdin stays here
    workers: tuple[ProcessPoolExecutor, Any] | None = None
    if not single:
        try:
            workers = _workers(jobs, progress)
        except (OSError, NotImplementedError) as exc:  # no process-shared locks here (some sandboxes)
            print(f"loopwatch: cannot start {jobs} processes ({exc}); scanning in this one", file=sys.stderr)
            single = True
    if progress is not None:
        progress.start(_total_bytes(files, 1 if single else jobs))
    if workers is None:
        policy = spec.build()
        with read_meter(progress.advance) if progress is not None else contextlib.nullcontext():
            for path in files:
                for _, scanned in _scan_task(_Task(path, format, None), policy, keep, on_error):
                    yield scanned
                if on_file is not None:
                    on_file(path)
        return
    yield from _parallel(files, spec, format, jobs, keep, on_error, on_file, progress, workers)


def _workers(jobs: int, progress: ScanProgress | None) -> tuple[ProcessPoolExecutor, Any]:
    """A pool of ``jobs`` worker processes and the count of bytes they read (shared with this process); raises
    ``OSError`` or ``NotImplementedError`` where processes cannot share a lock."""
    import multiprocessing  # here: a scan in one process never loads them (~8 ms at start)
    from concurrent.futures import ProcessPoolExecutor

    counter = multiprocessing.Value("q", 0)
    setup: dict[str, Any] = {"initializer": _start_worker, "initargs": (counter,)} if progress is not None else {}
    return ProcessPoolExecutor(max_workers=jobs, **setup), counter


def auto_jobs(files: Sequence[str]) -> int:
    """The processes a scan of ``files`` uses when ``-j`` does not say: 1 for standard input or an input under
    :data:`AUTO_BYTES`; else one per CPU this process may run on, at most one per :data:`_SPLIT_BYTES` of input (the
    size from which a file is shared between workers)."""
    size = _total_bytes(files, 1)
    if size is None or size < AUTO_BYTES:  # None: standard input, read here
        return 1
    return max(1, min(_cpus(), size // _SPLIT_BYTES))


def _cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells, else the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _total_bytes(files: Sequence[str], jobs: int) -> int | None:
    """The bytes the scan will read: each file's size, times the workers that share it (each reads it whole)."""
    total = 0
    for path in files:
        if path == "-":
            return None
        try:
            size = os.path.getsize(path)
        except OSError:
            continue  # reported when it is opened
        total += size * (jobs if jobs > 1 and size >= _SPLIT_BYTES else 1)
    return total


_WORKER_COUNTER: list[Any] = []


def _start_worker(counter: Any) -> None:
    """A worker process's set-up: count the bytes it reads into the counter shared with the parent."""
    _WORKER_COUNTER[:] = [counter]


def _count_worker_bytes(read: int) -> None:
    counter = _WORKER_COUNTER[0]
    with counter.get_lock():
        counter.value += read


class _Poller:
    """Forwards the workers' shared byte count to a progress bar, a few times a second, from a thread."""

    def __init__(self, counter: Any, progress: ScanProgress) -> None:
        self._counter = counter
        self._progress = progress
        self._seen = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loopwatch-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.2):
            self.flush()

    def flush(self) -> None:
        value = int(self._counter.value)
        if value > self._seen:
            self._progress.advance(value - self._seen)
            self._seen = value

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self.flush()


def _parallel(
    files: Sequence[str],
    spec: PolicySpec,
    format: Format | None,
    jobs: int,
    keep: KeepRun,
    on_error: ErrorHandler,
    on_file: Callable[[str], None] | None,
    progress: ScanProgress | None,
    workers: tuple[ProcessPoolExecutor, Any],
) -> Iterator[Scanned]:
    groups = iter(zip(files, _tasks(files, format, jobs), strict=True))
    pool, counter = workers
    poller = _Poller(counter, progress) if progress is not None else None
    with pool, _stopping(poller):
        # at most 2 * jobs files in flight: enough to keep every worker busy, with bounded memory
        pending = []
        for path, group in groups:
            pending.append((path, [pool.submit(_worker, spec, task, keep) for task in group]))
            if len(pending) >= 2 * jobs:
                break
        while pending:
            path, futures = pending.pop(0)
            results: list[tuple[int, Scanned]] = []
            met: list[InputError] = []
            for future in futures:
                scanned, errors = future.result()
                results.extend(scanned)
                met += (InputError(message, path=where, line=line) for message, where, line in errors)
            if met and len(futures) > 1:
                # a bad record in a shared file: each share stopped where it met one, or not at all; one piece
                # stops where a scan in one process does, with its runs before the bad record, reported once
                results = list(_scan_task(_Task(path, format, None), _policy_cache(spec), keep, on_error))
            else:
                for error in met:
                    on_error(error)
            results.sort(key=lambda item: item[0])
            yield from (scanned for _, scanned in results)
            if on_file is not None:
                on_file(path)
            following = next(groups, None)
            if following is not None:
                pending.append((following[0], [pool.submit(_worker, spec, task, keep) for task in following[1]]))
