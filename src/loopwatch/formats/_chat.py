"""Message lists (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages) -> events.

One conversion serves the three APIs, so a file mixing their shapes (or read under a neighbouring
``--format``) still loses nothing; the format modules differ in what they recognise when sniffing.

A record is one message (Chat, Anthropic) or one item (Responses). Per record:

- an assistant message: one ``tool_call`` per tool call (Chat ``tool_calls`` and legacy ``function_call``,
  Anthropic ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` blocks); its text becomes the ``thought`` of
  the first call, or an assistant ``message`` when there is no call (an assistant message with neither text nor
  call, e.g. only thinking, gives nothing);
- a ``tool`` (or legacy ``function``) message, an Anthropic ``tool_result`` block, a Responses ``*_call_output``
  item: a ``tool_result`` (its tool looked up from the call id; ``is_error`` kept where the format has it);
- a user message: its ``tool_result`` blocks, then a ``user`` message for any other text (a user message with
  only tool results starts no new prompt); a ``system`` or ``developer`` message: a ``system`` message;
- Responses items: ``function_call`` and ``custom_tool_call`` are calls; any other ``*_call`` item (built-in
  tools: shell, computer, web search, MCP, ...) is a call of the tool it names, with its remaining fields as
  arguments, followed by its result when the item carries one (``output``, ``error``, ``outputs``,
  ``results``); ``reasoning`` and bookkeeping items give nothing.

Text is joined from content parts; a non-text part (an image, a file) becomes a short digest of its data, so two
different screenshots never look like the same result. Top-level ``system`` / ``instructions`` are not records
of the conversation and are skipped.

File layouts (all readable plain, gzipped, as JSONL or as one pretty-printed document):

- one conversation: an object with ``messages`` (or, for Responses, ``input`` / ``output`` / ``items`` /
  ``data``; ``input`` then ``output`` when both are there), or a bare list of messages;
- many conversations: JSONL, one such object (or list) per line;
- one conversation as JSONL of individual messages / items, one per line.

Record indices are the positions in the conversation's message list (``input`` items, then ``output`` items),
or, for JSONL of individual messages, the message's position among the file's records. Run ids: the object's
``id``, else the file name without extensions (with ``:LINE`` appended when a file holds several conversations
without ids).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..errors import EventError, InputError
from ._common import tool_args
from ._run import ErrorHandler, Run, run_id_from_path

OPENAI: Final = "openai"
RESPONSES: Final = "openai-responses"
ANTHROPIC: Final = "anthropic"

CONTAINER_KEYS: Final = ("messages", "input", "output", "items", "data")
ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
_CALL_BLOCKS: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_WRITTEN: Final = frozenset({*_TEXT_PARTS, "refusal"})
_SKIPPED_PARTS: Final = frozenset({"thinking", "redacted_thinking", "reasoning", "tool_use", "tool_result"})
_RESULT_FIELDS: Final = ("output", "error", "outputs", "results", "result")
_NOT_ARGS: Final = frozenset(
    {"type", "id", "call_id", "status", "name", "created_by", "pending_safety_checks", "acknowledged_safety_checks"}
    | set(_RESULT_FIELDS)
)
_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file", "refusal"})
_ANTHROPIC_PARTS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document", "search_result"}
)
_OPENAI_PARTS: Final = frozenset({"image_url", "input_audio", "file"})
_REMINDER: Final = ("<system-reminder>", "</system-reminder>")


# -- sniffing ---------------------------------------------------------------------------------------------


def dialect(first: Any) -> str | None:
    """``openai``, ``openai-responses`` or ``anthropic`` when a file's first JSON value looks like one of them.

    Plain role/content messages with nothing specific are ``openai``.
    """
    items = _sample(first)
    found: set[str] = set()
    if isinstance(first, Mapping) and _is_container(first):
        if isinstance(first.get("messages"), list):
            found.add(ANTHROPIC if isinstance(first.get("system"), (str, list)) else OPENAI)
        elif first.get("object") == "response" or "instructions" in first or not items:
            found.add(RESPONSES)
    elif not items:
        return None
    roles = 0
    for item in items[:500]:
        role, kind = item.get("role"), item.get("type")
        if role is None and isinstance(kind, str) and _is_responses_item(kind):
            found.add(RESPONSES)
        if isinstance(role, str) and role in ROLES:
            roles += 1
            if role in ("tool", "function", "system") or "tool_calls" in item or "function_call" in item:
                found.add(OPENAI)
        content = item.get("content")
        for part in content if isinstance(content, list) else ():
            ptype = part.get("type") if isinstance(part, Mapping) else None
            if not isinstance(ptype, str):
                continue
            if ptype in _RESPONSES_PARTS:
                found.add(RESPONSES)
            elif ptype in _ANTHROPIC_PARTS or (ptype == "image" and isinstance(part, Mapping) and "source" in part):
                found.add(ANTHROPIC)
            elif ptype in _OPENAI_PARTS:
                found.add(OPENAI)
    for name in (RESPONSES, ANTHROPIC, OPENAI):
        if name in found:
            return name
    return OPENAI if roles else None


def _sample(first: Any) -> list[Mapping[str, Any]]:
    """The messages / items to look at in a file's first JSON value."""
    if isinstance(first, list):
        return [m for m in first if isinstance(m, Mapping)]
    if not isinstance(first, Mapping):
        return []
    items = [m for key in CONTAINER_KEYS if isinstance(first.get(key), list) for m in first[key]]
    if items:
        return [m for m in items if isinstance(m, Mapping)]
    if "role" in first or (isinstance(first.get("type"), str) and _is_responses_item(first["type"])):
        return [first]
    return []


