"""A FAKE tool-calling chat model, for offline tests, benchmarks and the quickstart.

This is the one fake BeeWeave uses, and only in place of the LLM itself: it replays
scripted ``AIMessage`` s (answers and tool calls) so a LangGraph agent can run with
no network and no model weights.  LangChain's ``GenericFakeChatModel`` has no
``bind_tools``; agents need it, so this subclass adds one that keeps the script.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

_ids = itertools.count(1)


class FakeToolCallingChatModel(GenericFakeChatModel):
    """FAKE LLM: replays ``messages`` (AIMessages or strings) in order and records every
    prompt it was sent."""

    #: Every prompt this fake received, in order (what the agent really sent the "model").
    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def tool_call(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A LangChain tool call; without ``call_id`` it is numbered ``call_000001``… per process
    (so a second process reuses ids, as some model servers do — the recorder copes)."""
    return {
        "name": name,
        "args": args,
        "id": call_id or f"call_{next(_ids):06d}",
        "type": "tool_call",
    }


def calls(*tool_calls: dict[str, Any], content: str = "") -> AIMessage:
    """An answer that asks for ``tool_calls``."""
    return AIMessage(content=content, tool_calls=list(tool_calls))
