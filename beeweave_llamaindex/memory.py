"""LlamaIndex memory backed by BeeWeave: a drop-in ``BaseMemory`` and a ``BaseMemoryBlock``.

``BeeWeaveChatMemory`` goes wherever ``ChatMemoryBuffer`` / ``Memory`` goes (an agent's
``memory=``, a chat engine): ``put`` records messages as events, ``get`` returns
``weave.assemble``'s layered context for the session within ``token_limit`` — pinned
system, working state, memories recalled from the user's other sessions (whatever
framework wrote them), and the latest turns.

``BeeWeaveMemoryBlock`` plugs recalled BeeWeave memories into LlamaIndex's own
``Memory`` class, next to its static / fact / vector blocks.

Messages are recorded through the weave's one transcript writer
(:mod:`beeweave_core.transcript`), with the same keys a LangChain chat history uses.
Inside an instrumented agent run both the instrumentation and this memory see the same
messages, so each must become one event: they share the run's scope (see
:class:`~beeweave_llamaindex.writer.TurnWriter`), and a message *object* already stored
(an answer the instrumentation recorded, a message ``get`` handed out) is recognised
when it is put.  Outside a run, ``put`` adds after what the session holds, as a chat
history does.  A workflow agent keeps a run's tool calls in its scratchpad and puts them into
memory only when the run ends, so ``get`` hides the events of the live run that were not
put yet — exactly what ``ChatMemoryBuffer`` would return.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import BaseMemory, BaseMemoryBlock
from pydantic import ConfigDict, Field, PrivateAttr, SkipValidation

from beeweave_core.transcript import transcript_for
from beeweave_core.weave import Weave
from beeweave_llamaindex.instrumentation import current_run
from beeweave_llamaindex.messages import (
    event_to_dict,
    remember,
    role_of,
    stored_as,
    text_of,
    to_chat_message,
    to_chat_messages,
    to_message,
)
from beeweave_llamaindex.writer import FRAMEWORK, TurnWriter

log = logging.getLogger("beeweave.llamaindex")
DEFAULT_TOKEN_LIMIT = 3000  # ChatMemoryBuffer's default
DEFAULT_TOKEN_LIMIT_RATIO = 0.75  # ChatMemoryBuffer: share of the LLM's context window
_FLUSH_TIMEOUT = 10.0
_MAX_WRITERS = 256
#: What the memory block recalls unless told otherwise: what was said and what was learnt,
#: not bookkeeping (model calls, earlier retrievals, errors).
RECALL_TYPES = ("memory", "summary", "user_message", "assistant_message", "tool_result")
_MEMORY_SOURCE = {"framework": FRAMEWORK, "component": "BeeWeaveChatMemory"}


def _without(
    context: Any, hidden: set[str], *, keep_system: bool
) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """The assembled messages, each with the events it was built from, minus the pinned
    system layer (unless kept) and minus the immediate-layer turns built from ``hidden``.

    Messages carry no ids; the immediate layer's provenance does, one piece per turn
    unit in message order (a user or assistant message, then its tool results), so the
    two are walked side by side.  Should that shape ever not line up, nothing is hidden
    (and no ids are attached) rather than the wrong turn.
    """
    messages = list(context.messages)
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    layers = context.layers
    merged = head == 1 and bool(layers["working"].tokens or layers["recalled"].tokens)
    drop_first = bool(layers["system"].pieces) and not keep_system and head > 0 and not merged
    units: list[list[dict[str, Any]]] = []
    for m in messages[head:]:
        if m.get("role") == "tool" and units:
            units[-1].append(m)
        else:
            units.append([m])
    pieces = context.layers["immediate"].pieces
    if len(units) == len(pieces):
        paired = [(u, tuple(p.event_ids)) for u, p in zip(units, pieces, strict=True)]
        paired = [(u, ids) for u, ids in paired if not set(ids) & hidden]
    else:
        if hidden:
            log.warning("beeweave: assembled turns do not match their provenance; nothing hidden")
        paired = [(u, ()) for u in units]
    out: list[tuple[dict[str, Any], tuple[str, ...]]] = [
        (m, ()) for m in messages[int(drop_first) : head]
    ]
    return out + [(m, ids) for u, ids in paired for m in u]


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=host))


def _check_weave(weave: object) -> None:
    if not isinstance(weave, Weave):
        raise ValueError(
            f"weave= must be an open beeweave_core.Weave (Weave.open(...)), got {weave!r}"
        )


class BeeWeaveChatMemory(BaseMemory):
    """A LlamaIndex chat memory whose history is a BeeWeave session.

    ``get`` returns the assembled, token-budgeted context (``token_limit`` is the exact
    budget, counted by BeeWeave's tokenizer for ``model``); ``get_all`` the whole stored
    conversation; ``put``/``set``/``reset`` record, replace and clear it (``reset``
    soft-deletes, so the events stay recoverable until purged).

    Attributes:
        weave: The weave holding the memory (default: ``Weave.open()``).
        session_id: The BeeWeave session this conversation is (generated if not given).
        token_limit: The exact token budget of ``get``.
        user_id: Whose memories are recalled (and recorded as ``meta.user_id``).
        agent_id: Recorded as ``meta.agent_id``.
        model: Whose tokenizer counts the budget.
        include_system_prompt: Return the session's pinned system prompt too.  Off by
            default: LlamaIndex agents and chat engines add their own system prompt to
            every call.
        assemble_kwargs: Extra keyword arguments for ``weave.assemble``.

    Raises:
        ValueError: ``weave`` is not a weave, or ``session_id`` is empty.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    weave: SkipValidation[Weave | None] = Field(
        default=None,
        exclude=True,
        description="The beeweave_core.Weave holding the memory (default: Weave.open()).",
    )
    session_id: str = Field(
        default_factory=lambda: f"chat-{uuid.uuid4().hex[:12]}",
        description="The BeeWeave session this conversation is (generated if not given).",
    )
    token_limit: int = Field(default=DEFAULT_TOKEN_LIMIT, gt=0)
    user_id: str | None = Field(default=None, description="Whose memories are recalled.")
    agent_id: str | None = Field(default=None)
    model: str | None = Field(default=None, description="Model whose tokenizer counts the budget.")
    include_system_prompt: bool = Field(
        default=False,
        description="Return the session's pinned system prompt too.  Off by default: "
        "LlamaIndex agents and chat engines add their own system prompt to every call.",
    )
    assemble_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra keyword arguments for weave.assemble."
    )
    _lock: threading.RLock = PrivateAttr(default_factory=threading.RLock)
    _writers: OrderedDict[str, TurnWriter] = PrivateAttr(default_factory=OrderedDict)
    _last: Any = PrivateAttr(default=None)

    def model_post_init(self, __context: Any) -> None:
        """Open the default weave when none was given, and check the fields.

        Args:
            __context: Pydantic's validation context (unused).

        Raises:
            ValueError: ``weave`` is not a weave, or ``session_id`` is empty.
        """
        if self.weave is None:
            self.weave = Weave.open()
        _check_weave(self.weave)
        if not isinstance(self.session_id, str) or not self.session_id:
            raise ValueError("session_id must be a non-empty string")

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes the memory under.

        Returns:
            ``"BeeWeaveChatMemory"``.
        """
        return "BeeWeaveChatMemory"

    @property
    def chat_store_key(self) -> str:
        """``ChatMemoryBuffer``'s name for the conversation: here, the BeeWeave session."""
        return self.session_id

    def to_string(self) -> str:
        """Where the conversation lives (store URL without credentials, tenant, session)
        and the settings, as JSON.  The messages stay in the store: unlike
        ``ChatMemoryBuffer``'s in-memory store, it outlives the process.

        Returns:
            The JSON text :meth:`from_string` reads.
        """
        return json.dumps(
            {
                "url": _without_credentials(self.weave.url),
                "tenant": self.weave.tenant,
                **self.model_dump(),
                "class_name": self.class_name(),
            }
        )

    @classmethod
    def from_string(cls, json_str: str, weave: Weave | None = None) -> BeeWeaveChatMemory:  # type: ignore[override]
        """The memory :meth:`to_string` described, on ``weave`` or on a weave opened from the
        recorded URL and tenant.

        Args:
            json_str: What :meth:`to_string` returned.
            weave: The weave to use (pass it when the store needs credentials).

        Returns:
            The memory, on the same session with the same settings.

        Raises:
            ValueError: ``json_str`` is not what ``to_string`` returned.
        """
        data = json.loads(json_str)
        if not isinstance(data, dict) or data.get("class_name") != cls.class_name():
            raise ValueError("from_string takes what BeeWeaveChatMemory.to_string() returned")
        url, tenant = data.pop("url", None), data.pop("tenant", "default")
        data.pop("class_name")
        return cls(weave=weave or Weave.open(url, tenant=tenant), **data)

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        weave: Weave | None = None,
        session_id: str | None = None,
        token_limit: int | None = None,
        user_id: str | None = None,
        *,
        agent_id: str | None = None,
        chat_history: list[ChatMessage] | None = None,
        llm: Any = None,
        model: str | None = None,
        chat_store_key: str | None = None,
        **assemble_kwargs: Any,
    ) -> BeeWeaveChatMemory:
        """Build the memory the way ``ChatMemoryBuffer.from_defaults`` users expect.

        Args:
            weave: The weave (``None``: ``Weave.open()``).
            session_id: The session (``None``: a generated one).
            token_limit: The budget (``None``: 75% of ``llm``'s context window, else 3000).
            user_id: Whose memories are recalled.
            agent_id: Recorded as ``meta.agent_id``.
            chat_history: Replaces the session's conversation.
            llm: Gives the default ``token_limit`` and ``model``.
            model: Whose tokenizer counts the budget (``None``: ``llm``'s model name).
            chat_store_key: Another name for ``session_id``.
            **assemble_kwargs: Extra keyword arguments for ``weave.assemble``.

        Returns:
            The memory.

        Raises:
            ValueError: A bad weave, session id or token limit.
        """
        session_id = session_id or chat_store_key
        if token_limit is None:
            window = getattr(getattr(llm, "metadata", None), "context_window", None)
            token_limit = int(window * DEFAULT_TOKEN_LIMIT_RATIO) if window else DEFAULT_TOKEN_LIMIT
        if model is None and llm is not None:
            model = getattr(getattr(llm, "metadata", None), "model_name", None) or None
        given = {"session_id": session_id} if session_id else {}
        memory = cls(
            weave=weave,
            token_limit=token_limit,
            user_id=user_id,
            agent_id=agent_id,
            model=model,
            assemble_kwargs=assemble_kwargs,
            **given,
        )
        if chat_history is not None:
            memory.set(chat_history)
        return memory

    # ------------------------------------------------------------ writing
    def _writer(self, scope: str) -> TurnWriter:
        w = self._writers.get(scope)
        if w is None:
            w = TurnWriter(
                self.weave,
                session_id=self.session_id,
                scope=scope,
                user_id=self.user_id,
                agent_id=self.agent_id,
                component="BeeWeaveChatMemory",
            )
            self._writers[scope] = w
            while len(self._writers) > _MAX_WRITERS:
                self._writers.popitem(last=False)
        return w

    def _meta(self) -> dict[str, str]:
        return {k: v for k, v in (("user_id", self.user_id), ("agent_id", self.agent_id)) if v}

    def _live_run(self) -> tuple[str, set[str]] | None:
        return current_run(self.weave, self.session_id)

    def put(self, message: ChatMessage) -> None:
        """Record one message.

        Inside an instrumented run it never blocks; outside one it waits for the
        session's earlier events to be stored, so its key follows them.

        Args:
            message: The message; one already stored (an answer the instrumentation
                recorded, a message ``get`` handed out) is not recorded again.

        Raises:
            TypeError: ``message`` is not a ``ChatMessage``.
            ValueError: Its role is unknown.
        """
        if not isinstance(message, ChatMessage):
            raise TypeError(f"put() takes a ChatMessage, got {type(message).__name__}")
        live = self._live_run()
        if live is None:
            self._append([message])
            return
        with self._lock:
            writer = self._writer(live[0])
            known = stored_as(message, self.weave, self.session_id)
            if known is not None:  # this very object is already stored: an answer the
                writer.ids.update(known)  # instrumentation recorded, or our own output
                return
            writer.message(to_message(message))

    def _append(self, messages: Sequence[ChatMessage]) -> None:
        """Add messages after what the session holds (no run to share keys with)."""
        fresh = [
            to_message(m) for m in messages if stored_as(m, self.weave, self.session_id) is None
        ]
        if not fresh:
            return
        self.weave.flush(_FLUSH_TIMEOUT)
        transcript_for(self.weave).append(
            self.session_id, fresh, meta=self._meta(), source=_MEMORY_SOURCE
        )

    async def aput(self, message: ChatMessage) -> None:
        """Async twin of :meth:`put`, called in the event loop (no thread hop).

        Args:
            message: The message.
        """
        self.put(message)  # emit() never blocks: no thread hop needed

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Record several messages in order (outside a run, in one append).

        Args:
            messages: The messages.

        Raises:
            TypeError: An item is not a ``ChatMessage``.
        """
        if self._live_run() is None:
            for m in messages:
                if not isinstance(m, ChatMessage):
                    raise TypeError(f"put() takes a ChatMessage, got {type(m).__name__}")
            self._append(messages)
            return
        for m in messages:
            self.put(m)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async twin of :meth:`put_messages`, called in the event loop (no thread hop).

        Args:
            messages: The messages.
        """
        self.put_messages(messages)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the conversation: earlier events are soft-deleted, ``messages`` recorded.

        Args:
            messages: The new conversation.
        """
        self.reset()  # the deleted messages still count: the new ones get new keys
        self._append(messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async twin of :meth:`set` (on a worker thread).

        Args:
            messages: The new conversation.
        """
        await asyncio.to_thread(self.set, messages)

    def reset(self) -> None:
        """Clear the conversation (soft-delete; a live instrumented run keeps its events)."""
        live = self._live_run()
        keep = live[1] if live else set()
        self.weave.flush(_FLUSH_TIMEOUT)
        ids = [e.id for e in self.weave.store.timeline(self.session_id) if e.id not in keep]
        if ids:
            self.weave.store.soft_delete(ids, reason="reset by BeeWeaveChatMemory")
        with self._lock:
            self._writers.clear()

    async def areset(self) -> None:
        """Async twin of :meth:`reset` (on a worker thread)."""
        await asyncio.to_thread(self.reset)

    # ------------------------------------------------------------ reading
    def _hidden(self) -> set[str]:
        """Events of the live run that this memory has not been given (still in scratchpad)."""
        live = self._live_run()
        if live is None:
            return set()
        with self._lock:
            mine = self._writers.get(live[0])
            return live[1] - (mine.ids if mine else set())

    def _assemble_kwargs(self, call: dict[str, Any]) -> dict[str, Any]:
        """``weave.assemble`` arguments; ``initial_token_count`` (tokens a chat engine's
        prefix messages already use, as ``ChatMemoryBuffer.get`` takes it) comes off the
        budget."""
        used = call.pop("initial_token_count", 0) or 0
        budget = self.token_limit - used
        if budget <= 0:
            raise ValueError(
                f"initial_token_count={used} leaves no room within token_limit={self.token_limit}"
            )
        kw: dict[str, Any] = {"budget_tokens": budget}
        if self.model:
            kw["model"] = self.model
        if self.user_id:
            kw["user_id"] = self.user_id
        return {**kw, **self.assemble_kwargs, **call}

    def _to_messages(self, context: Any, hidden: set[str]) -> list[ChatMessage]:
        self._last = context
        out = []
        for d, ids in _without(context, hidden, keep_system=self.include_system_prompt):
            msg = to_chat_message(d)
            remember(msg, self.weave, self.session_id, ids)  # not new when seen again
            out.append(msg)
        return out

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The layered context for the next model call, within ``token_limit``.

        Args:
            input: Steers what is recalled (default: the latest user message).
            **kwargs: Extra keyword arguments for ``weave.assemble`` (e.g.
                ``phase="closing"``); ``initial_token_count`` comes off the budget.

        Returns:
            The assembled messages (events of a live run not yet put are left out).

        Raises:
            ValueError: ``initial_token_count`` leaves no room within ``token_limit``.
        """
        hidden = self._hidden()
        ctx = self.weave.assemble(self.session_id, input, **self._assemble_kwargs(kwargs))
        return self._to_messages(ctx, hidden)

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """Async twin of :meth:`get` (``weave.aassemble``).

        Args:
            input: Steers what is recalled.
            **kwargs: Extra keyword arguments for ``weave.assemble``.

        Returns:
            The assembled messages.
        """
        hidden = self._hidden()
        ctx = await self.weave.aassemble(self.session_id, input, **self._assemble_kwargs(kwargs))
        return self._to_messages(ctx, hidden)

    def get_all(self) -> list[ChatMessage]:
        """Every stored message of the session, without a budget: the whole history.

        Returns:
            The messages, oldest first (the system prompt only with
            ``include_system_prompt``).
        """
        hidden = self._hidden()
        self.weave.flush(_FLUSH_TIMEOUT)
        dicts = [
            d
            for e in self.weave.store.timeline(self.session_id)
            if e.id not in hidden
            and (d := event_to_dict(e)) is not None
            and (self.include_system_prompt or d["role"] != "system")
        ]
        return to_chat_messages(dicts)

    async def aget_all(self) -> list[ChatMessage]:
        """Async twin of :meth:`get_all` (on a worker thread).

        Returns:
            The messages, oldest first.
        """
        return await asyncio.to_thread(self.get_all)

    @property
    def last_context(self) -> Any:
        """The object ``weave.assemble`` returned for the last ``get`` (layers, provenance)."""
        return self._last


class BeeWeaveMemoryBlock(BaseMemoryBlock[str]):
    """Memories BeeWeave recalls for the latest user message, as a ``Memory`` block.

    ``Memory`` renders the block inside its ``<memory>`` section.  Each line names the
    session, turn and time it came from.  Hits from the conversation the ``Memory`` already
    holds (its ``session_id``) are skipped unless ``skip_current_session=False``.
    Messages ejected from the short-term queue are not re-recorded by default
    (``accept_short_term_memory=False``): an instrumented agent already recorded them.

    Attributes:
        name: The block's name.
        priority: ``Memory``'s truncation priority (1: truncated last among truncatable
            blocks).
        accept_short_term_memory: Record the messages ``Memory`` ejects from its
            short-term queue.
        weave: The weave to recall from.
        user_id: Recall across this user's sessions.
        session_id: Restrict recall to one session.
        k: How many memories to recall.
        filters: ``weave.retrieve`` filters (default: what was said and learnt).
        paths: The recall paths to use (default: all that apply).
        skip_current_session: Leave out hits from the conversation ``Memory`` holds.
        record_session_id: The session accepted short-term messages are recorded in.

    Raises:
        ValueError: ``weave`` is not a weave.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="beeweave_memory", description="Name of the block.")
    priority: int = Field(default=1, description="1 = truncated last among truncatable blocks.")
    accept_short_term_memory: bool = Field(default=False)
    weave: SkipValidation[Weave] = Field(
        exclude=True, description="The beeweave_core.Weave to recall from."
    )
    user_id: str | None = Field(default=None, description="Recall across this user's sessions.")
    session_id: str | None = Field(default=None, description="Restrict recall to one session.")
    k: int = Field(default=5, gt=0)
    filters: dict[str, Any] | None = Field(
        default=None, description="weave.retrieve filters (default: what was said and learnt)."
    )
    paths: list[str] | None = None
    skip_current_session: bool = True
    record_session_id: str | None = Field(
        default=None, description="Session that accepted short-term messages are recorded in."
    )

    def model_post_init(self, __context: Any) -> None:
        """Check that ``weave`` is an open weave.

        Args:
            __context: Pydantic's validation context (unused).

        Raises:
            ValueError: ``weave`` is not a weave.
        """
        _check_weave(self.weave)

    @staticmethod
    def _query(messages: Sequence[ChatMessage] | None) -> str:
        for m in reversed(messages or ()):
            if role_of(m) == "user" and text_of(m):
                return text_of(m)
        return text_of(messages[-1]) if messages else ""

    @staticmethod
    def _line(hit: Any) -> str:
        ev = hit.event
        when = ev.time.strftime("%Y-%m-%d %H:%M")
        where = f"session {ev.session_id}, turn {ev.seq}, {when}"
        return f"- [recalled · {where}] {ev.type.value}: {ev.content}"

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = self._query(messages)
        if not query:
            return ""
        await asyncio.to_thread(self.weave.flush, _FLUSH_TIMEOUT)
        hits = await self.weave.aretrieve(
            query,
            session_id=self.session_id,
            user_id=self.user_id,
            k=self.k,
            filters=self.filters or {"types": list(RECALL_TYPES)},
            paths=self.paths,
        )
        skip = block_kwargs.get("session_id") if self.skip_current_session else None
        lines = [self._line(h) for h in hits if not skip or h.event.session_id != skip]
        return "\n".join(lines)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Record messages ``Memory`` hands over (only when ``accept_short_term_memory``)."""
        by_session: dict[str, list[ChatMessage]] = {}
        for m in messages:
            sid = m.additional_kwargs.get("session_id") or self.record_session_id
            if sid:
                by_session.setdefault(str(sid), []).append(m)
        for sid, msgs in by_session.items():
            writer = TurnWriter(
                self.weave,
                session_id=sid,
                scope=f"block-{uuid.uuid4().hex[:12]}",
                user_id=self.user_id,
                component="BeeWeaveMemoryBlock",
            )
            for m in msgs:
                clean = m.model_copy(
                    update={
                        "additional_kwargs": {
                            k: v for k, v in m.additional_kwargs.items() if k != "session_id"
                        }
                    }
                )
                writer.message(to_message(clean))

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the lowest-ranked recalled lines until about ``tokens_to_truncate`` are freed,
        when ``Memory`` runs over its budget.

        Args:
            content: The block's rendered lines, best first.
            tokens_to_truncate: How many tokens to free.

        Returns:
            The lines kept, or ``None`` when none are left.
        """
        from beeweave_core.tokens import TokenCounter

        counter = TokenCounter()
        lines = content.splitlines()
        freed = 0
        while lines and freed < tokens_to_truncate:
            freed += counter.count_text(lines.pop()) + 1
        return "\n".join(lines) or None


__all__ = ["BeeWeaveChatMemory", "BeeWeaveMemoryBlock"]
