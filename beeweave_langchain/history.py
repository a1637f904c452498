"""A LangChain chat message history kept as events in a BeeWeave graph.

Drop-in for ``RunnableWithMessageHistory`` (and anything else taking a
``BaseChatMessageHistory``), like ``Neo4jChatMessageHistory`` — but the messages land
in the same causal graph the callback handler and the checkpointer write to, keyed
the same way, so using several of them at once never stores a message twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from beeweave_core.events import EventType
from beeweave_core.fallback import Fallback
from beeweave_core.tokens import DEFAULT_MODEL
from beeweave_core.transcript import MESSAGE_TYPES, transcript_for
from beeweave_core.weave import Weave, require_weave
from beeweave_langchain.messages import dicts_to_messages, event_to_message, to_messages

_COMPONENT = "chat_history"


class BeeWeaveChatMessageHistory(BaseChatMessageHistory):
    """The conversation of ``session_id`` in ``weave``, as LangChain messages.

    ``messages`` reads user, assistant (with their tool calls) and tool messages in
    session order, and the system messages added through a history (not the system
    prompts the callback handler saw in a prompt template); ``add_messages`` records new ones and waits until they
    are stored (so the next read, or another process, sees them); ``clear`` hides the
    whole session from every read — soft-deleted, so ``beeweave show --all`` still has it.

    ``budget_tokens`` makes ``messages`` the assembled context instead (``weave.assemble``:
    pinned system prompt, what recall finds for the latest user message, the newest turns,
    within the budget counted with ``model``'s tokenizer), for ``RunnableWithMessageHistory``
    chains whose prompt should not grow with the conversation.  Without it ``messages``
    is the whole history, as ``InMemoryChatMessageHistory`` returns it.

    Args:
        weave: The open weave holding the conversation.
        session_id: The conversation (the BeeWeave session).
        user_id: Put into the ``meta`` of every message added (and given to assembly).
        agent_id: Put into the ``meta`` of every message added.
        budget_tokens: Make ``messages`` the assembled context within this many tokens
            (``None``: the whole history).
        model: Whose tokenizer counts the budget.

    Raises:
        ValueError: An empty ``session_id`` or a ``budget_tokens`` that is not a
            positive int.
        TypeError: ``weave`` is not an open weave.
    """

    def __init__(
        self,
        weave: Weave,
        session_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        budget_tokens: int | None = None,
        model: str | None = DEFAULT_MODEL,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
        if budget_tokens is not None and (
            not isinstance(budget_tokens, int)
            or isinstance(budget_tokens, bool)
            or budget_tokens <= 0
        ):
            raise ValueError(f"budget_tokens must be a positive int or None, got {budget_tokens!r}")
        self.budget_tokens = budget_tokens
        self.model = model
        self._user_id = user_id
        self.weave = require_weave(weave, "BeeWeaveChatMessageHistory")
        self.session_id = session_id
        self.fallback = Fallback("BeeWeaveChatMessageHistory")
        self._meta = {
            k: v for k, v in (("user_id", user_id), ("agent_id", agent_id)) if v is not None
        }
        self._source = {"framework": "langchain", "component": _COMPONENT}

    def _events(self, *, include_inactive: bool = False) -> list[Any]:
        self.weave.flush()
        return self.weave.store.timeline(
            self.session_id, types=MESSAGE_TYPES, include_inactive=include_inactive
        )

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages; none (one warning) when the store is closed or down."""
        read = self._messages if self.budget_tokens is None else self._assembled
        return self.fallback.run(read, list)

    def _assembled(self) -> list[BaseMessage]:
        ctx = self.weave.assemble(
            self.session_id,
            budget_tokens=self.budget_tokens,
            model=self.model,
            user_id=self._user_id,
        )
        return dicts_to_messages(ctx.messages)

    def _messages(self) -> list[BaseMessage]:
        out = []
        for ev in self._events():
            if ev.type == EventType.SYSTEM_PROMPT and ev.source.get("component") != _COMPONENT:
                continue  # a prompt template's system message (seen by the callback
                # handler) is configuration: the template adds it again on every call
            msg = event_to_message(ev)
            if msg is not None:
                out.append(msg)
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Record new messages and wait until they are stored, so the next read (or
        another process) sees them; skipped with one warning when the store is down.

        Args:
            messages: LangChain messages, added after what the session holds (one another
                observer already recorded from the same prompt is kept once).

        Raises:
            TypeError: An item is not a LangChain message.
        """
        if not messages:
            return
        for m in messages:
            if not isinstance(m, BaseMessage):
                raise TypeError(f"add_messages takes LangChain messages, got {type(m).__name__}")
        self.fallback.run(lambda: self._add(messages), lambda: None)

    def _add(self, messages: Sequence[BaseMessage]) -> None:
        self.weave.flush()  # the writer reads what the session holds
        transcript_for(self.weave).append(
            self.session_id, to_messages(messages), meta=self._meta, source=self._source
        )
        self.weave.flush()

    def clear(self) -> None:
        """Hide the whole session from every read (soft-deleted: audit still has it)."""
        self.weave.flush()
        ids = [ev.id for ev in self.weave.store.timeline(self.session_id)]
        if ids:
            self.weave.store.soft_delete(ids, "cleared by BeeWeaveChatMessageHistory.clear()")
        transcript_for(self.weave).forget(self.session_id)

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of :attr:`messages` (read on a worker thread).

        Returns:
            The session's messages, or the assembled context with ``budget_tokens``.
        """
        return await asyncio.to_thread(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async twin of :meth:`add_messages` (on a worker thread).

        Args:
            messages: LangChain messages.
        """
        await asyncio.to_thread(self.add_messages, messages)

    async def aclear(self) -> None:
        """Async twin of :meth:`clear` (on a worker thread)."""
        await asyncio.to_thread(self.clear)

    def __repr__(self) -> str:
        return f"BeeWeaveChatMessageHistory(session_id={self.session_id!r}, weave={self.weave!r})"
