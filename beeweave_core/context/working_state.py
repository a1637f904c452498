"""The working state: where the task stands, as structure rather than transcript.

Goal, constraints, decisions with their reasons, what was done (with the parameters
that matter), todos, open questions and conflicts.  It is built on every assembly from
the active memories and a scan of the user's turns (kept current by the session view,
one new unit at a time), so it reflects the latest invalidations and never drifts from
what the events say.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from beeweave_core.context.messages import Unit
from beeweave_core.events import Event, EventType
from beeweave_core.memory.kinds import conflicts, expired
from beeweave_core.text import language as L

SECTIONS = (
    "goal",
    "constraints",
    "preferences",
    "decisions",
    "done",
    "todos",
    "open_questions",
    "conflicts",
    "needs_confirmation",
)
TITLES = {
    "goal": "Goal",
    "constraints": "Constraints",
    "preferences": "Preferences",
    "decisions": "Decisions",
    "done": "Done",
    "todos": "Todos",
    "open_questions": "Open questions",
    "conflicts": "Conflicts (ask the user which holds)",
    "needs_confirmation": "Needs confirmation (dormant: not affirmed for a long time)",
}
#: Sections shown as one list in the order said (what the user settled: a later line
#: on the same thing is the one that holds), and the kind each line is tagged with.
SETTLED = frozenset({"constraints", "preferences", "decisions", "done"})
_KIND_OF_SECTION = {
    "constraints": "constraint",
    "preferences": "preference",
    "decisions": "decision",
    "done": "done",
}
#: Which items survive first when the layer's budget is short (higher first).
PRIORITY = {
    "conflicts": 6.0,
    "needs_confirmation": 5.5,
    "decisions": 5.0,
    "constraints": 5.0,
    "goal": 4.5,
    "preferences": 4.0,
    "open_questions": 3.5,
    "done": 3.0,
    "todos": 2.5,
}


@dataclass(frozen=True)
class Item:
    """One line of the working state and the events it stands for."""

    section: str
    text: str
    event_ids: tuple[str, ...]
    seq: int
    reason: str | None = None
    #: when it was said (0: not known); recall dates the item's line by it
    ts: float = 0.0

    def render(self, tag: str = "") -> str:
        ref = f" [#{self.seq}]" if self.seq >= 0 else ""
        why = f" (reason: {self.reason})" if self.reason and self.reason not in self.text else ""
        kind = f"({tag}) " if tag else ""
        return f"- {kind}{self.text}{why}{ref}"

    def render_note(self) -> str:
        """The item as a recalled line's text (the line carries its turn number)."""
        why = f" (reason: {self.reason})" if self.reason and self.reason not in self.text else ""
        return f"({_KIND_OF_SECTION.get(self.section, self.section)}) {self.text}{why}"


@dataclass
class WorkingState:
    """Structured task state of one session (see module docstring)."""

    session_id: str
    goal: Item | None = None
    constraints: list[Item] = field(default_factory=list)
    preferences: list[Item] = field(default_factory=list)
    decisions: list[Item] = field(default_factory=list)
    done: list[Item] = field(default_factory=list)
    todos: list[Item] = field(default_factory=list)
    open_questions: list[Item] = field(default_factory=list)
    conflicts: list[Item] = field(default_factory=list)
    needs_confirmation: list[Item] = field(default_factory=list)

    def items(self) -> list[Item]:
        out: list[Item] = [self.goal] if self.goal else []
        for name in SECTIONS[1:]:
            out += getattr(self, name)
        return out

    @property
    def memory_ids(self) -> set[str]:
        return {i for item in self.items() for i in item.event_ids}

    def render(self, items: Iterable[Item] | None = None) -> str:
        """The text a model reads; ``items`` restricts it to a chosen subset."""
        chosen = list(items) if items is not None else self.items()
        if not chosen:
            return ""
        lines = ["Working state (kept by BeeWeave from this session; latest wins):"]
        goal = [i for i in chosen if i.section == "goal"]
        if goal:
            lines.append(f"Goal: {goal[0].text}")
        settled = sorted((i for i in chosen if i.section in SETTLED), key=lambda i: i.seq)
        if settled:  # one list in the order said: a later line on the same thing wins
            lines.append("Settled so far (oldest first):")
            lines += [i.render(tag=_KIND_OF_SECTION[i.section]) for i in settled]
        for name in SECTIONS:
            sec = [i for i in chosen if i.section == name]
            if not sec or name == "goal" or name in SETTLED:
                continue
            lines.append(f"{TITLES[name]}:")
            lines += [i.render() for i in sorted(sec, key=lambda i: i.seq)]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {
            name: (
                [i.text for i in getattr(self, name)]
                if name != "goal"
                else (self.goal.text if self.goal else None)
            )
            for name in SECTIONS
        }


def put_to_sleep(ws: WorkingState, asleep: Collection[str], asked: Sequence[Item]) -> WorkingState:
    """``ws`` without the items of dormant memories, with ``asked`` (dormant memories the
    query matched) under "needs confirmation"."""
    out = replace(ws, needs_confirmation=list(asked))
    for name in ("constraints", "preferences", "decisions", "done", "conflicts"):
        setattr(out, name, [i for i in getattr(ws, name) if asleep.isdisjoint(i.event_ids)])
    return out


_SECTION_OF_KIND = {
    "constraint": "constraints",
    "preference": "preferences",
    "decision": "decisions",
    "artifact": "done",
}


