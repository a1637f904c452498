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
  nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.events import Event, EventType
from beeweave_core.store import EventStore
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
    store: EventStore, session_id: str, *, assemble_text: AssembleText | None = None
) -> Health:
    """Compression and hit rate from the session's records; amnesia when asked."""
    health = Health(scope=session_id)
    summaries = store.timeline(session_id, types=(EventType.SUMMARY,))
    assemblies = store.timeline(session_id, types=(EventType.RETRIEVAL,))
    _add_compression(health, summaries)
    _add_hit_rate(health, assemblies)
    if assemble_text is not None:
        memories = store.timeline(session_id, types=(EventType.MEMORY,))
        health.amnesia = amnesia_check(memories, assemble_text(session_id))
    _judge(health)
    return health


def pooled(parts: Iterable[Health]) -> Health:
    """All sessions together: token sums and piece counts pooled, not averages of ratios."""
    total = Health(scope="all sessions")
    for h in parts:
        total.summary_tokens += h.summary_tokens
        total.source_tokens += h.source_tokens
        total.recalled_injected += h.recalled_injected
        total.recalled_total += h.recalled_total
        total.assemblies += h.assemblies
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


def amnesia_check(
    memories: Sequence[Event], assembled: str, sample: int = AMNESIA_SAMPLE
) -> AmnesiaReport:
    """Sample facts from the oldest third of the live memories; each must still show
    its key tokens in ``assembled`` (the text a dry-run assembly would send)."""
    ordered = sorted(memories, key=lambda m: int(m.payload.get("source_seq", m.seq)))
    early = ordered[: max(1, len(ordered) // 3)] if ordered else []
    step = max(1, len(early) // sample) if early else 1
    picked = early[::step][:sample]
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
