"""What every detector sees (:class:`Step`, defined in :mod:`._step`, and the accessors of the features it shares) and
reports (:class:`Finding`).

Detectors are pure: ``observe(state, step)`` reads one step, updates the detector's own per-session state (a
typed structure, see :mod:`loopwatch.core.detectors._state`, written out as JSON so sessions can be snapshotted and
restored anywhere) and may report a finding.
They never read a clock, a file or the network, and never import their driver.
"""

from __future__ import annotations

import binascii
from abc import abstractmethod
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final, Generic, TypeVar, cast

from .. import _kernels
from .._canonical import canonical_json, shortened
from .._configured import Configured
from .._fingerprint import error_signature, is_mutation, is_poll, is_search, preview
from .._kernels_py import WORD_CODE as WORD_CODE  # how rules keep sets of word hashes (unsigned 32-bit integers)
from .._kernels_py import lines_of as lines_of  # what the lines of a masked text are
from .._masking import masked
from .._patterns import REGISTRY, Pattern
from .._tools import search_query_hashes, search_scopes
from .._verdict import COMPILED, set_frozen
from ._state_pack import pack_fields
from ._step import Step as Step  # what every detector sees, with the features the rules share
from ._step import StepKind as StepKind

try:
    from mypy_extensions import mypyc_attr as mypyc_attr  # (the compiled modules' class settings: shared)
except ImportError:  # a build requirement only (mypyc reads it): at run time it has nothing to do

    def mypyc_attr(*_: object, **__: object) -> Callable[[T], T]:  # type: ignore[misc]
        return lambda cls: cls


def word_bytes(hashes: Iterable[int]) -> bytes:
    """Word hashes (CRC-32s) packed in one bytes object, 4 bytes each in the machine's order: how rules keep them (an
    ``array`` of them takes 47 bytes more, a tuple 4 to 8 times as much)."""
    return array(WORD_CODE, hashes).tobytes()


def word_values(words: bytes) -> array[int]:
    """The word hashes :func:`word_bytes` packed, as a sequence of integers (a copy: quicker to go through than a
    view)."""
    return array(WORD_CODE, words)


T = TypeVar("T")
S = TypeVar("S")
"""A rule's state type (what its :meth:`Detector.new_state` makes)."""
State = dict[str, Any]


