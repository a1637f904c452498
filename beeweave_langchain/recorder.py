"""Messages → events, once each: the state the handler, the history and the hook share.

Every model call re-sends the whole conversation.  The recorder remembers, per
session, which message keys it has already emitted, so only what is new becomes an
event; because the keys are deterministic (:mod:`beeweave_langchain.messages`), a
message seen again after a restart maps to the event already stored and the store
keeps one copy.  One recorder exists per :class:`~beeweave_core.weave.Weave`, so a
callback handler and a context hook on the same weave never record a message twice.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from beeweave_core.events import EventType, event_id_for
from beeweave_core.refs import ValueRefLinker
from beeweave_core.weave import Weave
from beeweave_langchain.messages import (
    EVENT_BY_ROLE,
    STORED_ID_PREFIX,
    digest,
    message_payload,
    role_of,
    stored_event_id,
    text_of,
    tool_call_key,
    tool_calls_of,
    tool_result_key,
)

MAX_SESSIONS = 1_024
MAX_KEYS_PER_SESSION = 50_000


class SessionState:
    """What one session has recorded in this process."""

    __slots__ = ("ids", "seen", "ai_by_digest", "last", "owners")

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}  # message key → event id (saves re-hashing)
        self.seen: set[str] = set()  # event ids already emitted
        self.ai_by_digest: dict[str, list[str]] = {}  # answers by text, in order: re-sent
        # without their id, the n-th copy of a text maps to the n-th answer recorded
        self.last: str | None = None  # latest conversational event
        self.owners: dict[str, str] = {}  # tool_call_id → the answer that asked (latest)


class Recorder:
    """Emits LangChain messages of one weave as events, each at most once per process."""

    def __init__(self, weave: Weave) -> None:
        # the bus, not the weave: recorders are kept per weave in a WeakKeyDictionary,
        # and a value holding its key strongly would never be let go
        self._emit = weave.bus.emit
        self.tenant = weave.tenant
        self.lock = threading.RLock()
        self._sessions: OrderedDict[str, SessionState] = OrderedDict()
        self.linker = ValueRefLinker(weave.store)
        weave.bus.subscribe(self.linker)

    # ---------------------------------------------------------------- state
    def session(self, session_id: str) -> SessionState:
        st = self._sessions.get(session_id)
        if st is None:
            st = self._sessions[session_id] = SessionState()
            if len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return st

    def forget(self, session_id: str) -> None:
        with self.lock:
            self._sessions.pop(session_id, None)

    def id_for(self, st: SessionState, session_id: str, key: str) -> str:
        eid = st.ids.get(key)
        if eid is None:
            if len(st.ids) > MAX_KEYS_PER_SESSION:
                st.ids.clear()
            eid = st.ids[key] = event_id_for(self.tenant, session_id, key)
        return eid

    # ---------------------------------------------------------------- writes
    def emit_message(
        self,
        session_id: str,
        message: BaseMessage,
        *,
        key: str | None,
        parents: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
        role: str | None = None,
    ) -> str:
        """Record one message (an answer also records its tool calls); returns its id."""
        role = role or role_of(message)
        text = text_of(message)
        with self.lock:
            st = self.session(session_id)
            eid = self._emit(
                EVENT_BY_ROLE.get(role, EventType.USER_MESSAGE), text, session_id=session_id,
                role=role, payload=message_payload(message), parents=parents, meta=meta,
                source=source, key=key,
            )  # fmt: skip
            new = eid not in st.seen  # False: a redelivered hook
            st.seen.add(eid)
            st.last = eid
            if role == "assistant":
                if new:
                    st.ai_by_digest.setdefault(digest(text), []).append(eid)
                for tc in tool_calls_of(message):
                    if tc.get("id"):
                        st.owners[tc["id"]] = eid
                    self.emit_tool_call(session_id, tc, parents=(eid,), meta=meta, source=source)
        return eid

    def emit_tool_call(
        self,
        session_id: str,
        tool_call: Mapping[str, Any],
        *,
        parents: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> str:
        """Record a tool call ``{"id", "name", "args"}`` once (keyed by its tool_call_id,
        scoped by the answer that asked for it)."""
        tcid = tool_call.get("id")
        with self.lock:
            st = self.session(session_id)
            if tcid:
                key = tool_call_key(tcid, st.owners.get(tcid))
            if key is not None:
                eid = self.id_for(st, session_id, key)
                if eid in st.seen:
                    return eid
            args = tool_call.get("args")
            text = (
                args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
            )
            eid = self._emit(
                EventType.TOOL_INVOCATION, text, session_id=session_id, role="assistant",
                payload={"name": tool_call.get("name"), "args": args, "tool_call_id": tcid},
                parents=parents, meta=meta, source=source, key=key,
            )  # fmt: skip
            st.seen.add(eid)
        return eid

    def note_tool_calls(self, session_id: str, answer_id: str, tool_calls: Any) -> None:
        """Remember which stored answer asked for which tool_call_ids (after a restart)."""
        with self.lock:
            st = self.session(session_id)
            for tc in tool_calls or ():
                if isinstance(tc, Mapping) and tc.get("id"):
                    st.owners[tc["id"]] = answer_id

    def result_key(self, session_id: str, tool_call_id: str) -> str:
        """The key the result of ``tool_call_id`` is recorded under."""
        with self.lock:
            return tool_result_key(tool_call_id, self.session(session_id).owners.get(tool_call_id))

    def emit_user_text(
        self,
        session_id: str,
        text: str,
        *,
        key: str | None,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        """A user turn known only as text (a legacy chain's input)."""
        with self.lock:
            eid = self._emit(EventType.USER_MESSAGE, text, session_id=session_id,
                                  role="user", meta=meta, source=source, key=key)  # fmt: skip
            self.mark(session_id, eid)
        return eid

    def mark(self, session_id: str, event_id: str) -> None:
        """Note an event emitted outside the recorder as the session's latest."""
        with self.lock:
            st = self.session(session_id)
            st.seen.add(event_id)
            st.last = event_id

    def last(self, session_id: str) -> str | None:
        st = self._sessions.get(session_id)
        return st.last if st is not None else None

    def record_history(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
        counts: dict[tuple[str, str], int] | None = None,
        prev: str | None = None,
    ) -> list[str | None]:
        """Event ids of ``messages`` (``None`` for assembled synthetic ones), recording new ones.

        A user or system message has no cause inside the conversation; an answer not
        seen before hangs off the message before it; a tool result off its tool call.
        ``counts`` (role, digest) → n carries the occurrence numbers of id-less messages
        that came earlier in the conversation but are not in ``messages``.
        """
        out: list[str | None] = []
        counts = {} if counts is None else counts
        with self.lock:
            st = self.session(session_id)
            for m in messages:
                mid = m.id
                role = role_of(m)
                if mid and mid.startswith(STORED_ID_PREFIX):
                    eid = stored_event_id(m)
                    if eid:  # stored without an id of its own: it counts as an occurrence
                        count_occurrence(counts, role, text_of(m))
                        st.seen.add(eid)
                        self._own(st, m, eid)
                        prev = eid
                    out.append(eid)
                    continue
                tcid = getattr(m, "tool_call_id", None) if role == "tool" else None
                if tcid:
                    owner = st.owners.get(tcid)
                    key = tool_result_key(tcid, owner)
                elif mid:
                    key = f"msg:{mid}"
                else:
                    d = digest(text_of(m))
                    n = counts.get((role, d), 0)
                    counts[(role, d)] = n + 1
                    answers = st.ai_by_digest.get(d) if role == "assistant" else None
                    if answers and n < len(answers):  # the n-th answer with this text,
                        out.append(answers[n])  # re-sent without the id it was recorded with
                        prev = answers[n]
                        self._own(st, m, prev)
                        continue
                    key = f"msg:{role}:{d}:{n}"
                eid = self.id_for(st, session_id, key)
                if eid not in st.seen:
                    if role == "tool":
                        parents: tuple[str, ...] = (
                            (self.id_for(st, session_id, tool_call_key(tcid, owner)),)
                            if tcid
                            else ()
                        )
                    elif role == "assistant":
                        before = prev or st.last
                        parents = (before,) if before else ()
                    else:
                        parents = ()
                    self.emit_message(
                        session_id, m, key=key, parents=parents, meta=meta, source=source, role=role
                    )
                else:
                    self._own(st, m, eid)
                out.append(eid)
                prev = eid
        return out

    @staticmethod
    def _own(st: SessionState, message: BaseMessage, answer_id: str) -> None:
        for tc in tool_calls_of(message):
            if tc.get("id"):
                st.owners[tc["id"]] = answer_id


def count_occurrence(counts: dict[tuple[str, str], int], role: str, text: str) -> None:
    """Count one earlier id-less message toward the ``n`` of its key."""
    k = (role, digest(text))
    counts[k] = counts.get(k, 0) + 1


_RECORDERS: weakref.WeakKeyDictionary[Weave, Recorder] = weakref.WeakKeyDictionary()
_RECORDERS_LOCK = threading.Lock()


def recorder_for(weave: Weave) -> Recorder:
    """The one recorder of ``weave`` (made, and its REFERS_TO linker attached, on first use)."""
    rec = _RECORDERS.get(weave)
    if rec is None:
        with _RECORDERS_LOCK:
            rec = _RECORDERS.get(weave)
            if rec is None:
                rec = _RECORDERS[weave] = Recorder(weave)
    return rec
