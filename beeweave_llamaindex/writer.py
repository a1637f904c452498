"""``TurnWriter``: one agent run's messages and tool traffic as keyed, causally linked events.

Both the instrumentation (which sees LLM calls and tool spans) and the memory (which
sees the messages an agent stores) describe the same run.  They share this writer's key
scheme — ``li:{scope}:{kind}:{identity}`` with ``scope`` = the run's root span — so a
message seen by both maps to one event id and the store keeps the first copy (the
instrumentation's, which has the finer parents).  Parents follow DESIGN.md:
tool_result → tool_invocation → assistant_message → model_call → user message / the
tool results it consumed.  Nothing here blocks: every write is ``weave.emit``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from beeweave_core.events import EventType, event_id_for
from beeweave_llamaindex.messages import ToolCallDict, fingerprint

if TYPE_CHECKING:
    from beeweave_core.weave import Weave


FRAMEWORK = "llama_index"

#: Roles other frameworks or providers use, mapped onto BeeWeave's four.
_ROLE_ALIASES = {"developer": "system", "chatbot": "assistant", "model": "assistant",
                 "function": "tool"}  # fmt: skip


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


class TurnWriter:
    """Emits one run's events for one session with deterministic ids and parents.

    Not thread-safe on its own: callers hold a lock (the instrumentation's recorder and
    the memory each serialise their calls).
    """

    def __init__(
        self,
        weave: Weave,
        *,
        session_id: str,
        scope: str,
        user_id: str | None = None,
        agent_id: str | None = None,
        component: str = "instrumentation",
    ) -> None:
        self.weave = weave
        self.session_id = session_id
        self.scope = scope
        self.meta: dict[str, Any] = {}
        if user_id is not None:
            self.meta["user_id"] = user_id
        if agent_id is not None:
            self.meta["agent_id"] = agent_id
        self.source = {"framework": FRAMEWORK, "component": component, "run": scope}
        #: Ids of every event this writer emitted (the memory hides the others of a live run).
        self.ids: set[str] = set()
        self.has_user = False
        self._pending: list[str] = []  # what the next model call / answer is caused by
        self._results_phase = False
        self._owner: dict[str, str] = {}  # tool_call_id -> assistant message that asked
        self._last_assistant: str | None = None
        self._last_inv_by_name: dict[str, str] = {}
        self._occ: dict[str, int] = {}

    # ------------------------------------------------------------------ ids
    def key(self, kind: str, identity: str) -> str:
        return f"li:{self.scope}:{kind}:{identity}"

    def id_for(self, kind: str, identity: str) -> str:
        """The id an event gets (or got) — so a parent can be named before it is seen."""
        return event_id_for(self.weave.tenant, self.session_id, self.key(kind, identity))

    def _occurrence(self, kind: str, fp: str) -> str:
        n = self._occ.get(f"{kind}:{fp}", 0)
        self._occ[f"{kind}:{fp}"] = n + 1
        return f"{fp}:{n}"

    def _emit(
        self,
        type_: EventType,
        content: Any,
        *,
        key: str,
        role: str | None,
        parents: Sequence[str] = (),
        payload: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        eid = self.weave.emit(
            type_, content, session_id=self.session_id, role=role, payload=payload,
            parents=[p for p in dict.fromkeys(parents) if p], meta=dict(self.meta),
            source={**self.source, **(source or {})}, key=key,
        )  # fmt: skip
        if eid:
            self.ids.add(eid)
        return eid

    # --------------------------------------------------------------- messages
    def causes(self) -> list[str]:
        return list(self._pending)

    def user(self, text: str, *, source: Mapping[str, Any] | None = None) -> str:
        fp = fingerprint({"role": "user", "content": text})
        eid = self._emit(EventType.USER_MESSAGE, text, role="user", source=source,
                         key=self.key("user_message", self._occurrence("user", fp)))  # fmt: skip
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
        """A system prompt is configuration: one event per distinct prompt per session."""
        fp = fingerprint({"role": "system", "content": text})
        return self._emit(EventType.SYSTEM_PROMPT, text, role="system",
                          key=f"li:system_prompt:{fp}")  # fmt: skip

    def model_call(
        self, call_id: str, payload: Mapping[str, Any], *, source: Mapping[str, Any] | None = None
    ) -> str:
        return self._emit(EventType.MODEL_CALL, "", role="assistant", parents=self._pending,
                          payload=payload, source=source,
                          key=self.key("model_call", call_id))  # fmt: skip

    def assistant(
        self,
        message: Mapping[str, Any],
        *,
        parents: Sequence[str] | None = None,
        payload: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        calls: list[ToolCallDict] = list(message.get("tool_calls") or ())
        body = dict(payload or {})
        if calls:
            body["tool_calls"] = calls
        fp = fingerprint(message)
        eid = self._emit(
            EventType.ASSISTANT_MESSAGE, message.get("content") or "", role="assistant",
            parents=self._pending if parents is None else parents, payload=body, source=source,
            key=self.key("assistant_message", self._occurrence("assistant", fp)),
        )  # fmt: skip
        for call in calls:
            if call.get("id") is not None:
                self._owner[str(call["id"])] = eid
        self._last_assistant = eid
        self._pending = [eid]
        self._results_phase = False
        return eid

    def _tool_identity(self, tool_id: Any, name: str, *, new: bool) -> str:
        if tool_id is not None:
            return str(tool_id)
        if new:
            return self._occurrence("tool", name)
        n = self._occ.get(f"tool:{name}", 1) - 1
        return f"{name}:{max(n, 0)}"

    def tool_invocation(
        self,
        call: Mapping[str, Any],
        *,
        parents: Sequence[str] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        name = str(call.get("name") or "")
        ident = self._tool_identity(call.get("id"), name, new=True)
        if parents is None:
            cid = call.get("id")
            owner = (self._owner.get(str(cid)) if cid is not None else None) or self._last_assistant
            parents = [owner] if owner else self._pending
        args = call.get("args")
        eid = self._emit(
            EventType.TOOL_INVOCATION, _text(args), role="assistant", parents=parents,
            payload={"name": name, "args": args, "tool_call_id": call.get("id")}, source=source,
            key=self.key("tool_invocation", ident),
        )  # fmt: skip
        self._last_inv_by_name[name] = eid
        return eid

    def tool_result(
        self,
        tool_id: Any,
        name: str | None,
        content: str,
        *,
        output: Any = None,
        is_error: bool = False,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        name = name or ""
        if tool_id is None and name in self._last_inv_by_name:
            parent = self._last_inv_by_name[name]
        else:
            parent = self.id_for("tool_invocation", self._tool_identity(tool_id, name, new=False))
        payload: dict[str, Any] = {"name": name, "tool_call_id": tool_id, "is_error": is_error}
        payload["output"] = output if output is not None else content
        eid = self._emit(
            EventType.TOOL_RESULT, content, role="tool", parents=[parent], payload=payload,
            source=source,
            key=self.key("tool_result", self._tool_identity(tool_id, name, new=False)),
        )  # fmt: skip
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
        eid = self._emit(EventType.RETRIEVAL, query, role=None, parents=self._pending,
                         payload={"query": query, "hits": hits}, source=source,
                         key=self.key("retrieval", call_id))  # fmt: skip
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
        return self._emit(EventType.ERROR, text, role=None,
                          parents=self._pending if parents is None else parents,
                          payload=payload, source=source,
                          key=self.key("error", call_id))  # fmt: skip

    def message(self, message: Mapping[str, Any]) -> list[str]:
        """Record one chat message (what a memory ``put`` receives), by role."""
        role = str(message.get("role") or "")
        role = _ROLE_ALIASES.get(role, role)
        text = message.get("content") or ""
        if role == "user":
            return [self.user(text)]
        if role == "system":
            return [self.system(text)]
        if role == "tool":
            return [self.tool_result(message.get("tool_call_id"), message.get("name"), text)]
        if role != "assistant":
            raise ValueError(
                f"cannot record a message with role {message.get('role')!r}: "
                "expected user, assistant, system or tool"
            )
        eid = self.assistant(message)
        calls = message.get("tool_calls") or ()
        return [eid, *(self.tool_invocation(c, parents=[eid]) for c in calls)]
