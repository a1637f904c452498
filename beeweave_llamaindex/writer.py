"""``TurnWriter``: one LlamaIndex observer of a session — an instrumented run or a memory.

Both the instrumentation (which sees LLM calls and tool spans) and the memory (which
sees the messages an agent stores) describe the same run.  Keys, parents and tool
wiring are the weave's one :class:`~beeweave_core.transcript.Transcript`'s; a run is
its ``scope`` (the run's root span), so a message seen by both observers maps to one
event id and the store keeps the first copy (the instrumentation's, which has the
finer parents).  What this class adds is the run's bookkeeping beside the messages:
the model calls, retrievals and errors, and what the next model call consumed.
Nothing here blocks: every write goes to the capture bus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from beeweave_core.events import EventType
from beeweave_core.transcript import Message, Occurrences, ToolCall, transcript_for
from beeweave_core.weave import Weave

FRAMEWORK = "llama_index"


class TurnWriter:
    """Records one observer's messages for one session and scope.

    Not thread-safe on its own: callers hold a lock (the instrumentation's recorder and
    the memory each serialise their calls).
    """

    def __init__(
        self,
        weave: Weave,
        *,
        session_id: str,
        scope: str | None,
        user_id: str | None = None,
        agent_id: str | None = None,
        component: str = "instrumentation",
    ) -> None:
        self.transcript = transcript_for(weave)
        self.session_id = session_id
        self.scope = scope
        self.meta: dict[str, Any] = {}
        if user_id is not None:
            self.meta["user_id"] = user_id
        if agent_id is not None:
            self.meta["agent_id"] = agent_id
        self.source: dict[str, Any] = {"framework": FRAMEWORK, "component": component}
        if scope is not None:
            self.source["run"] = scope
        #: Ids of every event this writer recorded (the memory hides the others of a live run).
        self.ids: set[str] = set()
        self.has_user = False
        self._occ = Occurrences()
        self._pending: list[str] = []  # what the next model call is caused by
        self._results_phase = False

    def name_agent(self, agent_id: str) -> None:
        """Record the next events under ``agent_id`` (a workflow hands over to another
        agent).  The meta dict is replaced, never changed: events already queued keep
        theirs, so it is handed to the bus without a copy."""
        if self.meta.get("agent_id") != agent_id:
            self.meta = {**self.meta, "agent_id": agent_id}

    def _source(self, extra: Mapping[str, Any] | None) -> dict[str, Any]:
        return {**self.source, **(extra or {})}

    def _record(
        self,
        message: Message,
        *,
        parents: Sequence[str] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        eid = self.transcript.message(
            self.session_id,
            message,
            scope=self.scope,
            parents=parents,
            occurrences=self._occ,
            meta=self.meta,
            source=self._source(source),
        )
        self.ids.add(eid)
        for call in message.tool_calls:  # an answer's calls are recorded with it
            inv = self.transcript.invocation(self.session_id, call.id, self.scope)
            if inv:
                self.ids.add(inv)
        return eid

    def _event(
        self,
        type_: EventType,
        content: str,
        *,
        kind: str,
        identity: str,
        parents: Sequence[str],
        payload: Mapping[str, Any],
        source: Mapping[str, Any] | None,
        role: str | None = None,
    ) -> str:
        eid = self.transcript.event(
            self.session_id,
            type_,
            content,
            kind=kind,
            identity=identity,
            scope=self.scope,
            role=role,
            parents=parents,
            payload=payload,
            meta=self.meta,
            source=self._source(source),
        )
        if eid:
            self.ids.add(eid)
        return eid

    # --------------------------------------------------------------- messages
    def causes(self) -> list[str]:
        return list(self._pending)

    def user(self, text: str, *, source: Mapping[str, Any] | None = None) -> str:
        eid = self._record(Message("user", text), source=source)
        self.has_user = True
        self._pending = [eid]
        self._results_phase = False
        return eid

    def adopt(self, causes: Sequence[str]) -> None:
        """Continue from messages already stored (e.g. a user message the memory recorded
        before the model call): they become what the next model call is caused by."""
        self.has_user = True
        self._pending = list(causes)
        self._results_phase = False

    def system(self, text: str) -> str:
        """A system prompt is configuration: one event per distinct prompt per session
        (seen afresh each call, so never a second occurrence)."""
        eid = self.transcript.message(
            self.session_id,
            Message("system", text),
            scope=self.scope,
            meta=self.meta,
            source=self.source,
        )
        self.ids.add(eid)
        return eid

    def model_call(
        self, call_id: str, payload: Mapping[str, Any], *, source: Mapping[str, Any] | None = None
    ) -> str:
        return self._event(
            EventType.MODEL_CALL,
            "",
            kind="model_call",
            identity=call_id,
            parents=self._pending,
            payload=payload,
            source=source,
            role="assistant",
        )

    def assistant(
        self,
        message: Message,
        *,
        parents: Sequence[str] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        """An answer (with its tool calls); ``parents`` default to the transcript's rule."""
        eid = self._record(message, parents=parents, source=source)
        self._pending = [eid]
        self._results_phase = False
        return eid

    def tool_invocation(
        self,
        call: ToolCall,
        *,
        parents: Sequence[str] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        eid = self.transcript.tool_call(
            self.session_id,
            call,
            scope=self.scope,
            parents=parents,
            meta=self.meta,
            source=self._source(source),
        )
        self.ids.add(eid)
        return eid

    def tool_result(
        self,
        tool_id: str | None,
        name: str | None,
        content: str,
        *,
        output: object = None,
        is_error: bool = False,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        payload = {
            "name": name or "",
            "is_error": is_error,
            "output": output if output is not None else content,
        }
        msg = Message("tool", content, tool_call_id=tool_id, name=name or None, payload=payload)
        eid = self._record(msg, source=source)
        if not self._results_phase:
            self._pending = []
            self._results_phase = True
        self._pending.append(eid)
        return eid

    def retrieval(
        self,
        query: str,
        hits: list[dict[str, Any]],
        *,
        call_id: str,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        eid = self._event(
            EventType.RETRIEVAL,
            query,
            kind="retrieval",
            identity=call_id,
            parents=self._pending,
            payload={"query": query, "hits": hits},
            source=source,
        )
        self._pending = [*self._pending, eid]
        return eid

    def error(
        self,
        text: str,
        *,
        call_id: str,
        payload: Mapping[str, Any],
        parents: Sequence[str] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        return self._event(
            EventType.ERROR,
            text,
            kind="error",
            identity=call_id,
            parents=self._pending if parents is None else parents,
            payload=payload,
            source=source,
        )

    def message(self, message: Message) -> str:
        """Record one chat message (what a memory ``put`` receives), by role."""
        if message.role == "user":
            return self.user(message.content)
        if message.role == "system":
            return self.system(message.content)
        if message.role == "tool":
            return self.tool_result(message.tool_call_id, message.name, message.content)
        return self.assistant(message)
