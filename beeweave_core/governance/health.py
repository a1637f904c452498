"""Context health: three numbers that say when context management goes wrong.

All three are computed from what BeeWeave already records, so they cost nothing on
the agent's path:

* **compression ratio** — summary tokens / source tokens over the session's live
  summaries.  Above 0.5 the compactor is not compressing; below 0.05 it may be
  dropping information (the retention check should have caught it; look).
* **retrieval hit rate** — of the items recall brought to an assembly, the share that
  was actually injected (each assembly's audit record lists what went in and what was
  left out, and why).  Below 50 % recall is noisy: it spends time on candidates the
  budget then throws away.
* **amnesia** — facts stated early in the session (its oldest live memories) that the
  current assembly no longer carries.  Checked with a dry-run assembly, which writes
  nothing.  The context engine also runs it right after each compaction
  (:func:`guard_compaction`): when a sampled fact is missing, a segment written by
  that compaction holds the turn it came from, and the context without that segment
  carries it again, the segment is rolled back (invalidated, so its turns are recalled
  as originals again; the compactor never re-summarises them) with a ``warning`` event
  saying which facts it lost.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from beeweave_core.events import Event, EventType, event_id_for
from beeweave_core.memory.dormancy import dormant_ages
from beeweave_core.store import EventReader, SessionReader
from beeweave_core.store_writer import StoreWriter
from beeweave_core.text.segment import HAN

COMPRESSION_HIGH = 0.5
COMPRESSION_LOW = 0.05
HIT_RATE_LOW = 0.5
#: Layer names whose pieces come from recall (the assembler's persistent layer).
RECALLED_LAYERS = frozenset({"recalled"})
#: How many early facts an amnesia check samples (evenly over the oldest third).
AMNESIA_SAMPLE = 5
#: Tokens of a fact that must survive: numbers, ids and codes, or else its longest words.
_KEY = re.compile(rf"[A-Za-z_][\w-]*\d[\w.:/-]*|\d[\w.:/-]*|[{HAN}]{{2,}}|[A-Za-z]{{5,}}")

#: ``assemble(session_id, dry_run=True) -> text`` for the amnesia check.
AssembleText = Callable[[str], str]


@dataclass
class AmnesiaReport:
    """Early facts sampled and which of them the current assembly lost."""

    sampled: int
    carried: int
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing


@dataclass
class Health:
    """The three metrics for one session (or pooled over all), with their warnings."""

    scope: str
    compression_ratio: float | None = None
    summary_tokens: int = 0
    source_tokens: int = 0
    retrieval_hit_rate: float | None = None
    recalled_injected: int = 0
    recalled_total: int = 0
    assemblies: int = 0
    amnesia: AmnesiaReport | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "amnesia"}
        out["amnesia"] = None if self.amnesia is None else self.amnesia.__dict__
        return out


def session_health(
    store: EventReader,
    session_id: str,
    *,
    assemble_text: AssembleText | None = None,
    asleep: Callable[[Sequence[Event]], Collection[str]] | None = None,
) -> Health:
    """Compression and hit rate from the session's records; amnesia when asked.

    ``asleep`` names dormant memories: the context leaves them out on purpose, so the
    amnesia check does not sample them."""
    health = Health(scope=session_id)
    summaries = store.timeline(session_id, types=(EventType.SUMMARY,))
    assemblies = store.timeline(session_id, types=(EventType.RETRIEVAL,))
    _add_compression(health, summaries)
    _add_hit_rate(health, assemblies)
    if assemble_text is not None:
        memories = store.timeline(session_id, types=(EventType.MEMORY,))
        gone = asleep(memories) if asleep is not None else ()
        memories = [m for m in memories if m.id not in gone]
        health.amnesia = amnesia_check(memories, assemble_text(session_id))
    _judge(health)
    return health


class _Assembler(Protocol):
    """What :func:`weave_health` needs of a weave: its store and its context engine."""

    store: SessionReader

    @property
    def context(self) -> Any: ...


#: Budget of the dry-run assembly the amnesia check reads (what a mid-size model gets).
AMNESIA_BUDGET = 8000


def weave_health(
    weave: _Assembler, session_id: str | None = None, *, budget_tokens: int = AMNESIA_BUDGET
) -> tuple[list[Health], Health]:
    """Each session's health (or only ``session_id``'s) and the pooled figures.

    The amnesia check reads an assembly that records nothing (``assemble`` is a pure
    read: it writes only its audit record, and that is turned off here).
    """
    sids = [session_id] if session_id else [s.session_id for s in weave.store.sessions()]
    engine = weave.context

    def text(sid: str) -> str:
        return context_text(engine.assemble(sid, budget_tokens=budget_tokens, record=False))

    def asleep(memories: Sequence[Event]) -> Collection[str]:
        return dormant_ages(weave.store, memories, engine.dormancy).keys()

    parts = [session_health(weave.store, sid, assemble_text=text, asleep=asleep) for sid in sids]
    return parts, pooled(parts)


class _Messages(Protocol):
    @property
    def messages(self) -> Sequence[dict[str, Any]]: ...


def context_text(ctx: _Messages) -> str:
    """The text an assembled context sends (what the amnesia check searches)."""
    return "\n".join(str(m.get("content", "")) for m in ctx.messages)


def recorded_text(store: EventReader, session_id: str) -> str:
    """The full text of what the session's latest recorded assembly injected."""
    records = store.timeline(session_id, types=(EventType.RETRIEVAL,), last=1)
    if not records:
        return ""
    ids = [i for p in records[-1].payload.get("included") or () for i in p.get("event_ids") or ()]
    return "\n".join(e.content for e in store.get(list(dict.fromkeys(ids))))