@dataclass(frozen=True, slots=True, init=False)
class Finding:
    """A detector's report: a loop of ``pattern`` seen ``count`` times (in its own unit)."""

    pattern: str
    count: int
    key: str
    loop_start: int | None
    reason: str
    indices: tuple[int, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    blockable: bool = False
    """True when the finding is about the tool call of this very step (so the call can be refused)."""
    hard: bool = False
    """Hard evidence: the same unit (a call and its result, a failing call and its error, an identical message)
    repeated with nothing changed in between. Only hard findings may block or stop a policy with
    ``hard_evidence=True``; similarity, rewording, streaks of different calls and self-reports may only nudge."""
    stoppable: bool = True
    """With ``hard_evidence``, may this hard finding stop the run (not only refuse the call)? The same call
    succeeding the same way again (a padding step, a no-op) is refused but not stopped: nothing fails, and the
    run may still finish; the same failure again is stopped."""

    def __init__(
        self,
        pattern: str,
        count: int,
        key: str,
        loop_start: int | None,
        reason: str,
        indices: tuple[int, ...] = (),
        facts: Mapping[str, Any] | None = None,
        blockable: bool = False,
        hard: bool = False,
        stoppable: bool = True,
    ) -> None:
        # Written out, so that mypyc compiles it and sets the fields directly (the frozen class's refusing __setattr__
        # is for Python code): the one dataclasses writes runs as Python, each field through object.__setattr__.
        if not COMPILED:
            given = (pattern, count, key, loop_start, reason, indices, {} if facts is None else facts, blockable, hard)
            set_frozen(self, _FIELDS, (*given, stoppable))
            return
        self.pattern = pattern  # type: ignore[misc]
        self.count = count  # type: ignore[misc]
        self.key = key  # type: ignore[misc]
        self.loop_start = loop_start  # type: ignore[misc]
        self.reason = reason  # type: ignore[misc]
        self.indices = indices  # type: ignore[misc]
        self.facts = {} if facts is None else facts  # type: ignore[misc]
        self.blockable = blockable  # type: ignore[misc]
        self.hard = hard  # type: ignore[misc]
        self.stoppable = stoppable  # type: ignore[misc]

    def __reduce__(self) -> tuple[type[Finding], tuple[Any, ...]]:
        # copied and pickled through the constructor (a compiled class's own way makes it empty first)
        return Finding, tuple(getattr(self, name) for name in _FIELDS)


_FIELDS: Final = tuple(f.name for f in fields(Finding))


@mypyc_attr(allow_interpreted_subclasses=True)  # a user's rules, run from source, subclass it
class Detector(Configured, Generic[S]):
    """A loop rule over its state type ``S`` (``class MyRule(Detector[MyState])``). Subclasses hold thresholds only;
    per-session data lives in the state they create.

    Every rule defines :meth:`new_state` and :meth:`observe` (mypy says so where a rule without them is made; a
    policy refuses one). The class is not an ``abc.ABC``: the compiled rules would share one ``isinstance`` cache."""

    name: ClassVar[str] = "detector"
    patterns: ClassVar[tuple[Pattern, ...]] = ()
    """The patterns the rule reports, each with its default ladder, messages, specificity and evidence
    (:class:`~loopwatch.core.Pattern`); a pattern another rule declared may be named by its name. Defining the
    class registers them (:data:`~loopwatch.core.REGISTRY`)."""
    kinds: ClassVar[frozenset[str]] = frozenset({"call", "result", "message", "delta", "usage"})
    """The step kinds the detector looks at; the engine does not call it for the others."""
    reset_on_user: bool = True
    optional_state: ClassVar[frozenset[str]] = frozenset()
    """State keys added after a release: a snapshot without them loads with their fresh values."""
    fresh_shared: ClassVar[bool] = False
    """Do sessions keep no state of their own for this rule while it is fresh (as :meth:`new_state` makes it)? A rule
    whose state is fresh most of the time (no look-up under way, no reply streaming in) says so and answers
    :meth:`keeps_fresh` and :meth:`is_fresh`: the engine then keeps ``None`` for a fresh state, makes one only for a
    step that may change it, and drops it once it is fresh again."""
    fresh_kinds: ClassVar[frozenset[str]] = frozenset()
    """With :attr:`fresh_shared`: the step kinds :meth:`keeps_fresh` says yes to whatever the step (not asked)."""
    state_records: ClassVar[tuple[type, ...]] = ()
    """The record classes (dataclasses with slots) the rule's state holds, which :meth:`pack_state` packs: part of
    the packed state's layout (:func:`~._state_pack.layout_of`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = vars(cls).get("patterns")  # (a compiled class's namespace is read the same way)
        if declared is not None:
            cls.patterns = REGISTRY.declare(declared, by=cls.__name__)

    # A rule's state is its own type S (a dataclass with slots, or a plain JSON dict): a rule subclasses
    # Detector[S], so mypy checks that what new_state makes is what observe, dump_state and the others take; the
    # engine, which holds rules of every kind (Detector[Any]), only hands each its own state back.

    @abstractmethod
    def new_state(self) -> S:
        """A fresh state for one session."""

    @abstractmethod
    def observe(self, state: S, step: Step) -> Finding | None:
        """Update ``state`` with ``step`` and report a finding, if any."""

    def keeps_fresh(self, step: Step) -> bool:
        """Would :meth:`observe` leave a fresh state as it is, and find nothing, on ``step``? (Asked only with
        :attr:`fresh_shared`; ``False`` is always a safe answer.)"""
        return False

    def is_fresh(self, state: S) -> bool:
        """Is ``state`` the same as a fresh one? (Asked only with :attr:`fresh_shared`; ``False`` is always a safe
        answer.)"""
        return False

    def suspicion(self, state: S, index: int) -> str | None:
        """What this rule found suggestive but not enough at step ``index`` (something an LLM judge may be
        asked about), or ``None``. Most rules are never undecided."""
        return None

    def dump_state(self, state: S) -> dict[str, Any]:
        """The JSON form of ``state`` (a plain JSON dict state as it is)."""
        return dict(cast(State, state))

    def load_state(self, data: dict[str, Any]) -> S:
        """The state from its JSON form; raises ``KeyError``/``TypeError``/``ValueError`` when malformed."""
        return cast(S, self.load_dict_state(data))

    def pack_state(self, state: S) -> Any:
        """``state`` packed for a store (:mod:`._state_pack`): a dataclass state as its fields' values, a plain JSON
        dict state as it is (the engine keeps a shared fresh state, ``None``, as it is). A rule whose state holds
        records (:attr:`state_records`) packs them too."""
        return pack_fields(state)

    def unpack_state(self, packed: Any) -> S:
        """:meth:`pack_state` undone; raises ``TypeError``/``ValueError`` when ``packed`` is not such a state."""
        if type(packed) is dict:  # a plain JSON dict state: checked as a snapshot's is
            return self.load_state(packed)
        return cast(S, self.state_class()(*packed))

    def state_class(self) -> type:
        """The class of the rule's state (of what :meth:`new_state` makes)."""
        return type(self.new_state())

    def load_dict_state(self, data: dict[str, Any]) -> State:
        """A plain JSON dict state: ``data`` with the keys :meth:`new_state` makes (those of
        :attr:`optional_state` may be missing: they get their fresh values)."""
        fresh = cast(State, self.new_state())
        for key in self.optional_state - data.keys():
            data[key] = fresh[key]
        if set(data) != set(fresh):
            raise ValueError(f"{self.name}: state keys {sorted(data)} != {sorted(fresh)}")
        return data

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"


def check_judges(detector: Detector[Any]) -> None:
    """``TypeError`` naming what ``detector`` lacks when it does not define :meth:`~Detector.new_state` and
    :meth:`~Detector.observe`: what a policy checks of each rule it holds."""
    kind = type(detector)
    missing = [name for name in ("new_state", "observe") if getattr(kind, name) is getattr(Detector, name)]
    if missing:
        raise TypeError(f"{kind.__name__} cannot judge events: it does not define {' or '.join(missing)}()")


def canonical_of(step: Step) -> str:
    """The canonical JSON of the step's (projected) arguments, built once and only when needed."""
    if step.canonical is None:
        step.canonical = canonical_json(step.projected if step.projected is not None else step.args or {})
    return step.canonical


def has_code_fence(text: str) -> bool:
    """Does ``text`` hold a fenced code block's fence (three backticks)? A backtick is looked for first: CPython finds
    one character with memchr, and a string of three ~30x slower (~1 us in 1.5 KB of prose)."""
    return "`" in text and "```" in text


def masked_of(step: Step) -> bytes:
    """The step's output (a message's text for messages) with its volatile parts removed
    (:func:`loopwatch.core._masking.masked`), computed once per step."""
    if step.masked is None:
        step.masked = masked((step.output if step.kind == "result" else step.text) or "")
    return step.masked


def signature_of(step: Step) -> str:
    """The error signature (:func:`loopwatch.core._fingerprint.error_signature`) of a message's text, computed once per
    step: the engine asks whether a user's reply is new, and a rule whether it is the same complaint again."""
    cached = step.signature
    if cached is None:
        cached = step.signature = error_signature(step.text or "", masked_of(step))
    return str(cached)


def line_hashes(step: Step) -> frozenset[int]:
    """CRC-32s of the distinct non-empty lines of the step's masked output (see :func:`lines_of`), computed once
    per step: several rules ask what a result's lines are."""
    cached = step.lines
    if cached is None:
        cached = step.lines = _kernels.line_hashes(masked_of(step))
    return cached


ARGUMENT_WORDS: Final = 64
"""How many distinct words of a call's arguments are kept: what two calls have to share to be the same action."""


def argument_word_bytes(step: Step) -> bytes:
    """CRC-32s of the first distinct lowercased words (runs of letters and digits, at most :data:`ARGUMENT_WORDS`) in
    a call's argument values (keys aside; the first 600 characters of each string), sorted and packed 4 bytes each
    (:func:`word_bytes`): what two calls have to share to be the same action in other words. Computed once per step,
    in one pass of the text kernels, and shared by the rules that keep it."""
    cached = step.argument_word_bytes
    return cached if cached is not None else _read_argument_words(step)[0]


def numberless_argument_words(step: Step) -> bytes:
    """:func:`argument_word_bytes` without the words made of digits only: what a call does, whichever line, count or
    attempt number it names (``edit 169:171`` and ``edit 169:172``, ``--try 0`` and ``--try 1`` share all of
    theirs). Read in the same pass as :func:`argument_word_bytes` (the same bytes object when the call names no
    number)."""
    cached = step.numberless_argument_words
    return cached if cached is not None else _read_argument_words(step)[1]


def _read_argument_words(step: Step) -> tuple[bytes, bytes]:
    """Both of :func:`argument_word_bytes` and :func:`numberless_argument_words`, read in one kernel pass and kept on
    the step."""
    words = step.argument_word_bytes, step.numberless_argument_words = _kernels.alnum_word_pair(
        _argument_text(step), ARGUMENT_WORDS
    )
    return words


def _argument_text(step: Step) -> str:
    """A call's argument values as one text (keys aside; the first 600 characters of each string)."""
    texts = []
    for value in (step.projected if step.projected is not None else step.args or {}).values():
        if isinstance(value, str):
            texts.append(value[:600])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            texts.append(str(value))
        elif value is not None:
            texts.append(canonical_json(value)[:600])
    return " ".join(texts)


_ECHO_BYTES: Final = 2_000
"""Outputs longer than this say more than their call asked: they are not read word by word for echoes."""


def beyond_echo(step: Step, asked: bytes | None) -> str:
    """The fingerprint of what a result says beyond the words of the call that asked for it (``asked``: its
    :func:`argument_word_bytes`): ``echo step 7`` answered ``step 7`` says nothing new, whatever the counter (the
    words of the masked output not among the call's, hashed by :func:`~loopwatch.core._kernels_py.rest_hash`).
    Long outputs, and results whose call is unknown, are taken whole (their outcome fingerprint)."""
    output = masked_of(step)
    if asked is None or len(output) > _ECHO_BYTES:
        return step.outcome_fp or ""
    # f"{crc:08x}:{failed:d}" at a third of the cost (a format specification is parsed at every call): the CRC-32
    # with bit 32 set, in hex, without "0x1"
    return hex(_kernels.rest_hash(output, asked) | 0x1_0000_0000)[3:] + (":1" if step.failed else ":0")


def call_label(step: Step, limit: int = 120) -> str:
    """``tool(args...)`` for messages and evidence: a preview of the canonical arguments, computed once per step and
    ``limit`` (the rules that report the same call quote the same label).

    Only the first ``4 * limit`` characters of the canonical JSON can show, so for flat arguments each
    string is cut to that length before encoding (the same prefix, a fraction of the work), and first to half that
    length, which is enough when that head, whitespace collapsed, is longer than the label (:func:`_flat_label`).
    """
    labels = step.labels
    if labels is None:
        labels = step.labels = {}
    label = labels.get(limit)
    if label is None:
        if step.canonical is None and step.payload is not None and step.projected is not None:
            label = f"{step.tool}({_flat_label(step, step.projected, limit)})"
        else:
            label = f"{step.tool}({preview(canonical_of(step), limit)})"
        labels[limit] = label
    return label


def _flat_label(step: Step, projected: Mapping[str, Any], limit: int) -> str:
    """``preview(canonical_json(projected), limit)`` from a head of the JSON (strings cut at twice the label's length,
    at four times when that is too short), kept on the step for the other labels: the JSON's first ``e`` characters are
    its strings cut at ``e``'s, and a head collapsed is a prefix of the text collapsed (longer than a label: same)."""
    edge = 4 * limit
    head = step.label_head
    if head is not None:
        whole = len(head[1]) < head[0]  # nothing cut: the whole JSON
        if head[0] == edge or (whole and len(head[1]) <= edge):  # this label's own head
            return shortened(head[2], limit)
        if head[0] > edge or whole:
            return preview(head[1][:edge], limit)
        if len(head[2]) > limit:
            return shortened(head[2], limit)
    short = 2 * limit
    if head is None or head[0] < short:
        head = step.label_head = _label_head(projected, short)
        if len(head[1]) < short or len(head[2]) > limit:  # nothing cut (the whole JSON), or long enough
            return shortened(head[2], limit)
    head = step.label_head = _label_head(projected, edge)
    return shortened(head[2], limit)


def _label_head(projected: Mapping[str, Any], cut: int) -> tuple[int, str, str]:
    """The first ``cut`` characters of the JSON of ``projected`` with its strings cut there, and collapsed."""
    head = canonical_json(_cut(projected, cut))[:cut]
    return cut, head, " ".join(head.split())


def _cut(args: Mapping[str, Any], edge: int) -> dict[str, Any]:
    """The arguments with each string cut to ``edge`` characters."""
    return {k: v[:edge] if type(v) is str else v for k, v in args.items()}


def mutates(step: Step) -> bool:
    """Does the step's tool call change something (cached on the step)?"""
    cached = step.mutation
    if cached is None:
        cached = step.mutation = is_mutation(step.tool or "", step.args or {}, command=step.command)
    return bool(cached)


def polls(step: Step) -> bool:
    """Is the step's tool call a wait or a status check (cached on the step)?"""
    cached = step.poll
    if cached is None:
        cached = step.poll = is_poll(step.tool or "", step.command)
    return bool(cached)


def searches(step: Step) -> bool:
    """Is the step's tool call a read-only look-up (cached on the step)?"""
    cached = step.search
    if cached is None:
        tool, args = step.tool or "", step.args or {}
        cached = step.search = is_search(tool, step.tool_key, args, command=step.command, changes=lambda: mutates(step))
    return bool(cached)


def scopes_of(step: Step) -> list[str]:
    """Where the step's call looks (:func:`loopwatch.core._tools.search_scopes`), computed once per step."""
    cached = step.scopes
    if cached is None:
        cached = step.scopes = search_scopes(step.tool or "", step.args or {}, step.command)
    return list(cached)


def query_of(step: Step) -> list[int]:
    """What the step's call looks for, as :func:`loopwatch.core._tools.search_query_hashes`, computed once per
    step."""
    cached = step.query
    if cached is None:
        places = scopes_of(step)  # computed once for both
        cached = step.query = search_query_hashes(step.tool or "", step.args or {}, step.command, places=places)
    return list(cached)


SKETCH_BITS: Final = 1024


def fold(hashes: Iterable[int], bits: int = SKETCH_BITS) -> int:
    """The set of ``hashes`` folded into ``bits`` bits (a power of two up to 1,024), as an integer."""
    return _kernels.fold(hashes, bits)


def bits_text(value: int, bits: int = SKETCH_BITS) -> str:
    """A folded set of ``bits`` bits as JSON-able base64 text (172 characters for 1,024 bits)."""
    return packed_bits_text(value.to_bytes(bits // 8, "big"))


def packed_bits_text(packed: bytes) -> str:
    """:func:`bits_text` of a folded set already packed in its big-endian bytes (as rules keep sketches)."""
    return binascii.b2a_base64(packed, newline=False).decode("ascii")


def text_bits(text: str) -> int:
    """The folded set :func:`bits_text` wrote (0 for empty text)."""
    return int.from_bytes(binascii.a2b_base64(text), "big") if text else 0


def sketch_of(hashes: Iterable[int], k: int, bits: int = SKETCH_BITS) -> str:
    """A bottom-k sketch: the k smallest distinct hashes, folded into a set of ``bits`` bits (1,024 by default;
    a power of two up to that), as base64 text (:func:`bits_text` of :func:`bottom_k`).

    JSON-able, 172 characters whatever k (88 for 512 bits), and compared with two integer operations.
    """
    return _kernels.sketch_of(hashes, k, bits)


def bottom_k(hashes: Iterable[int], k: int, bits: int = SKETCH_BITS) -> int:
    """The k smallest distinct ``hashes`` folded into ``bits`` bits: :func:`sketch_of` as an integer."""
    return _kernels.bottom_k(hashes, k, bits)


def sketch_similarity(a: str, b: str) -> float:
    """Estimated Jaccard similarity of the sets two sketches were made from (0.0 when either is empty)."""
    return bits_similarity(text_bits(a), text_bits(b))


def bits_similarity(x: int, y: int) -> float:
    """Jaccard similarity of two folded sets (integers; 0.0 when both are empty)."""
    union = (x | y).bit_count()
    return (x & y).bit_count() / union if union else 0.0


def pushed(items: tuple[T, ...], item: T, limit: int) -> tuple[T, ...]:
    """``items`` and ``item`` after them, keeping at most ``limit`` items (oldest dropped): how rules keep their
    short histories (a tuple holds no spare room, and no empty tuple costs anything)."""
    if len(items) < limit:
        return (*items, item)
    return (*items[len(items) - limit + 1 :], item)


def push(items: list[Any], item: Any, limit: int) -> None:
    """Append ``item`` keeping at most ``limit`` items (oldest dropped)."""
    items.append(item)
    if len(items) > limit:
        del items[: len(items) - limit]
