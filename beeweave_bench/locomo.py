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
  ``bw-lexical`` / ``bw-semantic`` are its two main paths alone;
* ``bw-chroma`` — the same fused retriever with every vector query sent to Chroma
  (the index's in-process copy of a scope's vectors off): the latency baseline.

Each question is new to ``beeweave`` and ``bw-chroma`` (the query's embedding, one
model call, is inside their latency); ``bw-semantic`` and ``bw-lexical`` run after
``beeweave`` and reuse its query vector.  ``dense``'s latency is mostly that model call.

A naive reciprocal-rank fusion of the two baselines is reported too, so the value
of what BeeWeave adds beyond "BM25 + vectors" is visible.  The generated summaries,
observations and event annotations in the files are not conversation and are
never ingested; the image-search ``query`` field is not either (the photo's
caption is: it describes what was shared).
"""

from __future__ import annotations

import itertools
import json
import re
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from beeweave_bench import crossval
from beeweave_bench.ingest import purge_bench_data
from beeweave_bench.report import percentile
from beeweave_bench.throughput import raw_model_speed, throughput_summary
from beeweave_core.config import RetrievalConfig
from beeweave_core.index import query_vectors
from beeweave_core.retrieval import Rankings, Retriever
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


def _via_chroma(weave: Weave, conv: Conversation, kmax: int, **options: Any) -> Ranker:
    """The fused retriever with a new query vector and Chroma answering vector queries."""
    fused = _beeweave(weave, conv, kmax, **options)
    index = weave.indexer.index if weave.indexer is not None else None
    toggles = hasattr(index, "in_process")  # a Chroma index (Neo4j's has no copy)

    def rank(q: Question) -> list[str]:
        query_vectors.forget()  # as new to it as to ``beeweave``
        if toggles:
            setattr(index, "in_process", False)  # noqa: B010 - not on the VectorIndex protocol
        try:
            return fused(q)
        finally:
            if toggles:
                setattr(index, "in_process", True)  # noqa: B010

    return rank


# ---------------------------------------------------------------- scoring
@dataclass
class Tally:
    recall: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    hit: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    latency_ms: list[float] = field(default_factory=list)

    def add(
        self, ranked: list[str], evidence: list[str], ms: float | None, ks: Sequence[int]
    ) -> None:
        """One question's result (``ms=None``: not timed, e.g. a re-fusion in the CV)."""
        for k in ks:
            top = set(ranked[:k])
            found = sum(1 for e in evidence if e in top)
            self.recall[k].append(found / len(evidence))
            self.hit[k].append(1.0 if found else 0.0)
        if ms is not None:
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
#: bw-lexical / bw-semantic: BeeWeave's own two main paths alone (what fusion adds);
#: bw-chroma: the fused retriever with Chroma answering every vector query (latency).
#: bw-cv: the fused retriever with fusion settings chosen by leave-one-conversation-out
#: cross-validation, scored on the held-out conversation (``bw-cv-dev``: on the ones
#: they were chosen on); needs two conversations or more.
SYSTEMS = ("bm25", "dense", "rrf", "beeweave", "bw-lexical", "bw-semantic", "bw-chroma", "bw-cv")

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
    store_url: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every system over every conversation in ``data``; returns (rows, summary).

    ``store_url``: the store to capture into (default: a fresh SQLite file under
    ``workdir``); a Neo4j URL gets a tenant of its own, removed afterwards.
    """
    from beeweave_core.embeddings import default_embeddings

    convs = load_dir(data)
    embeddings = default_embeddings()
    summary: dict[str, Any] = {"conversations": [c.name for c in convs], "turns": 0, "questions": 0}
    tmp = tempfile.TemporaryDirectory(prefix="beeweave-locomo-") if workdir is None else None
    root = Path(tmp.name if tmp else workdir)  # type: ignore[arg-type]
    url = store_url or f"sqlite:///{root / 'locomo.db'}"
    tenant = "locomo" if store_url is None else f"locomo-{uuid.uuid4().hex[:8]}"
    summary["store"] = url.split("://", 1)[0]
    try:
        weave = Weave.open(url, tenant=tenant, spool_dir=root / "spool", embeddings=embeddings)
        try:
            tallies = _run_all(
                weave,
                convs,
                embeddings,
                summary,
                systems=systems,
                ks=ks,
                limit=limit,
                say=progress or (lambda _m: None),
            )
        finally:
            if store_url is not None:
                purge_bench_data(weave.store)  # leave a shared server as it was
            weave.close()
    finally:
        if tmp is not None:
            tmp.cleanup()
    return _rows(tallies, ks), summary


def _run_all(
    weave: Weave,
    convs: Sequence[Conversation],
    embeddings: Any,
    summary: dict[str, Any],
    *,
    systems: Sequence[str],
    ks: Sequence[int],
    limit: int | None,
    say: Callable[[str], None],
) -> dict[str, dict[int, Tally]]:
    """Ingest and ask, conversation by conversation; then cross-validate fusion."""
    kmax = max(ks)
    asked_systems = [s for s in systems if s != "bw-cv"]
    tallies: dict[str, dict[int, Tally]] = {s: defaultdict(Tally) for s in asked_systems}
    asked: dict[str, list[tuple[Question, Rankings]]] = {}
    ingest_s = index_s = 0.0
    if weave.indexer is not None:
        weave.indexer.sync(120)  # the index is open before the clock runs
    for conv in convs:
        took = _ingest_conv(weave, conv, summary, say)
        ingest_s, index_s = ingest_s + took[0], index_s + took[1]
        rankers = _rankers(weave, conv, asked_systems, kmax, embeddings)
        qs = conv.questions[:limit] if limit else conv.questions
        say(f"{conv.name}: {len(qs)} questions")
        _ask(qs, rankers, asked_systems, tallies, ks)
        if "bw-cv" in systems:
            asked[conv.name] = list(zip(qs, collect(weave, conv, qs), strict=True))
    summary["ingest_s"] = round(ingest_s, 2)
    summary["index_s"] = round(index_s, 2)
    if len(asked) >= 2:
        grid = fusion_grid(replace(weave.retriever.config, **BENCH_OPTIONS))
        say(f"cross-validating {len(grid)} fusion settings over {len(asked)} conversations")
        cv = cross_validate(weave.retriever, asked, ks, grid)
        tallies["bw-cv"], tallies["bw-cv-dev"] = cv.held, cv.dev
        summary["cv"] = cv.summary(grid["default"])
    elif "bw-cv" in systems:
        summary["cv"] = "skipped: cross-validation needs two conversations or more"
    raw = raw_model_speed(embeddings, [t.text for c in convs for t in c.turns])
    summary.update(throughput_summary(summary["turns"], ingest_s, index_s, raw))
    return tallies


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
    if "bw-chroma" in systems:
        rankers["bw-chroma"] = _via_chroma(weave, conv, kmax, **BENCH_OPTIONS)
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
            n = sum(len(p.recall[ks[0]]) for p in parts)
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
    """The issue's targets, checked on the ``all`` rows.

    The fused figure judged is the cross-validated one (``bw-cv``: settings chosen
    without the conversation scored) when there is one, else ``beeweave``'s.
    """
    allrows = {r["system"]: r for r in rows if r["category"] == "all"}
    name = "bw-cv" if "bw-cv" in allrows else "beeweave"
    bw = allrows.get(name)
    if bw is None:
        return []
    notes = []
    for group in (("bm25", "dense", "rrf"), ("bw-lexical", "bw-semantic")):
        others = [s for s in group if s in allrows]
        for k in ks if others else ():
            best = max(others, key=lambda s: allrows[s][f"R@{k}"])
            ok = bw[f"R@{k}"] >= allrows[best][f"R@{k}"]
            notes.append(
                f"R@{k}: {name} {bw[f'R@{k}']:.3f} vs {best} {allrows[best][f'R@{k}']:.3f} "
                f"({'not worse' if ok else 'WORSE'})"
            )
    for k, target in ((5, 0.68), (10, 0.80)):
        got = bw.get(f"R@{k}", float("nan"))
        notes.append(
            f"target {name} R@{k} >= {target}: {got:.3f} ({'met' if got >= target else 'NOT met'})"
        )
    return notes


def cv_notes(summary: Mapping[str, Any]) -> list[str]:
    """One line per fold (what was chosen without it, its score there), and the pick on all."""
    cv = summary.get("cv")
    if not isinstance(cv, Mapping):
        return [f"cv: {cv}"] if cv else []
    out = [
        f"fold {f['held_out']}: chose {f['chosen']} (dev {f['dev_score']:.3f}, "
        f"held-out {f['held_out_score']:.3f})"
        for f in cv["folds"]
    ]
    out.append(
        f"chosen on all: {cv['chosen_on_all']} (shipped default: "
        f"{'the same' if cv['default_is_chosen'] else 'DIFFERENT'})"
    )
    return out


# --------------------------------------------------------- cross-validation
#: What the cross-validation chooses among: the weights of the semantic, temporal,
#: graph and feedback paths relative to lexical (only ratios matter, so lexical stays 1), the
#: reciprocal-rank constant, how many turns either side of a hit the graph path
#: offers and how much a turn further away inherits (both moot when its weight is 0).
CV_SEMANTIC = (0.25, 0.5, 0.75, 1.0)
CV_TEMPORAL = (1.0, 2.0)
CV_GRAPH = (0.0, 0.25, 0.5)
CV_RRF_K = (3.0, 5.0, 10.0)
CV_NEIGHBOURS = (1, 2)
CV_NEIGHBOUR_DECAY = (0.5, 1.0)
#: How much more the turns of the one speaker a question names weigh (0: not at all).
CV_AUTHOR_BOOST = (0.0, 1.0, 2.0)
#: The weight of the second lexical round (pseudo-relevance feedback; 0: off).
CV_FEEDBACK = (0.0, 0.5)


def fusion_grid(base: RetrievalConfig) -> dict[str, RetrievalConfig]:
    """Candidate fusion settings by name; the shipped default first (ties keep it)."""
    grid = {"default": base}
    for sem, temp, graph, rrf_k, near, decay in itertools.product(
        CV_SEMANTIC, CV_TEMPORAL, CV_GRAPH, CV_RRF_K, CV_NEIGHBOURS, CV_NEIGHBOUR_DECAY
    ):
        if (graph == 0 or near == 1) and decay != CV_NEIGHBOUR_DECAY[0]:
            continue  # the same ranking as with the first decay
        if graph == 0 and near != CV_NEIGHBOURS[0]:
            continue  # the same ranking as with the first
        weights = {**base.weights, "semantic": sem, "temporal": temp, "graph": graph}
        name = f"semantic={sem:g} temporal={temp:g} graph={graph:g} rrf_k={rrf_k:g}"
        name += f" neighbours={near}" if graph else ""
        name += f" neighbour_decay={decay:g}" if graph and near > 1 else ""
        for boost, fb in itertools.product(CV_AUTHOR_BOOST, CV_FEEDBACK):
            grid[f"{name} author_boost={boost:g} feedback={fb:g}"] = replace(
                base,
                weights={**weights, "feedback": fb},
                rrf_k=rrf_k,
                neighbours=near,
                neighbour_decay=decay,
                author_boost=boost,
            )
    return grid


def collect(weave: Weave, conv: Conversation, questions: Sequence[Question]) -> list[Rankings]:
    """Each question's path rankings (searched once; every candidate re-fuses them)."""
    now = conv.last_ts + 86_400
    return [
        weave.retriever.rankings(q.text, user_id=conv.name, now=now, **BENCH_OPTIONS)
        for q in questions
    ]


