"""LangChain callbacks → BeeWeave events with their causes.

Attach :class:`BeeWeaveCallbackHandler` (or :class:`AsyncBeeWeaveCallbackHandler`)
wherever LangChain takes callbacks — ``config={"callbacks": [handler]}`` on a
chain, a LangGraph graph or a model — and every run becomes events in the graph:

=====================  ===========================================================
callback               event (CAUSED_BY →)
=====================  ===========================================================
chat model start       new input messages (user / system / unseen answers and tool
                       results), then ``model_call`` → what it consumed: the tool
                       results after the last answer, else the new user message(s)
LLM new token          ``internal_thought`` fragments, low priority, coalesced per run
LLM end                ``assistant_message`` → model call; ``tool_invocation`` per
                       tool call → that answer (keyed by tool_call_id)
tool start / end       ``tool_result`` → the invocation with the same tool_call_id
                       (a tool run no answer announced gets its own invocation)
retriever end          ``retrieval`` (query + documents) → the run that asked
agent action           ``internal_thought`` (the agent's reasoning log)
any error              ``error`` → the run it broke (once per exception)
=====================  ===========================================================

Messages go through the weave's one transcript writer (:mod:`beeweave_core.transcript`),
which keys them, wires tool calls to their results and hands REFERS_TO linking (a tool
call reusing a value from an earlier result) to the bus, off the agent's thread.

Why it is safe in production: every callback only updates a few dicts keyed by
``run_id`` under a short lock and calls ``weave.emit`` (non-blocking), so one handler
can serve parallel runs and nested graphs; every callback body is wrapped so an
error in BeeWeave is logged and counted, never raised into the chain
(``raise_error = False``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config

from beeweave_core.events import EventType
from beeweave_core.transcript import Message, ToolCall, Transcript, transcript_for
from beeweave_core.weave import Weave, require_weave
from beeweave_langchain.messages import STORED_ID_PREFIX, text_of, to_message, to_messages

log = logging.getLogger("beeweave.langchain")

MAX_OPEN_RUNS = 100_000
_ROOT_INPUT_KEYS = ("input", "question", "query", "human_input", "text")


class _Run:
    __slots__ = (
        "named",
        "parent",
        "event",
        "kind",
        "name",
        "tool_call_id",
        "text",
        "errors",
        "last",
    )

    def __init__(self, parent: _Run | None, kind: str, name: str | None) -> None:
        self.named: str | None = None  # root: its session, once a run below names it
        self.parent = parent
        self.kind = kind
        self.name = name
        self.event: str | None = None  # the event standing for this run
        self.tool_call_id: str | None = None
        self.text: str | None = None  # a root chain's plain-text input
        self.errors: dict[int, BaseException] | None = None  # root: exceptions recorded
        self.last: str | None = None  # root: the latest answer / thought / result below it

    @property
    def session(self) -> str:
        return self.root.named or ""

    @property
    def root(self) -> _Run:
        r = self
        while r.parent is not None:
            r = r.parent
        return r


def _guard(fn: Any) -> Any:
    """Run a callback body; log and count any failure instead of raising into the chain."""

    @functools.wraps(fn)
    def wrapper(self: _Capture, *args: Any, **kwargs: Any) -> None:
        try:
            fn(self, *args, **kwargs)
        except Exception:
            self.failures += 1
            log.exception("beeweave: %s failed; the chain goes on", fn.__name__)

    return wrapper


class _Capture:
    """The callback logic shared by the sync and async handlers."""

    raise_error = False
    run_inline = True  # cheap and non-blocking: no thread hop, and order is kept

    def __init__(
        self,
        weave: Weave,
        session_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        *,
        capture_tokens: bool = True,
        tags: Sequence[str] | None = None,
        scope: str | None = None,
    ) -> None:
        """Set up a handler that records into ``weave``; it may serve many runs at once.

        Args:
            weave: The open weave the events go to.
            session_id: The session of runs whose metadata names none (it comes after a
                run's ``beeweave_session_id``, before LangGraph's ``thread_id``).
            user_id: Put into every event's ``meta``.
            agent_id: Put into every event's ``meta``.
            capture_tokens: Record streamed token fragments (coalesced, low priority).
            tags: Put into every event's ``meta["tags"]``.
            scope: The business line of the events (needed on a weave of several scopes).

        Raises:
            TypeError: ``weave`` is not an open :class:`~beeweave_core.weave.Weave`.
        """
        self.weave = require_weave(weave, type(self).__name__)
        self.session_id = session_id
        self.user_id = user_id
        self.agent_id = agent_id
        self.capture_tokens = capture_tokens
        meta: dict[str, Any] = {}
        if user_id is not None:
            meta["user_id"] = user_id
        if agent_id is not None:
            meta["agent_id"] = agent_id
        if tags:
            meta["tags"] = list(tags)
        if scope is not None:  # the business line captured runs belong to (beeweave_core.scopes)
            meta["scope"] = scope
        self._meta = meta
        self._rec: Transcript = transcript_for(weave)
        self._lock = self._rec.lock
        self._runs: dict[UUID, _Run] = {}
        self._warned = False  # the "no session" warning is given once per handler
        #: Callbacks that failed inside BeeWeave (logged; the chain was not affected).
        self.failures = 0

    # ------------------------------------------------------------------ runs
    def _open(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: Mapping[str, Any] | None,
        kind: str,
        name: str | None,
    ) -> _Run:
        parent = self._runs.get(parent_run_id) if parent_run_id is not None else None
        run = _Run(parent, kind, name)
        root = run.root
        if root.named is None:  # a chain's config reaches the handler in its children's runs
            root.named = self._named_session(metadata)
        if kind != "chain":  # about to record: a session is needed now
            self._ensure_session(run, run_id)
        with self._lock:
            if len(self._runs) >= MAX_OPEN_RUNS:  # runs that never ended (cancelled tasks)
                for stale in list(self._runs)[: MAX_OPEN_RUNS // 2]:
                    del self._runs[stale]
            self._runs[run_id] = run
        return run

    def _named_session(self, metadata: Mapping[str, Any] | None) -> str | None:
        """The session a run names, from the most to the least explicit source.

        LangGraph copies ``thread_id`` into run metadata; RunnableWithMessageHistory's
        ``configurable.session_id`` only reaches callbacks through the config of the runs
        it starts (``var_child_runnable_config``), so a root chain may learn its session
        from its first child.
        """
        md = metadata or {}
        configurable = (var_child_runnable_config.get() or {}).get("configurable") or {}
        for value in (
            md.get("beeweave_session_id"),
            self.session_id,
            md.get("thread_id"),
            configurable.get("thread_id"),
            md.get("session_id"),
            configurable.get("session_id"),
        ):
            if isinstance(value, str | int) and str(value):
                return str(value)
        return None

    def _ensure_session(self, run: _Run, run_id: UUID) -> None:
        """A run naming no session gets one of its own (logged once): never a shared one,
        so two users' identical messages are never taken for one."""
        root = run.root
        if root.named is not None:
            return
        root.named = f"run-{run_id}"
        if not self._warned:
            self._warned = True
            log.warning(
                "beeweave: a run names no session (no session_id=, thread_id or configurable "
                "session_id); each such run is recorded in a session of its own, run-<run_id>"
            )

    def _close(self, run_id: UUID) -> _Run | None:
        with self._lock:
            return self._runs.pop(run_id, None)

    def _nearest(self, run: _Run | None) -> tuple[str, ...]:
        """The closest event standing for ``run`` or one of its ancestors."""
        hops = 0
        r = run
        while r is not None and hops < 64:
            if r.event is not None:
                return (r.event,)
            r = r.parent
            hops += 1
        last = self._rec.last(run.session) if run is not None else None
        return (last,) if last else ()

    def _source(self, run_id: UUID, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        src = {"framework": "langchain", "run_id": str(run_id)}
        if metadata and metadata.get("langgraph_node"):
            src["node"] = metadata["langgraph_node"]
        return src

    def _emit(self, run: _Run, type: EventType, content: Any, **kw: Any) -> str:
        return self.weave.emit(type, content, session_id=run.session, meta=self._meta, **kw)

    def _error(self, error: BaseException, run_id: UUID, run: _Run | None, where: str) -> None:
        """One ``error`` event per exception, however many runs it unwinds through."""
        if run is not None:  # remembered on the root run: dropped when the run ends
            root = run.root
            with self._lock:
                if root.errors is None:
                    root.errors = {}
                if id(error) in root.errors:
                    return
                root.errors[id(error)] = error  # holding it keeps id() unique meanwhile
        if run is None:
            run = _Run(None, where, None)
        self._ensure_session(run, run_id)
        payload: dict[str, Any] = {"error_type": type(error).__name__, "where": where}
        if run.name:
            payload["name"] = run.name
        if run.tool_call_id:
            payload["tool_call_id"] = run.tool_call_id
        self._emit(
            run,
            EventType.ERROR,
            f"{type(error).__name__}: {error}",
            role="system",
            payload=payload,
            parents=self._nearest(run),
            source=self._source(run_id),
            key=f"run:{run_id}:error",
        )

    # ---------------------------------------------------------------- chains
    @_guard
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Open a chain or graph run: its session is named here or by a run below it.

        Args:
            serialized: LangChain's description of the chain (its ``name``).
            inputs: The chain's input; a root chain's plain text is kept in case a text
                LLM runs below it (then it is recorded as the user's message).
            run_id: LangChain's id of the run.
            parent_run_id: The run that started it (``None``: a root run).
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        metadata = kwargs.get("metadata")
        name = kwargs.get("name") or (serialized or {}).get("name")
        run = self._open(run_id, parent_run_id, metadata, "chain", name)
        if parent_run_id is None:  # a legacy text chain's input: recorded if a text LLM runs
            if isinstance(inputs, str):
                run.text = inputs
            elif isinstance(inputs, Mapping):
                run.text = next(
                    (inputs[k] for k in _ROOT_INPUT_KEYS if isinstance(inputs.get(k), str)), None
                )

    @_guard
    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Close a chain run (what it produced was recorded by the runs inside it).

        Args:
            outputs: The chain's output (not recorded).
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        self._close(run_id)

    @_guard
    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Record an ``error`` event for a failed chain (once per exception; LangGraph's
        interrupts are control flow, not failures, and are not recorded).

        Args:
            error: What the chain raised.
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._close(run_id)
        if not _is_control_flow(error):
            self._error(error, run_id, run, "chain")

    @_guard
    def on_agent_action(self, action: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Record a legacy agent's reasoning log as an ``internal_thought``.

        Args:
            action: The agent's action (its ``log``, ``tool`` and ``tool_input``).
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._runs.get(run_id)
        if run is None:
            return
        self._ensure_session(run, run_id)
        thought = getattr(action, "log", "") or ""
        root = run.root
        root.last = self._emit(
            run,
            EventType.INTERNAL_THOUGHT,
            thought,
            role="assistant",
            payload={
                "tool": getattr(action, "tool", None),
                "tool_input": getattr(action, "tool_input", None),
            },
            parents=(root.last,) if root.last else self._nearest(run),
            source=self._source(run_id),
        )

    # ------------------------------------------------------------------ LLMs
    @_guard
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Record the prompt's new messages, then a ``model_call`` caused by what it answers.

        Args:
            serialized: LangChain's description of the model (its name and settings).
            messages: The prompt (the first of the batch is recorded).
            run_id: LangChain's id of the run.
            parent_run_id: The run that started it (``None``: a root run).
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        metadata = kwargs.get("metadata")
        run = self._open(run_id, parent_run_id, metadata, "chat", kwargs.get("name"))
        prompt = messages[0] if messages else []
        src = self._source(run_id, metadata)
        payload = _model_payload(serialized, metadata, kwargs, len(prompt))
        assembled = next(  # a context hook's assembly (after any system prompt the agent adds)
            (m.additional_kwargs["beeweave"] for m in prompt if "beeweave" in m.additional_kwargs),
            None,
        )
        rid = None
        if isinstance(assembled, Mapping):
            rid = assembled.get("retrieval_event_id")
            # a system prompt added around the assembly (create_react_agent(prompt=...)) is
            # kept with this call, not as a session event: the assembler would pin it and
            # the agent add it again, so the model would read it twice
            outside = [m for m in prompt if m.type == "system" and not _assembled(m)]
            if outside:
                payload["system_outside_context"] = [text_of(m) for m in outside]
                prompt = [m for m in prompt if m.type != "system" or _assembled(m)]
        ids = self._rec.record(run.session, to_messages(prompt), meta=self._meta, source=src)
        run.event = self._emit(
            run,
            EventType.MODEL_CALL,
            "",
            role="assistant",
            parents=_consumed(prompt, ids) or self._nearest(run),
            payload=payload,
            source=src,
            links={"REFERS_TO": (rid,)} if rid else None,
            key=f"run:{run_id}:call",
        )

    @_guard
    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Record a text LLM's ``model_call`` (and, once per chain run, the user's input).

        Args:
            serialized: LangChain's description of the model.
            prompts: The text prompts (only their length is recorded).
            run_id: LangChain's id of the run.
            parent_run_id: The run that started it (``None``: a root run).
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        metadata = kwargs.get("metadata")
        run = self._open(run_id, parent_run_id, metadata, "llm", kwargs.get("name"))
        src = self._source(run_id, metadata)
        root = run.root
        if root.text is not None and root.event is None:  # the user's words, once per chain run
            root.event = self._rec.message(
                root.session,
                Message("user", root.text),
                meta=self._meta,
                source=src,
                key=f"run:{run_id}:input",
            )
        payload = _model_payload(serialized, metadata, kwargs, None)
        payload["prompt_chars"] = sum(len(p) for p in prompts)
        # a text prompt cannot be split into messages: it consumed what came last in this
        # run (a legacy agent's observation), else what started the run
        run.event = self._emit(
            run,
            EventType.MODEL_CALL,
            "",
            role="assistant",
            parents=(root.last,) if root.last else self._nearest(run),
            payload=payload,
            source=src,
            key=f"run:{run_id}:call",
        )

    @_guard
    def on_llm_new_token(
        self, token: Any, *, chunk: Any = None, run_id: UUID, **kwargs: Any
    ) -> None:
        """Record a streamed token as a low-priority fragment, merged per run by the bus
        (skipped with ``capture_tokens=False``).

        Args:
            token: The new text.
            chunk: The chunk it came in (not recorded).
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        if not self.capture_tokens:
            return
        run = self._runs.get(run_id)
        if run is None or not token:
            return
        self._emit(
            run,
            EventType.INTERNAL_THOUGHT,
            token if isinstance(token, str) else str(token),
            role="assistant",
            parents=(run.event,) if run.event else (),
            payload={"kind": "token_stream"},
            priority="low",
            coalesce_key=f"stream:{run_id}",
        )

    @_guard
    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Record the model's answer (and a ``tool_invocation`` per tool call in it).

        Args:
            response: The ``LLMResult``; the first prompt's generations are recorded.
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._close(run_id)
        if run is None:
            return
        src = self._source(run_id)
        parents = (run.event,) if run.event else self._nearest(run)
        for gens in response.generations[:1]:
            for i, gen in enumerate(gens):
                msg = getattr(gen, "message", None)
                if not isinstance(msg, BaseMessage):
                    msg = AIMessage(content=gen.text)
                key = f"msg:{msg.id}" if msg.id else f"run:{run_id}:gen:{i}"
                run.root.last = self._rec.message(
                    run.session,
                    to_message(msg, "assistant"),
                    key=key,
                    parents=parents,
                    meta=self._meta,
                    source=src,
                )

    @_guard
    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Record an ``error`` event for a failed model call (once per exception).

        Args:
            error: What the model raised.
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._close(run_id)
        self._error(error, run_id, run, "llm")

    # ----------------------------------------------------------------- tools
    @_guard
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Tie a tool run to the invocation its ``tool_call_id`` names (a tool run no
        answer announced gets an invocation of its own).

        Args:
            serialized: LangChain's description of the tool (its ``name``).
            input_str: The tool's input as text (``kwargs["inputs"]`` wins when given).
            run_id: LangChain's id of the run.
            parent_run_id: The run that started it (``None``: a root run).
            **kwargs: LangChain's other arguments (``inputs``, ``tool_call_id``,
                ``metadata`` ...).
        """
        metadata = kwargs.get("metadata")
        inputs = kwargs.get("inputs")
        name = (serialized or {}).get("name") or kwargs.get("name")
        run = self._open(run_id, parent_run_id, metadata, "tool", name)
        tcid = kwargs.get("tool_call_id")
        run.tool_call_id = tcid
        call = ToolCall(tcid, str(name or ""), inputs if inputs is not None else input_str)
        last = run.root.last  # a legacy agent's action (no tool_call_id to link by)
        run.event = self._rec.tool_call(
            run.session,
            call,
            parents=(last,) if last and not tcid else self._nearest(run),
            meta=self._meta,
            source=self._source(run_id, metadata),
            key=None if tcid else f"run:{run_id}:tool",
        )

    @_guard
    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Record the ``tool_result``, caused by the invocation of the same tool call.

        Args:
            output: The tool's return value or ``ToolMessage``.
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._close(run_id)
        if run is None:
            return
        msg = _tool_message(output, run.tool_call_id)
        tcid = run.tool_call_id or (msg.tool_call_id if msg is not None else None)
        parents = (run.event,) if run.event else ()
        if msg is not None:
            if not msg.name and run.name:
                msg = msg.model_copy(update={"name": run.name})
            result = to_message(msg, "tool")
        else:  # a plain return value: stored in its canonical form
            result = Message(
                "tool",
                tool_call_id=tcid,
                name=run.name,
                value=output,
                payload={"name": run.name, "status": "success"},
            )
        key = None if tcid else f"run:{run_id}:result"
        run.root.last = self._rec.message(
            run.session,
            result,
            key=key,
            parents=parents,
            meta=self._meta,
            source=self._source(run_id),
        )

    @_guard
    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Record an ``error`` event for a failed tool (once per exception).

        Args:
            error: What the tool raised.
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._close(run_id)
        self._error(error, run_id, run, "tool")

    # ------------------------------------------------------------ retrievers
    @_guard
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Open a retriever run; its query is recorded with the documents it finds.

        Args:
            serialized: LangChain's description of the retriever (its ``name``).
            query: What it searches for.
            run_id: LangChain's id of the run.
            parent_run_id: The run that started it (``None``: a root run).
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        metadata = kwargs.get("metadata")
        name = kwargs.get("name") or (serialized or {}).get("name")
        run = self._open(run_id, parent_run_id, metadata, "retriever", name)
        run.text = query

    @_guard
    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        """Record a ``retrieval`` event: the query and documents, REFERS_TO the events
        BeeWeave's own retriever returned.

        Args:
            documents: The documents found (their text and metadata are recorded).
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._close(run_id)
        if run is None:
            return
        docs = [_doc_record(d) for d in documents]
        recalled = [d["event_id"] for d in docs if isinstance(d.get("event_id"), str)]
        self._emit(
            run,
            EventType.RETRIEVAL,
            run.text or "",
            role="system",
            payload={"retriever": run.name, "documents": docs},
            parents=self._nearest(run.parent) if run.parent else self._nearest(run),
            links={"REFERS_TO": recalled} if recalled else None,
            source=self._source(run_id),
            key=f"run:{run_id}:retrieval",
        )

    @_guard
    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Record an ``error`` event for a failed retriever (once per exception).

        Args:
            error: What the retriever raised.
            run_id: LangChain's id of the run.
            **kwargs: LangChain's other arguments (``metadata``, ``name``, ``tags`` ...).
        """
        run = self._close(run_id)
        self._error(error, run_id, run, "retriever")


class BeeWeaveCallbackHandler(_Capture, BaseCallbackHandler):
    """Records every LangChain / LangGraph run into a :class:`~beeweave_core.weave.Weave`.

    The session of a run is, in order: the run's metadata key ``beeweave_session_id``,
    the handler's ``session_id``, LangGraph's ``thread_id`` and RunnableWithMessageHistory's
    ``session_id`` (both from ``config["configurable"]``).  A run naming none is logged
    once and recorded in a session of its own (``run-<run_id>``), never a shared one.
    ``user_id`` / ``agent_id`` go into every event's ``meta``, ``scope`` names their business
    line (needed on a weave of several scopes).  ``capture_tokens=False`` skips streamed
    token fragments.
    """


class AsyncBeeWeaveCallbackHandler(_Capture, AsyncCallbackHandler):
    """The same recording for async runs (``ainvoke`` / ``astream``): never awaits I/O."""


_CALLBACKS = (
    "on_chain_start",
    "on_chain_end",
    "on_chain_error",
    "on_agent_action",
    "on_chat_model_start",
    "on_llm_start",
    "on_llm_new_token",
    "on_llm_end",
    "on_llm_error",
    "on_tool_start",
    "on_tool_end",
    "on_tool_error",
    "on_retriever_start",
    "on_retriever_end",
    "on_retriever_error",
)


def _async_twin(sync: Any) -> Any:
    @functools.wraps(sync)
    async def method(self: Any, *args: Any, **kwargs: Any) -> None:
        sync(self, *args, **kwargs)

    return method


for _name in _CALLBACKS:
    setattr(AsyncBeeWeaveCallbackHandler, _name, _async_twin(getattr(_Capture, _name)))


# ----------------------------------------------------------------------- helpers
def _consumed(prompt: Sequence[BaseMessage], ids: Sequence[str | None]) -> tuple[str, ...]:
    """What a model call answers: the messages after the last answer (tool results or
    the new user turn), never the system prompt; the last answer if nothing followed it."""
    last_ai = -1
    for i in range(len(prompt) - 1, -1, -1):
        if prompt[i].type == "ai":
            last_ai = i
            break
    out = tuple(
        eid
        for m, eid in zip(prompt[last_ai + 1 :], ids[last_ai + 1 :], strict=False)
        if eid is not None and m.type not in ("system", "developer")
    )
    if not out and last_ai >= 0 and ids[last_ai] is not None:
        return (ids[last_ai],)  # type: ignore[return-value]
    return out


def _model_payload(
    serialized: Mapping[str, Any] | None,
    metadata: Mapping[str, Any] | None,
    kwargs: Mapping[str, Any],
    n_messages: int | None,
) -> dict[str, Any]:
    params = kwargs.get("invocation_params") or {}
    model = (
        params.get("model")
        or params.get("model_name")
        or (metadata or {}).get("ls_model_name")
        or params.get("_type")
        or ((serialized or {}).get("id") or [None])[-1]
    )
    payload: dict[str, Any] = {"model": model}
    if metadata and metadata.get("ls_provider"):
        payload["provider"] = metadata["ls_provider"]
    if n_messages is not None:
        payload["n_messages"] = n_messages
    return payload


def _assembled(message: BaseMessage) -> bool:
    return (message.id or "").startswith(STORED_ID_PREFIX)


def _tool_message(output: Any, tool_call_id: str | None) -> ToolMessage | None:
    if isinstance(output, ToolMessage):
        return output
    update = getattr(output, "update", None)  # LangGraph Command(update={"messages": [...]})
    if isinstance(update, Mapping):
        for m in update.get("messages") or ():
            if isinstance(m, ToolMessage) and (
                tool_call_id is None or m.tool_call_id == tool_call_id
            ):
                return m
    return None


def _doc_record(doc: Any) -> dict[str, Any]:
    md = dict(getattr(doc, "metadata", None) or {})
    text = getattr(doc, "page_content", str(doc))
    rec = {"page_content": text[:2_000], "metadata": md}
    if getattr(doc, "id", None):
        rec["id"] = doc.id
    if isinstance(md.get("event_id"), str):
        rec["event_id"] = md["event_id"]
    return rec


def _is_control_flow(error: BaseException) -> bool:
    """LangGraph interrupts and bubbling-up signals are not failures worth an event."""
    return any(c.__name__ in _CONTROL_FLOW for c in type(error).__mro__)


_CONTROL_FLOW = frozenset({"GraphBubbleUp", "GraphInterrupt", "NodeInterrupt", "ParentCommand"})


__all__ = ["AsyncBeeWeaveCallbackHandler", "BeeWeaveCallbackHandler"]
