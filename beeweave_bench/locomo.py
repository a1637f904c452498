"""``beeweave bench locomo``: evidence recall on LoCoMo, no LLM in the loop.

Every turn of every conversation is ingested in order through ``weave.emit`` (the
capture path an agent uses), timestamped with its session's date.  Each question
of categories 1-4 is then answered by retrieving the top k turns, scored against
the turns the dataset names as evidence:

* recall@k — share of a question's evidence turns among the top k;
* hit@k — at least one evidence turn among the top k.

Three systems run over the same turns in the same process:

* ``bm25``   — ``bm25s`` over the turn texts (English stopwords), per conversation;
* ``dense``  — all-MiniLM-L6-v2 (BeeWeave's default model), exact cosine, per conversation;
* ``beeweave`` — ``weave.retrieve(question, user_id=conversation)``: the fused
  retriever over the SQLite store and the Chroma index, with the graph path;
  ``bw-lexical`` / ``bw-semantic`` are its two main paths alone.

A naive reciprocal-rank fusion of the two baselines is reported too, so the value
of what BeeWeave adds beyond "BM25 + vectors" is visible.  The generated summaries,
observations and event annotations in the files are not conversation and are
never ingested; the image-search ``query`` field is not either (the photo's
caption is: it describes what was shared).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from beeweave_bench.report import percentile
from beeweave_bench.throughput import raw_model_speed, throughput_summary
from beeweave_core.weave import Weave

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 25)
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass
class Turn:
    dia_id: str
    session: int
    index: int
    speaker: str
    text: str
    ts: float


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    dropped_evidence: int = 0
    skipped_questions: int = 0

    @property
    def last_ts(self) -> float:
        return max(t.ts for t in self.turns)


def parse_date(text: str) -> datetime:
    """LoCoMo session dates: ``"1:56 pm on 8 May, 2023"`` (UTC assumed)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return f"{turn['speaker']}: {text}"


def parse_evidence(raw: Sequence[str], known: set[str]) -> tuple[list[str], int]:
    """Evidence ids, split on ``;``, parentheses stripped, normalised; unknown ones dropped."""
    out: list[str] = []
    dropped = 0
    for item in raw:
        for part in str(item).replace("(", " ").replace(")", " ").split(";"):
            part = part.strip()
            if not part:
                continue
            m = _EVIDENCE.fullmatch(part)
            dia = f"D{m.group(1)}:{m.group(2)}" if m else None
            if dia is None or dia not in known:
                dropped += 1
                continue
            if dia not in out:
                out.append(dia)
    return out, dropped


def load_conversation(path: Path) -> Conversation:
    return parse_conversation(json.loads(path.read_text(encoding="utf-8")), path.stem)


def parse_conversation(data: dict[str, Any], name: str) -> Conversation:
    """One conversation; the public ``locomo10.json`` nests the sessions under
    ``conversation`` (with ``qa`` beside it), a one-conversation file may not."""
    if isinstance(data.get("conversation"), dict):
        data = {**data["conversation"], "qa": data.get("qa", [])}
    turns: list[Turn] = []
    n = 1
    while f"session_{n}" in data or f"session_{n}_date_time" in data:
        sess = data.get(f"session_{n}") or []
        if sess:
            start = parse_date(data[f"session_{n}_date_time"]).timestamp()
            for i, t in enumerate(sess):
                turns.append(Turn(t["dia_id"], n, i, t["speaker"], turn_text(t), start + i))
        n += 1
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    dropped = skipped = 0
    for qa in data.get("qa", []):
        cat = int(qa.get("category", 0))
        if cat not in CATEGORIES:
            continue
        ev, d = parse_evidence(qa.get("evidence", []), known)
        dropped += d
        if not ev:
            skipped += 1
            continue
        questions.append(Question(str(qa["question"]), cat, ev))
    return Conversation(name, turns, questions, dropped, skipped)


def load_dir(data: Path) -> list[Conversation]:
    """Conversations from a directory of one-conversation files, or from one file: the
    public release's ``locomo10.json`` (a list of conversations) or a single one."""
    data = Path(data)
    files = [data] if data.is_file() else sorted(data.glob("*.json"))
    if not files:
        raise ValueError(f"no LoCoMo conversation files (*.json) in {data}")
    out = []
    for p in files:
        try:
            loaded = json.loads(p.read_text(encoding="utf-8"))
            if isinstance(loaded, list):
                out += [
                    parse_conversation(c, str(c.get("sample_id") or f"{p.stem}-{i}"))
                    for i, c in enumerate(loaded)
                ]
            else:
                out.append(parse_conversation(loaded, p.stem))
        except (
            OSError,
            json.JSONDecodeError,
            KeyError,
            TypeError,
            ValueError,
            AttributeError,
        ) as exc:
            raise ValueError(f"{p} is not a LoCoMo conversation file: {exc!r}") from exc
    return out


# ------------------------------------------------------------------ systems
Ranker = Callable[[Question], list[str]]  # question -> ranked dia_ids


