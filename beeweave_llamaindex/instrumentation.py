"""Capture for LlamaIndex through its instrumentation dispatcher — no change to agent code.

Two hooks feed one recorder:

* the **event handler** sees LLM chat/completion start and end, queries, retrievals and
  exceptions;
* the **span handler** sees the span tree.  Span parent ids give the causality (every
  span maps to the root span of its run, which scopes the run's event keys), and the
  workflow *step* spans carry what no instrumentation event does in llama-index-core
  0.14: a workflow agent's ``call_tool`` step is entered with the ``ToolCall`` event as
  its argument and exits with the ``ToolCallResult``.  That is how tool calls of
  ``FunctionAgent``, ``ReActAgent`` and ``AgentWorkflow`` are captured — whether or not
  the caller iterates ``handler.stream_events()`` (an observer of that stream would only
  see what the caller chose to consume, with no span to hang causality on).  Tools called
  outside an agent are captured from their own ``BaseTool.call/acall`` spans.

The recorder only calls ``weave.emit`` (non-blocking) with deterministic keys, and never
lets an exception out: a capture bug costs a log line and a counter, never the agent.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.agent.workflow.workflow_events import ToolCall as ToolCallEvent
from llama_index.core.agent.workflow.workflow_events import ToolCallResult
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import (
    Dispatcher,
    active_instrument_tags,
    instrument_tags,
)
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span import SimpleSpan, active_span_id
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.tools.types import BaseTool, ToolOutput
from llama_index.core.workflow import Workflow
from pydantic import ConfigDict, Field, PrivateAttr, SkipValidation

from beeweave_core.payloads import preview
from beeweave_core.transcript import Message, ToolCall
from beeweave_core.weave import Weave
from beeweave_llamaindex.messages import is_known, remember, role_of, stored_as, text_of, to_message
from beeweave_llamaindex.writer import TurnWriter

log = logging.getLogger("beeweave.llamaindex")

#: ``instrument_tags`` keys that route one run to another session / user / agent.
TAG_SESSION = "beeweave.session_id"
TAG_USER = "beeweave.user_id"
TAG_AGENT = "beeweave.agent_id"

_HIT_TEXT_CHARS = 500
_MAX_DEPTH = 64


@dataclass
class _Run:
    """What the recorder tracks for one span tree (one agent run, query or bare LLM call)."""

    root: str
    writer: TurnWriter
    spans: list[str] = field(default_factory=list)
    llm_calls: dict[str, str] = field(default_factory=dict)  # LLM span -> model_call id
    tools: dict[str, tuple[str, Any, str]] = field(default_factory=dict)  # span -> (inv, id, name)
    errors: list[BaseException] = field(default_factory=list)
    nested: set[str] = field(default_factory=set)  # LLM spans inside another LLM call
    agent_fixed: bool = False
    closed: bool = False


def _query_text(q: Any) -> str:
    return q if isinstance(q, str) else str(getattr(q, "query_str", q))


def _model_name(model_dict: Any) -> str | None:
    if not isinstance(model_dict, dict):
        return None
    for key in ("model", "model_name", "deployment_name", "class_name"):
        if model_dict.get(key):
            return str(model_dict[key])
    return None


def _usage(response: Any) -> dict[str, Any]:
    """Token usage a provider reported (OpenAI-style ``additional_kwargs`` or ``raw.usage``)."""
    out = {
        k: v
        for k, v in (getattr(response, "additional_kwargs", None) or {}).items()
        if k.endswith("_tokens") and isinstance(v, int)
    }
    raw = getattr(response, "raw", None)
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if usage is not None:
        if hasattr(usage, "model_dump"):
            usage = usage.model_dump()
        if isinstance(usage, dict):
            out.update({k: v for k, v in usage.items() if isinstance(v, int)})
    return out


#: Per workflow event type: does it declare the agent's name?
_NAMED: dict[type, bool] = {}


def _agent_of(ev: Any) -> str | None:
    """The workflow agent a step's event names.  Asked once per event type: reading a
    name a workflow event lacks raises inside pydantic (~3.5 µs, on most step spans)."""
    kind = type(ev)
    named = _NAMED.get(kind)
    if named is None:
        named = _NAMED[kind] = "current_agent_name" in (getattr(kind, "model_fields", None) or {})
    return getattr(ev, "current_agent_name", None) if named else None


def _hits(nodes: Any) -> list[dict[str, Any]]:
    hits = []
    for n in nodes or ():
        node = getattr(n, "node", n)
        try:
            text = node.get_content()
        except Exception:
            text = str(getattr(node, "text", ""))
        hits.append(
            {
                "node_id": getattr(node, "node_id", None),
                "score": getattr(n, "score", None),
                "text": preview(text, _HIT_TEXT_CHARS),
                "metadata": dict(getattr(node, "metadata", None) or {}),
            }
        )
    return hits


class _Recorder:
    """Shared state of the event and span handlers: span tree → runs → writers."""

    def __init__(
        self,
        weave: Weave,
        session_id: str,
        user_id: str | None,
        agent_id: str | None,
        *,
        keep_closed: int = 256,
        max_runs: int = 10_000,
    ) -> None:
        self.weave = weave
        self.session_id = session_id
        self.user_id = user_id
        self.agent_id = agent_id
        self._lock = threading.RLock()
        self._root: dict[str, str] = {}
        self._parent: dict[str, str | None] = {}
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._closed: deque[str] = deque()
        self._keep_closed = keep_closed
        self._max_runs = max_runs
        self.failures = 0
        _LIVE.add(self)

    # ------------------------------------------------------------- span tree
    def _new_run(self, root: str, tags: dict[str, Any] | None, memory: Any = None) -> _Run:
        """Start a run; its session is, first match: the ``beeweave.*`` instrument tags,
        the BeeWeave memory the workflow was run with, this handler's default."""
        tags = tags or {}
        mem = memory if getattr(memory, "weave", None) is self.weave else None

        def pick(tag: str, attr: str, default: str | None) -> str | None:
            return tags.get(tag) or (getattr(mem, attr, None) if mem else None) or default

        agent = pick(TAG_AGENT, "agent_id", self.agent_id)
        writer = TurnWriter(
            self.weave,
            session_id=str(pick(TAG_SESSION, "session_id", self.session_id)),
            scope=root,
            user_id=pick(TAG_USER, "user_id", self.user_id),
            agent_id=agent,
        )
        run = _Run(root=root, writer=writer, agent_fixed=agent is not None)
        self._runs[root] = run
        while len(self._runs) > self._max_runs:  # roots whose exit we never saw
            self._forget(next(iter(self._runs)))
        return run

    def _forget(self, root: str) -> None:
        run = self._runs.pop(root, None)
        if run is None:
            return
        for sid in run.spans:
            self._root.pop(sid, None)
            self._parent.pop(sid, None)

    def run_for(self, span_id: str | None, tags: dict[str, Any] | None = None) -> _Run:
        """The run a span belongs to; an unknown span starts a run of its own."""
        sid = span_id or "unscoped"
        root = self._root.get(sid, sid)
        run = self._runs.get(root)
        if run is None:
            run = self._new_run(root, tags)
            self._root[sid] = root
            run.spans.append(sid)
        return run

    def lookup(self, span_id: str | None) -> _Run | None:
        if not span_id:
            return None
        with self._lock:
            root = self._root.get(span_id)
            return self._runs.get(root) if root is not None else None

    def _ancestors(self, span_id: str | None) -> Iterator[str]:
        for _ in range(_MAX_DEPTH):
            if span_id is None:
                return
            yield span_id
            span_id = self._parent.get(span_id)

    def _close(self, run: _Run) -> None:
        run.closed = True
        self._closed.append(run.root)
        while len(self._closed) > self._keep_closed:
            self._forget(self._closed.popleft())

    def failed(self) -> None:
        """(in an ``except`` block) A hook failed: capture must never break the agent."""
        self.failures += 1
        log.exception("beeweave: LlamaIndex capture failed; event not recorded")

    # ------------------------------------------------------------- span hooks
    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any,
        parent_id: str | None,
        tags: dict[str, Any] | None,
    ) -> None:
        with self._lock:
            root = self._root.get(parent_id, parent_id) if parent_id else id_
            args = bound_args.arguments
            run = self._runs.get(root)
            if run is None:
                start = args.get("start_event") if parent_id is None else None
                getter = getattr(start, "get", None)
                memory = getter("memory", None) if callable(getter) else None
                run = self._new_run(root, tags or active_instrument_tags.get(), memory)
            self._root[id_] = root
            self._parent[id_] = parent_id
            run.spans.append(id_)
            if "start_event" in args and isinstance(instance, Workflow):
                self._on_run_start(run, instance, args.get("start_event"))
            ev = args.get("ev")
            if ev is not None:
                agent = _agent_of(ev)
                if agent and not run.agent_fixed:
                    run.writer.name_agent(agent)
                if isinstance(ev, ToolCallEvent):
                    self._tool_call(run, id_, ToolCall(ev.tool_id, ev.tool_name, ev.tool_kwargs))
            elif isinstance(instance, BaseTool) and not any(
                s in run.tools for s in self._ancestors(parent_id)
            ):  # a tool called outside a workflow agent's call_tool step
                name = instance.metadata.get_name()
                kwargs = dict(args.get("kwargs") or {})
                kwargs.update({k: v for k, v in args.items() if k not in ("kwargs", "args")})
                if args.get("args"):  # positional arguments, kept in order
                    kwargs["args"] = list(args["args"])
                self._tool_call(run, id_, ToolCall(id_, name, kwargs))

    @staticmethod
    def _tool_call(run: _Run, span_id: str, call: ToolCall) -> None:
        # registered first: should recording the call fail, its result is still recorded
        run.tools[span_id] = ("", call.id, call.name)
        inv = run.writer.tool_invocation(call, source={"span": span_id})
        run.tools[span_id] = (inv, call.id, call.name)

    def _on_run_start(self, run: _Run, instance: Any, start_event: Any) -> None:
        if not run.agent_fixed and getattr(instance, "name", None):
            run.writer.name_agent(str(instance.name))
        getter = getattr(start_event, "get", None)
        msg = getter("user_msg") if callable(getter) else None
        if isinstance(msg, ChatMessage):
            msg = text_of(msg)
        if isinstance(msg, str) and msg:
            run.writer.user(msg, source={"span": run.root})

    def span_exit(self, id_: str, result: Any) -> None:
        with self._lock:
            run = self._runs.get(self._root.get(id_, ""))
            if run is None:
                return
            tool = run.tools.pop(id_, None)
            if tool is not None:
                out = result.tool_output if isinstance(result, ToolCallResult) else result
                if isinstance(out, ToolOutput):
                    run.writer.tool_result(
                        tool[1],
                        tool[2],
                        out.content,
                        output=out.raw_output,
                        is_error=out.is_error,
                        source={"span": id_},
                    )
            if id_ == run.root:
                self._close(run)

    def span_drop(self, id_: str, err: BaseException | None) -> None:
        with self._lock:
            run = self._runs.get(self._root.get(id_, ""))
            if run is None:
                return
            if isinstance(err, Exception):
                self._error(run, err, id_)
                tool = run.tools.pop(id_, None)
                if tool is not None:  # the invocation gets its (failed) result
                    run.writer.tool_result(
                        tool[1],
                        tool[2],
                        f"{type(err).__name__}: {err}",
                        is_error=True,
                        source={"span": id_},
                    )
            if id_ == run.root:
                self._close(run)

    def _error(self, run: _Run, err: BaseException, span_id: str | None) -> None:
        """One error event per exception, however many spans it unwinds through."""
        if any(e is err for e in run.errors):
            return
        run.errors.append(err)
        parents = None
        for s in self._ancestors(span_id):
            if s in run.tools:
                parents = [run.tools[s][0]]
                break
            if s in run.llm_calls:
                parents = [run.llm_calls[s]]
                break
        run.writer.error(
            f"{type(err).__name__}: {err}",
            call_id=f"{span_id}:{len(run.errors)}",
            payload={
                "error_type": f"{type(err).__module__}.{type(err).__qualname__}",
                "span": span_id,
            },
            parents=parents,
            source={"span": span_id},
        )

    # ------------------------------------------------------------- events
    def on_event(self, event: BaseEvent) -> None:
        handler = _EVENT_HANDLERS.get(type(event).__name__)
        if handler is None:
            return
        with self._lock:
            run = self.run_for(event.span_id, event.tags)
            handler(self, run, event)

    def _chat_start(self, run: _Run, ev: Any) -> None:
        w = run.writer
        msgs = list(ev.messages or ())
        if self._nested(run, ev.span_id):
            return
        user = (
            None if w.has_user else next((m for m in reversed(msgs) if role_of(m) == "user"), None)
        )
        if user is not None:
            stored = stored_as(user, self.weave, w.session_id)
            if stored is not None:  # the memory recorded it and handed it back
                w.adopt(stored)
            elif not is_known(user):
                w.user(text_of(user), source={"span": ev.span_id})
        system = next(
            (text_of(m) for m in msgs if role_of(m) == "system" and not is_known(m)), ""
        )  # the agent's own prompt, not BeeWeave's assembled layers
        if system:
            w.system(system)
        self._model_call(run, ev, {"messages": len(msgs)})

    def _nested(self, run: _Run, span_id: str | None) -> bool:
        """An LLM call made inside another one (a completion model's ``chat`` calls its
        ``complete``) is the same model call: recorded once, by the outer span."""
        if span_id in run.nested:
            return True
        if any(s in run.llm_calls for s in self._ancestors(self._parent.get(span_id or ""))):
            run.nested.add(span_id or "")
            return True
        return False

    def _model_call(self, run: _Run, ev: Any, extra: dict[str, Any]) -> None:
        span = ev.span_id or "unscoped"
        payload = {
            "model": _model_name(ev.model_dict),
            "params": dict(ev.additional_kwargs or {}),
            **extra,
        }
        run.llm_calls[span] = run.writer.model_call(  # keyed by the start event: redelivery-safe
            ev.id_, payload, source={"span": span, "instrumentation_event": ev.id_}
        )

    def _answer(self, run: _Run, ev: Any, message: Message) -> str | None:
        if self._nested(run, ev.span_id):
            return None
        mc = run.llm_calls.get(ev.span_id or "unscoped")
        return run.writer.assistant(
            message,
            parents=[mc] if mc else None,
            source={"span": ev.span_id, "instrumentation_event": ev.id_},
        )

    def _chat_end(self, run: _Run, ev: Any) -> None:
        if ev.response is not None:
            usage = {"usage": _usage(ev.response)}
            eid = self._answer(run, ev, to_message(ev.response.message, usage))
            if eid:  # the agent may put this very message into a BeeWeave memory
                remember(ev.response.message, self.weave, run.writer.session_id, [eid])

    def _completion_start(self, run: _Run, ev: Any) -> None:
        if self._nested(run, ev.span_id):
            return
        if not run.writer.has_user and ev.prompt:
            run.writer.user(ev.prompt, source={"span": ev.span_id})
        self._model_call(run, ev, {"prompt": ev.prompt})

    def _completion_end(self, run: _Run, ev: Any) -> None:
        if ev.response is not None:
            usage = {"usage": _usage(ev.response)}
            self._answer(run, ev, Message("assistant", ev.response.text or "", payload=usage))

    def _query_start(self, run: _Run, ev: Any) -> None:
        if not run.writer.has_user:
            run.writer.user(_query_text(ev.query), source={"span": ev.span_id})

    def _retrieval_end(self, run: _Run, ev: Any) -> None:
        run.writer.retrieval(
            _query_text(ev.str_or_query_bundle),
            _hits(ev.nodes),
            call_id=ev.id_,
            source={"span": ev.span_id},
        )

    def _exception(self, run: _Run, ev: Any) -> None:
        if isinstance(ev.exception, Exception):
            self._error(run, ev.exception, ev.span_id)


