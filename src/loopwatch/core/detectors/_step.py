"""What every detector sees: :class:`Step`, one event with the features the rules share, computed once by the engine
(the accessors that compute them on first use are in :mod:`loopwatch.core.detectors._base`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._events import Event
from .._swarm_tally import SwarmTally

StepKind = Literal["call", "result", "message", "delta", "usage", "reset"]


@dataclass(slots=True, init=False)
class Step:
    """One event with the features detectors share, computed once by the engine."""

    index: int
    kind: StepKind
    event: Event
    worker: str | None = None
    # tool calls (and, for results, the call they answer)
    tool: str | None = None
    tool_key: str | None = None
    args: Mapping[str, Any] | None = None
    command: str | None = None
    projected: Mapping[str, Any] | None = None
    """The arguments the fingerprints see (per-tool ignored keys removed)."""
    payload: bytes | None = None
    """What the call fingerprint hashes (see :func:`loopwatch.core._fingerprint.call_payload`)."""
    canonical: str | None = None
    """The canonical JSON of ``projected``: built on first use, see :func:`canonical_of`."""
    call_fp: str | None = None
    call_index: int | None = None
    swarm: SwarmTally | None = None
    """For a call of a session in a swarm: the swarm-wide count of its fingerprint after this call, counted by the
    session backend (read-only; ``None`` outside a swarm)."""
    # tool results
    output: str | None = None
    masked: bytes | None = None
    """The output (or a message's text) as UTF-8 with its volatile parts removed: see :func:`masked_of`."""
    outcome_fp: str | None = None
    failed: bool = False
    error_sig: str | None = None
    # messages
    role: str | None = None
    text: str | None = None
    # features only some rules need, each computed on first use by its accessor below (or in the rule's module)
    # and kept for the other rules: ``None`` until then
    signature: str | None = None
    """:func:`signature_of`."""
    lines: frozenset[int] | None = None
    """:func:`line_hashes`."""
    argument_word_bytes: bytes | None = None
    """:func:`argument_word_bytes`."""
    numberless_argument_words: bytes | None = None
    """:func:`numberless_argument_words`."""
    mutation: bool | None = None
    """:func:`mutates`."""
    poll: bool | None = None
    """:func:`polls`."""
    search: bool | None = None
    """:func:`searches`."""
    scopes: tuple[str, ...] | None = None
    """:func:`scopes_of`."""
    query: list[int] | None = None
    """:func:`query_of`."""
    excerpt: str | None = None
    """:func:`loopwatch.core.detectors._failures.excerpt_of`."""
    error_bits: int | None = None
    """:func:`loopwatch.core.detectors._failures.error_bits_of`."""
    fruitless: bool | None = None
    """:func:`loopwatch.core.detectors._progress.fruitless`."""
    loose_fp: str | None = None
    """:func:`loopwatch.core.detectors._repeat.loose_fp`."""
    labels: dict[int, str] | None = None
    """:func:`call_label` by its ``limit`` (every rule that reports a call quotes it)."""
    label_head: tuple[int, str, str] | None = None
    """The head of the canonical arguments the labels are cut from: the length its strings were cut at, the head, and
    the head with its blanks collapsed (see :func:`call_label`)."""

    def __init__(
        self,
        index: int,
        kind: StepKind,
        event: Event,
        worker: str | None = None,
        tool: str | None = None,
        tool_key: str | None = None,
        args: Mapping[str, Any] | None = None,
        command: str | None = None,
        projected: Mapping[str, Any] | None = None,
        payload: bytes | None = None,
        canonical: str | None = None,
        call_fp: str | None = None,
        call_index: int | None = None,
        swarm: SwarmTally | None = None,
        output: str | None = None,
        masked: bytes | None = None,
        outcome_fp: str | None = None,
        failed: bool = False,
        error_sig: str | None = None,
        role: str | None = None,
        text: str | None = None,
        signature: str | None = None,
        lines: frozenset[int] | None = None,
        argument_word_bytes: bytes | None = None,
        numberless_argument_words: bytes | None = None,
        mutation: bool | None = None,
        poll: bool | None = None,
        search: bool | None = None,
        scopes: tuple[str, ...] | None = None,
        query: list[int] | None = None,
        excerpt: str | None = None,
        error_bits: int | None = None,
        fruitless: bool | None = None,
        loose_fp: str | None = None,
        labels: dict[int, str] | None = None,
        label_head: tuple[int, str, str] | None = None,
    ) -> None:
        # written out (init=False): mypyc compiles this one; the one dataclasses writes would run as Python
        self.index = index
        self.kind = kind
        self.event = event
        self.worker = worker
        self.tool = tool
        self.tool_key = tool_key
        self.args = args
        self.command = command
        self.projected = projected
        self.payload = payload
        self.canonical = canonical
        self.call_fp = call_fp
        self.call_index = call_index
        self.swarm = swarm
        self.output = output
        self.masked = masked
        self.outcome_fp = outcome_fp
        self.failed = failed
        self.error_sig = error_sig
        self.role = role
        self.text = text
        self.signature = signature
        self.lines = lines
        self.argument_word_bytes = argument_word_bytes
        self.numberless_argument_words = numberless_argument_words
        self.mutation = mutation
        self.poll = poll
        self.search = search
        self.scopes = scopes
        self.query = query
        self.excerpt = excerpt
        self.error_bits = error_bits
        self.fruitless = fruitless
        self.loose_fp = loose_fp
        self.labels = labels
        self.label_head = label_head
