"""Events → chat messages: how a stored conversation is read back.

Reading: a session's events become *units* — a user message, an assistant message
with the tool calls it made and their results, a lone assistant message.  A unit is
the smallest thing the assembler may keep or drop, which is how "a tool call is never
separated from its result" is guaranteed by construction rather than checked later.

Writing is :mod:`beeweave_core.transcript`'s (one writer for every framework).
"""

from __future__ import annotations

import bisect
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.events import Event, EventType, tool_args, tool_name
from beeweave_core.store import EventReader

#: Event types that are part of what was said (everything else is bookkeeping).
CONVERSATION_TYPES = (
    EventType.SYSTEM_PROMPT,
    EventType.USER_MESSAGE,
    EventType.ASSISTANT_MESSAGE,
    EventType.TOOL_INVOCATION,
    EventType.TOOL_RESULT,
)


_SAID_BY = {"user": EventType.USER_MESSAGE}


@dataclass
class Unit:
    """Messages that must stay together, with the events they came from."""

    kind: str  # user | assistant | tool_group
    events: list[Event]
    messages: list[dict[str, Any]]
    #: tool_call_id → event id of the tool_result (for editing the result text)
    results: dict[str, str] = field(default_factory=dict)
    #: what was worked out about this unit, by key (its token cost per encoding): a
    #: unit handed out is never changed (the builder hands out copies), so it holds
    memo: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def seq_from(self) -> int:
        return min(e.seq for e in self.events)

    @property
    def seq_to(self) -> int:
        return max(e.seq for e in self.events)

    @property
    def ids(self) -> list[str]:
        return [e.id for e in self.events]

    @property
    def turns(self) -> int:
        """How many chat messages (turns) the unit holds."""
        return len(self.messages)

    def message_ids(self) -> list[str | None]:
        """The event behind each message (``None``: a call message no assistant event
        said), so a caller maps what the model reads back to the store without a read."""
        said = {
            e.type: e.id
            for e in reversed(self.events)
            if e.type in (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE)
        }
        out: list[str | None] = []
        for m in self.messages:
            if m.get("role") == "tool":
                out.append(self.results.get(str(m.get("tool_call_id"))))
            else:
                out.append(said.get(_SAID_BY.get(str(m.get("role")), EventType.ASSISTANT_MESSAGE)))
        return out


def tool_call_id(ev: Event) -> str:
    p = ev.payload or {}
    return str(p.get("tool_call_id") or p.get("id") or ev.id)


def _call_dict(inv: Event) -> dict[str, Any]:
    args = tool_args(inv)
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return {
        "id": tool_call_id(inv),
        "type": "function",
        "function": {"name": tool_name(inv), "arguments": arguments},
    }


class UnitBuilder:
    """Builds a session's units one event at a time, so a cursor can feed it.

    A tool invocation joins the assistant message that caused it (or the one just
    before it); its result joins the invocation it answers (by CAUSED_BY or by
    ``tool_call_id``).  A call whose result never arrived is left out of the message
    (a model API rejects an unanswered call); an orphan result gets a synthetic call.
    ``units()`` gives the finished units; only units touched since the last call are
    finished again, so reading after each new event costs what the event changed.
    """

    def __init__(self) -> None:
        self.systems: list[Event] = []
        self._raw: list[Unit] = []
        self._done: list[Unit | None] = []
        self._dirty: set[int] = set()
        self._index: dict[int, int] = {}  # id(raw unit) -> position
        self._inv_unit: dict[str, Unit] = {}  # invocation event id / tool_call_id -> unit
        self._invocations: dict[str, Event] = {}
        self._current: Unit | None = None  # last assistant unit that may still take calls
        #: positions finished again, in order (readers keep a mark into it)
        self.refinished: list[int] = []
        self._out: list[Unit] = []  # the finished units (what ``units()`` copies)
        self._out_pos: list[int] = []  # raw position of each

    def _new(self, unit: Unit) -> Unit:
        self._index[id(unit)] = len(self._raw)
        self._dirty.add(len(self._raw))
        self._raw.append(unit)
        self._done.append(None)
        return unit

    def _touch(self, unit: Unit) -> None:
        self._dirty.add(self._index[id(unit)])

    def add(self, ev: Event) -> None:
        t = ev.type
        if t == EventType.SYSTEM_PROMPT:
            self.systems.append(ev)
        elif t == EventType.USER_MESSAGE:
            self._new(Unit("user", [ev], [{"role": "user", "content": ev.content}]))
            self._current = None
        elif t == EventType.ASSISTANT_MESSAGE:
            msg = {"role": "assistant", "content": ev.content}
            self._current = self._new(Unit("assistant", [ev], [msg]))
        elif t == EventType.TOOL_INVOCATION:
            self._add_invocation(ev)
        elif t == EventType.TOOL_RESULT:
            self._add_result(ev)

    def _add_invocation(self, ev: Event) -> None:
        cur = self._current
        if cur is None or (cur.kind == "tool_group" and cur.results):
            cur = self._current = self._new(
                Unit("assistant", [], [{"role": "assistant", "content": ""}])
            )
        cur.kind = "tool_group"
        cur.events.append(ev)
        cur.messages[0].setdefault("tool_calls", []).append(_call_dict(ev))
        self._inv_unit[ev.id] = self._inv_unit[tool_call_id(ev)] = cur
        self._invocations[ev.id] = self._invocations[tool_call_id(ev)] = ev
        self._touch(cur)

    def _add_result(self, ev: Event) -> None:
        cid = str((ev.payload or {}).get("tool_call_id") or "")
        owner_key = next((p for p in ev.parents if p in self._inv_unit), None) or (
            cid if cid in self._inv_unit else None
        )
        if owner_key is None:  # orphan result: give it a call so the pair is valid
            synth = {
                "id": ev.id,
                "type": "function",
                "function": {"name": tool_name(ev), "arguments": "{}"},
            }
            self._new(
                Unit(
                    "tool_group",
                    [ev],
                    [
                        {"role": "assistant", "content": "", "tool_calls": [synth]},
                        {"role": "tool", "tool_call_id": ev.id, "content": ev.content},
                    ],
                    {ev.id: ev.id},
                )
            )
            self._current = None
            return
        unit = self._inv_unit[owner_key]
        call_id = tool_call_id(self._invocations[owner_key])
        if call_id in unit.results:  # a second result for one call: keep the first
            return
        unit.events.append(ev)
        unit.messages.append({"role": "tool", "tool_call_id": call_id, "content": ev.content})
        unit.results[call_id] = ev.id
        self._touch(unit)

    def units(self) -> list[Unit]:
        """The finished units, oldest first (unanswered calls left out)."""
        self.units_view()
        return list(self._out)

    def units_view(self) -> None:
        """Finish the units that changed since the last call (no copy of the list)."""
        if self._dirty:
            lo = min(self._dirty)
            for i in sorted(self._dirty):
                self._done[i] = _finished(self._raw[i])
                self.refinished.append(i)
            self._dirty.clear()
            cut = bisect.bisect_left(self._out_pos, lo)  # only what follows lo is redone
            del self._out[cut:], self._out_pos[cut:]
            for i in range(lo, len(self._done)):
                u = self._done[i]
                if u is not None:
                    self._out.append(u)
                    self._out_pos.append(i)

    def since(self, i: int) -> list[Unit]:
        """The finished units from position ``i`` on (call :meth:`units_view` first)."""
        return self._out[i:]

    def count(self) -> int:
        """How many finished units there are (call :meth:`units_view` first)."""
        return len(self._out)

    def newest(self, n: int) -> list[Unit]:
        """The newest ``n`` finished units, oldest first (call :meth:`units_view` first)."""
        return self._out[-n:] if n > 0 else []

    def finished(self, i: int) -> Unit | None:
        """The finished unit at raw position ``i`` (``None``: nothing a model may read)."""
        return self._done[i]


