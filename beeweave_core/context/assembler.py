"""Layered assembly under an exact token budget: verbatim while it fits, evidence first
when it does not.

Four layers, in the order a model reads them:

1. **system** — the session's system prompt(s), pinned: never dropped or cut (a budget
   smaller than this layer is an error, not a silent truncation);
2. **working** — items of the working state the request touches (settings, decisions,
   conflicts, memories that need confirmation), within a small cap;
3. **recalled** — what the retriever found for this request outside the recent turns:
   the matching turns and tool results (with the neighbours the retriever brought and,
   for a turn a later one replaced, that later turn), memories and summaries, packed by
   rank and shown oldest first, each with its turn number;
4. **immediate** — the newest turns verbatim, a tool call always with its result,
   starting on a user turn.

While the whole history fits the budget it is sent as it is, in order, as a plain buffer
would (nothing is edited, nothing dropped).  When it does not, the newest turns get a
floor (the phase's ``immediate`` share), recall takes what its hits need of the rest by
rank, and what recall leaves goes back to the newest turns: a question about the past
gets the room, one about the last few turns keeps them.  The final message list is
counted with the model's tokenizer and is never over budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from beeweave_core.context.editing import EditPolicy, cut_tool_output, tool_digest
from beeweave_core.context.messages import Unit, message_text
from beeweave_core.context.working_state import PRIORITY, SETTLED, Item, WorkingState
from beeweave_core.events import Event, EventType
from beeweave_core.payloads import clean_text
from beeweave_core.text import language as L
from beeweave_core.tokens import TokenCounter

LAYERS = ("system", "working", "recalled", "immediate")
RECALL_HEADER = (
    "Recalled by BeeWeave for this request (earlier turns and notes, oldest first: a "
    "later line on the same thing holds; not the latest turns):"
)
OTHER_SESSIONS_HEADER = "From this user's other sessions:"
#: Working-state sections shown whatever the query (they ask the model to check).
ALWAYS_SHOWN = frozenset({"conflicts", "needs_confirmation"})


@dataclass(frozen=True)
class LayerShares:
    """How a budget left after the system layer is split (fractions summing to 1):
    ``working`` caps the working layer, ``immediate`` is the newest turns' floor, and
    ``recalled`` is what recall may take at most beyond them (unused: to the newest).

    A request about the past — none of the retriever's best ``past_hits`` candidates
    is among the newest turns the floor shows — keeps ``past_floor`` of that floor, and
    never less than the exchange in progress and the one before it; recall gets the
    rest, and what it leaves goes back to the newest turns.  The defaults (0 and 3)
    are the pick of four of five folds of a leave-one-conversation-out cross-validation
    on LoCoMo (``beeweave bench locomo-floor``; the fifth picks 0 and 1, and every
    ``past_floor`` up to 0.4 scores within 0.001 of it: the floor matters little once
    recall gets the room)."""

    working: float
    recalled: float
    immediate: float
    past_floor: float = 0.0
    past_hits: int = 3

    def __post_init__(self) -> None:
        total = self.working + self.recalled + self.immediate
        if min(self.working, self.recalled, self.immediate) < 0 or abs(total - 1.0) > 1e-6:
            raise ValueError(f"layer shares must be >= 0 and sum to 1, got {total}")
        if not 0.0 <= self.past_floor <= 1.0 or self.past_hits < 1:
            raise ValueError(
                f"past_floor must be in [0, 1] and past_hits >= 1, got "
                f"{self.past_floor!r} and {self.past_hits!r}"
            )

    def shrink_immediate(self, factor: float) -> LayerShares:
        """Move part of the immediate floor to recall (the thrash guard's adaptation)."""
        imm = self.immediate * factor
        return replace(self, recalled=self.recalled + self.immediate - imm, immediate=imm)


#: The newest turns' floor per phase: what was just said matters most while
#: requirements are gathered, least when wrapping up.  Chosen by cross-validation over
#: conversations (``beeweave bench context`` and ``bench locomo``'s assembled figures).
PRESETS: dict[str, LayerShares] = {
    "requirement": LayerShares(working=0.10, recalled=0.55, immediate=0.35),
    "execution": LayerShares(working=0.10, recalled=0.65, immediate=0.25),
    "closing": LayerShares(working=0.10, recalled=0.75, immediate=0.15),
}


def infer_phase(units: Sequence[Unit], from_start: bool = True) -> str:
    """requirement early on, closing when the user wraps up, execution otherwise.

    ``from_start``: ``units`` begin at the session's start.  A read that began later (a
    session longer than the budget) cannot tell the early turns, and counting from where
    its pages happened to begin made the phase follow the page size: it is execution."""
    last = next((u for u in reversed(units) if u.kind == "user"), None)
    if last is not None and L.CLOSING.search(last.events[0].content):
        return "closing"
    if not from_start:
        return "execution"
    users = 0
    for u in units:  # stops at the fourth user turn or the first tool call
        users += u.kind == "user"
        if users > 3 or u.kind == "tool_group":
            return "execution"
    return "requirement"


@dataclass(frozen=True)
class Piece:
    """One thing that went into (or was left out of) the context, and where it came from."""

    layer: str
    kind: str
    text: str
    tokens: int
    event_ids: tuple[str, ...]
    session_id: str | None
    seq_range: tuple[int, int] | None
    score: float | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The piece as an audit record lists it, already in the stored (canonical) form."""
        score = self.score
        return {
            "layer": self.layer,
            "kind": self.kind,
            "tokens": self.tokens,
            "event_ids": list(self.event_ids),
            "session_id": clean_text(self.session_id) if self.session_id else self.session_id,
            "seq_range": list(self.seq_range) if self.seq_range else None,
            "score": round(score, 4) if score is not None and math.isfinite(score) else None,
            "note": clean_text(self.note) if self.note else self.note,
            "text": clean_text(self.text[:200]),
        }


@dataclass
class LayerReport:
    name: str
    budget: int
    tokens: int = 0
    pieces: list[Piece] = field(default_factory=list)
    left_out: list[Piece] = field(default_factory=list)


@dataclass
class AssembledContext:
    """The messages for the next model call, with the accounts behind them."""

    session_id: str
    query: str | None
    messages: list[dict[str, Any]]
    layers: dict[str, LayerReport]
    total_tokens: int
    budget_tokens: int
    model: str | None
    encoding: str
    phase: str
    #: what the whole history costs as a plain buffer sends it; while ``catching_up``
    #: a lower bound (turns maintenance has not counted yet, older than the newest
    #: turns this call read, are not in it: counting them would read the session)
    full_history_tokens: int
    working_state: WorkingState
    overhead_tokens: int = 0
    retrieval_event_id: str | None = None
    compaction: dict[str, Any] | None = None
    #: maintenance has not read the whole session yet: memories, supersession and the
    #: working state cover what it has read; the turns and recall are complete
    catching_up: bool = False
    #: the stored event behind each message (``None``: a synthetic block or the query)
    message_ids: list[str | None] = field(default_factory=list)
    #: what recall searched for: ``query``, else the latest user message (the audit
    #: record keeps it, so an assembly made without a query still shows its question)
    recall_query: str | None = None

    @property
    def provenance(self) -> list[Piece]:
        """Every piece that went in, layer by layer."""
        return [p for name in LAYERS for p in self.layers[name].pieces]

    @property
    def left_out(self) -> list[Piece]:
        return [p for name in LAYERS for p in self.layers[name].left_out]

    @property
    def tokens_by_layer(self) -> dict[str, int]:
        return {name: self.layers[name].tokens for name in LAYERS}

    @property
    def share_of_history(self) -> float | None:
        return self.total_tokens / self.full_history_tokens if self.full_history_tokens else None

    def text(self) -> str:
        """Everything the model will read, as one string."""
        return message_text(self.messages)


# ---------------------------------------------------------------- recall lines
@dataclass(frozen=True)
class Line:
    """One recalled line: a turn, a tool call's digest, a memory or a summary."""

    event_id: str
    session_id: str
    seq: int
    ts: float
    kind: str  # turn | tool | memory | summary | note
    text: str
    note: str = ""
    #: ids whose text this line stands for (a memory's sources, a tool call's pair)
    covers: tuple[str, ...] = ()

    def render(self) -> str:
        return f"#{self.seq} {self.text}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Candidate:
    """A retriever hit as recall can show it: its lines, by the hit's rank."""

    rank: int
    score: float
    lines: tuple[Line, ...]
    via: str = "retriever"

    @property
    def key(self) -> str:
        return self.lines[0].event_id


@dataclass(frozen=True)
class RecallInputs:
    """What the read gathered for the recalled layer (decided by the engine)."""

    session_id: str
    candidates: Sequence[Candidate]
    #: the day the newest turn was said (dates are shown only when lines differ from it)
    today: str | None = None


def day_of(ts: float) -> str:
    """A timestamp's day as people write it: ``8 May 2023`` (UTC)."""
    return _day(int(ts // 86_400))


@lru_cache(maxsize=4096)
def _day(day: int) -> str:
    d = datetime.fromtimestamp(day * 86_400, tz=timezone.utc)
    return f"{d.day} {d.strftime('%B')} {d.year}"


def render_recall(lines: Sequence[Line], session_id: str, today: str | None) -> str:
    """The recalled layer's text: this session's lines oldest first, then other
    sessions' by session; a date line wherever the day changes (when any differs from
    ``today``)."""
    return "\n".join(_recall_rows(lines, session_id, today))


def _recall_rows(lines: Sequence[Line], session_id: str, today: str | None) -> list[str]:
    """The rows :func:`render_recall` joins (each counted once: see :func:`_recall_cost`)."""
    if not lines:
        return []
    own = sorted((ln for ln in lines if ln.session_id == session_id), key=lambda ln: ln.seq)
    others = sorted(
        (ln for ln in lines if ln.session_id != session_id),
        key=lambda ln: (ln.ts, ln.session_id, ln.seq),
    )
    dated = any(day_of(ln.ts) != today for ln in lines if ln.ts)
    out = [RECALL_HEADER]
    out += _dated(own, dated)
    if others:
        out.append(OTHER_SESSIONS_HEADER)
        current = None
        for ln in others:
            if ln.session_id != current:
                current = ln.session_id
                out.append(f"[session {ln.session_id}]")
            out += _dated([ln], dated, _last_day(out))
    return out


def _last_day(out: list[str]) -> str | None:
    for s in reversed(out):
        if s.startswith("— ") and s.endswith(" —"):
            return s[2:-2]
    return None


def _dated(lines: Sequence[Line], dated: bool, day: str | None = None) -> list[str]:
    out: list[str] = []
    for ln in lines:
        if dated and ln.ts:
            d = day_of(ln.ts)
            if d != day:
                out.append(f"— {d} —")
                day = d
        out.append(ln.render())
    return out


def event_line(
    ev: Event,
    related: dict[str, Event],
    policy: EditPolicy,
    resolve: Callable[[str], str | None] | None,
    note: str = "",
) -> Line | None:
    """The line ``ev`` is recalled as (``None``: nothing a model should read)."""
    t = ev.type
    if t in (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE):
        if not (ev.content or "").strip():
            return None
        role = "user" if t == EventType.USER_MESSAGE else "assistant"
        text = cut_tool_output(ev, policy, resolve) or ev.content
        return Line(ev.id, ev.session_id, ev.seq, ev.ts, "turn", f"{role}: {text}", note)
    if t == EventType.TOOL_RESULT:
        inv = next(
            (
                related[p]
                for p in ev.parents
                if p in related and related[p].type == EventType.TOOL_INVOCATION
            ),
            None,
        )
        covers = (inv.id,) if inv is not None else ()
        digest = tool_digest(ev, inv, policy, resolve)
        return Line(ev.id, ev.session_id, ev.seq, ev.ts, "tool", f"tool {digest}", note, covers)
    if t == EventType.MEMORY:
        seq = int(ev.payload.get("source_seq", ev.seq))
        kind = str(ev.payload.get("kind", "fact"))
        sources = tuple(str(s) for s in ev.payload.get("source_ids") or ())
        return Line(
            ev.id,
            ev.session_id,
            seq,
            ev.ts,
            "memory",
            f"(noted {kind}) {ev.content}",
            note,
            sources,
        )
    if t == EventType.SUMMARY and ev.content:
        a = int(ev.payload.get("seq_from", ev.seq))
        b = int(ev.payload.get("seq_to", ev.seq))
        return Line(
            ev.id, ev.session_id, a, ev.ts, "summary", f"(summary of #{a}-#{b}) {ev.content}", note
        )
    if t == EventType.ERROR and ev.content:
        return Line(ev.id, ev.session_id, ev.seq, ev.ts, "turn", f"error: {ev.content}", note)
    return None


# ---------------------------------------------------------------- the plan
@dataclass
class Plan:
    """Inputs of one assembly, decided by the engine."""

    session_id: str
    query: str | None
    budget: int
    counter: TokenCounter
    phase: str
    shares: LayerShares
    systems: list[str]
    system_ids: list[str]
    units: list[Unit]  # the newest turns read, oldest first
    working: WorkingState
    #: candidates for the recalled layer, by rank; called with the ids shown verbatim
    recall: Callable[[set[str]], RecallInputs]
    query_message: dict[str, Any] | None = None
    single_system: bool = False
    #: ``units`` are the whole history and fit: send them as they are
    whole_history: bool = False
    #: big tool outputs in the newest turns are cut to key fields (history over budget)
    policy: EditPolicy = field(default_factory=EditPolicy)
    resolve: Callable[[str], str | None] | None = None


@dataclass
class _Fill:
    """What each layer took and left while one assembly is filled."""

    avail: int
    w_in: list[Item] = field(default_factory=list)
    w_out: list[Item] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    scores: dict[str, tuple[float, int]] = field(default_factory=dict)
    r_out: list[Candidate] = field(default_factory=list)
    window: list[Unit] = field(default_factory=list)
    dropped: list[Unit] = field(default_factory=list)
    w_used: int = 0
    session_id: str = ""
    today: str | None = None


@dataclass(frozen=True)
class Filled:
    """What :func:`assemble` hands back: the messages, the event behind each (``None``
    for the synthetic ones), the layer reports, the fixed overhead in tokens."""

    messages: list[dict[str, Any]]
    message_ids: list[str | None]
    reports: dict[str, LayerReport]
    overhead: int
    tokens: int


def assemble(plan: Plan) -> Filled:
    """Fill the layers of ``plan``."""
    reports = {name: LayerReport(name, 0) for name in LAYERS}
    sys_msg, overhead, avail = _system_layer(plan, reports)
    if plan.whole_history:
        f = _whole_history(plan, reports, avail)
    else:
        f = _fill_layers(plan, reports, avail)
    messages, tokens = _within_budget(plan, sys_msg, f)
    _account(plan, reports, f)
    tail: list[str | None] = [i for u in f.window for i in u.message_ids()]
    if plan.query_message:
        tail.append(None)
    return Filled(messages, [None] * (len(messages) - len(tail)) + tail, reports, overhead, tokens)


def _whole_history(plan: Plan, reports: dict[str, LayerReport], avail: int) -> _Fill:
    """The session's history as it is; beside it, only what its turns do not hold:
    other sessions of the user, and this session's notes whose turns are gone (archived
    by retention) or that never had any (a memory tool's) — recall leaves out whatever
    the window shows."""
    c = plan.counter
    f = _Fill(avail, window=list(plan.units), session_id=plan.session_id)
    used = sum(unit_cost(c, u) for u in f.window)
    reports["immediate"].budget = used
    if avail - used > 0:
        shown = {i for u in f.window for i in u.ids}
        inputs = plan.recall(shown)
        others = [
            k
            for k in inputs.candidates
            if k.lines[0].session_id != plan.session_id or _notes_only(k)
        ]
        if others:
            f.today = inputs.today
            reports["recalled"].budget = avail - used
            _pack(c, f, others, avail - used)
    return f


def _notes_only(k: Candidate) -> bool:
    """A candidate of memories or summaries only (no turn: the window has every turn
    this request may see, so a turn outside it is one it must not)."""
    return all(ln.kind not in ("turn", "tool") for ln in k.lines)


def _system_layer(
    plan: Plan, reports: dict[str, LayerReport]
) -> tuple[dict[str, Any] | None, int, int]:
    """(pinned system message, fixed overhead, tokens left for the other layers)."""
    c = plan.counter
    sys_text = "\n\n".join(dict.fromkeys(t for t in plan.systems if t))
    sys_msg = {"role": "system", "content": sys_text} if sys_text else None
    sys_cost = c.count_message(sys_msg) if sys_msg else 0
    overhead = c.count_messages([]) + (
        c.count_message(plan.query_message) if plan.query_message else 0
    )
    if overhead + sys_cost > plan.budget:
        raise ValueError(
            f"budget_tokens={plan.budget} is smaller than the pinned system layer "
            f"({sys_cost} tokens + {overhead} overhead); raise the budget"
        )
    reports["system"].budget = reports["system"].tokens = sys_cost
    if sys_msg:
        reports["system"].pieces.append(
            Piece(
                "system",
                "system_prompt",
                sys_text,
                sys_cost,
                tuple(plan.system_ids),
                plan.session_id,
                None,
            )
        )
    return sys_msg, overhead, plan.budget - overhead - sys_cost


def _fill_layers(plan: Plan, reports: dict[str, LayerReport], avail: int) -> _Fill:
    """Newest turns up to their floor (less for a question about the past), the working
    items the request touches, recall by rank, then the newest turns with what is left."""
    c = plan.counter
    f = _Fill(avail, session_id=plan.session_id)
    units = _cut_big_outputs(plan)
    items = _rank_items(plan.working, plan.query)
    b_work = int(avail * plan.shares.working)
    f.w_used = _fill_working(c, plan.working, items, b_work, f.w_in, f.w_out)
    reports["working"].budget = b_work
    floor = int(avail * plan.shares.immediate)
    inputs = plan.recall(set())
    f.window, f.dropped = _fit_newest(c, units, floor)
    shown = {i for u in f.window for i in u.ids}
    if _about_the_past(plan, inputs.candidates, shown):
        low = max(int(floor * plan.shares.past_floor), min(floor, _exchange_cost(c, units)))
        f.window, f.dropped = _fit_newest(c, units, low)
        shown = {i for u in f.window for i in u.ids}
    f.today = inputs.today
    room = avail - f.w_used - sum(unit_cost(c, u) for u in f.window)
    reports["recalled"].budget = room
    cands = [_without(k, shown) for k in inputs.candidates if k.key not in shown]
    cands = [k for k in cands if k.lines]
    _pack(c, f, cands, room)
    # the working items read among recalled lines cost less than their block (one
    # whose turn is recalled costs nothing): that room goes to recall first
    freed = f.w_used + _recall_cost(c, f) - _head_cost(plan, f) if _settled(f) else 0
    if freed > 0 and f.r_out:
        f.r_out = []
        _pack(c, f, cands, room + freed)
        reports["recalled"].budget = room + freed
    for _pass in range(2):  # the turns the window grew by may say what recall does
        spare = avail - _head_cost(plan, f) - sum(unit_cost(c, u) for u in f.window)
        _widen(plan, f, units, spare)
        if not _drop_repeats(f, _Said(f.window, f.lines)):
            break
    reports["immediate"].budget = sum(unit_cost(c, u) for u in f.window)
    return f


def _about_the_past(plan: Plan, cands: Sequence[Candidate], shown: set[str]) -> bool:
    """None of the retriever's best ``past_hits`` candidates is among the newest turns
    shown.  The request's own turn does not count (an agent records it before it asks,
    and it is always its own best match)."""
    asked = L.fold(plan.query or "")
    own = {
        u.events[0].id
        for u in plan.units[-3:]
        if u.kind == "user" and asked and L.fold(u.events[0].content) == asked
    }
    best = [k for k in cands if k.key not in own][: plan.shares.past_hits]
    return bool(best) and not any(k.key in shown for k in best)


def _exchange_cost(c: TokenCounter, units: Sequence[Unit]) -> int:
    """Tokens of the exchange in progress and the one before it: the request is read
    against the answer it follows ("is that enough?"), and a conversation shown from
    the turn before the request would open on that answer, not on a user turn."""
    users = (k for k in range(len(units) - 1, -1, -1) if units[k].kind == "user")
    next(users, None)  # the request's own turn; the exchange before it starts at the next
    return sum(unit_cost(c, u) for u in units[next(users, 0) :])


def _without(cand: Candidate, shown: set[str]) -> Candidate:
    """A candidate without the lines the newest turns show already."""
    if not any(ln.event_id in shown for ln in cand.lines):
        return cand
    return replace(cand, lines=tuple(ln for ln in cand.lines if ln.event_id not in shown))


def _cut_big_outputs(plan: Plan) -> list[Unit]:
    """The newest turns with tool outputs over the policy's size cut to key fields."""
    out = []
    for u in plan.units:
        if u.kind != "tool_group":
            out.append(u)
            continue
        by_id = {e.id: e for e in u.events}
        msgs = []
        for m in u.messages:
            if m.get("role") == "tool":
                ev = by_id.get(u.results.get(m.get("tool_call_id", ""), ""))
                cut = cut_tool_output(ev, plan.policy, plan.resolve) if ev is not None else None
                if cut is not None:
                    m = {**m, "content": cut}
            msgs.append(m)
        out.append(Unit(u.kind, u.events, msgs, u.results))
    return out


def _widen(plan: Plan, f: _Fill, units: Sequence[Unit], spare: int) -> None:
    """Give what recall left to the newest turns: the window grows back in time; a turn
    it reaches that recall already shows leaves recall (it is verbatim now)."""
    c = plan.counter
    while spare > 0 and f.dropped:
        prev = f.dropped[-1]
        cost = unit_cost(c, prev)
        freed = _lines_of(c, f, set(prev.ids))
        if cost > spare + freed:
            break
        f.dropped.pop()
        f.window.insert(0, prev)
        if freed:
            f.lines = [ln for ln in f.lines if ln.event_id not in set(prev.ids)]
        spare -= cost - freed
    while f.window and f.window[0].kind != "user":
        f.dropped.append(f.window.pop(0))  # the window starts on a user turn


def _lines_of(c: TokenCounter, f: _Fill, ids: set[str]) -> int:
    return sum(_text_tokens(c, ln.render()) + 1 for ln in f.lines if ln.event_id in ids)


def _pack(c: TokenCounter, f: _Fill, candidates: Sequence[Candidate], budget: int) -> None:
    """Candidates by rank while their new lines fit (exact at the end).  A line that
    says nothing the prompt does not already say later (every sentence of it is in the
    newest turns or in a later recalled line) is left out: a conversation that repeats
    itself would otherwise fill recall with copies and crowd out what was said once.
    Lines a later one made repeats of leave again and their room goes to what is next."""
    seen = _Said(f.window)
    left = _pack_pass(c, f, candidates, budget, seen)
    if _drop_repeats(f, seen) and left:
        f.r_out = [k for k in f.r_out if k not in left]
        _pack_pass(c, f, left, budget, seen)
    while f.lines and _recall_cost(c, f) > budget:
        f.lines.pop()


def _pack_pass(
    c: TokenCounter, f: _Fill, candidates: Sequence[Candidate], budget: int, seen: _Said
) -> list[Candidate]:
    """One pass of :func:`_pack`; returns the candidates that did not fit."""
    have = {ln.event_id for ln in f.lines}
    covered = {i for ln in f.lines for i in ln.covers}
    used = _recall_cost(c, f)
    left: list[Candidate] = []
    for cand in candidates:
        new = [ln for ln in cand.lines if ln.event_id not in have and ln.event_id not in covered]
        new = [ln for ln in new if not (ln.kind == "memory" and have.intersection(ln.covers))]
        new = [ln for ln in new if not seen.repeats(ln)]
        if not new:
            continue
        add = sum(_text_tokens(c, ln.render()) + 1 for ln in new) + (0 if f.lines else 40)
        if used + add > budget:
            f.r_out.append(cand)
            left.append(cand)
            continue
        f.lines += new
        for ln in new:
            f.scores[ln.event_id] = (cand.score, cand.rank)
            have.add(ln.event_id)
            covered.update(ln.covers)
            seen.add(ln)
        used += add
    return left


def _drop_repeats(f: _Fill, seen: _Said) -> bool:
    """Take out the recalled lines a later recalled line repeats; did any go?"""
    keep = [ln for ln in f.lines if not seen.repeats(ln)]
    if len(keep) == len(f.lines):
        return False
    f.lines = keep
    return True


class _Said:
    """The sentences the prompt holds, each with the newest place it is said: the
    newest turns (newer than anything recalled) or a recalled line's seq."""

    def __init__(self, window: Sequence[Unit], lines: Sequence[Line] = ()) -> None:
        self._window = {
            s
            for u in window
            for m in u.messages
            for s in _sentences_of(str(m.get("content") or ""))
        }
        self._newest: dict[tuple[str, str], int] = {}
        for ln in lines:
            self.add(ln)

    def add(self, ln: Line) -> None:
        for s in _sentences_of(_said_text(ln)):
            key = (ln.session_id, s)
            self._newest[key] = max(self._newest.get(key, -1), ln.seq)

    def repeats(self, ln: Line) -> bool:
        """Is every sentence of ``ln`` said again later in the prompt?"""
        said = _sentences_of(_said_text(ln))
        return bool(said) and all(
            s in self._window or self._newest.get((ln.session_id, s), -1) > ln.seq for s in said
        )


def _said_text(ln: Line) -> str:
    """What a line says, without the speaker a turn's line starts with."""
    return ln.text.partition(": ")[2] if ln.kind == "turn" else ln.text


@lru_cache(maxsize=8192)
def _sentences_of(text: str) -> frozenset[str]:
    return frozenset(L.fold(s) for s in L.sentences(text))


def _recall_cost(c: TokenCounter, f: _Fill, settled: Sequence[Item] = ()) -> int:
    """Tokens of the recalled layer's message, summed over its rows, each counted with
    the line break that follows it: packing asks this after every change, and counting
    the whole ~8 KB text anew each time was a fifth of an assembly.  The tokenizers
    split at a line break, so the sum is the exact count or, rarely, a few tokens above
    it (measured on LoCoMo recalls); :func:`_within_budget` counts the final prompt."""
    rows = _recall_rows([*f.lines, *_notes(f, settled)], f.session_id, f.today)
    if not rows:
        return 0
    last = rows.pop()
    frame = c.count_message({"role": "system", "content": ""})
    return frame + sum(_text_tokens(c, r + "\n") for r in rows) + _text_tokens(c, last)


def _recall_message(f: _Fill, settled: Sequence[Item] = ()) -> dict[str, Any] | None:
    """The recalled layer's message, with the working state's ``settled`` items among
    its lines by turn."""
    text = render_recall([*f.lines, *_notes(f, settled)], f.session_id, f.today)
    return {"role": "system", "content": text} if text else None


def _notes(f: _Fill, settled: Sequence[Item]) -> list[Line]:
    """The ``settled`` items as recalled lines, but for those whose turn is recalled (an
    item whose turn is shown is that line already)."""
    said = {ln.seq for ln in f.lines if ln.session_id == f.session_id}
    return [
        Line(it.event_ids[0], f.session_id, it.seq, it.ts, "memory", it.render_note())
        for it in settled
        if it.seq not in said
    ]


_TEXT_TOKENS: dict[tuple[str, str], int] = {}


def _text_tokens(c: TokenCounter, text: str) -> int:
    """Tokens of a line; lines recur from call to call, so they are counted once."""
    key = (c.encoding_name, text)
    n = _TEXT_TOKENS.get(key)
    if n is None:
        if len(_TEXT_TOKENS) > 200_000:
            _TEXT_TOKENS.clear()
        n = _TEXT_TOKENS[key] = c.count_text(text)
    return n


_UNIT_TOKENS: dict[tuple[Any, ...], int] = {}


def unit_cost(counter: TokenCounter, unit: Unit) -> int:
    """Tokens of a unit's messages, kept on the unit and by its events (the same stored
    turns are read again by call after call; a cut unit is counted on its own)."""
    key = counter.encoding_name
    n = unit.memo.get(key)
    if n is None:
        sig = (key, *unit.ids, *(len(str(m.get("content") or "")) for m in unit.messages))
        n = _UNIT_TOKENS.get(sig)
        if n is None:
            if len(_UNIT_TOKENS) > 200_000:
                _UNIT_TOKENS.clear()
            n = _UNIT_TOKENS[sig] = sum(counter.count_message(m) for m in unit.messages)
        unit.memo[key] = n
    return n


def _within_budget(
    plan: Plan, sys_msg: dict[str, Any] | None, f: _Fill
) -> tuple[list[dict[str, Any]], int]:
    """Compose, then drop until the exact count fits (the count has the last word):
    (messages, their tokens)."""
    messages = _compose(plan, sys_msg, f)
    while (tokens := _count(plan, messages, f)) > plan.budget:
        if f.lines:
            f.lines.pop()
        elif f.w_in:
            f.w_out.append(f.w_in.pop())
        elif len(f.window) > 1:
            f.dropped.append(f.window.pop(0))
            while f.window and f.window[0].kind != "user" and len(f.window) > 1:
                f.dropped.append(f.window.pop(0))
        elif f.window:
            f.dropped.append(f.window.pop(0))
        else:
            break
        messages = _compose(plan, sys_msg, f)
    return messages, tokens


def _count(plan: Plan, messages: Sequence[Mapping[str, Any]], f: _Fill) -> int:
    """``count_messages(messages)``: the window's units by their kept costs, the rest
    (head blocks, the query) counted."""
    c = plan.counter
    n_window = sum(len(u.messages) for u in f.window)
    head, rest = len(messages) - n_window - (1 if plan.query_message else 0), messages
    others = [*rest[:head], *rest[head + n_window :]]
    return c.count_messages(others) + sum(unit_cost(c, u) for u in f.window)


def _head(plan: Plan, f: _Fill) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The working and recalled messages.  Beside recalled turns, what the user settled
    is read in the order it was said (one list, the later line on a setting last), not
    in a block of its own: a value a later turn changed is followed by the change,
    whichever of the two is a memory and which a recalled turn."""
    settled = _settled(f)
    return _unsettled_message(plan, f, settled), _recall_message(f, settled)


def _settled(f: _Fill) -> list[Item]:
    """The working items read among the recalled lines (none when recall shows none)."""
    return [it for it in f.w_in if it.section in SETTLED] if f.lines else []


def _head_cost(plan: Plan, f: _Fill) -> int:
    """Tokens of the working and recalled messages (the recalled one by its rows, as
    packing counts it)."""
    settled = _settled(f)
    wmsg = _unsettled_message(plan, f, settled)
    c = plan.counter
    return (c.count_message(wmsg) if wmsg else 0) + _recall_cost(c, f, settled)


def _unsettled_message(plan: Plan, f: _Fill, settled: Sequence[Item]) -> dict[str, Any] | None:
    """The working message without the items read among the recalled lines."""
    return _working_message(plan.working, [it for it in f.w_in if it not in settled])


def _compose(plan: Plan, sys_msg: dict[str, Any] | None, f: _Fill) -> list[dict[str, Any]]:
    wmsg, rmsg = _head(plan, f)
    head = [m for m in (sys_msg, wmsg, rmsg) if m]
    if plan.single_system and len(head) > 1:
        head = [{"role": "system", "content": "\n\n".join(m["content"] for m in head)}]
    out = head + [m for u in f.window for m in u.messages]
    if plan.query_message:
        out.append(plan.query_message)
    return out


def _account(plan: Plan, reports: dict[str, LayerReport], f: _Fill) -> None:
    c, sid = plan.counter, plan.session_id
    wr, rr, ir = reports["working"], reports["recalled"], reports["immediate"]
    wmsg, rmsg = _head(plan, f)
    wr.tokens = c.count_message(wmsg) if wmsg else 0
    rr.tokens = c.count_message(rmsg) if rmsg else 0
    ir.tokens = sum(unit_cost(c, u) for u in f.window)
    wr.pieces = [_item_piece(c, it, sid) for it in f.w_in]
    wr.left_out = [_item_piece(c, it, sid, note="over budget") for it in f.w_out]
    rr.pieces = [_line_piece(c, ln, f.scores.get(ln.event_id)) for ln in f.lines]
    rr.left_out = [
        _line_piece(c, k.lines[0], (k.score, k.rank), "over budget")
        for k in f.r_out[:LEFT_OUT_SHOWN]
    ]
    ir.pieces = [_unit_piece(c, u, sid) for u in f.window]
    ir.left_out = _older_turns(c, f.dropped[-LEFT_OUT_SHOWN:], sid)


#: Recalled candidates listed as left out in the audit (the best-ranked first).
LEFT_OUT_SHOWN = 100


def _working_message(ws: WorkingState, chosen: Sequence[Item]) -> dict[str, Any] | None:
    text = ws.render(chosen)
    return {"role": "system", "content": text} if text else None


def _fill_working(
    c: TokenCounter,
    ws: WorkingState,
    items: Sequence[Item],
    budget: int,
    chosen: list[Item],
    skipped: list[Item],
) -> int:
    """Working items in order while the rendered state fits (exact)."""
    used = 0
    for it in items:
        msg = _working_message(ws, [*chosen, it])
        cost = c.count_message(msg) if msg else 0
        if cost <= budget:
            chosen.append(it)
            used = cost
        else:
            skipped.append(it)
    return used


def _rank_items(ws: WorkingState, query: str | None) -> list[Item]:
    """Working items in the order they claim the layer's cap: those that ask the model
    to check (conflicts, dormant memories) first, then by how much of the request they
    share, then the newest (the latest word on a setting is the one that holds)."""
    q = set(L.terms(query or ""))

    def key(it: Item) -> tuple[bool, float, int, float]:
        rel = len(q & set(L.terms(it.text))) / (len(q) or 1)
        return (it.section in ALWAYS_SHOWN, rel, it.seq, PRIORITY.get(it.section, 1.0))

    # what tools returned is evidence: recall brings it when the request asks for it
    # (pinning done steps here cost the hand-written set 0.96 -> 0.93 retention)
    return sorted((it for it in ws.items() if it.section != "done"), key=key, reverse=True)


def _fit_newest(
    c: TokenCounter, units: Sequence[Unit], budget: int
) -> tuple[list[Unit], list[Unit]]:
    """The newest units that fit, oldest first, starting on a user turn (providers
    reject a conversation that opens with an assistant or tool message): when the
    newest that fit begin mid-exchange, the user turn that opened the exchange leads
    and the newest units after it fill the rest."""
    window, dropped = _newest_that_fit(c, units, budget)
    if not window or window[0].kind == "user":
        return window, dropped
    start = len(units) - len(window)
    j = next((k for k in range(start - 1, -1, -1) if units[k].kind == "user"), None)
    inside = any(u.kind == "user" for u in window)
    head = _cut_user(c, units[j], budget) if j is not None and not inside else None
    if head is None:  # start at the first user turn inside the window
        while window and window[0].kind != "user":
            dropped.append(window.pop(0))
        return window, dropped
    rest, _ = _newest_that_fit(c, units[j + 1 :], budget - unit_cost(c, head))
    kept = {id(u) for u in rest}
    dropped = [u for u in units if id(u) not in kept and u is not units[j]]
    return [head, *rest], dropped


def _cut_user(c: TokenCounter, unit: Unit, budget: int) -> Unit | None:
    """``unit`` whole if it fits ``budget``, else its text cut to fit (or ``None``)."""
    if unit_cost(c, unit) <= budget:
        return unit
    room = budget - c.count_message({"role": "user", "content": ""}) - 12
    if room <= 0:
        return None
    text = c.truncate_to_tokens(unit.messages[0]["content"], room) + " [cut by BeeWeave]"
    cut = Unit("user", unit.events, [{"role": "user", "content": text}])
    return cut if unit_cost(c, cut) <= budget else None


def _newest_that_fit(
    c: TokenCounter, units: Sequence[Unit], budget: int
) -> tuple[list[Unit], list[Unit]]:
    """The newest units that fit, oldest first; the newest user message is cut rather
    than dropped when it alone is too big."""
    window: list[Unit] = []
    used = 0
    for i in range(len(units) - 1, -1, -1):
        u = units[i]
        cost = unit_cost(c, u)
        if used + cost <= budget:
            window.insert(0, u)
            used += cost
            continue
        if not window and u.kind == "user":
            cut = _cut_user(c, u, budget)
            if cut is not None:
                return [cut], list(units[:i])
        return window, list(units[: i + 1])
    return window, []


def _item_piece(c: TokenCounter, it: Item, sid: str, note: str | None = None) -> Piece:
    line = it.render()
    return Piece(
        "working",
        it.section,
        line,
        _text_tokens(c, line),
        it.event_ids,
        sid,
        (it.seq, it.seq),
        None,
        note,
    )


def _line_piece(
    c: TokenCounter, ln: Line, score: tuple[float, int] | None, note: str | None = None
) -> Piece:
    text = ln.render()
    kind = {"turn": "original", "tool": "tool_result"}.get(ln.kind, ln.kind)
    return Piece(
        "recalled",
        kind,
        text,
        _text_tokens(c, text),
        (ln.event_id, *ln.covers),
        ln.session_id,
        (ln.seq, ln.seq),
        score[0] if score else None,
        note or (f"via retriever, rank {score[1]}" if score else None),
    )


def _unit_piece(c: TokenCounter, u: Unit, sid: str) -> Piece:
    # every message's words (a tool group: what the assistant said, then what came back)
    text = " ".join(str(m["content"]) for m in u.messages if m.get("content"))[:200]
    return Piece(
        "immediate",
        u.kind,
        text,
        unit_cost(c, u),
        tuple(u.ids),
        sid,
        (u.seq_from, u.seq_to),
    )


def _older_turns(c: TokenCounter, units: Sequence[Unit], sid: str) -> list[Piece]:
    """The turns before the window, as one piece: each is the rest of the history, not
    a choice to explain (listed one by one, with their words, they made most of every
    audit record, written on each call)."""
    if not units:
        return []
    return [
        Piece(
            "immediate",
            "earlier turns",
            f"{len(units)} turns before the window",
            sum(unit_cost(c, u) for u in units),
            tuple(i for u in units for i in u.ids),
            sid,
            (units[0].seq_from, units[-1].seq_to),
            None,
            "older than the window",
        )
    ]


def lines_for(
    hits: Iterable[tuple[Sequence[Event], float]],
    related: dict[str, Event],
    superseded: dict[str, tuple[str, ...]],
    policy: EditPolicy,
    resolve: Callable[[str], str | None] | None,
) -> list[Candidate]:
    """Each hit (the events it shows: a turn, or a memory's source turns) as a
    candidate: their lines and, for a turn a later one replaced, the later turn after it
    (what it said changed: both are shown, the newer last)."""
    out: list[Candidate] = []
    for rank, (events, score) in enumerate(hits, 1):
        lines: list[Line] = []
        for ev in events:
            newer = [related[i] for i in superseded.get(ev.id, ()) if i in related]
            note = "later on this: " + ", ".join(f"#{n.seq}" for n in newer) if newer else ""
            first = event_line(ev, related, policy, resolve, note)
            if first is None:
                continue
            lines.append(first)
            lines += [ln for n in newer if (ln := event_line(n, related, policy, resolve))]
        if lines:
            out.append(Candidate(rank, score, tuple(lines)))
    return out
