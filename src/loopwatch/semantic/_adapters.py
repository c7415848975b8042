"""Your own embedder as a loopwatch :class:`~loopwatch.semantic.Embedder`, duck-typed (nothing is imported).

- :class:`CallableEmbedder`: any function ``texts -> vectors`` (or ``text -> vector`` with ``per_text=True``);
- :class:`EncodeEmbedder`: an object with ``encode(texts)``, such as a sentence-transformers ``SentenceTransformer``;
- :class:`OpenAIEmbedder`: an embeddings API client with ``client.embeddings.create(input=..., model=...)``
  (``openai.OpenAI``, ``AzureOpenAI``, or any OpenAI-compatible server through it);
- :class:`MethodEmbedder`: an object's batch method by name, e.g. a LangChain ``Embeddings.embed_documents``.

:func:`embedder_from` picks the right one and puts a :class:`~loopwatch.semantic.CachedEmbedder` (batching, bounded
LRU cache) in front of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ._base import Embedder, EmbeddingError, Vector, check_texts, reject_awaitable, to_vectors
from ._cache import CachedEmbedder

__all__ = ["CallableEmbedder", "EncodeEmbedder", "MethodEmbedder", "OpenAIEmbedder", "embedder_from"]

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


def _name(obj: object) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__name__


class _RowsEmbedder:
    """What every adapter does around its own call: the texts checked, nothing asked for no text, and the rows
    it gets (one per text) turned into vectors, L2-normalised unless ``normalize`` is false."""

    normalize: bool
    dimension: int | None

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        items = check_texts(texts)
        if not items:
            return []
        return to_vectors(self._rows(items), len(items), normalize=self.normalize, source=repr(self))

    def _rows(self, items: list[str]) -> Any:
        """One row per text of ``items`` (non-empty), as the wrapped embedder gives them."""
        raise NotImplementedError


class CallableEmbedder(_RowsEmbedder):
    """A function as an embedder: ``fn(list_of_texts) -> list of vectors`` (a 2-D numpy array is fine), or with
    ``per_text=True`` ``fn(text) -> vector``, called once per text."""

    def __init__(self, fn: Callable[..., Any], *, per_text: bool = False, normalize: bool = True) -> None:
        if not callable(fn):
            raise ConfigError(f"{type(fn).__name__} is not callable", field="fn")
        self.fn = fn
        self.per_text = per_text
        self.normalize = normalize
        self.dimension: int | None = None

    def __repr__(self) -> str:
        return f"CallableEmbedder({_name(self.fn)}, per_text={self.per_text})"

    def _rows(self, items: list[str]) -> Any:
        if not self.per_text:
            return self.fn(items)
        rows = []
        for text in items:
            row = self.fn(text)
            reject_awaitable(row, repr(self))
            rows.append(row)
        return rows


class EncodeEmbedder(_RowsEmbedder):
    """A model with ``encode(texts, **encode_kwargs)`` returning one row per text (a sentence-transformers
    ``SentenceTransformer``, or anything alike). The rows are L2-normalised here unless ``normalize=False``."""

    def __init__(self, model: Any, *, normalize: bool = True, **encode_kwargs: Any) -> None:
        if not callable(getattr(model, "encode", None)):
            raise ConfigError(f"{type(model).__name__} has no encode(texts) method", field="model")
        self.model = model
        self.normalize = normalize
        self.encode_kwargs = encode_kwargs
        self.dimension: int | None = None
        get_dimension = getattr(model, "get_sentence_embedding_dimension", None)
        if callable(get_dimension):
            try:
                dimension = get_dimension()
            except Exception:  # a look-up only: the first call checks the dimension anyway
                dimension = None
            if isinstance(dimension, int) and not isinstance(dimension, bool):
                self.dimension = dimension

    def __repr__(self) -> str:
        return f"EncodeEmbedder({type(self.model).__name__})"

    def _rows(self, items: list[str]) -> Any:
        return self.model.encode(items, **self.encode_kwargs)


class MethodEmbedder(_RowsEmbedder):
    """``obj.<method>(texts)`` as an embedder, for an object whose batch method has another name (LangChain's
    ``embed_documents``, LlamaIndex's ``get_text_embedding_batch``)."""

    def __init__(self, obj: Any, method: str, *, normalize: bool = True) -> None:
        if not isinstance(method, str):
            raise ConfigError(f"must be a method's name, got {method!r}", field="method")
        if not callable(getattr(obj, method, None)):
            raise ConfigError(f"{type(obj).__name__} has no {method}(texts) method", field="method")
        self.obj = obj
        self.method = method
        self.normalize = normalize
        self.dimension: int | None = None

    def __repr__(self) -> str:
        return f"MethodEmbedder({type(self.obj).__name__}.{self.method})"

    def _rows(self, items: list[str]) -> Any:
        return getattr(self.obj, self.method)(items)


class OpenAIEmbedder(_RowsEmbedder):
    """An OpenAI-style embeddings client: ``client.embeddings.create(input=texts, model=model, **create_kwargs)``
    whose reply has ``data``, a list of items with ``embedding`` (and ``index``, by which they are put back in
    order), as objects or as dicts. ``dimensions=`` asks a ``text-embedding-3`` model for shorter vectors. Only a
    synchronous client will do (an ``AsyncOpenAI`` gives an :class:`~loopwatch.semantic.EmbeddingError`). The API
    refuses empty strings: such a text is an error from the client, passed on as it is."""

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        dimensions: int | None = None,
        normalize: bool = True,
        **create_kwargs: Any,
    ) -> None:
        embeddings = getattr(client, "embeddings", None)
        if not callable(getattr(embeddings, "create", None)):
            raise ConfigError(f"{type(client).__name__} has no embeddings.create(...) method", field="client")
        if not isinstance(model, str) or not model:
            raise ConfigError(f"must be a model name, not {model!r}", field="model")
        self.client = client
        self.model = model
        self.normalize = normalize
        self.create_kwargs = dict(create_kwargs)
        if dimensions is not None:
            self.create_kwargs["dimensions"] = dimensions
        self.dimension: int | None = dimensions

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({type(self.client).__name__}, model={self.model!r})"

    def _rows(self, items: list[str]) -> Any:
        reply = self.client.embeddings.create(input=items, model=self.model, **self.create_kwargs)
        reject_awaitable(reply, repr(self))
        data = reply.get("data") if isinstance(reply, Mapping) else getattr(reply, "data", None)
        if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
            raise EmbeddingError(f"{self!r}: the reply has no list of embeddings in 'data'")
        rows = [_field(item, "embedding") for item in data]
        indices = [_field(item, "index") for item in data]
        if all(isinstance(index, int) for index in indices) and sorted(indices) == list(range(len(indices))):
            rows = [row for _, row in sorted(zip(indices, rows, strict=True), key=lambda pair: pair[0])]
        return rows


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _adapt(obj: Any, *, model: str | None, per_text: bool, normalize: bool) -> tuple[Embedder, int]:
    """The adapter for ``obj`` and the batch size that suits it."""
    if isinstance(obj, (str, bytes)):  # a text has encode(): it would pass for a model until the first embedding
        raise ConfigError(
            f"cannot embed with a text ({obj!r:.40}): give the model object, an embeddings API client or a callable; "
            "builtin_embedder() is the built-in model",
            field="embedder",
        )
    if callable(getattr(getattr(obj, "embeddings", None), "create", None)):
        return OpenAIEmbedder(obj, model or DEFAULT_OPENAI_MODEL, normalize=normalize), 256
    if model is not None:
        raise ConfigError("model= is for an embeddings API client only", field="model")
    if callable(getattr(obj, "encode", None)):
        return EncodeEmbedder(obj, normalize=normalize), 64
    if callable(getattr(obj, "embed_documents", None)):
        return MethodEmbedder(obj, "embed_documents", normalize=normalize), 64
    if callable(getattr(obj, "embed", None)):
        return obj, 64
    if callable(obj):
        return CallableEmbedder(obj, per_text=per_text, normalize=normalize), 64
    raise ConfigError(
        f"cannot embed with a {type(obj).__name__}: give a callable texts -> vectors, an object with encode(texts) "
        "or embed(texts), or an embeddings API client",
        field="embedder",
    )