def pooled(parts: Iterable[Health]) -> Health:
    """All sessions together: token sums and piece counts pooled, not averages of ratios."""
    total = Health(scope="pooled")
    for h in parts:
        total.summary_tokens += h.summary_tokens
        total.source_tokens += h.source_tokens
        total.recalled_injected += h.recalled_injected
        total.recalled_total += h.recalled_total
        total.assemblies += h.assemblies
        if h.amnesia is not None:
            a = total.amnesia = total.amnesia or AmnesiaReport(0, 0)
            a.sampled, a.carried = a.sampled + h.amnesia.sampled, a.carried + h.amnesia.carried
            a.missing += h.amnesia.missing
    if total.source_tokens:
        total.compression_ratio = total.summary_tokens / total.source_tokens
    if total.recalled_total:
        total.retrieval_hit_rate = total.recalled_injected / total.recalled_total
    _judge(total)
    return total


def _add_compression(health: Health, summaries: Sequence[Event]) -> None:
    for s in summaries:
        health.source_tokens += int(s.payload.get("source_tokens", 0) or 0)
        health.summary_tokens += int(s.payload.get("summary_tokens", 0) or 0)
    if health.source_tokens:
        health.compression_ratio = health.summary_tokens / health.source_tokens


def _add_hit_rate(health: Health, assemblies: Sequence[Event]) -> None:
    for a in assemblies:
        health.assemblies += 1
        injected = [p for p in a.payload.get("included") or () if p.get("layer") in RECALLED_LAYERS]
        dropped = [p for p in a.payload.get("left_out") or () if p.get("layer") in RECALLED_LAYERS]
        health.recalled_injected += len(injected)
        health.recalled_total += len(injected) + len(dropped)
    if health.recalled_total:
        health.retrieval_hit_rate = health.recalled_injected / health.recalled_total


def key_tokens(text: str) -> list[str]:
    """What a fact cannot lose: its numbers and codes, else its longest words."""
    found = _KEY.findall(text)
    numeric = [t for t in found if any(ch.isdigit() for ch in t)]
    return numeric or sorted(found, key=len, reverse=True)[:2]


