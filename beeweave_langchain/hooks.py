"""A LangGraph pre-model hook that hands the model BeeWeave's layered context.

``create_react_agent(model, tools, pre_model_hook=beeweave_context_hook(weave,
budget_tokens=8000))``: before every model call the hook records the state's new
messages (same keys as the callback handler, so nothing is stored twice) and returns
the assembled context — pinned system prompt, working state, what recall finds for the
latest request, latest turns verbatim, within ``budget_tokens`` exactly — as
``llm_input_messages``.  The graph's own ``messages`` state is left untouched, so the
checkpointer still keeps the full conversation.

Assembled messages carry ids ``beeweave:<event id>`` (``beeweave:~<layer>`` for the
synthetic working/recalled blocks), which tells the callback handler they are not new
and which events the model call consumed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig, RunnableLambda

from beeweave_core.context.assembler import AssembledContext
from beeweave_core.events import Event
from beeweave_core.fallback import Fallback
from beeweave_core.tokens import DEFAULT_MODEL
from beeweave_core.transcript import transcript_for
from beeweave_core.weave import Weave, require_weave
from beeweave_langchain.messages import STORED_ID_PREFIX, dict_to_message, to_messages

#: Key of ``additional_kwargs`` where assembled messages keep BeeWeave's accounts.
BEEWEAVE_KWARG = "beeweave"
#: LangGraph's config key for the run's checkpointer (set, possibly to None, by Pregel).
CHECKPOINTER_KEY = "__pregel_checkpointer"


def checkpointed(config: Mapping[str, Any] | None) -> bool:
    """True when the run resumes a checkpoint: its state's messages are the branch."""
    return ((config or {}).get("configurable") or {}).get(CHECKPOINTER_KEY) is not None


def assembled_messages(
    ctx: AssembledContext,
    known: Mapping[str, BaseMessage] | None = None,
    reuse: MutableMapping[str, BaseMessage] | None = None,
) -> list[BaseMessage]:
    """An :class:`~beeweave_core.context.AssembledContext` as LangChain messages, ids set.

    ``known``: event id -> the caller's own message for it (the graph state's); one the
    assembly hands on unchanged is copied rather than rebuilt, which skips validating
    every message of a long thread on every model call.  ``reuse``: the copies a hook
    handed out before (event id -> message), kept by the caller: a turn unchanged since
    is handed out again instead of copied on every call.  The first message carries
    the call's accounts (``additional_kwargs["beeweave"]``: the retrieval record the
    callback handler links the model call to)."""
    tag = {"retrieval_event_id": ctx.retrieval_event_id}
    ids = ctx.message_ids or [None] * len(ctx.messages)
    out: list[BaseMessage] = []
    for n, (d, eid) in enumerate(zip(ctx.messages, ids, strict=True)):
        mid = f"{STORED_ID_PREFIX}{eid or f'~{ctx.session_id}:{n}'}"
        msg = _handed_before(reuse, eid, d) or _copy_of(known, eid, d, mid)
        if msg is None:
            msg = dict_to_message({**d, "id": mid})
            msg.additional_kwargs[BEEWEAVE_KWARG] = tag
        elif reuse is not None and eid:
            if len(reuse) >= _REUSE_MAX:
                reuse.clear()
            reuse[eid] = msg
        out.append(msg)
    if out and out[0].additional_kwargs.get(BEEWEAVE_KWARG) is not tag:
        first = out[0]
        out[0] = first.model_copy(
            update={"additional_kwargs": {**first.additional_kwargs, BEEWEAVE_KWARG: tag}}
        )
    return out


#: Copies a hook keeps for handing out again (a long thread's turns; then it starts over).
_REUSE_MAX = 8_192


def _handed_before(
    reuse: Mapping[str, BaseMessage] | None, eid: str | None, d: Mapping[str, Any]
) -> BaseMessage | None:
    msg = reuse.get(eid) if reuse is not None and eid else None
    return msg if msg is not None and msg.name == d.get("name") and _same(msg, d) else None


def _copy_of(
    known: Mapping[str, BaseMessage] | None, eid: str | None, d: Mapping[str, Any], mid: str
) -> BaseMessage | None:
    """The caller's own message for ``eid`` with BeeWeave's id, if it says what ``d`` says."""
    mine = known.get(eid) if known is not None and eid else None
    if mine is None or not _same(mine, d):
        return None
    kwargs = {k: v for k, v in mine.additional_kwargs.items() if k != BEEWEAVE_KWARG}
    return mine.model_copy(
        update={"id": mid, "name": d.get("name"), "additional_kwargs": kwargs}  # name as counted
    )


