"""Shared pieces of the context tests: conversations written straight into real stores."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from beeweave_core.context import record_messages
from beeweave_core.events import EventType
from beeweave_core.weave import Weave


def exchanges(
    n: int, user: Callable[[int], str], reply: Callable[[int], str]
) -> list[dict[str, Any]]:
    """``n`` user turns ``user(i)``, each answered by ``reply(i)``."""
    return [
        m
        for i in range(n)
        for m in ({"role": "user", "content": user(i)}, {"role": "assistant", "content": reply(i)})
    ]


def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def say(weave: Weave, session_id: str, messages: Sequence[dict[str, Any]], *, user_id: str = "u1",
        prefix: str | None = None, ts: float | None = None, maintain: bool = True) -> list[str]:  # fmt: skip
    """Record ``messages`` synchronously (straight into the store) and return their ids;
    ``maintain``: then wait for the context engine's maintenance to read them (memories,
    supersession), as a later call in a real agent finds them."""
    ids = record_messages(weave.store, session_id, list(messages), user_id=user_id,
                          key_prefix=prefix, ts=ts)  # fmt: skip
    if maintain:
        weave.context.update(session_id)
    return ids


def chatter(n: int, lang: str = "en") -> list[dict[str, Any]]:
    """``n`` user/assistant pairs of filler that carry no facts."""
    en = ["Thanks, that looks fine to me.", "Let me think about this and continue with the plan."]
    zh = ["谢谢，看起来没问题。", "我再想一想，然后按计划继续。"]
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    zwords = ["甲", "乙", "丙", "丁", "戊", "己", "庚", "辛"]
    a, b = en if lang == "en" else zh
    out: list[dict[str, Any]] = []
    for i in range(n):
        tag = f" Topic {words[i % 8]}." if lang == "en" else f"话题{zwords[i % 8]}。"
        out.append({"role": "user", "content": a + tag})
        out.append({"role": "assistant", "content": b})
    return out


def memories(weave: Weave, session_id: str, *, include_inactive: bool = False) -> list[Any]:
    return weave.store.timeline(
        session_id, types=(EventType.MEMORY,), include_inactive=include_inactive
    )