def early_facts(memories: Sequence[Event], sample: int = AMNESIA_SAMPLE) -> list[Event]:
    """The facts an amnesia check samples: evenly over the oldest third of ``memories``."""
    ordered = sorted(memories, key=lambda m: int(m.payload.get("source_seq", m.seq)))
    early = ordered[: max(1, len(ordered) // 3)] if ordered else []
    step = max(1, len(early) // sample) if early else 1
    return early[::step][:sample]


def amnesia_check(
    memories: Sequence[Event], assembled: str, sample: int = AMNESIA_SAMPLE
) -> AmnesiaReport:
    """Sample facts from the oldest third of the live memories; each must still show
    its key tokens in ``assembled`` (the text an assembly sends, recording nothing)."""
    picked = early_facts(memories, sample)
    text = assembled.casefold()
    missing = [
        m.content
        for m in picked
        if (keys := key_tokens(m.content)) and not all(k.casefold() in text for k in keys)
    ]
    return AmnesiaReport(sampled=len(picked), carried=len(picked) - len(missing), missing=missing)


def _judge(health: Health) -> None:
    r = health.compression_ratio
    if r is not None and r > COMPRESSION_HIGH:
        health.warnings.append(f"not compressing: summaries keep {r:.0%} of their source tokens")
    elif r is not None and r < COMPRESSION_LOW:
        health.warnings.append(
            f"may be losing information: summaries keep only {r:.1%} of their source tokens"
        )
    h = health.retrieval_hit_rate
    if h is not None and h < HIT_RATE_LOW:
        health.warnings.append(f"noisy retrieval: only {h:.0%} of recalled items were injected")
    a = health.amnesia
    if a is not None and a.missing:
        health.warnings.append(
            f"amnesia: {len(a.missing)} of {a.sampled} early facts are missing from the context"
        )


# ------------------------------------------------------------ after each compaction
#: The status reason of a segment the post-compaction amnesia check rolled back.
AMNESIA_ROLLBACK = "amnesia check failed after compaction"


#: ``(summary ids to leave out, facts to ask for) -> the text the answers hold``
FactText = Callable[[Collection[str], Sequence[Event]], str]


def guard_compaction(
    writer: StoreWriter,
    session_id: str,
    written: Sequence[str],
    assemble_text: FactText,
    asleep: Callable[[Sequence[Event]], Collection[str]],
    memories: Sequence[Event] | None = None,
) -> tuple[list[str], AmnesiaReport | None]:
    """Run the amnesia check on the context as it is right after a compaction wrote the
    summaries ``written``; roll back those that made early facts go missing.

    ``assemble_text(hidden, facts)`` is what assemblies asking for each of ``facts``
    carry, as if the summaries ``hidden`` were rolled back (nothing recorded).  A fact is blamed on the compaction only when a written segment holds
    the turn it came from *and* the context without those segments carries it again
    (a fact the budget had already dropped is not the compaction's doing).  ``writer``
    must be the engine's own (its invalidations reach the session views); the check reads
    ``writer.store``.  Returns the
    ids rolled back and the check as it stands (``None``: no early facts to check).
    ``memories``: the session's active memories when the caller holds them already
    (the engine's session view: no read of every memory after each compaction).
    """
    store = writer.store
    if memories is None:
        memories = store.timeline(session_id, types=(EventType.MEMORY,))
    gone = asleep(memories)
    memories = [m for m in memories if m.id not in gone]
    if not memories or not written:
        return [], None
    facts = early_facts(memories)
    report = amnesia_check(memories, assemble_text((), facts))
    if report.ok:
        return [], report
    lost = [
        int(m.payload.get("source_seq", m.seq)) for m in memories if m.content in report.missing
    ]
    summaries = sorted(store.get(list(written)), key=lambda s: int(s.payload.get("level", 0)))
    suspects = {s.id for s in summaries if int(s.payload.get("level", 0)) == 0 and _holds(s, lost)}
    for s in summaries:
        if suspects & set(s.payload.get("children") or ()):
            suspects.add(s.id)  # a merge standing on a suspect segment goes with it
    if not suspects:
        return [], report
    ids = sorted(suspects)
    without = amnesia_check(memories, assemble_text(ids, facts))
    if len(without.missing) >= len(report.missing):
        return [], report  # rolling back would not bring them back: keep the compaction
    writer.invalidate(ids, f"{AMNESIA_ROLLBACK}; originals kept")
    writer.append([_rollback_note(store.tenant, session_id, ids, report, without)])
    return ids, without


def _holds(segment: Event, seqs: Sequence[int]) -> bool:
    lo, hi = int(segment.payload.get("seq_from", -1)), int(segment.payload.get("seq_to", -1))
    return any(lo <= seq <= hi for seq in seqs)


def _rollback_note(
    tenant: str, session_id: str, ids: list[str], before: AmnesiaReport, after: AmnesiaReport
) -> Event:
    return Event(
        id=event_id_for(tenant, session_id, "amnesia:" + ",".join(ids)),
        session_id=session_id,
        type=EventType.WARNING,
        role="system",
        content=(
            f"Compaction rolled back ({len(ids)} summary(ies)): the context lost "
            f"{len(before.missing)} early fact(s); the original turns are kept."
        ),
        payload={
            "kind": "amnesia",
            "summary_ids": ids,
            "missing": before.missing,
            "still_missing": after.missing,
        },
        source={"framework": "beeweave", "component": "health"},
    )