def _same(msg: BaseMessage, d: Mapping[str, Any]) -> bool:
    """``msg`` says what the assembled dict ``d`` says (not redacted, cut or cleared)."""
    if msg.content != d.get("content", ""):
        return False
    if isinstance(msg, AIMessage):
        return [c["id"] for c in msg.tool_calls] == [c["id"] for c in d.get("tool_calls") or ()]
    return msg.type == _LC_TYPE.get(str(d.get("role")))


_LC_TYPE = {"user": "human", "tool": "tool", "system": "system"}


class BeeWeaveContextHook:
    """The hook's state and logic; :func:`beeweave_context_hook` wraps it as a Runnable.

    Args:
        weave: The open weave that records and assembles.
        budget_tokens: The exact token budget of what the model reads.
        session_id: The session to read and record (``None``: the run's ``thread_id``).
        model: Whose tokenizer counts the budget.
        window_tokens: What compaction measures against (``None``: the budget).
        record: Record the state's new messages (False leaves recording to the
            callback handler or checkpointer alone).
        user_id: Put into what the hook records, and given to assembly.
        agent_id: Marks what the hook records and, when several agents share a session,
            shows this agent only its own turns and the user's (plus shared memories).
        messages_key: The state key holding the conversation.
        output_key: The key the hook returns the assembled messages under.
        **assemble_kw: More options for ``weave.assemble`` (``phase``,
            ``single_system``, ``use_retriever`` ...).

    Raises:
        ValueError: ``budget_tokens`` is not a positive int.
        TypeError: ``weave`` is not an open weave.
    """

    def __init__(
        self,
        weave: Weave,
        *,
        budget_tokens: int = 8_000,
        session_id: str | None = None,
        model: str | None = DEFAULT_MODEL,
        window_tokens: int | None = None,
        record: bool = True,
        user_id: str | None = None,
        agent_id: str | None = None,
        messages_key: str = "messages",
        output_key: str = "llm_input_messages",
        **assemble_kw: Any,
    ) -> None:
        if not isinstance(budget_tokens, int) or budget_tokens <= 0:
            raise ValueError(f"budget_tokens must be a positive int, got {budget_tokens!r}")
        self.weave = require_weave(weave, "beeweave_context_hook")
        self.budget_tokens = budget_tokens
        self.session_id = session_id
        self.fallback = Fallback("the context hook")
        self.model = model
        self.window_tokens = window_tokens
        self.record = record
        self.user_id = user_id
        self.agent_id = agent_id
        self.messages_key = messages_key
        self.output_key = output_key
        self.assemble_kw = assemble_kw
        self._meta = {
            k: v for k, v in (("user_id", user_id), ("agent_id", agent_id)) if v is not None
        }
        self._source = {"framework": "langchain", "component": "context_hook"}
        #: The last assembly, for inspection (tokens per layer, provenance, compaction).
        self.last: Any = None
        self._handed: dict[str, BaseMessage] = {}  # event id -> the copy handed out

    def session(self, thread_id: Any = None) -> str:
        """The session to read and record: ``session_id`` if given, else the run's thread.

        Args:
            thread_id: The run's ``configurable.thread_id``, if any.

        Returns:
            The session id.

        Raises:
            ValueError: Neither a ``session_id`` nor a thread id is there.
        """
        sid = self.session_id or thread_id
        if not sid:
            raise ValueError(
                "BeeWeave's context hook needs a session: pass session_id= or run the graph "
                "with config={'configurable': {'thread_id': ...}}"
            )
        return str(sid)

    def _messages(self, state: Any) -> list[BaseMessage]:
        raw = (
            state.get(self.messages_key)
            if isinstance(state, Mapping)
            else getattr(state, self.messages_key, None)
        )
        if raw is None:
            raise ValueError(f"the state has no {self.messages_key!r} key")
        return (
            convert_to_messages(raw) if raw and not isinstance(raw[0], BaseMessage) else list(raw)
        )

    def record_messages(self, session_id: str, messages: Sequence[BaseMessage]) -> list[str | None]:
        """Record the messages not seen before (the weave's one writer dedupes).

        Args:
            session_id: The session they belong to.
            messages: The conversation as the state holds it.

        Returns:
            The event id of each message (``None`` for one not recorded).
        """
        return transcript_for(self.weave).record(
            session_id, to_messages(messages), meta=self._meta, source=self._source
        )

    def context(
        self, session_id: str, messages: Sequence[BaseMessage], *, branch: bool = False
    ) -> list[BaseMessage]:
        """What the model should read instead of ``messages``: records the new ones and
        returns the assembly as messages (maintenance compacts in the background).

        ``branch``: ``messages`` are the whole conversation of the checkpoint being
        resumed (a checkpointed graph), so the assembly keeps to their events and a
        rewound or forked thread never shows the abandoned turns.  The one step both
        harnesses share (the ``pre_model_hook`` here and
        :class:`~beeweave_langchain.middleware.BeeWeaveContextMiddleware`).

        Args:
            session_id: The session to read and record.
            messages: The conversation as the state holds it.
            branch: ``messages`` are the whole conversation of a resumed checkpoint.

        Returns:
            The assembled messages; ``messages`` as they are (one warning) when the store
            is closed or unreachable: the agent goes on.
        """
        return self.fallback.run(
            lambda: self._context(session_id, messages, branch), lambda: list(messages)
        )

    def _context(
        self, session_id: str, messages: Sequence[BaseMessage], branch: bool
    ) -> list[BaseMessage]:
        ids = self.record_messages(session_id, messages) if self.record or branch else []
        lineage = [i for i in ids if i] if branch else None
        known = {i: m for i, m in zip(ids, messages, strict=False) if i}
        ctx = self.weave.assemble(
            session_id,
            budget_tokens=self.budget_tokens,
            model=self.model,
            window_tokens=self.window_tokens,
            user_id=self.user_id,
            agent_id=self.agent_id,
            lineage=lineage,
            **self.assemble_kw,
        )
        self.last = ctx
        return assembled_messages(ctx, known, self._handed)

    async def acontext(
        self, session_id: str, messages: Sequence[BaseMessage], *, branch: bool = False
    ) -> list[BaseMessage]:
        """:meth:`context` off the event loop (assembly reads the store and counts tokens).

        Args:
            session_id: The session to read and record.
            messages: The conversation as the state holds it.
            branch: ``messages`` are the whole conversation of a resumed checkpoint.

        Returns:
            The assembled messages (or ``messages``, when the store is down).
        """
        return await asyncio.to_thread(self.context, session_id, messages, branch=branch)

    def __call__(self, state: Any, config: RunnableConfig | None = None) -> dict[str, Any]:
        sid = self.session(((config or {}).get("configurable") or {}).get("thread_id"))
        msgs = self._messages(state)
        return {self.output_key: self.context(sid, msgs, branch=checkpointed(config))}

    async def acall(self, state: Any, config: RunnableConfig | None = None) -> dict[str, Any]:
        """Run the hook for an async graph (on a worker thread).

        Args:
            state: The graph state holding ``messages_key``.
            config: The run's config (its ``thread_id`` names the session).

        Returns:
            ``{output_key: the assembled messages}``.

        Raises:
            ValueError: No session can be named, or the state has no ``messages_key``.
        """
        return await asyncio.to_thread(self.__call__, state, config)