def _is_responses_item(kind: str) -> bool:
    return kind in ("reasoning", "item_reference") or kind.endswith(("_call", "_call_output"))


# -- conversations ----------------------------------------------------------------------------------------


class Conversation:
    """The events of one conversation, the record index of each, and the tool name of each call id."""

    def __init__(self, run_id: str, path: str) -> None:
        self.run = Run(id=run_id, path=path, indices=[])
        self.names: dict[str, str] = {}

    def add(self, events: Iterable[Event], index: int) -> None:
        indices = self.run.indices
        assert indices is not None
        for event in events:
            if isinstance(event, ToolCall) and event.id is not None:
                self.names[event.id] = event.tool
            self.run.events.append(event)
            indices.append(index)

    def tool_of(self, call_id: str | None) -> str | None:
        return self.names.get(call_id) if call_id is not None else None


def read(records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """Runs of a file in any layout of the module docstring."""
    stem = run_id_from_path(path)
    single: Conversation | None = None  # the file's one conversation, in JSONL-of-messages layout
    pending: tuple[Run, int, bool] | None = None  # the last conversation read: (run, line, has its own id)
    count = 0
    for lineno, record in records:
        if single is None and (isinstance(record, list) or _is_container(record)):
            if pending is not None:
                yield _named(pending, stem, several=True)
            count += 1
            conversation, own_id = _conversation(record, stem, path)
            error = _fill(conversation, _items(record))
            pending = (conversation.run, lineno, own_id)
            if error is not None:
                on_error(InputError(error, path=path, line=lineno))
                break
            continue
        if pending is not None:  # a message after conversations
            on_error(InputError("expected a conversation like the lines before", path=path, line=lineno))
            break
        if single is None:
            if dialect(record) is None:
                on_error(InputError("neither a conversation nor a message of a chat API", path=path, line=lineno))
                break
            single = Conversation(stem, path)
        error = _fill(single, [record], count)
        count += 1
        if error is not None:
            on_error(InputError(error.removeprefix("message 0: "), path=path, line=lineno))
            break
    if pending is not None:
        yield _named(pending, stem, several=count > 1)
    if single is not None:
        yield single.run


def _is_container(record: Any) -> bool:
    if not isinstance(record, Mapping):
        return False
    return isinstance(record.get("input"), str) or any(isinstance(record.get(k), list) for k in CONTAINER_KEYS)


def _conversation(record: Any, stem: str, path: str) -> tuple[Conversation, bool]:
    run_id = record.get("id") if isinstance(record, Mapping) else None
    if isinstance(run_id, str) and run_id:
        return Conversation(run_id, path), True
    return Conversation(stem, path), False


def _named(pending: tuple[Run, int, bool], stem: str, *, several: bool) -> Run:
    run, lineno, own_id = pending
    if not own_id and several:
        run.id = f"{stem}:{lineno}"
    return run


def _items(record: Any) -> list[Any]:
    if isinstance(record, list):
        return record
    if isinstance(record.get("messages"), list):
        return list(record["messages"])
    items: list[Any] = []
    source = record.get("input")
    if isinstance(source, str):
        items.append({"role": "user", "content": source})
    elif isinstance(source, list):
        items.extend(source)
    for key in ("output", "items", "data"):
        if isinstance(record.get(key), list):
            items.extend(record[key])
    return items


def _fill(conversation: Conversation, items: list[Any], first_index: int = 0) -> str | None:
    """Add the events of ``items`` (record indices from ``first_index`` on); the reason of the first bad one
    (reading stops there), else ``None``."""
    for k, item in enumerate(items):
        try:
            conversation.add(item_events(item, conversation), first_index + k)
        except EventError as exc:
            return f"message {k}: {exc}"
    return None


# -- one message or item -> events -------------------------------------------------------------------------


def item_events(item: Any, conversation: Conversation, *, usage: bool = True) -> list[Event]:
    """The events of one message (Chat, Anthropic) or item (Responses)."""
    if not isinstance(item, Mapping):
        raise EventError(f"expected a JSON object, got {type(item).__name__}")
    kind, role = item.get("type"), item.get("role")
    if role is not None and kind in (None, "message"):
        events = message_events(item, conversation)
    elif isinstance(kind, str):
        events = _responses_item(item, kind, conversation)
    else:
        raise EventError("expected a message (with a 'role') or an item (with a 'type')")
    if usage:
        spent = usage_event(item.get("usage"))
        if spent is not None:
            events.append(spent)
    return events


def message_events(message: Mapping[str, Any], conversation: Conversation) -> list[Event]:
    """The events of one role/content message."""
    role = message.get("role")
    if not isinstance(role, str):
        raise EventError(f"expected a string, got {type(role).__name__}", field="role")
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise EventError(f"expected a string or a list of content parts, got {type(content).__name__}", field="content")
    if role == "assistant":
        return _assistant(message, content, conversation)
    if role == "user":
        events: list[Event] = _tool_results(content, conversation)
        text = text_of(content)
        if text.startswith(_REMINDER[0]) and text.endswith(_REMINDER[1]):  # a harness's note, not a new prompt
            events.append(Message(role="system", text=text))
        elif text or not events:
            events.append(Message(role="user", text=text))
        return events
    if role in ("system", "developer"):
        return [Message(role="system", text=text_of(content))]
    if role == "tool":
        call_id = _opt_str(message, "tool_call_id")
        name = conversation.tool_of(call_id) or _opt_str(message, "name")
        return [_result(text_of(content), name, call_id, message.get("is_error"))]
    if role == "function":
        return [_result(text_of(content), _opt_str(message, "name") or "function", None, None)]
    raise EventError(f"expected one of {', '.join(sorted(ROLES))}, got {role!r}", field="role")


def _assistant(message: Mapping[str, Any], content: Any, conversation: Conversation) -> list[Event]:
    events: list[Event] = []
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise EventError(f"expected a list, got {type(calls).__name__}", field="tool_calls")
    for k, call in enumerate(calls or ()):
        events.append(_chat_call(call, f"tool_calls[{k}]"))
    legacy = message.get("function_call")
    if legacy is not None:
        events.append(_chat_call({"function": legacy}, "function_call"))
    for k, block in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        kind = kind if isinstance(kind, str) else None  # a value of another type is no block type
        if kind in _CALL_BLOCKS:
            name = block.get("name")
            if not isinstance(name, str):
                raise EventError("a tool_use block needs a name", field=f"content[{k}].name")
            call = ToolCall(tool=name, args=tool_args(block.get("input")), id=_opt_str(block, "id"))
            if call.id is not None:
                conversation.names[call.id] = name  # a server tool's result follows in this same message
            events.append(call)
        elif isinstance(kind, str) and kind.endswith("_tool_result"):  # Anthropic server tools answer inline
            events.append(_block_result(block, conversation))
    first = next((i for i, e in enumerate(events) if isinstance(e, ToolCall)), None)
    text = assistant_text(content)
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        text = f"{text}\n{refusal}" if text else refusal
    if first is None:
        return [*events, Message(role="assistant", text=text)] if text else events
    call = events[first]
    assert isinstance(call, ToolCall)
    events[first] = dataclasses.replace(call, thought=text or None)
    return events


def _chat_call(call: Any, where: str) -> ToolCall:
    if not isinstance(call, Mapping):
        raise EventError(f"expected a JSON object, got {type(call).__name__}", field=where)
    kind = call.get("type")
    function = call.get(kind if isinstance(kind, str) else "function")  # "function", or "custom" with "input"
    if not isinstance(function, Mapping):
        function = call  # {"name", "arguments"} at the top
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise EventError("a tool call needs a name", field=f"{where}.name")
    raw = function.get("arguments", function.get("input"))
    return ToolCall(tool=name, args=tool_args(raw), id=_opt_str(call, "id"))


def _tool_results(content: Any, conversation: Conversation) -> list[Event]:
    if not isinstance(content, list):
        return []
    blocks = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"]
    return [_block_result(b, conversation) for b in blocks]


def _block_result(block: Mapping[str, Any], conversation: Conversation) -> ToolResult:
    call_id = _opt_str(block, "tool_use_id")
    inner = block.get("content")
    is_error = block.get("is_error")
    if isinstance(inner, Mapping) and ("error_code" in inner or str(inner.get("type", "")).endswith("_error")):
        is_error = True  # a server tool's error result
    return _result(text_of(inner), conversation.tool_of(call_id), call_id, is_error)


def _result(output: str, tool: str | None, call_id: str | None, is_error: Any) -> ToolResult:
    return ToolResult(
        output=output,
        tool=tool or (None if call_id is not None else "tool"),
        id=call_id,
        is_error=is_error if isinstance(is_error, bool) else None,
    )


def _responses_item(item: Mapping[str, Any], kind: str, conversation: Conversation) -> list[Event]:
    call_id = _opt_str(item, "call_id") or _opt_str(item, "id")
    if kind == "message":
        raise EventError("a message item needs a role", field="role")
    if kind in ("function_call", "custom_tool_call"):
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise EventError(f"a {kind} item needs a name", field="name")
        raw = item.get("arguments") if kind == "function_call" else {"input": item.get("input")}
        return [ToolCall(tool=name, args=tool_args(raw), id=call_id)]
    if kind.endswith("_call_output"):
        output, exit_code = _output_text(item.get("output"))
        failed = True if item.get("status") == "failed" else None
        result = _result(output, conversation.tool_of(call_id) or kind[: -len("_call_output")], call_id, failed)
        return [dataclasses.replace(result, exit_code=exit_code)]
    if kind.endswith("_call"):
        name = _opt_str(item, "name") or kind[: -len("_call")]
        if "arguments" in item:
            args = tool_args(item.get("arguments"))
        else:
            args = {k: v for k, v in item.items() if k not in _NOT_ARGS}
        events: list[Event] = [ToolCall(tool=name, args=args, id=call_id)]
        if any(item.get(k) is not None for k in _RESULT_FIELDS):  # a built-in tool's call carrying its result
            error = item.get("error")
            parts = [item.get(k) for k in _RESULT_FIELDS if k != "error" and item.get(k) is not None]
            output = text_of(error) if error else "\n".join(_output_text(p)[0] for p in parts)
            events.append(_result(output, name, call_id, True if error or item.get("status") == "failed" else None))
        return events
    return []  # reasoning, item references, MCP tool lists and approvals, compaction: nothing to watch


def _output_text(output: Any) -> tuple[str, int | None]:
    """A ``*_call_output``'s text, and the exit code when it is a shell's ``{stdout, stderr, outcome}`` list."""
    if isinstance(output, list) and output and all(isinstance(o, Mapping) and "stdout" in o for o in output):
        text = "\n".join(str(o.get("stdout") or "") + str(o.get("stderr") or "") for o in output)
        outcome = output[-1].get("outcome")
        code = outcome.get("exit_code") if isinstance(outcome, Mapping) else None
        return text, code if isinstance(code, int) and not isinstance(code, bool) else None
    return text_of(output), None


# -- pieces -----------------------------------------------------------------------------------------------


def text_of(content: Any) -> str:
    """The text of a content value: a string, a list of parts (text joined, other parts digested), or JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_part_text(p) for p in content) if t)
    if isinstance(content, Mapping):
        return _part_text(content)
    return json.dumps(content, ensure_ascii=False)


def assistant_text(content: Any) -> str:
    """The text an assistant wrote: a string, or its text parts joined (tool calls, thinking and the inline results
    of server tools left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = (p for p in content if isinstance(p, str) or (isinstance(p, Mapping) and _type_of(p) in _WRITTEN))
    return "\n".join(t for t in (_part_text(p) for p in parts) if t)


def _type_of(part: Mapping[str, Any]) -> str | None:
    """A content part's ``type`` when it is a string (a value of another type is no type)."""
    kind = part.get("type")
    return kind if isinstance(kind, str) else None


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return json.dumps(part, ensure_ascii=False)
    kind = part.get("type")
    kind = kind if isinstance(kind, str) else None
    if kind in _TEXT_PARTS or (kind is None and isinstance(part.get("text"), str)):
        text = part.get("text")
        return text if isinstance(text, str) else text_of(text)
    if kind == "refusal":
        return str(part.get("refusal") or "")
    if kind == "logs":  # code interpreter output
        return str(part.get("logs") or "")
    if kind in _SKIPPED_PARTS:
        return ""
    if isinstance(kind, str) and "content" in part and kind.endswith("_tool_result"):
        return text_of(part.get("content"))
    data = json.dumps(part, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "replace")
    return f"[{kind or 'data'} {hashlib.sha256(data).hexdigest()[:12]}]"


def _opt_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) and value else None


def usage_event(usage: Any) -> Usage | None:
    """Token counts of an API ``usage`` object (Anthropic, Chat Completions or Responses names)."""
    if not isinstance(usage, Mapping):
        return None

    def count(*keys: str) -> int | None:
        values = [usage.get(k) for k in keys]
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
        return sum(ints) if ints else None

    input_tokens = count("input_tokens", "prompt_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    output_tokens = count("output_tokens", "completion_tokens")
    if input_tokens is None and output_tokens is None:
        return None
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens)
