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
#: Working-state sections made from turns (not memories): shown verbatim, they go.
TURN_SECTIONS = frozenset({"goal", "todos", "open_questions"})
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
    last = next((u for u in reversed(units) if u.kind == "user"), None)
    if last is not None and L.CLOSING.search(last.events[0].content):
        return "closing"
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
    #: answered from the session's newest turns while its full view is built in the
    #: background (no memories, summaries or recall of older turns yet; see
    #: context/tail.py); ``full_history_tokens`` then counts the turns read
    catching_up: bool = False

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
#: Exact re-counts one fill may make near its budget (each counts the whole block).
MAX_RECOUNTS = 6
#: Recalled candidates listed as left out in the audit (the best-scored first).
LEFT_OUT_SHOWN = 100


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
    recounts = 0
    for item in items:
        if recounts >= MAX_RECOUNTS:  # the block is full to within a line: stop trying
            skipped.append(item)
            continue
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
            recounts += 1
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


class _Seen:
    """Whether a key occurs among the chosen items, kept as the list grows: the greedy
    fill only appends while it asks, so asking is not a scan of all chosen so far."""

    def __init__(self, key: Callable[[Any], str]) -> None:
        self.key = key
        self.keys: set[str] = set()
        self.n = 0
        self.last: object = None

    def __call__(self, chosen: list[Any], k: str) -> bool:
        n = self.n
        if len(chosen) < n or (n and chosen[n - 1] is not self.last):
            self.keys, n = set(), 0  # not grown from what was seen: start again
        for x in chosen[n:]:
            self.keys.add(self.key(x))
        self.n = len(chosen)
        self.last = chosen[-1] if chosen else None
        return k in self.keys


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

    has = _Seen(lambda r: r.group)

    def line_cost(r: Recallable, ch: list[Recallable]) -> int:
        new_group = not has(ch, r.group)
        return _text_tokens(c, r.line()) + 1 + (_text_tokens(c, r.group) + 1 if new_group else 0)

    used = _greedy(exact, line_cost, candidates, budget, chosen, skipped)
    block.groups = {}
    for r in chosen:
        block.add(r.group, r.line())
    return used


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


def _unit_cost(counter: TokenCounter, unit: Unit) -> int:
    """Tokens of a unit's messages, kept on the unit (the same stored turns, edited
    once by the edit cache, recur every call and several times within one)."""
    key = counter.encoding_name
    n = unit.memo.get(key)
    if n is None:
        n = unit.memo[key] = sum(counter.count_message(m) for m in unit.messages)
    return n


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
    #: the edited units are the whole history and fit: send them as they are
    whole_history: bool = False


@dataclass
class _Fill:
    """What each layer took and left while one assembly is filled."""

    avail: int
    w_in: list[Item] = field(default_factory=list)
    w_out: list[Item] = field(default_factory=list)
    r_in: list[Recallable] = field(default_factory=list)
    r_out: list[Recallable] = field(default_factory=list)
    window: list[Unit] = field(default_factory=list)
    dropped: list[Unit] = field(default_factory=list)
    w_used: int = 0
    r_used: int = 0


def assemble(plan: Plan) -> tuple[list[dict[str, Any]], dict[str, LayerReport], int]:
    """Run the layered fill of ``plan``: (messages, layer reports, overhead tokens).

    When the whole (edited) history fits, it is sent as it is, after the system
    prompt: a plain buffer would send no less, and layers would only add tokens."""
    c = plan.counter
    reports = {name: LayerReport(name, 0) for name in LAYERS}
    sys_msg, overhead, avail = _system_layer(plan, reports)
    if plan.whole_history and (not plan.units or plan.units[0].kind == "user"):
        f = _whole_history(plan, reports, avail)
    else:
        f = _fill_layers(plan, reports, avail)
        _share_spare(plan, reports, f)
        _drop_repeats(f)
    wmsg = _working_message(plan.working, f.w_in)
    rmsg = _recall_message(c, f.r_in)
    messages = _within_budget(plan, sys_msg, f, wmsg, rmsg)
    _account(plan, reports, f)
    return messages, reports, overhead