def _dia_ids(retriever: Retriever, r: Rankings, cfg: RetrievalConfig, kmax: int) -> list[str]:
    return [h.event.meta.get("dia_id") for h in retriever.fuse(r, kmax, cfg)]


def _score(ranked: list[str], evidence: list[str], ks: Sequence[int]) -> float:
    """A question's score for choosing: its recall averaged over the reported ks."""
    return sum(sum(e in ranked[:k] for e in evidence) / len(evidence) for k in ks) / len(ks)


@dataclass
class CrossValidation:
    """Leave-one-conversation-out over the fusion grid, and what it chose."""

    held: dict[int, Tally] = field(default_factory=lambda: defaultdict(Tally))
    dev: dict[int, Tally] = field(default_factory=lambda: defaultdict(Tally))
    folds: list[crossval.Fold] = field(default_factory=list)
    chosen_all: str = ""
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self, default: RetrievalConfig) -> dict[str, Any]:
        """The folds, and whether the shipped default is what all of them together pick."""
        same = self.settings == {
            "weights": dict(default.weights),
            "rrf_k": default.rrf_k,
            "neighbours": default.neighbours,
            "neighbour_decay": default.neighbour_decay,
            "author_boost": default.author_boost,
        }
        return {
            "folds": [
                {
                    "held_out": f.held_out,
                    "chosen": f.chosen,
                    "dev_score": round(f.dev, 4),
                    "held_out_score": round(f.held, 4),
                }
                for f in self.folds
            ],
            "chosen_on_all": self.chosen_all,
            "default_is_chosen": same,
        }


