"""What a caller hands the guard, made ready to judge: the policy (a preset's name or a
:class:`~loopwatch.core.Policy`), the store (a :class:`~loopwatch.stores.Store` or its URL), session and swarm
names, the event (an event object, a subclass's, or its JSON form) and when it happened; and any value shown safely
in a log line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._presets import preset as get_preset
from .core._event_values import MAX_NAME
from .core._events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage, name_of, parse_event
from .core._policy import Policy
from .errors import ConfigError, EventError

if TYPE_CHECKING:
    from .stores import Store

EVENT_CLASSES = (ToolCall, ToolResult, Message, TextDelta, Usage, Reset)


def _policy_of(preset: str | Policy | None, policy: Policy | None) -> Policy:
    if policy is not None and preset is not None:
        raise ConfigError("give either preset or policy, not both", field="policy")
    if policy is not None:
        if not isinstance(policy, Policy):
            raise ConfigError(
                f"must be a Policy (a preset's name goes in preset=), got {type(policy).__name__}", field="policy"
            )
        return policy
    if isinstance(preset, Policy):
        return preset
    if preset is not None and not isinstance(preset, str):
        raise ConfigError(f"must be a preset's name or a Policy, got {type(preset).__name__}", field="preset")
    return get_preset(preset or "default")


def _store_of(store: str | Store | None) -> Store | None:
    if store is None:
        return None
    from .stores import Store, store_from_url  # here: a guard without a store never loads the stores

    if isinstance(store, Store):
        return store
    if not isinstance(store, str):
        raise ConfigError(f"must be a Store or a store URL, got {type(store).__name__}", field="store")
    if store.strip().lower() in ("memory://", "memory:"):
        return None  # in this process, without serialising: what the guard does by itself
    return store_from_url(store)


def _listed(items: object, field: str) -> list[Any]:
    """The guard's ``sinks`` (each with an ``emit(record)`` method) or ``listeners`` (callables) as a list; a
    :class:`ConfigError` naming the first that is neither, or when ``items`` is not a collection of them."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise ConfigError(f"must be a list of {field}, got {type(items).__name__}", field=field)
    listed = list(items)
    for n, item in enumerate(listed):
        usable = callable(getattr(item, "emit", None)) if field == "sinks" else callable(item)
        if not usable:
            need = "an object with an emit(record) method" if field == "sinks" else "a callable taking a record"
            raise ConfigError(f"item {n} must be {need}, got {type(item).__name__}", field=field)
    return listed


def _name(value: object, field: str) -> str:
    """A session or swarm name as a plain, bounded string (an :class:`EventError` when it has no text)."""
    if type(value) is str and len(value) <= MAX_NAME:
        return value
    return name_of(value, field)


def _event_of(event: object) -> Event:
    """The event to judge: an event object as it is, a subclass's fields as the plain class, a mapping parsed."""
    if type(event) in EVENT_CLASSES:
        return event  # type: ignore[return-value]
    for kind in EVENT_CLASSES:
        if isinstance(event, kind):
            try:
                fields = {name: getattr(event, name) for name in kind.__dataclass_fields__}
                rebuilt: Event = kind(**fields)
            except EventError:
                raise
            except Exception as exc:  # a subclass whose attributes raise
                raise EventError(f"the event could not be read ({type(exc).__name__})") from None
            return rebuilt
    return parse_event(event)


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= 200 else text[:197] + "..."