_EVENT_HANDLERS = {
    "LLMChatStartEvent": _Recorder._chat_start,
    "LLMChatEndEvent": _Recorder._chat_end,
    "LLMCompletionStartEvent": _Recorder._completion_start,
    "LLMCompletionEndEvent": _Recorder._completion_end,
    "QueryStartEvent": _Recorder._query_start,
    "RetrievalEndEvent": _Recorder._retrieval_end,
    "ExceptionEvent": _Recorder._exception,
}

#: Recorders alive now, so a memory can find the run it is being called from.
_LIVE: weakref.WeakSet[_Recorder] = weakref.WeakSet()


def current_run(weave: Weave, session_id: str) -> tuple[str, set[str]] | None:
    """``(scope, ids recorded so far)`` of the instrumented run the caller is inside, if any.

    Found through LlamaIndex's own ``active_span_id`` context variable, so it works in
    the agent's task or thread without anything being passed around.
    """
    span = active_span_id.get()
    if not span:
        return None
    for rec in list(_LIVE):
        if rec.weave is not weave:
            continue
        run = rec.lookup(span)
        if run is not None and run.writer.session_id == session_id:
            with rec._lock:
                return run.root, set(run.writer.ids)
    return None


class BeeWeaveSpanHandler(BaseSpanHandler[SimpleSpan]):
    """Span half of the capture: span tree, workflow tool steps, tool spans, errors.

    Keeps no spans itself (``open_spans`` stays empty) — the recorder holds what it needs.
    The recorder is a plain (excluded) field, not a private attribute: the dispatcher calls
    these hooks ~45 times per agent run, and a pydantic private attribute costs ~2 µs to read.

    Args:
        recorder: The state it shares with its event handler; build the pair with
            :class:`BeeWeaveEventHandler` (its ``span_handler``) rather than by hand.
    """

    recorder: SkipValidation[_Recorder | None] = Field(default=None, exclude=True, repr=False)

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes the handler under.

        Returns:
            ``"BeeWeaveSpanHandler"``.
        """
        return "BeeWeaveSpanHandler"

    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Place a span in its run (the root span scopes the run's event keys); a workflow
        run's user message, a ``call_tool`` step or a tool's own span is recorded here.

        Args:
            id_: The span's id.
            bound_args: The arguments of the call the span wraps.
            instance: The object whose method the span wraps.
            parent_id: The enclosing span (``None``: a new run).
            tags: ``instrument_tags`` in force (``beeweave.session_id`` ... route the run).
            **kwargs: The dispatcher's other arguments (unused).
        """
        rec = self.recorder
        if rec is not None:
            try:  # (inline: a hook runs ~45 times per agent run)
                rec.span_enter(id_, bound_args, instance, parent_id, tags)
            except Exception:
                rec.failed()

    def span_exit(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any = None,
        result: Any = None,
        **kwargs: Any,
    ) -> None:
        """Record a tool step's result; the run ends with its root span.

        Args:
            id_: The span's id.
            bound_args: The arguments of the call the span wrapped.
            instance: The object whose method the span wrapped.
            result: What the call returned (a ``ToolCallResult`` or ``ToolOutput``).
            **kwargs: The dispatcher's other arguments (unused).
        """
        rec = self.recorder
        if rec is not None:
            try:  # (inline: a hook runs ~45 times per agent run)
                rec.span_exit(id_, result)
            except Exception:
                rec.failed()

    def span_drop(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        """Record a failed span's error (once per exception), and a failed tool's result.

        Args:
            id_: The span's id.
            bound_args: The arguments of the call the span wrapped.
            instance: The object whose method the span wrapped.
            err: What the call raised.
            **kwargs: The dispatcher's other arguments (unused).
        """
        rec = self.recorder
        if rec is not None:
            try:  # (inline: a hook runs ~45 times per agent run)
                rec.span_drop(id_, err)
            except Exception:
                rec.failed()

    def new_span(self, *args: Any, **kwargs: Any) -> SimpleSpan | None:
        """Keep no span object (the recorder holds what it needs).

        Args:
            *args: The dispatcher's arguments (unused).
            **kwargs: The dispatcher's keyword arguments (unused).

        Returns:
            ``None``.
        """
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> SimpleSpan | None:
        """Nothing to close: no span object is kept.

        Args:
            *args: The dispatcher's arguments (unused).
            **kwargs: The dispatcher's keyword arguments (unused).

        Returns:
            ``None``.
        """
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> SimpleSpan | None:
        """Nothing to drop: no span object is kept.

        Args:
            *args: The dispatcher's arguments (unused).
            **kwargs: The dispatcher's keyword arguments (unused).

        Returns:
            ``None``.
        """
        return None


class BeeWeaveEventHandler(BaseEventHandler):
    """Records a LlamaIndex app's LLM calls, tool calls, retrievals and errors into a weave.

    Attach both halves (``instrument()`` does it)::

        handler = BeeWeaveEventHandler(weave=weave, session_id="s1")
        handler.attach()            # root dispatcher: event handler + span handler

    A run is recorded in, first match: the session named by :func:`session_tags` (or
    ``instrument_tags({"beeweave.session_id": ...})``), the session of the
    :class:`~beeweave_llamaindex.BeeWeaveChatMemory` the workflow was run with, or
    ``session_id``.  The same goes for ``user_id`` and ``agent_id``.

    Attributes:
        weave: The :class:`~beeweave_core.Weave` to record into.
        session_id: The session captured runs are recorded in by default.
        user_id: Recorded as ``meta.user_id``.
        agent_id: Recorded as ``meta.agent_id`` (default: the workflow agent's name).
        recorder: Set by the handler itself; leave it out.

    Raises:
        ValueError: An empty ``session_id``.
        TypeError: ``weave`` is not a :class:`~beeweave_core.Weave`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    weave: SkipValidation[Weave] = Field(
        exclude=True, description="The beeweave_core.Weave to record into."
    )
    session_id: str = Field(description="Session that captured runs are recorded in.")
    user_id: str | None = Field(default=None, description="Recorded as meta.user_id.")
    agent_id: str | None = Field(
        default=None, description="Recorded as meta.agent_id (default: the workflow agent's name)."
    )
    #: Set by the handler itself (a plain field read on every hook; see BeeWeaveSpanHandler).
    recorder: SkipValidation[_Recorder | None] = Field(default=None, exclude=True, repr=False)
    _span_handler: BeeWeaveSpanHandler | None = PrivateAttr(default=None)
    _dispatcher: Dispatcher | None = PrivateAttr(default=None)

    def model_post_init(self, __context: Any) -> None:
        """Check the fields and build the recorder both halves share.

        Args:
            __context: Pydantic's validation context (unused).

        Raises:
            ValueError: An empty ``session_id``.
            TypeError: ``weave`` is not a :class:`~beeweave_core.Weave`.
        """
        if not self.session_id or not isinstance(self.session_id, str):
            raise ValueError("session_id must be a non-empty string")
        if not isinstance(self.weave, Weave):
            raise TypeError(f"weave must be a beeweave_core.Weave, got {type(self.weave).__name__}")
        self.recorder = _Recorder(self.weave, self.session_id, self.user_id, self.agent_id)
        self._span_handler = BeeWeaveSpanHandler(self.recorder)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes the handler under.

        Returns:
            ``"BeeWeaveEventHandler"``.
        """
        return "BeeWeaveEventHandler"

    @property
    def span_handler(self) -> BeeWeaveSpanHandler:
        """The span half; add it to the same dispatcher as this handler."""
        assert self._span_handler is not None
        return self._span_handler

    @property
    def failures(self) -> int:
        """Capture errors swallowed so far (each also logged)."""
        return self.recorder.failures if self.recorder else 0

    def retarget(
        self, session_id: str, *, user_id: str | None = None, agent_id: str | None = None
    ) -> None:
        """Record runs started from now on under another default session/user/agent
        (runs already going keep theirs).

        Args:
            session_id: The new default session.
            user_id: The new default user (``None``: none).
            agent_id: The new default agent (``None``: the workflow agent's name).

        Raises:
            ValueError: An empty ``session_id``.
        """
        if not session_id or not isinstance(session_id, str):
            raise ValueError("session_id must be a non-empty string")
        self.session_id, self.user_id, self.agent_id = session_id, user_id, agent_id
        rec = self.recorder
        if rec is not None:
            with rec._lock:
                rec.session_id, rec.user_id, rec.agent_id = session_id, user_id, agent_id

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        """Record what an instrumentation event says (LLM start/end, query, retrieval,
        exception); a capture failure is logged and counted, never raised.

        Args:
            event: The LlamaIndex event.
            **kwargs: The dispatcher's other arguments (unused).
        """
        rec = self.recorder
        if rec is not None:
            try:  # (inline: a hook runs ~45 times per agent run)
                rec.on_event(event)
            except Exception:
                rec.failed()

    # ------------------------------------------------------------ lifecycle
    def attach(self, dispatcher: Dispatcher | None = None) -> BeeWeaveEventHandler:
        """Add both halves to ``dispatcher``, so its runs are captured; a no-op once attached.

        Args:
            dispatcher: Where to attach (default: LlamaIndex's root dispatcher).

        Returns:
            This handler (for ``with handler.attach(): ...``).
        """
        d = dispatcher or get_dispatcher()
        if self._dispatcher is not None:
            return self
        d.add_event_handler(self)
        d.add_span_handler(self.span_handler)
        self._dispatcher = d
        return self

    def detach(self) -> None:
        """Remove both halves from the dispatcher they were attached to.  Safe to repeat."""
        d, self._dispatcher = self._dispatcher, None
        if d is None:
            return
        d.event_handlers = [h for h in d.event_handlers if h is not self]
        d.span_handlers = [h for h in d.span_handlers if h is not self._span_handler]

    def __enter__(self) -> BeeWeaveEventHandler:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()


def instrument(
    weave: Weave,
    session_id: str,
    user_id: str | None = None,
    agent_id: str | None = None,
    *,
    dispatcher: Dispatcher | None = None,
) -> BeeWeaveEventHandler:
    """Capture everything LlamaIndex does into ``weave`` under ``session_id`` — one line.

    One handler per weave: calling it again for the same weave returns the attached
    handler, re-aimed at the new default session/user/agent (runs already going keep
    theirs), so LlamaIndex's global dispatcher never records a run twice.  A run started
    with a :class:`~beeweave_llamaindex.BeeWeaveChatMemory` of this weave goes to that
    memory's session, and :func:`session_tags` routes any block of code explicitly.  The
    handler is detached when the weave closes, or by ``handler.detach()``.

    Args:
        weave: The open weave to record into.
        session_id: The default session of captured runs.
        user_id: The default user (recorded as ``meta.user_id``).
        agent_id: The default agent (default: the workflow agent's name).
        dispatcher: Where to attach (default: LlamaIndex's root dispatcher).

    Returns:
        The attached handler (``handler.failures`` counts swallowed capture errors).

    Raises:
        ValueError: An empty ``session_id``.
    """
    d = dispatcher or get_dispatcher()
    for h in d.event_handlers:
        if isinstance(h, BeeWeaveEventHandler) and h.weave is weave:
            h.retarget(session_id, user_id=user_id, agent_id=agent_id)
            return h
    handler = BeeWeaveEventHandler(
        weave=weave, session_id=session_id, user_id=user_id, agent_id=agent_id
    )
    handler.attach(d)
    weave.on_close(handler.detach)
    return handler


@contextlib.contextmanager
def session_tags(
    session_id: str, *, user_id: str | None = None, agent_id: str | None = None
) -> Iterator[None]:
    """Route the runs started inside this block to ``session_id`` (one handler, many sessions).

    Args:
        session_id: The session those runs are recorded in.
        user_id: Their user (``None``: the handler's).
        agent_id: Their agent (``None``: the handler's).

    Yields:
        Nothing; the routing holds until the block ends.
    """
    tags = {**active_instrument_tags.get(), TAG_SESSION: session_id}
    if user_id is not None:
        tags[TAG_USER] = user_id
    if agent_id is not None:
        tags[TAG_AGENT] = agent_id
    with instrument_tags(tags):
        yield