def _bm25(conv: Conversation, kmax: int) -> Ranker:
    import bm25s

    corpus = [t.text for t in conv.turns]
    model = bm25s.BM25()
    model.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    ids = [t.dia_id for t in conv.turns]

    def rank(q: Question) -> list[str]:
        toks = bm25s.tokenize([q.text], stopwords="en", show_progress=False)
        if not toks.vocab:
            return []
        docs, scores = model.retrieve(toks, k=min(kmax, len(ids)), show_progress=False)
        return [ids[int(i)] for i, s in zip(docs[0], scores[0], strict=True) if s > 0]

    return rank


def _dense(conv: Conversation, kmax: int, embeddings: Any) -> Ranker:
    matrix = np.asarray(embeddings.embed_documents([t.text for t in conv.turns]), dtype=np.float32)
    ids = [t.dia_id for t in conv.turns]

    def rank(q: Question) -> list[str]:
        v = np.asarray(embeddings.embed_query(q.text), dtype=np.float32)
        sims = matrix @ v
        top = np.argsort(-sims)[:kmax]
        return [ids[int(i)] for i in top]

    return rank


def _rrf(rankers: Sequence[Ranker], kmax: int, c: float = 60.0) -> Ranker:
    def rank(q: Question) -> list[str]:
        score: dict[str, float] = defaultdict(float)
        for r in rankers:
            for i, d in enumerate(r(q), 1):
                score[d] += 1.0 / (c + i)
        return sorted(score, key=lambda d: -score[d])[:kmax]

    return rank


def _beeweave(weave: Weave, conv: Conversation, kmax: int, **options: Any) -> Ranker:
    now = conv.last_ts + 86_400

    def rank(q: Question) -> list[str]:
        hits = weave.retrieve(q.text, user_id=conv.name, k=kmax, now=now, **options)
        return [h.event.meta.get("dia_id") for h in hits]

    return rank


# ---------------------------------------------------------------- scoring
@dataclass
class Tally:
    recall: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    hit: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    latency_ms: list[float] = field(default_factory=list)

    def add(self, ranked: list[str], evidence: list[str], ms: float, ks: Sequence[int]) -> None:
        for k in ks:
            top = set(ranked[:k])
            found = sum(1 for e in evidence if e in top)
            self.recall[k].append(found / len(evidence))
            self.hit[k].append(1.0 if found else 0.0)
        self.latency_ms.append(ms)


def ingest(weave: Weave, conv: Conversation) -> None:
    """Every turn, in order, through the capture bus (what an agent integration does)."""
    for t in conv.turns:
        weave.emit(
            "user_message",
            t.text,
            session_id=f"{conv.name}/session_{t.session}",
            role="user",
            meta={"user_id": conv.name, "name": t.speaker, "dia_id": t.dia_id},
            key=t.dia_id,
            ts=t.ts,
        )


#: bm25 / dense: the baselines; rrf: their naive fusion; beeweave: the fused retriever;
#: bw-lexical / bw-semantic: BeeWeave's own two main paths alone (what fusion adds).
SYSTEMS = ("bm25", "dense", "rrf", "beeweave", "bw-lexical", "bw-semantic")

#: The bench asks about a conversation's whole history, after it ended, so it turns
#: recency decay off (an agent's working memory keeps the default half-life).
BENCH_OPTIONS: dict[str, Any] = {"half_life": None}