def _whole_history(plan: Plan, reports: dict[str, LayerReport], avail: int) -> _Fill:
    """The session's history as it is; only what other sessions of the user hold is
    recalled beside it (this session's own memories would repeat its turns)."""
    c = plan.counter
    f = _Fill(avail, window=list(plan.units))
    used = sum(_unit_cost(c, u) for u in f.window)
    window_from = f.window[0].seq_from if f.window else 1 << 62
    others = [r for r in plan.recall(window_from, []) if r.session_id != plan.session_id]
    if others:
        reports["recalled"].budget = avail - used
        f.r_used = _fill(_Block(c, RECALL_HEADER), others, avail - used, f.r_in, f.r_out)
    reports["immediate"].budget = used
    return f


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
        reports["system"].pieces.append(Piece("system", "system_prompt", sys_text, sys_cost,
                                              tuple(plan.system_ids), plan.session_id, None))  # fmt: skip
    return sys_msg, overhead, plan.budget - overhead - sys_cost


def _fill_layers(plan: Plan, reports: dict[str, LayerReport], avail: int) -> _Fill:
    """Working, then recalled, then immediate; each hands what it left to the next."""
    c = plan.counter
    f = _Fill(avail)
    b_work = int(avail * plan.shares.working)
    b_rec = int(avail * plan.shares.recalled)
    b_imm = avail - b_work - b_rec
    # a first look at the immediate window, so recall skips what it will show verbatim
    window, _ = _fit_newest(c, plan.units, b_imm)
    window_from = window[0].seq_from if window else 1 << 62
    items = _rank_items(plan.working, plan.query)
    f.w_used = _fill_working(c, plan.working, items, b_work, f.w_in, f.w_out)
    reports["working"].budget = b_work
    b_rec += b_work - f.w_used
    reports["recalled"].budget = b_rec
    candidates = plan.recall(window_from, f.w_in)[: max(64, (b_rec + b_imm) // 4)]
    f.r_used = _fill(_Block(c, RECALL_HEADER), candidates, b_rec, f.r_in, f.r_out)
    b_imm += b_rec - f.r_used
    reports["immediate"].budget = b_imm
    f.window, f.dropped = _fit_newest(c, plan.units, b_imm)
    return f


def _share_spare(plan: Plan, reports: dict[str, LayerReport], f: _Fill) -> None:
    """What is left goes back to the layers that had to leave things out."""
    c = plan.counter
    imm_used = sum(_unit_cost(c, u) for u in f.window)
    spare = f.avail - (f.w_used + f.r_used + imm_used)
    if spare > 0 and f.w_out:
        retry, f.w_out = f.w_out, []
        reports["working"].budget = f.w_used + spare
        f.w_used = _fill_working(c, plan.working, retry, f.w_used + spare, f.w_in, f.w_out)
        spare = f.avail - (f.w_used + f.r_used + imm_used)
    if spare > 0 and f.r_out:
        retry_r, f.r_out = f.r_out, []
        reports["recalled"].budget = f.r_used + spare
        f.r_used = _fill(_Block(c, RECALL_HEADER), retry_r, f.r_used + spare, f.r_in, f.r_out)


def _drop_repeats(f: _Fill) -> None:
    """Nothing twice: recalled pieces and turn-derived working items whose turns the
    final immediate window shows verbatim are taken out (the window may have grown
    past the first look that recall was told about)."""
    shown = {i for u in f.window for i in u.ids}
    if not shown:
        return
    for r in [r for r in f.r_in if shown.intersection(r.event_ids)]:
        f.r_in.remove(r)
        f.r_out.append(r)
    for it in [
        it for it in f.w_in if it.section in TURN_SECTIONS and shown.issuperset(it.event_ids)
    ]:
        f.w_in.remove(it)
        f.w_out.append(it)


def _recall_message(c: TokenCounter, chosen: Sequence[Recallable]) -> dict[str, Any] | None:
    block = _Block(c, RECALL_HEADER)
    for r in chosen:
        block.add(r.group, r.line())
    return block.message()


def _within_budget(
    plan: Plan,
    sys_msg: dict[str, Any] | None,
    f: _Fill,
    wmsg: dict[str, Any] | None,
    rmsg: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Compose, then drop until the exact count fits (the count has the last word)."""
    c = plan.counter
    messages = _compose(plan, sys_msg, wmsg, rmsg, f.window)
    while c.count_messages(messages) > plan.budget:
        if f.window and (len(f.window) > 1 or not rmsg):
            f.dropped.append(f.window.pop(0))
            while f.window and f.window[0].kind != "user" and len(f.window) > 1:
                f.dropped.append(f.window.pop(0))  # the window starts on a user turn
        elif f.r_in:
            f.r_out.append(f.r_in.pop())
            rmsg = _recall_message(c, f.r_in)
        elif f.w_in:
            f.w_out.append(f.w_in.pop())
            wmsg = _working_message(plan.working, f.w_in)
        elif f.window:
            f.dropped.append(f.window.pop(0))
        else:
            break
        messages = _compose(plan, sys_msg, wmsg, rmsg, f.window)
    return messages


def _account(plan: Plan, reports: dict[str, LayerReport], f: _Fill) -> None:
    c, sid = plan.counter, plan.session_id
    wr, rr, ir = reports["working"], reports["recalled"], reports["immediate"]
    wmsg = _working_message(plan.working, f.w_in)
    rmsg = _recall_message(c, f.r_in)
    wr.tokens = c.count_message(wmsg) if wmsg else 0
    rr.tokens = c.count_message(rmsg) if rmsg else 0
    ir.tokens = sum(_unit_cost(c, u) for u in f.window)
    wr.pieces = [_item_piece(c, it, sid) for it in f.w_in]
    wr.left_out = [_item_piece(c, it, sid, note="over budget") for it in f.w_out]
    rr.pieces = [_recall_piece(c, r) for r in f.r_in]
    rr.left_out = [_recall_piece(c, r, note="over budget") for r in f.r_out[:LEFT_OUT_SHOWN]]
    ir.pieces = [_unit_piece(c, u, sid) for u in f.window]
    ir.left_out = [_unit_piece(c, u, sid, note="older than the window") for u in f.dropped]
    ir.left_out += [_unit_piece(c, u, sid, note=why) for u, why in plan.edited_out]


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

    has = _Seen(lambda it: it.section)

    def line_cost(it: Item, ch: list[Item]) -> int:
        new_section = not has(ch, it.section)
        return (
            _text_tokens(c, it.render())
            + 1
            + (_text_tokens(c, TITLES.get(it.section, "")) + 2 if new_section else 0)
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
    rest, _ = _newest_that_fit(c, units[j + 1 :], budget - _unit_cost(c, head))
    kept = {id(u) for u in rest}
    dropped = [u for u in units if id(u) not in kept and u is not units[j]]
    return [head, *rest], dropped


def _cut_user(c: TokenCounter, unit: Unit, budget: int) -> Unit | None:
    """``unit`` whole if it fits ``budget``, else its text cut to fit (or ``None``)."""
    if _unit_cost(c, unit) <= budget:
        return unit
    room = budget - c.count_message({"role": "user", "content": ""}) - 12
    if room <= 0:
        return None
    text = c.truncate_to_tokens(unit.messages[0]["content"], room) + " [cut by BeeWeave]"
    cut = Unit("user", unit.events, [{"role": "user", "content": text}])
    return cut if _unit_cost(c, cut) <= budget else None


def _newest_that_fit(
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
        c.count_text(line),
        it.event_ids,
        sid,
        (it.seq, it.seq),
        None,
        note,
    )


def _recall_piece(c: TokenCounter, r: Recallable, note: str | None = None) -> Piece:
    line = r.line()
    return Piece("recalled", r.kind, f"{r.group} {line}", _text_tokens(c, line), r.event_ids,
                 r.session_id, r.seq_range, r.score, note or f"via {r.via}")  # fmt: skip


def _unit_piece(c: TokenCounter, u: Unit, sid: str, note: str | None = None) -> Piece:
    return Piece("immediate", u.kind, message_text(u.messages), _unit_cost(c, u), tuple(u.ids), sid,
                 (u.seq_from, u.seq_to), None, note)  # fmt: skip
