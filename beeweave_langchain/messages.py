"""LangChain messages ⇄ BeeWeave's neutral :class:`~beeweave_core.transcript.Message`,
events and role/content dicts.

Translation only: how a message is keyed and wired to its causes is
:mod:`beeweave_core.transcript`'s, shared with every other integration.  What this
module adds is LangChain's own shapes — message types, ``tool_calls`` dicts, and the
id ``beeweave:<event id>`` a message rebuilt from a stored event carries (so the
writer knows it is not new).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from beeweave_core.events import Event
from beeweave_core.transcript import ROLE_BY_EVENT, Message, ToolCall, canonical_role

#: Id prefix of messages rebuilt from stored events (``beeweave:<event id>``).
STORED_ID_PREFIX = "beeweave:"
#: Keys of a role/content dict that LangChain understands; others are BeeWeave's own.
_DICT_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "id"})


def role_of(message: BaseMessage) -> str:
    """BeeWeave's role of a message (a custom chat role counts as the user)."""
    raw = message.role if isinstance(message, ChatMessage) else message.type
    return canonical_role(raw, default="user")


def text_of(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else str(message.text)


def stored_event_id(message: BaseMessage) -> str | None:
    """The event a message was rebuilt from, if it was (see :func:`event_to_message`)."""
    mid = message.id
    if mid and mid.startswith(STORED_ID_PREFIX):
        rest = mid[len(STORED_ID_PREFIX) :]
        return rest if rest and not rest.startswith("~") else None  # "~…": a synthetic block
    return None


def tool_calls_of(message: BaseMessage) -> list[dict[str, Any]]:
    """Only an AI message has tool calls: asking any other message for the attribute
    costs a pydantic ``AttributeError`` (tens of µs under load, per message per call)."""
    return list(message.tool_calls) if isinstance(message, AIMessage) else []


def to_message(message: BaseMessage, role: str | None = None) -> Message:
    """A LangChain message in the writer's neutral form (``role`` overrides its type,
    e.g. for a streamed ``AIMessageChunk``)."""
    r = role or role_of(message)
    mid = message.id or None
    assembled = bool(mid and mid.startswith(STORED_ID_PREFIX))
    calls = tuple(
        ToolCall(tc.get("id"), str(tc.get("name") or ""), tc.get("args"))
        for tc in tool_calls_of(message)
    )
    tcid = getattr(message, "tool_call_id", None) if r == "tool" else None
    return Message(
        role=r,
        content=text_of(message),
        tool_calls=calls,
        tool_call_id=tcid or None,
        name=message.name,
        id=None if assembled else mid,
        stored=stored_event_id(message) if assembled else None,
        assembled=assembled,
        extras=functools.partial(message_payload, message),
    )


def to_messages(messages: Iterable[BaseMessage]) -> list[Message]:
    return [to_message(m) for m in messages]


def message_payload(message: BaseMessage) -> dict[str, Any]:
    """What an event keeps besides the text, so the message can be rebuilt exactly."""
    payload: dict[str, Any] = {"lc_type": message.type}
    if message.id:
        payload["message_id"] = message.id
    if message.name:
        payload["name"] = message.name
    if not isinstance(message.content, str):
        payload["content_blocks"] = message.content
    if message.additional_kwargs:
        payload["additional_kwargs"] = message.additional_kwargs
    if isinstance(message, AIMessage):
        if message.tool_calls:
            payload["tool_calls"] = [
                {"name": tc["name"], "args": tc["args"], "id": tc.get("id")}
                for tc in message.tool_calls
            ]
        if message.usage_metadata:
            payload["usage"] = dict(message.usage_metadata)
        meta = message.response_metadata or {}
        model = meta.get("model_name") or meta.get("model")
        if model:
            payload["model"] = model
        if meta.get("finish_reason"):
            payload["finish_reason"] = meta["finish_reason"]
    elif isinstance(message, ToolMessage):
        payload["tool_call_id"] = message.tool_call_id
        payload["status"] = message.status
        if message.artifact is not None:
            payload["artifact"] = message.artifact
    elif isinstance(message, ChatMessage):
        payload["chat_role"] = message.role
    return payload


def event_to_message(event: Event) -> BaseMessage | None:
    """Rebuild the LangChain message an event was recorded from (``None``: not a message)."""
    role = ROLE_BY_EVENT.get(event.type)
    if role is None:
        return None
    p = event.payload
    content: Any = p.get("content_blocks", event.content)
    common: dict[str, Any] = {
        "id": p.get("message_id") or f"{STORED_ID_PREFIX}{event.id}",
        "additional_kwargs": dict(p.get("additional_kwargs") or {}),
    }
    if p.get("name"):
        common["name"] = p["name"]
    if p.get("chat_role"):
        return ChatMessage(content=content, role=p["chat_role"], **common)
    if role == "user":
        return HumanMessage(content=content, **common)
    if role == "system":
        return SystemMessage(content=content, **common)
    if role == "assistant":
        calls = [
            {
                "name": tc["name"],
                "args": tc.get("args") or {},
                "id": tc.get("id"),
                "type": "tool_call",
            }
            for tc in p.get("tool_calls") or ()
        ]
        extra = {"usage_metadata": p["usage"]} if isinstance(p.get("usage"), dict) else {}
        try:
            return AIMessage(content=content, tool_calls=calls, **common, **extra)
        except ValueError:  # a usage dict from another framework: keep the message anyway
            return AIMessage(content=content, tool_calls=calls, **common)
    return ToolMessage(
        content=content,
        tool_call_id=p.get("tool_call_id") or "",
        status=p.get("status") or "success",
        artifact=p.get("artifact"),
        **common,
    )


# --------------------------------------------------------------- role/content dicts
def _event_ids_of(d: Mapping[str, Any]) -> list[str]:
    ids = d.get("event_ids") or d.get("source_ids") or ()
    if isinstance(ids, str):
        return [ids]
    if not ids and d.get("event_id"):
        return [d["event_id"]]
    return list(ids)


def dict_to_message(d: Mapping[str, Any]) -> BaseMessage:
    """A role/content dict (OpenAI or LangChain tool-call shape) → a LangChain message.

    A dict backed by exactly one stored event gets the id ``beeweave:<event id>`` so the
    callback handler knows it is not new; BeeWeave's own keys (layer, event ids …) are
    kept in ``additional_kwargs["beeweave"]`` rather than passed on as message fields.
    """
    if not isinstance(d, Mapping) or "role" not in d:
        raise ValueError(f"expected a role/content dict, got {d!r}")
    core = {k: v for k, v in d.items() if k in _DICT_KEYS and v is not None}
    core.setdefault("content", "")
    if isinstance(core.get("tool_calls"), list):
        core["tool_calls"] = [_lc_tool_call(tc) for tc in core["tool_calls"]]
    ids = _event_ids_of(d)
    if "id" not in core and len(ids) == 1:
        core["id"] = f"{STORED_ID_PREFIX}{ids[0]}"
    extra = {k: v for k, v in d.items() if k not in _DICT_KEYS}
    (msg,) = convert_to_messages([core])
    if extra:
        msg.additional_kwargs = {**msg.additional_kwargs, "beeweave": extra}
    return msg


def _lc_tool_call(tc: Mapping[str, Any]) -> dict[str, Any]:
    if "function" in tc:  # OpenAI shape
        fn = tc["function"]
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                args = {"__raw__": args}
        return {"name": fn["name"], "args": args or {}, "id": tc.get("id"), "type": "tool_call"}
    return {
        "name": tc["name"],
        "args": tc.get("args") or {},
        "id": tc.get("id"),
        "type": "tool_call",
    }


def dicts_to_messages(dicts: Sequence[Mapping[str, Any]]) -> list[BaseMessage]:
    return [dict_to_message(d) for d in dicts]


def message_to_dict(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message → the role/content dict BeeWeave's core reads (tool calls kept)."""
    role = role_of(message)
    out: dict[str, Any] = {"role": role, "content": text_of(message)}
    if message.name:
        out["name"] = message.name
    if message.id:
        out["id"] = message.id
    calls = tool_calls_of(message)
    if calls:
        out["tool_calls"] = [
            {
                "id": tc.get("id"),
                "type": "function",
                "function": {"name": tc["name"], "arguments": json.dumps(tc.get("args") or {})},
            }
            for tc in calls
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


def messages_to_dicts(messages: Iterable[BaseMessage]) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in messages]