def run(
    data: Path,
    *,
    ks: Sequence[int] = KS,
    workdir: Path | None = None,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
    systems: Sequence[str] = SYSTEMS,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every system over every conversation in ``data``; returns (rows, summary)."""
    from beeweave_core.embeddings import default_embeddings

    say = progress or (lambda _m: None)
    convs = load_dir(data)
    kmax = max(ks)
    embeddings = default_embeddings()
    tallies: dict[str, dict[int, Tally]] = {s: defaultdict(Tally) for s in systems}
    summary: dict[str, Any] = {"conversations": [c.name for c in convs], "turns": 0, "questions": 0}
    tmp = tempfile.TemporaryDirectory(prefix="beeweave-locomo-") if workdir is None else None
    root = Path(tmp.name if tmp else workdir)  # type: ignore[arg-type]
    ingest_s = index_s = 0.0
    try:
        weave = Weave.open(
            f"sqlite:///{root / 'locomo.db'}", tenant="locomo", spool_dir=root / "spool",
            embeddings=embeddings,
        )  # fmt: skip
        try:
            if weave.indexer is not None:
                weave.indexer.sync(120)  # the index is open before the clock runs
            for conv in convs:
                took = _ingest_conv(weave, conv, summary, say)
                ingest_s, index_s = ingest_s + took[0], index_s + took[1]
                rankers = _rankers(weave, conv, systems, kmax, embeddings)
                qs = conv.questions[:limit] if limit else conv.questions
                say(f"{conv.name}: {len(qs)} questions")
                _ask(qs, rankers, systems, tallies, ks)
        finally:
            weave.close()
    finally:
        if tmp is not None:
            tmp.cleanup()
    summary["ingest_s"] = round(ingest_s, 2)
    summary["index_s"] = round(index_s, 2)
    raw = raw_model_speed(embeddings, [t.text for c in convs for t in c.turns])
    summary.update(throughput_summary(summary["turns"], ingest_s, index_s, raw))
    return _rows(tallies, ks), summary


def _ingest_conv(
    weave: Weave, conv: Conversation, summary: dict[str, Any], say: Callable[[str], None]
) -> tuple[float, float]:
    """Capture one conversation and wait for its vectors; (ingest s, index s)."""
    summary["turns"] += len(conv.turns)
    summary["questions"] += len(conv.questions)
    summary["dropped_evidence"] = summary.get("dropped_evidence", 0) + conv.dropped_evidence
    summary["skipped_questions"] = summary.get("skipped_questions", 0) + conv.skipped_questions
    say(f"{conv.name}: ingesting {len(conv.turns)} turns")
    t0 = time.perf_counter()
    ingest(weave, conv)
    weave.flush(120)
    t1 = time.perf_counter()
    if weave.indexer is not None:
        weave.indexer.sync(600)
    return t1 - t0, time.perf_counter() - t1


def _rankers(
    weave: Weave, conv: Conversation, systems: Sequence[str], kmax: int, embeddings: Any
) -> dict[str, Ranker]:
    """Every system asked for, over one conversation (baselines built from its turns)."""
    rankers: dict[str, Ranker] = {}
    if "bm25" in systems or "rrf" in systems:
        rankers["bm25"] = _bm25(conv, kmax)
    if "dense" in systems or "rrf" in systems:
        rankers["dense"] = _dense(conv, kmax, embeddings)
    if "rrf" in systems:
        rankers["rrf"] = _rrf([rankers["bm25"], rankers["dense"]], kmax)
    if "beeweave" in systems:
        rankers["beeweave"] = _beeweave(weave, conv, kmax, **BENCH_OPTIONS)
    for path in ("lexical", "semantic"):
        if f"bw-{path}" in systems:
            rankers[f"bw-{path}"] = _beeweave(weave, conv, kmax, paths=[path], **BENCH_OPTIONS)
    return rankers


def _ask(
    questions: Sequence[Question],
    rankers: Mapping[str, Ranker],
    systems: Sequence[str],
    tallies: dict[str, dict[int, Tally]],
    ks: Sequence[int],
) -> None:
    for q in questions:
        for name in systems:
            t = time.perf_counter()
            ranked = rankers[name](q)
            ms = (time.perf_counter() - t) * 1000
            tallies[name][q.category].add(ranked, q.evidence, ms, ks)


def _rows(tallies: dict[str, dict[int, Tally]], ks: Sequence[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, by_cat in tallies.items():
        groups: list[tuple[str, list[Tally]]] = [
            (f"{c} {CATEGORIES[c]}", [by_cat[c]]) for c in sorted(by_cat)
        ]
        groups.append(("all", list(by_cat.values())))
        for label, parts in groups:
            n = sum(len(p.latency_ms) for p in parts)
            if not n:
                continue
            row: dict[str, Any] = {"system": name, "category": label, "n": n}
            for k in ks:
                row[f"R@{k}"] = float(np.mean([x for p in parts for x in p.recall[k]]))
            for k in ks:
                row[f"hit@{k}"] = float(np.mean([x for p in parts for x in p.hit[k]]))
            lat = [x for p in parts for x in p.latency_ms]
            row["p50 ms"] = percentile(lat, 50)
            row["p95 ms"] = percentile(lat, 95)
            rows.append(row)
    return rows


def verdict(rows: list[dict[str, Any]], ks: Sequence[int] = KS) -> list[str]:
    """The issue's targets, checked on the ``all`` rows."""
    allrows = {r["system"]: r for r in rows if r["category"] == "all"}
    notes = []
    bw = allrows.get("beeweave")
    if bw is None:
        return notes
    singles = [s for s in ("bm25", "dense") if s in allrows]
    for k in ks:
        best = max((allrows[s][f"R@{k}"] for s in singles), default=float("nan"))
        ok = bw[f"R@{k}"] > best
        notes.append(
            f"R@{k}: beeweave {bw[f'R@{k}']:.3f} vs best single path {best:.3f} "
            f"({'beats' if ok else 'does NOT beat'})"
        )
    own = [s for s in ("bw-lexical", "bw-semantic") if s in allrows]
    if own:
        for k in ks:
            best = max(allrows[s][f"R@{k}"] for s in own)
            notes.append(
                f"R@{k}: beeweave {bw[f'R@{k}']:.3f} vs its own best single path {best:.3f}"
            )
    target = bw.get("R@10", 0.0)
    notes.append(
        f"target beeweave R@10 >= 0.70: {target:.3f} ({'met' if target >= 0.70 else 'NOT met'})"
    )
    return notes
