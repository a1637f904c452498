"""What reaches the model on LoCoMo: the assembled context at a budget, against the
simplest contexts built from the same parts, in one run.

Each conversation is captured through ``weave.emit`` in order — the first speaker's
turns as user messages, the other's as assistant messages, the turn's text only, each
turn timestamped with its session's date.  Two layouts of the same turns:

* ``one session`` — the whole conversation is one session;
* ``per session`` — each LoCoMo session is a session of its own, all of one user; the
  question is asked in a new, empty session of that user (what a returning user's first
  call sees: everything comes from the other sessions).

For every question of categories 1-4, four contexts of at most ``budget`` tokens:

* ``beeweave`` — ``weave.assemble(session, question, budget_tokens=budget)``;
* ``retrieve+pack`` — ``weave.retrieve(question, k=60, …)``: the hits' texts packed by
  rank into one system message (a hit that does not fit is skipped);
* ``newest turns`` — the newest turns that fit, as messages;
* ``whole history`` — every turn (over the budget: the ceiling).

Scored on the text the model would read: *evidence* — the share of the question's
evidence turns whose whole text is in it; *answer* — for gold answers of at most five
words, whether the answer is in it (case-insensitive, whitespace folded); *tokens* —
exact counts of the message list.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beeweave_bench.locomo import Conversation, load_dir, parse_date
from beeweave_bench.report import median, percentile
from beeweave_core.tokens import TokenCounter

if TYPE_CHECKING:
    from beeweave_core.weave import Weave

BUDGET = 2_000
#: Counted with cl100k_base, as the baselines are.
MODEL = "gpt-4"
PACK_K = 60
#: "settled": one session, asked as a returning user finds it (maintenance caught up and
#: compaction for the window done first); "one session" asks right after capture, while
#: maintenance still reads, so its figure moves with the machine's load.
MODES = ("one session", "settled", "per session")
SYSTEMS = ("beeweave", "retrieve+pack", "newest turns", "whole history")
#: Gold answers longer than this are not matched as strings (they paraphrase).
ANSWER_WORDS = 5


@dataclass
class Line:
    """One captured turn: its text, role and LoCoMo id."""

    dia_id: str
    session: int
    role: str
    text: str
    ts: float
    speaker: str = ""


@dataclass
class Asked:
    """One question with its gold answer and evidence."""

    text: str
    category: int
    evidence: list[str]
    answer: str


@dataclass
class Tally:
    evidence: list[float] = field(default_factory=list)
    answer: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)


def fold(text: str) -> str:
    return " ".join(str(text).casefold().split())


def lines_of(conv: Conversation, raw: dict[str, Any]) -> list[Line]:
    """The conversation's turns, text only, the first speaker as the user."""
    first = conv.turns[0].speaker if conv.turns else ""
    out = []
    n = 1
    while f"session_{n}" in raw or f"session_{n}_date_time" in raw:
        start = (
            parse_date(raw[f"session_{n}_date_time"]).timestamp()
            if raw.get(f"session_{n}_date_time")
            else 0.0
        )
        for i, t in enumerate(raw.get(f"session_{n}") or []):
            role = "user" if t["speaker"] == first else "assistant"
            out.append(
                Line(t["dia_id"], n, role, str(t.get("text", "")), start + i, str(t["speaker"]))
            )
        n += 1
    return out


def questions_of(conv: Conversation, raw: dict[str, Any]) -> list[Asked]:
    answers = {str(q["question"]): str(q.get("answer", "")) for q in raw.get("qa", [])}
    return [Asked(q.text, q.category, q.evidence, answers.get(q.text, "")) for q in conv.questions]


def _raw(path: Path, name: str) -> dict[str, Any]:
    import json

    files = [path] if path.is_file() else sorted(path.glob("*.json"))
    for p in files:
        data = json.loads(p.read_text(encoding="utf-8"))
        for c in data if isinstance(data, list) else [data]:
            cid = str(c.get("sample_id") or p.stem)
            if cid == name or p.stem == name:
                return {**c["conversation"], "qa": c.get("qa", [])} if "conversation" in c else c
    raise ValueError(f"conversation {name} not found in {path}")


def score(text: str, q: Asked, by_id: dict[str, str]) -> tuple[float, float | None]:
    """(share of evidence turns whole in ``text``, answer in it or None when not scored)."""
    t = fold(text)
    ev = [by_id[e] for e in q.evidence if e in by_id]
    evidence = sum(1 for e in ev if fold(e) in t) / len(ev) if ev else 0.0
    answer = None
    if q.answer and len(q.answer.split()) <= ANSWER_WORDS:
        answer = 1.0 if fold(q.answer) in t else 0.0
    return evidence, answer