class UnitsMemo:
    """Units of event lists that grow at their end, built once per event.

    Call after call of one session reads the same turns plus the newest one or two, so
    a list whose start is the last list seen under its key only adds the new events to
    that list's builder; any other list is built afresh.  Bounded: the oldest key goes.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._memo: OrderedDict[Hashable, tuple[list[str], UnitBuilder]] = OrderedDict()

    def units(self, key: Hashable, events: Sequence[Event]) -> list[Unit]:
        """``split_units(events)[1]``, from what was built for ``key`` when it applies."""
        ids = [e.id for e in events]
        with self._lock:
            seen, b = self._memo.pop(key, None) or ([], UnitBuilder())
            if seen != ids[: len(seen)]:
                seen, b = [], UnitBuilder()
            for ev in events[len(seen) :]:
                b.add(ev)
            self._memo[key] = (ids, b)
            while len(self._memo) > self.size:
                self._memo.popitem(last=False)
            return b.units()


def split_units(events: Sequence[Event]) -> tuple[list[Event], list[Unit]]:
    """(system prompts, conversation units) of a session's events, in order."""
    b = UnitBuilder()
    for ev in events:
        b.add(ev)
    return b.systems, b.units()


def _finished(raw: Unit) -> Unit | None:
    """``raw`` as a model may read it (a copy: the raw unit may still grow)."""
    unit = Unit(raw.kind, list(raw.events), [dict(m) for m in raw.messages], dict(raw.results))
    if unit.messages and "tool_calls" in unit.messages[0]:
        unit.messages[0]["tool_calls"] = list(unit.messages[0]["tool_calls"])
    _drop_unanswered(unit)
    return unit if unit.messages and unit.events else None


def _drop_unanswered(unit: Unit) -> None:
    if unit.kind != "tool_group":
        return
    head = unit.messages[0]
    calls = [c for c in head.get("tool_calls", []) if c["id"] in unit.results]
    if calls:
        head["tool_calls"] = calls
    else:
        head.pop("tool_calls", None)
        unit.kind = "assistant"
        unit.events = [e for e in unit.events if e.type != EventType.TOOL_INVOCATION]
        if not head.get("content"):
            unit.messages = []
    # tool messages in call order, right after the assistant message
    order = {c["id"]: i for i, c in enumerate(head.get("tool_calls", []))}
    tools = sorted((m for m in unit.messages[1:]), key=lambda m: order.get(m["tool_call_id"], 0))
    unit.messages = unit.messages[:1] + tools if unit.messages else []


def read_units(
    store: EventReader, session_id: str, **timeline_kw: Any
) -> tuple[list[Event], list[Unit]]:
    events = store.timeline(session_id, types=CONVERSATION_TYPES, **timeline_kw)
    return split_units(events)


def message_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """Everything a model reads in ``messages``: contents, tool names and arguments."""
    parts: list[str] = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str) and c:
            parts.append(c)
        elif isinstance(c, list):
            parts += [p if isinstance(p, str) else str(p.get("text", "")) for p in c]
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            name = fn.get("name") or call.get("name") or ""
            args = fn.get("arguments") if fn else call.get("args")
            parts.append(f"{name} {args if isinstance(args, str) else json.dumps(args)}")
    return "\n".join(parts)
