""":class:`CachedEmbedder`: batching and a bounded LRU cache (keyed by a hash of the text) in front of any embedder."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from ..core._checked import integer_at_least
from ..errors import ConfigError
from ._base import Embedder, EmbeddingError, Vector, check_texts, to_vectors

__all__ = ["CacheInfo", "CachedEmbedder", "text_key"]


def text_key(text: str) -> bytes:
    """The cache key of a text: its 128-bit BLAKE2b digest (UTF-8; lone surrogates kept as they are)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True)
class CacheInfo:
    """Counters of a :class:`CachedEmbedder` since it was made (or since :meth:`CachedEmbedder.clear`).

    ``hits``: texts answered without embedding them (in the cache, embedded by another thread at the same time,
    or repeated within one call); ``misses``: texts embedded; ``calls``: calls of the wrapped embedder (one per
    batch of at most ``batch_size`` texts); ``evictions``: vectors dropped to stay within ``max_entries``;
    ``size``: vectors held now.
    """

    hits: int
    misses: int
    calls: int
    evictions: int
    size: int
    max_entries: int


class _Flight:
    """A text being embedded by one thread; the others that ask for it meanwhile wait for its vector."""

    __slots__ = ("done", "vector")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.vector: Vector | None = None


class CachedEmbedder:
    """An :class:`~loopwatch.semantic.Embedder` that embeds each distinct text once.

    ``embed(texts)`` looks every text up in an LRU cache of at most ``max_entries`` vectors keyed by
    :func:`text_key`; the texts it has not seen (each once, however often it is repeated) go to ``inner.embed``
    in batches of at most ``batch_size`` texts (``N`` new texts: ``ceil(N / batch_size)`` calls). The vectors are
    checked (one per text, finite numbers, the same dimension every call) and L2-normalised unless
    ``normalize=False``; each caller gets its own copy. ``max_entries=0`` keeps nothing between calls.

    Thread-safe: a text asked for by several threads at once is embedded by one of them while the others wait
    for its vector, so it is never embedded twice while it is in the cache. ``inner`` may be called from several
    threads at once (for different texts) unless ``exclusive=True``. Memory: about ``max_entries x (4 x
    dimension + 150)`` bytes, 6.7 MB for 4,096 vectors of 384 dimensions.
    """

    def __init__(
        self,
        inner: Embedder,
        *,
        max_entries: int = 4096,
        batch_size: int = 64,
        normalize: bool = True,
        exclusive: bool = False,
        name: str | None = None,
    ) -> None:
        if not callable(getattr(inner, "embed", None)):
            raise ConfigError(
                f"{type(inner).__name__} has no embed(texts) method (loopwatch.semantic.embedder_from adapts it)",
                field="inner",
            )
        integer_at_least(max_entries, 0, "max_entries")
        integer_at_least(batch_size, 1, "batch_size")
        self.inner = inner
        self.max_entries = max_entries
        self.batch_size = batch_size
        self.normalize = normalize
        self.name = name if name is not None else type(inner).__name__
        self.dimension: int | None = getattr(inner, "dimension", None)
        self._entries: OrderedDict[bytes, Vector] = OrderedDict()
        self._flights: dict[bytes, _Flight] = {}
        self._lock = threading.Lock()
        self._call_lock = threading.Lock() if exclusive else None
        self._hits = self._misses = self._calls = self._evictions = 0

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.name}, max_entries={self.max_entries}, batch_size={self.batch_size})"

    # -- public -----------------------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order (``[]`` for no texts)."""
        items = check_texts(texts)
        if not items:
            return []
        keys = [text_key(text) for text in items]
        found: dict[bytes, Vector] = {}
        todo: dict[bytes, str] = dict(zip(keys, items, strict=True))
        computed = 0
        while todo:
            mine: dict[bytes, str] = {}
            waits: list[tuple[bytes, str, _Flight]] = []
            with self._lock:
                for key, text in todo.items():
                    vector = self._entries.get(key)
                    if vector is not None:
                        self._entries.move_to_end(key)
                        found[key] = vector
                    elif (flight := self._flights.get(key)) is not None:
                        waits.append((key, text, flight))
                    else:
                        self._flights[key] = _Flight()
                        mine[key] = text
            todo = {}
            if mine:
                self._compute(mine, found)
                computed += len(mine)
            for key, text, flight in waits:
                flight.done.wait()
                if flight.vector is None:  # the thread embedding it failed: try again here
                    todo[key] = text
                else:
                    found[key] = flight.vector
        with self._lock:
            self._misses += computed
            self._hits += len(items) - computed
        return [found[key][:] for key in keys]

    def embed_one(self, text: str) -> Vector:
        """The vector of one text."""
        return self.embed([text])[0]

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(
                self._hits, self._misses, self._calls, self._evictions, len(self._entries), self.max_entries
            )

    def clear(self) -> None:
        """Forget every cached vector and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._hits = self._misses = self._calls = self._evictions = 0

    def __contains__(self, text: object) -> bool:
        """Whether the vector of ``text`` is in the cache (without touching its recency)."""
        if not isinstance(text, str):
            return False
        with self._lock:
            return text_key(text) in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # -- inside -----------------------------------------------------------------------------------------------

    def _compute(self, mine: dict[bytes, str], found: dict[bytes, Vector]) -> None:
        """Embed the texts this thread claimed, batch by batch; publish each vector to the cache and to waiters."""
        pending = list(mine.items())
        try:
            for start in range(0, len(pending), self.batch_size):
                batch = pending[start : start + self.batch_size]
                vectors = self._call([text for _, text in batch])
                with self._lock:
                    for (key, _), vector in zip(batch, vectors, strict=True):
                        found[key] = vector
                        if self.max_entries:
                            self._entries[key] = vector
                            self._entries.move_to_end(key)
                        flight = self._flights.pop(key)
                        flight.vector = vector
                        flight.done.set()
                    while len(self._entries) > self.max_entries:
                        self._entries.popitem(last=False)
                        self._evictions += 1
        finally:
            with self._lock:  # the texts not embedded (an error): release their waiters, who try again
                for key, _ in pending:
                    failed = self._flights.get(key)
                    if failed is not None and key not in found:
                        del self._flights[key]
                        failed.done.set()

    def _call(self, texts: list[str]) -> list[Vector]:
        if self._call_lock is None:
            result = self.inner.embed(texts)
        else:
            with self._call_lock:
                result = self.inner.embed(texts)
        with self._lock:
            self._calls += 1
        vectors = to_vectors(result, len(texts), normalize=self.normalize, source=self.name)
        size = len(vectors[0])
        with self._lock:
            if self.dimension is None:
                self.dimension = size
            elif size != self.dimension:
                raise EmbeddingError(f"{self.name} returned {size}-dimensional embeddings, {self.dimension} before")
        return vectors
