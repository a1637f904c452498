"""LlamaIndex ``ChatMessage`` ↔ BeeWeave role/content dicts.

BeeWeave's core speaks plain dicts (``{"role", "content", "tool_calls", "tool_call_id"}``)
so every framework converts at its own edge.  Tool calls travel in two shapes in
LlamaIndex 0.14 — ``ToolCallBlock`` blocks (native) and ``additional_kwargs["tool_calls"]``
(OpenAI-style, older integrations) — so both are read; the native block is written,
because that is what current LLM integrations turn back into provider tool calls.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock

from beeweave_core.events import Event
from beeweave_core.transcript import ROLE_BY_EVENT, Message, ToolCall

if TYPE_CHECKING:
    from beeweave_core.weave import Weave


#: The keys of a tool call in BeeWeave dicts and event payloads.
ToolCallDict = dict[str, Any]  # {"id": str | None, "name": str, "args": dict | str}


def _args(raw: Any) -> Any:
    """Tool arguments as a dict when they are JSON, else as given (partial JSON stays text)."""
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        return value if isinstance(value, dict) else raw
    return raw if raw is not None else {}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _one_tool_call(call: Any) -> ToolCallDict | None:
    """Normalise one tool call from any shape LlamaIndex, OpenAI or BeeWeave use."""
    if isinstance(call, ToolCallBlock):
        return {"id": call.tool_call_id, "name": call.tool_name, "args": _args(call.tool_kwargs)}
    fn = _get(call, "function")
    if fn is not None:  # OpenAI: {"id", "type": "function", "function": {"name", "arguments"}}
        return {
            "id": _get(call, "id"),
            "name": _get(fn, "name") or "",
            "args": _args(_get(fn, "arguments")),
        }
    name = _get(call, "tool_name") or _get(call, "name")
    if name is None:
        return None
    return {  # llama_index ToolSelection or BeeWeave's own dict
        "id": _get(call, "tool_id") or _get(call, "id") or _get(call, "tool_call_id"),
        "name": name,
        "args": _args(
            _get(call, "tool_kwargs")
            if _get(call, "tool_kwargs") is not None
            else _get(call, "args")
        ),
    }


def tool_calls_of(message: ChatMessage) -> list[ToolCallDict]:
    """The tool calls a message asks for, whichever shape they came in (deduplicated by id)."""
    found: list[ToolCallDict] = []
    seen: set[str] = set()
    blocks = [b for b in message.blocks if isinstance(b, ToolCallBlock)]
    for call in blocks + list(message.additional_kwargs.get("tool_calls") or []):
        tc = _one_tool_call(call)
        if tc is None:
            continue
        if tc["id"] is not None:
            if tc["id"] in seen:
                continue
            seen.add(tc["id"])
        found.append(tc)
    return found


def text_of(message: ChatMessage) -> str:
    """The text of a message (``ChatMessage.content`` joins its text blocks)."""
    return message.content or ""


def role_of(message: ChatMessage) -> str:
    role = message.role
    return role.value if hasattr(role, "value") else str(role)


def to_dict(message: ChatMessage) -> dict[str, Any]:
    """A ``ChatMessage`` as a BeeWeave message dict."""
    out: dict[str, Any] = {"role": role_of(message), "content": text_of(message)}
    calls = tool_calls_of(message)
    if calls:
        out["tool_calls"] = calls
    tcid = message.additional_kwargs.get("tool_call_id")
    if tcid is not None:
        out["tool_call_id"] = str(tcid)
    name = message.additional_kwargs.get("name")
    if name is not None:
        out["name"] = str(name)
    return out


def to_message(message: ChatMessage, payload: Mapping[str, object] | None = None) -> Message:
    """A ``ChatMessage`` in the transcript writer's neutral form (an unknown role is a
    ``ValueError``); ``payload``: what its event keeps besides the text (e.g. usage)."""
    d = to_dict(message)
    calls = tuple(
        ToolCall(str(tc["id"]) if tc["id"] is not None else None, str(tc["name"]), tc["args"])
        for tc in d.get("tool_calls") or ()
    )
    return Message(
        role=d["role"],
        content=d["content"],
        tool_calls=calls,
        tool_call_id=d.get("tool_call_id"),
        name=d.get("name"),
        payload=payload or {},
    )


def to_chat_message(message: Mapping[str, Any]) -> ChatMessage:
    """A BeeWeave message dict (or an OpenAI-style one) as a ``ChatMessage``.

    Only keys a provider understands go into ``additional_kwargs`` (``tool_call_id``,
    ``name``): several LLM integrations forward ``additional_kwargs`` verbatim to the API,
    so provenance is kept on the assembled context object instead.
    """
    if not isinstance(message, Mapping):
        raise TypeError(f"expected a role/content mapping, got {type(message).__name__}")
    role = message.get("role")
    if not role:
        raise ValueError(f"message has no role: {dict(message)!r}")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, default=str)
    blocks: list[Any] = [TextBlock(text=content)] if content else []
    for call in message.get("tool_calls") or ():
        tc = _one_tool_call(call)
        if tc is not None:
            blocks.append(
                ToolCallBlock(tool_call_id=tc["id"], tool_name=tc["name"], tool_kwargs=tc["args"])
            )
    extra: dict[str, Any] = {}
    for key in ("tool_call_id", "name"):
        if message.get(key) is not None:
            extra[key] = message[key]
    return ChatMessage(role=str(role), blocks=blocks, additional_kwargs=extra)


def to_chat_messages(messages: Iterable[Mapping[str, Any]]) -> list[ChatMessage]:
    return [to_chat_message(m) for m in messages]


def event_to_dict(event: Event) -> dict[str, Any] | None:
    """A stored conversational event as a message dict (``None`` for model calls, etc.)."""
    role = ROLE_BY_EVENT.get(event.type)
    if role is None:
        return None
    out: dict[str, Any] = {"role": role, "content": event.content}
    calls = event.payload.get("tool_calls")
    if role == "assistant" and calls:
        out["tool_calls"] = [tc for tc in (_one_tool_call(c) for c in calls) if tc is not None]
    if role == "tool":
        out["tool_call_id"] = event.payload.get("tool_call_id")
        if event.payload.get("name"):
            out["name"] = event.payload["name"]
    return out


#: Message objects BeeWeave already holds as events, by identity: what the memory handed
#: out (assembled context) and the answers the instrumentation recorded.  When the same
#: object comes back — in the next LLM input, or in a ``memory.put`` — it is not recorded
#: again.  Identity, not text, decides: the same words typed again are a new message.
#: ``ChatMessage`` is unhashable, hence ``id()`` keys guarded by weak references.
_KNOWN: dict[int, tuple[weakref.ref[ChatMessage], int, str, tuple[str, ...]]] = {}


def _forget(key: int, ref: weakref.ref[ChatMessage]) -> None:
    entry = _KNOWN.get(key)
    if entry is not None and entry[0] is ref:
        del _KNOWN[key]


def remember(message: ChatMessage, weave: Weave, session_id: str, event_ids: Iterable[str]) -> None:
    """Note that ``message`` is stored in ``session_id`` of ``weave`` as ``event_ids``."""
    key = id(message)
    ref = weakref.ref(message, lambda r, k=key: _forget(k, r))
    _KNOWN[key] = (ref, id(weave), session_id, tuple(event_ids))


def _entry(
    message: ChatMessage,
) -> tuple[weakref.ref[ChatMessage], int, str, tuple[str, ...]] | None:
    entry = _KNOWN.get(id(message))
    return entry if entry is not None and entry[0]() is message else None


def is_known(message: ChatMessage) -> bool:
    """Whether BeeWeave produced or already recorded this very message object."""
    return _entry(message) is not None


def stored_as(message: ChatMessage, weave: Weave, session_id: str) -> tuple[str, ...] | None:
    """The events ``message`` is stored as in that session, if this object is known there."""
    entry = _entry(message)
    if entry is None or entry[1] != id(weave) or entry[2] != session_id:
        return None
    return entry[3]
