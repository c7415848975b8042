"""A pure-Python BERT WordPiece tokenizer (uncased), the one all-MiniLM-L6-v2 was trained with.

It gives the same token ids as Hugging Face's ``BertTokenizer`` / ``tokenizers``' ``BertWordPieceTokenizer``
with ``lowercase=True`` (the model's ``tokenizer.json``: ``BertNormalizer(clean_text, handle_chinese_chars,
lowercase, strip_accents follows lowercase)``, ``BertPreTokenizer``, ``WordPiece(max_input_chars_per_word=100)``
and the ``[CLS] A [SEP]`` template), without the ``tokenizers`` wheel (only characters that tokenizers' Unicode
tables predate can differ):

1. normalise: drop NUL, U+FFFD and control characters (``Cc``, ``Cf``, ``Co``, ``Cs`` but tab, CR, LF), turn
   whitespace into spaces, put spaces around CJK ideographs, decompose (NFD) and drop non-spacing marks
   (accents), lowercase character by character (unassigned code points are kept);
2. split on whitespace, and every punctuation character (ASCII punctuation or category ``P*``) is a word of its
   own;
3. each word becomes its longest-match-first word pieces (``##`` marks a piece inside a word); a word longer than
   100 characters, or one that cannot be spelt with the vocabulary, is ``[UNK]``.

The vocabulary (``vocab.txt`` beside this file, 30,522 entries) is BERT's ``bert-base-uncased`` vocabulary, the
one all-MiniLM-L6-v2 ships (Apache-2.0, Google Research). Pure functions of the text: deterministic, thread-safe.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Final

from ..core._checked import integer_at_least
from ..errors import ConfigError

__all__ = ["WordPieceTokenizer", "bert_vocabulary"]

UNK: Final = "[UNK]"
CLS: Final = "[CLS]"
SEP: Final = "[SEP]"
PAD: Final = "[PAD]"
MAX_INPUT_CHARS_PER_WORD: Final = 100

# CJK Unified Ideographs and their extensions, as in BERT's ``_is_chinese_char`` (not Hangul, kana...).
_CJK_RANGES: Final = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# After ASCII normalisation (control characters gone, whitespace a space, lowercase): a run of letters and
# digits is a word, and every other printable character is ASCII punctuation, a word of its own.
_ASCII_WORDS: Final = re.compile(r"[a-z0-9]+|[^a-z0-9 ]")
_ASCII_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ASCII_SPACE: Final = re.compile(r"[\t\n\r]")
_WORD_CACHE_SIZE: Final = 8192


def bert_vocabulary() -> dict[str, int]:
    """The packaged ``bert-base-uncased`` vocabulary: token -> id (its line number, from 0)."""
    text = resources.files(__package__ or "loopwatch.semantic").joinpath("vocab.txt").read_text(encoding="utf-8")
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    return {token: index for index, token in enumerate(tokens)}


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _normalise_unicode(text: str) -> str:
    """BertNormalizer for any text: clean, pad CJK, strip accents, lowercase (in that order)."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD:
            continue
        if char in "\t\n\r":
            out.append(" ")
            continue
        category = unicodedata.category(char)
        if category == "Zs":
            out.append(" ")
        elif category.startswith("C") and category != "Cn":
            continue
        elif _is_cjk(code):
            out.append(f" {char} ")
        else:
            out.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    return "".join(char.lower() for char in decomposed if unicodedata.category(char) != "Mn")


def _split_unicode(text: str) -> list[str]:
    """BertPreTokenizer: split on whitespace, punctuation characters alone."""
    words: list[str] = []
    current: list[str] = []
    for char in text:
        if char.isspace():
            if current:
                words.append("".join(current))
                current = []
        elif _is_punctuation(char):
            if current:
                words.append("".join(current))
                current = []
            words.append(char)
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return words


def _basic_tokens(text: str) -> list[str]:
    """The words of ``text`` after normalisation and pre-tokenisation (before WordPiece)."""
    if text.isascii():
        text = _ASCII_SPACE.sub(" ", _ASCII_CONTROL.sub("", text)).lower()
        return _ASCII_WORDS.findall(text)
    return _split_unicode(_normalise_unicode(text))


class WordPieceTokenizer:
    """Text -> token ids for a BERT uncased WordPiece vocabulary (``[CLS] ... [SEP]``, truncated).

    ``encode(text)`` gives at most ``max_length`` ids, ``[CLS]`` and ``[SEP]`` included (the words past the limit
    are dropped, as sentence-transformers truncates at the model's ``max_seq_length``). Word pieces of recent
    words are kept in a small bounded cache; it is safe to share one tokenizer between threads.
    """

    def __init__(self, vocab: Mapping[str, int] | None = None, *, max_length: int = 256) -> None:
        integer_at_least(max_length, 2, "max_length")
        if vocab is not None and not isinstance(vocab, Mapping):  # a file's path, say: the mapping is read from it
            raise ConfigError(f"must be a mapping of tokens to ids, got {type(vocab).__name__}", field="vocab")
        self.vocab: dict[str, int] = dict(bert_vocabulary() if vocab is None else vocab)
        for special in (UNK, CLS, SEP, PAD):
            if special not in self.vocab:
                raise ConfigError(f"the vocabulary has no {special} token", field="vocab")
        self.max_length = max_length
        self.unk_id = self.vocab[UNK]
        self.cls_id = self.vocab[CLS]
        self.sep_id = self.vocab[SEP]
        self.pad_id = self.vocab[PAD]
        self._words: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"WordPieceTokenizer(vocab={len(self.vocab)}, max_length={self.max_length})"

    def word_pieces(self, word: str) -> tuple[int, ...]:
        """The ids of one pre-tokenised word: longest match first, ``[UNK]`` if it cannot be spelt."""
        with self._lock:
            hit = self._words.get(word)
            if hit is not None:
                self._words.move_to_end(word)
                return hit
        pieces = self._spell(word)
        with self._lock:
            self._words[word] = pieces
            if len(self._words) > _WORD_CACHE_SIZE:
                self._words.popitem(last=False)
        return pieces

    def _spell(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_INPUT_CHARS_PER_WORD:
            return (self.unk_id,)
        vocab = self.vocab
        whole = vocab.get(word)
        if whole is not None:
            return (whole,)
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found: int | None = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk_id,)
            ids.append(found)
            start = end
        return tuple(ids)

    def tokenize(self, text: str) -> list[int]:
        """The word-piece ids of ``text``, without special tokens and without truncation."""
        ids: list[int] = []
        for word in _basic_tokens(text):
            ids.extend(self.word_pieces(word))
        return ids

    def encode(self, text: str) -> list[int]:
        """``[CLS]`` + the word pieces of ``text`` (at most ``max_length - 2``) + ``[SEP]``."""
        room = self.max_length - 2
        ids: list[int] = [self.cls_id]
        for word in _basic_tokens(text):
            ids.extend(self.word_pieces(word))
            if len(ids) > room:
                break
        del ids[room + 1 :]
        ids.append(self.sep_id)
        return ids

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode_tokens(self, ids: Iterable[int]) -> list[str]:
        """The vocabulary entries of ``ids`` (for debugging and tests)."""
        inverse = {index: token for token, index in self.vocab.items()}
        return [inverse.get(index, UNK) for index in ids]