def cross_validate(
    retriever: Retriever,
    asked: Mapping[str, Sequence[tuple[Question, Rankings]]],
    ks: Sequence[int],
    grid: Mapping[str, RetrievalConfig],
) -> CrossValidation:
    """Choose fusion settings on all conversations but one, report on that one, for each.

    ``held``: every question scored with what was chosen without its conversation;
    ``dev``: the chosen settings on the conversations they were chosen on.
    """
    kmax = max(ks)
    ranked = {
        name: {
            conv: [_dia_ids(retriever, r, cfg, kmax) for _, r in qs] for conv, qs in asked.items()
        }
        for name, cfg in grid.items()
    }
    table = {
        name: {
            conv: [
                _score(rk, q.evidence, ks) for rk, (q, _) in zip(by[conv], asked[conv], strict=True)
            ]
            for conv in asked
        }
        for name, by in ranked.items()
    }
    cv = CrossValidation(folds=crossval.leave_one_out(table, list(asked)))
    for fold in cv.folds:
        for conv, qs in asked.items():
            tallies = cv.held if conv == fold.held_out else cv.dev
            for rk, (q, _) in zip(ranked[fold.chosen][conv], qs, strict=True):
                tallies[q.category].add(rk, q.evidence, None, ks)
    cv.chosen_all = crossval.choose(table, list(asked))
    chosen = grid[cv.chosen_all]
    cv.settings = {
        "weights": dict(chosen.weights),
        "rrf_k": chosen.rrf_k,
        "neighbours": chosen.neighbours,
        "neighbour_decay": chosen.neighbour_decay,
        "author_boost": chosen.author_boost,
    }
    return cv
