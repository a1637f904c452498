"""Layered assembly under an exact token budget.

Four layers, in the order a model reads them:

1. **system** — the session's system prompt(s), pinned: never dropped or cut (a budget
   smaller than this layer is an error, not a silent truncation);
2. **working** — the structured working state (goal, constraints, decisions …);
3. **recalled** — memories and summaries from earlier, each tagged as recalled with its
   session and turn range;
4. **immediate** — the latest turns verbatim, newest first while they fit, a tool
   call always together with its result.

Each layer gets a share of the budget by task phase (``requirement`` / ``execution``
/ ``closing``); what a layer does not use is handed on to the next, and what is left
at the end goes back to the layers that had to leave things out.  The final message
list is counted with the model's tokenizer and is never over budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.context.messages import Unit, message_text
from beeweave_core.context.recall import Recallable
from beeweave_core.context.working_state import PRIORITY, TITLES, Item, WorkingState
from beeweave_core.text import language as L
from beeweave_core.tokens import TokenCounter

LAYERS = ("system", "working", "recalled", "immediate")
RECALL_HEADER = "Recalled by BeeWeave (earlier context, not the current turns; latest wins):"


@dataclass(frozen=True)
class LayerShares:
    """Fractions of the budget left after the system layer (they sum to 1)."""

    working: float
    recalled: float
    immediate: float

    def __post_init__(self) -> None:
        total = self.working + self.recalled + self.immediate
        if min(self.working, self.recalled, self.immediate) < 0 or abs(total - 1.0) > 1e-6:
            raise ValueError(f"layer shares must be >= 0 and sum to 1, got {total}")

    def shrink_immediate(self, factor: float) -> LayerShares:
        """Move part of the immediate share to recall (the thrash guard's adaptation)."""
        imm = self.immediate * factor
        return LayerShares(self.working, self.recalled + self.immediate - imm, imm)


PRESETS: dict[str, LayerShares] = {
    # gathering requirements: what was just said matters most
    "requirement": LayerShares(working=0.25, recalled=0.15, immediate=0.60),
    # doing the work: constraints, decisions and earlier results matter as much
    "execution": LayerShares(working=0.30, recalled=0.30, immediate=0.40),
    # wrapping up: the whole story, less of the last few turns
    "closing": LayerShares(working=0.35, recalled=0.40, immediate=0.25),
}


def infer_phase(units: Sequence[Unit]) -> str:
    """requirement early on, closing when the user wraps up, execution otherwise."""
    users = [u for u in units if u.kind == "user"]
    if users and L.CLOSING.search(users[-1].events[0].content):
        return "closing"
    if len(users) <= 3 and not any(u.kind == "tool_group" for u in units):
        return "requirement"
    return "execution"


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
        return {
            "layer": self.layer, "kind": self.kind, "tokens": self.tokens,
            "event_ids": list(self.event_ids), "session_id": self.session_id,
            "seq_range": list(self.seq_range) if self.seq_range else None,
            "score": round(self.score, 4) if self.score is not None else None,
            "note": self.note, "text": self.text[:200],
        }  # fmt: skip


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
    full_history_tokens: int
    working_state: WorkingState
    overhead_tokens: int = 0
    retrieval_event_id: str | None = None
    compaction: dict[str, Any] | None = None

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


# ---------------------------------------------------------------- text blocks
@dataclass
class _Block:
    """The recalled layer's system message: a header, then lines grouped by source."""

    counter: TokenCounter
    header: str
    groups: dict[str, list[str]] = field(default_factory=dict)

    def content(self) -> str:
        if not self.groups:
            return ""
        out = [self.header]
        for g, lines in self.groups.items():
            out.append(g)
            out += lines
        return "\n".join(out)

    def cost(self) -> int:
        text = self.content()
        return self.counter.count_message({"role": "system", "content": text}) if text else 0

    def add(self, group: str, line: str) -> None:
        self.groups.setdefault(group, []).append(line)

    def message(self) -> dict[str, Any] | None:
        text = self.content()
        return {"role": "system", "content": text} if text else None


#: Within this many tokens of a budget the fill re-counts exactly instead of estimating.
MARGIN = 8


def _greedy(
    exact: Callable[[list[Any]], int],
    line_cost: Callable[[Any, list[Any]], int],
    items: Iterable[Any],
    budget: int,
    chosen: list[Any],
    skipped: list[Any],
) -> int:
    """Add items in order while the exact cost stays within ``budget``.

    Each item's cost is estimated from its own line; only near the budget is the whole
    block re-counted, so filling is linear, and the final exact count has the last word.
    """
    used = exact(chosen)
    for item in items:
        if not chosen:
            cost = exact([item])
            if cost <= budget:
                chosen.append(item)
                used = cost
            else:
                skipped.append(item)
            continue
        add = line_cost(item, chosen)
        if used + add <= budget - MARGIN:
            chosen.append(item)
            used += add
        elif used + add > budget + MARGIN:
            skipped.append(item)
        else:
            cost = exact([*chosen, item])
            if cost <= budget:
                chosen.append(item)
                used = cost
            else:
                skipped.append(item)
    used = exact(chosen)
    while used > budget and chosen:
        skipped.append(chosen.pop())
        used = exact(chosen)
    return used


def _fill(
    block: _Block,
    candidates: Iterable[Recallable],
    budget: int,
    chosen: list[Recallable],
    skipped: list[Recallable],
) -> int:
    """Recalled pieces by score while the grouped block fits (exact at the end)."""
    c = block.counter

    def exact(ch: list[Recallable]) -> int:
        b = _Block(c, block.header)
        for r in ch:
            b.add(r.group, r.line())
        return b.cost()

    def line_cost(r: Recallable, ch: list[Recallable]) -> int:
        new_group = all(x.group != r.group for x in ch)
        return c.count_text(r.line()) + 1 + (c.count_text(r.group) + 1 if new_group else 0)

    used = _greedy(exact, line_cost, candidates, budget, chosen, skipped)
    block.groups = {}
    for r in chosen:
        block.add(r.group, r.line())
    return used


def _unit_cost(counter: TokenCounter, unit: Unit) -> int:
    return sum(counter.count_message(m) for m in unit.messages)


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
    units: list[Unit]  # edited, oldest first (acks already dropped)
    edited_out: list[tuple[Unit, str]]  # what editing dropped, and why
    working: WorkingState
    #: (first seq of the immediate window, items already in the working layer)
    #: -> scored candidates for the recalled layer
    recall: Callable[[int, Sequence[Item]], list[Recallable]]
    query_message: dict[str, Any] | None = None
    single_system: bool = False


def assemble(plan: Plan) -> tuple[list[dict[str, Any]], dict[str, LayerReport], int]:
    """Run the layered fill of ``plan``: (messages, layer reports, overhead tokens)."""
    c = plan.counter
    reports = {name: LayerReport(name, 0) for name in LAYERS}
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
        reports["system"].pieces.append(Piece("system", "system_prompt", sys_text, sys_cost,
                                              tuple(plan.system_ids), plan.session_id, None))  # fmt: skip
    avail = plan.budget - overhead - sys_cost
    b_work = int(avail * plan.shares.working)
    b_rec = int(avail * plan.shares.recalled)
    b_imm = avail - b_work - b_rec

    # a first look at the immediate window, so recall skips what it will show verbatim
    window, _ = _fit_newest(c, plan.units, b_imm)
    window_from = window[0].seq_from if window else 1 << 62

    # working state
    items = _rank_items(plan.working, plan.query)
    w_in: list[Item] = []
    w_out: list[Item] = []
    w_used = _fill_working(c, plan.working, items, b_work, w_in, w_out)
    reports["working"].budget = b_work

    # recalled
    b_rec += b_work - w_used
    reports["recalled"].budget = b_rec
    candidates = plan.recall(window_from, w_in)
    rblock = _Block(c, RECALL_HEADER)
    r_in: list[Recallable] = []
    r_out: list[Recallable] = []
    r_used = _fill(rblock, candidates, b_rec, r_in, r_out)

    # immediate
    b_imm += b_rec - r_used
    reports["immediate"].budget = b_imm
    window, dropped = _fit_newest(c, plan.units, b_imm)
    imm_used = sum(_unit_cost(c, u) for u in window)

    # what is left goes back to the layers that had to leave things out
    spare = avail - (w_used + r_used + imm_used)
    if spare > 0 and w_out:
        retry, w_out = w_out, []
        reports["working"].budget = w_used + spare
        w_used = _fill_working(c, plan.working, retry, w_used + spare, w_in, w_out)
        spare = avail - (w_used + r_used + imm_used)
    if spare > 0 and r_out:
        retry_r, r_out = r_out, []
        reports["recalled"].budget = r_used + spare
        r_used = _fill(rblock, retry_r, r_used + spare, r_in, r_out)

    wmsg = _working_message(plan.working, w_in)
    rmsg = rblock.message()
    messages = _compose(plan, sys_msg, wmsg, rmsg, window)
    total = c.count_messages(messages)
    while total > plan.budget:  # safety net: the exact count has the last word
        if window and (len(window) > 1 or not rmsg):
            dropped.append(window.pop(0))
        elif r_in:
            r_out.append(r_in.pop())
            rblock = _Block(c, RECALL_HEADER)
            for r in r_in:
                rblock.add(r.group, r.line())
            rmsg = rblock.message()
        elif w_in:
            w_out.append(w_in.pop())
            wmsg = _working_message(plan.working, w_in)
        elif window:
            dropped.append(window.pop(0))
        else:
            break
        messages = _compose(plan, sys_msg, wmsg, rmsg, window)
        total = c.count_messages(messages)

    # accounts
    wr, rr, ir = reports["working"], reports["recalled"], reports["immediate"]
    wr.tokens = c.count_message(wmsg) if wmsg else 0
    rr.tokens = c.count_message(rmsg) if rmsg else 0
    ir.tokens = sum(_unit_cost(c, u) for u in window)
    wr.pieces = [_item_piece(c, it, plan.session_id) for it in w_in]
    wr.left_out = [_item_piece(c, it, plan.session_id, note="over budget") for it in w_out]
    rr.pieces = [_recall_piece(c, r) for r in r_in]
    rr.left_out = [_recall_piece(c, r, note="over budget") for r in r_out]
    ir.pieces = [_unit_piece(c, u, plan.session_id) for u in window]
    ir.left_out = [
        _unit_piece(c, u, plan.session_id, note="older than the window") for u in dropped
    ]
    ir.left_out += [_unit_piece(c, u, plan.session_id, note=why) for u, why in plan.edited_out]
    return messages, reports, overhead


def _compose(
    plan: Plan,
    sys_msg: dict[str, Any] | None,
    wmsg: dict[str, Any] | None,
    rmsg: dict[str, Any] | None,
    window: Sequence[Unit],
) -> list[dict[str, Any]]:
    head = [m for m in (sys_msg, wmsg, rmsg) if m]
    if plan.single_system and len(head) > 1:
        head = [{"role": "system", "content": "\n\n".join(m["content"] for m in head)}]
    out = head + [m for u in window for m in u.messages]
    if plan.query_message:
        out.append(plan.query_message)
    return out


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
    """Working items by priority while the rendered state fits (exact at the end)."""

    def exact(ch: list[Item]) -> int:
        msg = _working_message(ws, ch)
        return c.count_message(msg) if msg else 0

    def line_cost(it: Item, ch: list[Item]) -> int:
        new_section = all(x.section != it.section for x in ch)
        return (
            c.count_text(it.render())
            + 1
            + (c.count_text(TITLES.get(it.section, "")) + 2 if new_section else 0)
        )

    return _greedy(exact, line_cost, items, budget, chosen, skipped)


def _rank_items(ws: WorkingState, query: str | None) -> list[Item]:
    """Working items in the order they claim budget: section priority, then relevance."""
    q = set(L.terms(query or ""))

    def key(it: Item) -> tuple[float, float, int]:
        rel = len(q & set(L.terms(it.text))) / (len(q) or 1)
        return (PRIORITY.get(it.section, 1.0), rel, it.seq)

    return sorted(ws.items(), key=key, reverse=True)


def _fit_newest(
    c: TokenCounter, units: Sequence[Unit], budget: int
) -> tuple[list[Unit], list[Unit]]:
    """The newest units that fit, oldest first; the newest user message is cut rather
    than dropped when it alone is too big."""
    window: list[Unit] = []
    used = 0
    for i in range(len(units) - 1, -1, -1):
        u = units[i]
        cost = _unit_cost(c, u)
        if used + cost <= budget:
            window.insert(0, u)
            used += cost
            continue
        if not window and u.kind == "user":
            room = budget - c.count_message({"role": "user", "content": ""}) - 12
            if room > 0:
                text = c.truncate_to_tokens(u.messages[0]["content"], room) + " [cut by BeeWeave]"
                cut = Unit("user", u.events, [{"role": "user", "content": text}])
                if _unit_cost(c, cut) <= budget:
                    window.insert(0, cut)
                    return window, list(units[:i])
        return window, list(units[: i + 1])
    return window, []


def _item_piece(c: TokenCounter, it: Item, sid: str, note: str | None = None) -> Piece:
    line = it.render()
    return Piece(
        "working",
        it.section,
        line,
        c.count_text(line),
        it.event_ids,
        sid,
        (it.seq, it.seq),
        None,
        note,
    )


def _recall_piece(c: TokenCounter, r: Recallable, note: str | None = None) -> Piece:
    line = r.line()
    return Piece("recalled", r.kind, f"{r.group} {line}", c.count_text(line), r.event_ids,
                 r.session_id, r.seq_range, r.score, note or f"via {r.via}")  # fmt: skip


def _unit_piece(c: TokenCounter, u: Unit, sid: str, note: str | None = None) -> Piece:
    return Piece("immediate", u.kind, message_text(u.messages), _unit_cost(c, u), tuple(u.ids), sid,
                 (u.seq_from, u.seq_to), None, note)  # fmt: skip