def build_working_state(
    session_id: str,
    memories: Sequence[Event],
    units: Sequence[Unit],
    *,
    now: float | None = None,
    max_todos: int = 6,
    max_conflicts: int = 5,
    scan: TurnScan | None = None,
    per_section: int | None = None,
    overturned: Mapping[str, Sequence[str]] | None = None,
) -> WorkingState:
    """Fold a session's active memories and turns into a :class:`WorkingState`.

    ``scan`` is the turn scan already folded over ``units`` (a session view keeps one
    current, so the turns are not read again); ``per_section`` keeps the newest items
    of each section only, which bounds the cost of a call in a long session (what is
    left out is still recalled by relevance); ``overturned`` (event id -> wording a
    later statement overturned) defaults to what ``memories`` say.
    """
    ws = WorkingState(session_id)
    live = [m for m in memories if not expired(m, now)]
    for item in _settled_items(live):
        getattr(ws, item.section).append(item)
    if per_section is not None:
        for name in ("constraints", "preferences", "decisions", "done"):
            setattr(ws, name, getattr(ws, name)[-per_section:])
    for old, new in conflicts(live)[-max_conflicts:]:
        a, b = int(old.payload.get("source_seq", -1)), int(new.payload.get("source_seq", -1))
        text = f'"{old.content}" (#{a}) vs "{new.content}" (#{b})'
        ws.conflicts.append(Item("conflicts", text, (old.id, new.id), b))
    if scan is None:
        scan = TurnScan()
        for u in units:
            scan.add(u)
    gone = overturned if overturned is not None else _overturned(memories)
    ws.goal = scan.goal(gone)
    ws.todos = scan.latest_todos(max_todos, gone)
    ws.open_questions = _open_questions(units)
    return ws


def _settled_items(live: Sequence[Event]) -> list[Item]:
    """One item per memory of a settled kind, showing the user's short turn whole when
    the memory was one sentence of it (two memories of one turn share its item)."""
    items: dict[tuple[str, int], Item] = {}
    for m in live:
        kind = m.payload.get("kind", "fact")
        section = _SECTION_OF_KIND.get(kind)
        if section is None:
            continue  # plain facts are recalled by relevance, not pinned here
        seq = int(m.payload.get("source_seq", m.seq))
        text = m.payload.get("said") or m.content
        twin = items.get((text, seq))
        if twin is not None:
            items[(text, seq)] = replace(twin, event_ids=(*twin.event_ids, m.id))
            continue
        reason = m.payload.get("reason") if kind == "decision" else None
        items[(text, seq)] = Item(section, text, (m.id,), seq, reason, m.ts)
    return list(items.values())


def _overturned(memories: Sequence[Event]) -> dict[str, list[str]]:
    """event id -> wording a later statement overturned (never shown as state)."""
    out: dict[str, list[str]] = {}
    for m in memories:
        for item in m.payload.get("overturned") or ():
            for src in item.get("sources") or ():
                out.setdefault(src, []).append(item.get("text") or "")
    return out


def _replaced(item: Item, gone: Mapping[str, Sequence[str]]) -> bool:
    """A goal or todo the user has since replaced (only the wordings of the item's own
    events are folded: the map covers the whole session)."""
    f = L.fold(item.text)
    words = (L.fold(t) for i in item.event_ids for t in gone.get(i, ()))
    return any(w and (w in f or f in w) for w in words)


class TurnScan:
    """Goal and todo sentences of the user's turns, folded one unit at a time (what
    was overturned since is left out when the state is built)."""

    #: Goal candidates kept (the first one not overturned is the goal).
    MAX_GOALS = 8

    def __init__(self) -> None:
        self.goals: list[Item] = []
        self.todos: list[Item] = []

    def add(self, unit: Unit) -> None:
        if unit.kind != "user":
            return
        for ev in unit.events:
            if ev.type != EventType.USER_MESSAGE:
                continue
            for s in L.sentences(ev.content):
                if L.is_question(s) or L.is_ack(s):
                    continue
                if len(self.goals) < self.MAX_GOALS and L.GOAL.search(s):
                    self.goals.append(Item("goal", s, (ev.id,), ev.seq))
                if L.TODO.search(s):
                    self.todos.append(Item("todos", s, (ev.id,), ev.seq))

    def goal(self, gone: Mapping[str, Sequence[str]]) -> Item | None:
        return next((g for g in self.goals if not _replaced(g, gone)), None)

    def latest_todos(self, n: int, gone: Mapping[str, Sequence[str]]) -> list[Item]:
        """The newest ``n`` distinct todos still in force, oldest first."""
        seen: set[str] = set()
        uniq = []
        for t in reversed(self.todos):
            if L.fold(t.text) not in seen and not _replaced(t, gone):
                seen.add(L.fold(t.text))
                uniq.append(t)
            if len(uniq) >= n:
                break
        return sorted(uniq, key=lambda i: i.seq)


def _open_questions(units: Sequence[Unit]) -> list[Item]:
    """Questions the assistant asked that the user has not answered yet.

    The user's own latest question is not listed: it is the turn being answered and is
    already in the immediate layer.
    """
    last_user = next((u for u in reversed(units) if u.kind == "user"), None)
    last_asst = next((u for u in reversed(units) if u.kind != "user"), None)
    if last_asst is None or (last_user is not None and last_user.seq_from > last_asst.seq_from):
        return []
    ev = last_asst.events[0]
    if ev.type != EventType.ASSISTANT_MESSAGE:
        return []
    return [
        Item("open_questions", s, (ev.id,), ev.seq)
        for s in L.sentences(ev.content)
        if L.is_question(s)
    ]