def message_text(messages: Sequence[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


# ------------------------------------------------------------------ baselines
def packed(hits: Sequence[Any], budget: int, c: TokenCounter) -> list[dict[str, Any]]:
    """Hits' texts by rank in one system message; one that does not fit is skipped."""
    chosen: list[str] = []
    for h in hits:
        trial = [*chosen, h.event.content]
        if c.count_messages([{"role": "system", "content": "\n".join(trial)}]) <= budget:
            chosen = trial
    return [{"role": "system", "content": "\n".join(chosen)}] if chosen else []


def newest(lines: Sequence[Line], budget: int, c: TokenCounter) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ln in reversed(lines):
        msg = {"role": ln.role, "content": ln.text}
        if c.count_messages([msg, *out]) > budget:
            break
        out.insert(0, msg)
    return out


# ------------------------------------------------------------------ the run
def _as_of(weave: Weave, now: float) -> None:
    """The conversation is replayed as of the day after it ended: memories it made are
    not dormant for having been said years before the run."""
    try:
        from beeweave_core.memory.dormancy import DormancyPolicy
    except ImportError:
        return
    weave.context.dormancy = DormancyPolicy(clock=lambda: now)


def _capture(weave: Weave, conv: str, lines: Sequence[Line], mode: str) -> None:
    for ln in lines:
        sid = f"{conv}/session_{ln.session}" if mode == "per session" else conv
        weave.emit(
            f"{ln.role}_message",
            ln.text,
            session_id=sid,
            role=ln.role,
            meta={"user_id": conv, "name": ln.speaker},
            key=f"{mode}:{ln.dia_id}",
            ts=ln.ts,
        )


def run_conversation(
    weave: Weave,
    conv: Conversation,
    raw: dict[str, Any],
    mode: str,
    budget: int,
    c: TokenCounter,
    tallies: dict[str, dict[int, Tally]],
    limit: int | None = None,
) -> None:
    """Capture one conversation in ``mode`` and ask each question of all four systems."""
    lines = lines_of(conv, raw)
    by_id = {ln.dia_id: ln.text for ln in lines}
    _as_of(weave, max(ln.ts for ln in lines) + 86_400)
    _capture(weave, conv.name, lines, mode)
    weave.flush(120, wait_index=True)
    if mode == "settled":
        _settle(weave, conv.name, budget)
    sid = f"{conv.name}/asking" if mode == "per session" else conv.name
    whole = [{"role": ln.role, "content": ln.text} for ln in lines]
    qs = questions_of(conv, raw)[:limit] if limit else questions_of(conv, raw)
    for q in qs:
        contexts: dict[str, tuple[list[dict[str, Any]], float]] = {}
        t0 = time.perf_counter()
        ctx = weave.assemble(sid, q.text, budget_tokens=budget, user_id=conv.name, model=MODEL)
        contexts["beeweave"] = (ctx.messages, (time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        scope = {"user_id": conv.name} if mode == "per session" else {"session_id": conv.name}
        hits = weave.retrieve(q.text, k=PACK_K, **scope)
        contexts["retrieve+pack"] = (packed(hits, budget, c), (time.perf_counter() - t0) * 1000)
        contexts["newest turns"] = (newest(lines, budget, c), 0.0)
        contexts["whole history"] = (whole, 0.0)
        for system, (messages, ms) in contexts.items():
            ev, ans = score(message_text(messages), q, by_id)
            t = tallies[system].setdefault(q.category, Tally())
            t.evidence.append(ev)
            if ans is not None:
                t.answer.append(ans)
            t.tokens.append(c.count_messages(messages))
            t.ms.append(ms)


def run(
    data: Path,
    *,
    budget: int = BUDGET,
    modes: Sequence[str] = MODES,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
    open_weave: Callable[[str, str], Weave] | None = None,
) -> list[dict[str, Any]]:
    """Rows per (mode, system, category) over every conversation in ``data``."""
    from beeweave_core.weave import Weave

    say = progress or (lambda _m: None)
    convs = load_dir(data)
    c = TokenCounter(encoding="cl100k_base")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="beeweave-locomo-ctx-") as tmp:
        for mode in modes:
            tallies: dict[str, dict[int, Tally]] = {s: {} for s in SYSTEMS}
            for conv in convs:
                tag = mode.replace(" ", "-")
                url = f"sqlite:///{tmp}/{conv.name}-{tag}.db"
                weave = (
                    open_weave(url, tmp)
                    if open_weave is not None
                    else Weave.open(url, tenant="locomo", spool_dir=f"{tmp}/spool")
                )
                try:
                    say(f"{mode}: {conv.name}")
                    run_conversation(
                        weave, conv, _raw(data, conv.name), mode, budget, c, tallies, limit
                    )
                finally:
                    weave.close()
            rows += _rows(mode, tallies)
    return rows


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _rows(mode: str, tallies: dict[str, dict[int, Tally]]) -> list[dict[str, Any]]:
    from beeweave_bench.locomo import CATEGORIES

    rows = []
    for system, by_cat in tallies.items():
        groups = [(f"{k} {CATEGORIES[k]}", [by_cat[k]]) for k in sorted(by_cat)]
        groups.append(("all", list(by_cat.values())))
        for label, parts in groups:
            ev = [x for p in parts for x in p.evidence]
            ms = [x for p in parts for x in p.ms]
            rows.append(
                {
                    "mode": mode,
                    "system": system,
                    "category": label,
                    "n": len(ev),
                    "evidence": _mean(ev),
                    "answer": _mean([x for p in parts for x in p.answer]),
                    "answer_n": sum(len(p.answer) for p in parts),
                    "tokens": _mean([x for p in parts for x in p.tokens]),
                    "p50 ms": median(ms) if any(ms) else float("nan"),
                    "p95 ms": percentile(ms, 95) if any(ms) else float("nan"),
                }
            )
    return rows


# ------------------------------------------------------------------ the floor's CV
#: (past_floor, past_hits) tried by :func:`floor_cv`.
FLOOR_GRID: tuple[tuple[float, int], ...] = tuple(
    (pf, hits) for pf in (0.0, 0.2, 0.4, 0.6, 1.0) for hits in (1, 3, 5)
)


def _settled_weave(root: str, conv: Conversation, lines: Sequence[Line], budget: int) -> Weave:
    """``conv`` captured as one session with maintenance caught up, compaction for the
    window ``budget`` included (an assembly tells maintenance its window, and it compacts
    after): every setting tried reads the same store."""
    from beeweave_core.weave import Weave

    weave = Weave.open(f"sqlite:///{root}/{conv.name}.db", tenant="locomo", spool_dir=root)
    _as_of(weave, max(ln.ts for ln in lines) + 86_400)
    _capture(weave, conv.name, lines, "one session")
    weave.flush(120, wait_index=True)
    _settle(weave, conv.name, budget)
    return weave


def _settle(weave: Weave, session_id: str, budget: int) -> None:
    """Maintenance caught up on the session, and compacted for the window ``budget``."""
    weave.context.compact(session_id, window_tokens=budget, model=MODEL)
    weave.context.settle([session_id])
    weave.flush(120, wait_index=True)


def _floor_scores(
    weave: Weave,
    conv: Conversation,
    raw: dict[str, Any],
    lines: Sequence[Line],
    grid: Sequence[tuple[float, int]],
    budget: int,
    limit: int | None,
) -> dict[tuple[float, int], list[float]]:
    """Evidence per question of ``conv`` under each (past_floor, past_hits)."""
    from dataclasses import replace

    from beeweave_core.context import PRESETS

    by_id = {ln.dia_id: ln.text for ln in lines}
    qs = questions_of(conv, raw)[:limit] if limit else questions_of(conv, raw)
    out: dict[tuple[float, int], list[float]] = {}
    for pf, hits in grid:
        weave.context.presets = {
            k: replace(v, past_floor=pf, past_hits=hits) for k, v in PRESETS.items()
        }
        contexts = [
            weave.assemble(conv.name, q.text, budget_tokens=budget, user_id=conv.name, model=MODEL)
            for q in qs
        ]
        out[(pf, hits)] = [
            score(message_text(ctx.messages), q, by_id)[0]
            for ctx, q in zip(contexts, qs, strict=True)
        ]
    return out


def floor_cv(
    data: Path,
    *,
    budget: int = BUDGET,
    grid: Sequence[tuple[float, int]] = FLOOR_GRID,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``LayerShares.past_floor`` / ``past_hits`` chosen by leave-one-conversation-out
    cross-validation: each setting's evidence on every conversation (one session,
    maintenance settled), then for each held-out conversation the setting best on the
    others, scored on it.  Rows: each setting over all conversations, and the held-out
    figure."""
    say = progress or (lambda _m: None)
    scores: dict[str, dict[tuple[float, int], list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="beeweave-floor-cv-") as tmp:
        for conv in load_dir(data):
            say(f"floor cv: {conv.name}")
            raw = _raw(data, conv.name)
            lines = lines_of(conv, raw)
            weave = _settled_weave(tmp, conv, lines, budget)
            try:
                scores[conv.name] = _floor_scores(weave, conv, raw, lines, grid, budget, limit)
            finally:
                weave.close()

    def mean(convs: Sequence[str], g: tuple[float, int]) -> float:
        return _mean([x for c in convs for x in scores[c][g]])

    names = sorted(scores)
    rows = [
        {"setting": f"past_floor {pf}, past_hits {hits}", "evidence": mean(names, (pf, hits))}
        for pf, hits in grid
    ]
    picks, held = {}, []
    for name in names:
        rest = [c for c in names if c != name] or names
        best = max(grid, key=lambda g: mean(rest, g))
        picks[name] = {"past_floor": best[0], "past_hits": best[1]}
        held += scores[name][best]
    rows.append({"setting": "held out (leave one conversation out)", "evidence": _mean(held)})
    return rows, {"budget": budget, "picks": picks}
