"""What every embedder shares: the :class:`Embedder` protocol, vectors, their checks and the cosine.

A vector is an ``array('f')`` (float32, 4 bytes a dimension: 1.5 KB for 384 dimensions), L2-normalised unless
the embedder was told not to. Nothing here needs numpy.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..errors import LoopwatchError

__all__ = [
    "Embedder",
    "EmbeddingError",
    "EmbeddingInputError",
    "Vector",
    "check_texts",
    "cosine",
    "reject_awaitable",
    "to_vector",
    "to_vectors",
]

Vector: TypeAlias = "array[float]"
"""One embedding: an ``array('f')`` (a mutable sequence of floats)."""


class EmbeddingError(LoopwatchError, ValueError):
    """An embedder gave something that is not one vector per text: wrong count, a row that is not a sequence of
    finite numbers, a dimension that changed from one call to the next, an awaitable from a synchronous call."""


class EmbeddingInputError(LoopwatchError, TypeError):
    """The texts given to an embedder are not a list (or other sequence) of ``str``."""


@runtime_checkable
class Embedder(Protocol):
    """Texts in, vectors out: ``embed(texts)`` returns one vector (a sequence of floats) per text, in order.

    ``embed([])`` returns ``[]``. Every loopwatch embedder (:class:`~loopwatch.semantic.CachedEmbedder`, the
    built-in :class:`~loopwatch.semantic.MiniLMEmbedder`, the adapters) returns ``list[array('f')]`` and raises
    :class:`EmbeddingInputError` for texts that are not strings. Any object with such a method is an embedder;
    :func:`~loopwatch.semantic.embedder_from` adapts the others (callables, ``.encode`` models, API clients).
    """

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


def check_texts(texts: object) -> list[str]:
    """``texts`` as a list of ``str``; a lone string, bytes, or a non-string item is an :class:`EmbeddingInputError`."""
    if isinstance(texts, (str, bytes, bytearray, memoryview)):
        raise EmbeddingInputError(
            f"texts must be a list of str, not a single {type(texts).__name__} (wrap it: embed([text]))"
        )
    try:
        items: list[object] = list(texts)  # type: ignore[call-overload]
    except TypeError:
        raise EmbeddingInputError(f"texts must be a list of str, not {type(texts).__name__}") from None
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise EmbeddingInputError(f"texts[{index}] is a {type(text).__name__}, not a str")
    return items  # type: ignore[return-value]  # every item is a str


def to_vector(row: Any, *, normalize: bool = True) -> Vector:
    """One embedding (a list, tuple, ``array``, numpy array, tensor...) as an ``array('f')`` of finite numbers,
    L2-normalised when ``normalize`` (a zero vector stays zero)."""
    if isinstance(row, array) and row.typecode == "f":
        vector = array("f", row)
    else:
        if hasattr(row, "tolist") and not isinstance(row, array):
            row = row.tolist()
        if isinstance(row, (str, bytes, bytearray)) or not isinstance(row, (Sequence, array)):
            raise EmbeddingError(f"an embedding must be a sequence of numbers, not {type(row).__name__}")
        try:
            vector = array("f", row)
        except (TypeError, OverflowError):
            raise EmbeddingError("an embedding must be a flat sequence of numbers") from None
    if not vector:
        raise EmbeddingError("an embedding is empty")
    norm = math.hypot(*vector)
    if not math.isfinite(norm):
        raise EmbeddingError("an embedding has a value that is not finite (nan or inf)")
    if normalize and norm > 0.0 and norm != 1.0:
        scale = 1.0 / norm
        vector = array("f", [value * scale for value in vector])
    return vector


def reject_awaitable(value: object, source: str) -> None:
    """An :class:`EmbeddingError` if ``value`` is an awaitable (an async embedder or client called synchronously)."""
    if hasattr(value, "__await__"):
        close = getattr(value, "close", None)
        if callable(close):  # a coroutine never awaited: close it, no "never awaited" warning
            close()
        raise EmbeddingError(f"{source} returned an awaitable: give a synchronous embedder (or client)")


def to_vectors(rows: Any, count: int, *, normalize: bool = True, source: str = "the embedder") -> list[Vector]:
    """A batch result (a list of rows, a 2-D numpy array or tensor...) as ``count`` vectors of one dimension."""
    reject_awaitable(rows, source)
    if hasattr(rows, "tolist") and not isinstance(rows, array):
        rows = rows.tolist()
    if isinstance(rows, (str, bytes, bytearray)) or not isinstance(rows, Sequence):
        raise EmbeddingError(f"{source} returned {type(rows).__name__}, not a list of embeddings")
    if len(rows) != count:
        raise EmbeddingError(f"{source} returned {len(rows)} embeddings for {count} texts")
    vectors = [to_vector(row, normalize=normalize) for row in rows]
    if vectors:
        size = len(vectors[0])
        for vector in vectors:
            if len(vector) != size:
                raise EmbeddingError(f"{source} returned embeddings of {size} and {len(vector)} dimensions")
    return vectors


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors, in [-1, 1]; 0.0 if either is zero. Pure Python (~20 µs for 384
    dimensions); for L2-normalised vectors it is their dot product."""
    if len(a) != len(b):
        raise EmbeddingError(f"cannot compare vectors of {len(a)} and {len(b)} dimensions")
    norms = math.hypot(*a) * math.hypot(*b)
    if norms == 0.0:
        return 0.0
    value = math.fsum(map(operator.mul, a, b)) / norms
    return max(-1.0, min(1.0, value))