def beeweave_context_hook(weave: Weave, *, budget_tokens: int = 8_000, **kw: Any) -> RunnableLambda:
    """A ``pre_model_hook`` for ``create_react_agent`` (or a node before any model call)
    that replaces the message list with BeeWeave's assembled, budgeted context.

    Args:
        weave: The open weave that records and assembles.
        budget_tokens: The exact token budget of what the model reads.
        **kw: The other options of :class:`BeeWeaveContextHook`.

    Returns:
        The hook as a Runnable; the hook object is reachable as ``runnable.hook``
        (e.g. ``runnable.hook.last`` is the last assembly).

    Raises:
        ValueError: ``budget_tokens`` is not a positive int.
    """
    hook = BeeWeaveContextHook(weave, budget_tokens=budget_tokens, **kw)
    runnable = RunnableLambda(hook.__call__, afunc=hook.acall, name="beeweave_context_hook")
    runnable.hook = hook  # type: ignore[attr-defined]
    return runnable


def message_event_ids(messages: Sequence[BaseMessage]) -> list[str | None]:
    """Stored event ids behind assembled messages (``None`` for synthetic blocks)."""
    out: list[str | None] = []
    for m in messages:
        mid = m.id or ""
        rest = mid[len(STORED_ID_PREFIX) :] if mid.startswith(STORED_ID_PREFIX) else ""
        out.append(rest if rest and not rest.startswith("~") else None)
    return out


def events_of(weave: Weave, messages: Sequence[BaseMessage]) -> list[Event]:
    """The stored events behind assembled messages, in order (synthetic blocks skipped)."""
    ids = [i for i in message_event_ids(messages) if i]
    found = {e.id: e for e in weave.store.get(ids)} if ids else {}
    return [found[i] for i in ids if i in found]