def embedder_from(
    obj: Any,
    *,
    model: str | None = None,
    per_text: bool = False,
    cache_size: int = 4096,
    batch_size: int | None = None,
    normalize: bool = True,
    exclusive: bool = False,
) -> CachedEmbedder:
    """Your embedder, batched and cached: a :class:`~loopwatch.semantic.CachedEmbedder` around the adapter for ``obj``.

    ``obj`` is, in the order they are recognised:

    - an embeddings API client, ``client.embeddings.create`` (``openai.OpenAI()``...): ``model=`` names the model
      (default ``text-embedding-3-small``), 256 texts a request;
    - an object with ``encode(texts)`` (a sentence-transformers model), 64 texts a call;
    - an object with ``embed_documents(texts)`` (a LangChain ``Embeddings``);
    - an :class:`~loopwatch.semantic.Embedder` (an ``embed(texts)`` method);
    - a callable ``texts -> vectors`` (``per_text=True``: ``text -> vector``, called once per new text).

    A :class:`~loopwatch.semantic.CachedEmbedder` is returned as it is. ``cache_size`` vectors are kept (LRU);
    ``batch_size`` overrides the texts per call; the vectors are L2-normalised unless ``normalize=False``;
    ``exclusive=True`` never calls ``obj`` from two threads at once.
    """
    if isinstance(obj, CachedEmbedder):
        return obj
    adapter, default_batch = _adapt(obj, model=model, per_text=per_text, normalize=normalize)
    return CachedEmbedder(
        adapter,
        max_entries=cache_size,
        batch_size=default_batch if batch_size is None else batch_size,
        normalize=normalize,
        exclusive=exclusive,
        name=repr(adapter),
    )
