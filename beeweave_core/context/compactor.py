"""Compaction: old turns become segment summaries that provably kept their facts.

* **When**: once the turns not yet covered by a summary exceed ``trigger_fraction`` of
  the window (default 40 %) — early, so compaction never happens in a hurry.
* **What**: segments of ``segment_turns`` turns (default 6, never splitting a tool call
  from its result), oldest first, until the uncovered tail is down to
  ``keep_fraction`` of the window.  Each becomes a ``summary`` event carrying its turn
  range, source ids and SUMMARIZES edges.  After ``merge_after`` segments, summaries
  are merged into a higher-level one (hierarchically).
* **Verified retention**: every number, identifier, quoted string and constraint phrase
  of the (edited) source must occur in the summary.  If one is missing the summarizer is
  asked again naming it; if it is still missing the summary is rolled back (stored,
  then invalidated, with what was lost) and the original turns stay in use.
* **Thrash guard**: if the context refills to the trigger within ``thrash_turns`` turns
  of the last compaction, a ``warning`` event is recorded and the compactor adapts: it
  keeps half as much uncompacted tail, allows shorter segments, waits longer before the
  next compaction, and tells the assembler to shrink the immediate layer.
* **Corrections**: when the user overturns an instruction that a summary already holds,
  that summary is rebuilt without it (new version SUPERSEDES the old one).
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.context.editing import Editor, EditPolicy, FirstSaid, SourceLine
from beeweave_core.context.messages import Unit, read_units, split_units
from beeweave_core.context.summarizers import Summarizer
from beeweave_core.events import EdgeType, Event, EventType, event_id_for
from beeweave_core.scopes import derived, runs
from beeweave_core.store_writer import StoreWriter
from beeweave_core.text import language as L
from beeweave_core.tokens import TokenCounter

_SOURCE = {"framework": "beeweave", "component": "compactor"}
_LINE = re.compile(r"^-?\s*#(?P<seq>\d+) (?P<role>user|assistant|tool|summary): (?P<text>.*)$")
_PREFIX = re.compile(r"#\d+ (?:user|assistant|tool|summary):")


@dataclass(frozen=True)
class CompactionPolicy:
    """When and how hard to compact (see module docstring)."""

    segment_turns: int = 6
    merge_after: int = 4
    trigger_fraction: float = 0.4
    keep_fraction: float = 0.2
    thrash_turns: int = 4
    max_level: int = 3
    retries: int = 1
    #: Highest merge level.  A merged summary stands for at most
    #: ``segment_turns * merge_after ** max_merge_level`` turns (96 by default), so
    #: rebuilding one after a supersession costs the same in a session of any length.
    max_merge_level: int = 2

    def __post_init__(self) -> None:
        if self.segment_turns < 1 or self.merge_after < 2:
            raise ValueError("segment_turns must be >= 1 and merge_after >= 2")
        if not 0 < self.keep_fraction < self.trigger_fraction <= 1:
            raise ValueError("need 0 < keep_fraction < trigger_fraction <= 1")


@dataclass
class CompactionReport:
    """What one :meth:`Compactor.maybe_compact` call did, and why."""

    session_id: str
    triggered: bool = False
    reason: str = ""
    tail_tokens: int = 0
    threshold: int = 0
    level: int = 0
    thrash: bool = False
    summaries: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    source_tokens: int = 0
    summary_tokens: int = 0

    @property
    def ratio(self) -> float | None:
        """Summary tokens per source token (lower is more compression)."""
        return self.summary_tokens / self.source_tokens if self.source_tokens else None


@dataclass(frozen=True)
class SessionInputs:
    """What the compactor reads of a session, when the caller already holds it
    (the engine's session view), so a call does not read the timeline again."""

    units: Sequence[Unit]
    summaries: Sequence[Event]  # every summary, any status, oldest first
    level: int
    overturned: Mapping[str, Sequence[str]]
    #: the top summaries a new overturn may touch (found through the caller's index);
    #: ``None``: check every top summary
    touched: Sequence[Event] | None = None
    #: last seq a segment handled, when the caller keeps it (else read from summaries)
    covered_to: int | None = None


def summary_lines(summary: Event) -> list[SourceLine]:
    """A stored summary as source lines again (for merging and for recall)."""
    out = []
    for raw in (summary.content or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _LINE.match(line)
        if m:
            out.append(SourceLine(summary.id, int(m["seq"]), m["role"], m["text"]))
        else:
            seq = int(summary.payload.get("seq_from", summary.seq))
            out.append(SourceLine(summary.id, seq, "summary", line.lstrip("- ").strip()))
    return out


def _check_text(summary: str) -> str:
    return _PREFIX.sub(" ", summary)


class Compactor:
    """Writes, merges, verifies and refreshes the summaries of sessions in a store."""

    def __init__(
        self,
        writer: StoreWriter,
        summarizer: Summarizer,
        *,
        policy: CompactionPolicy | None = None,
        edit_policy: EditPolicy | None = None,
        overturned: Any = None,
    ) -> None:
        #: Summaries, notes and rollbacks go through it (the engine's views follow them).
        self.writer = writer
        #: What the compactor reads (the writer's store).
        self.store = writer.store
        self.summarizer = summarizer
        self.policy = policy or CompactionPolicy()
        self.edit_policy = edit_policy or EditPolicy()
        #: callable(session_id) -> {event id: [overturned wording]}
        self.overturned = overturned or (lambda _sid: {})
        self._lock = threading.RLock()
        self._meta: dict[str, dict[str, Any]] = {}
        self._said = FirstSaid()  # when each sentence was first said: rebuilds read no history
        self._unit_tokens: dict[tuple[Any, ...], int] = {}
        #: session -> (last covered seq, sentences said up to it): grows with coverage
        self._seen: dict[str, tuple[int, set[str]]] = {}
        #: called between segments (maintenance gives way to reads there)
        self.pause: Callable[[], None] = lambda: None

    # ----------------------------------------------------------------- state
    def summaries(self, session_id: str, *, include_inactive: bool = False) -> list[Event]:
        return self.store.timeline(
            session_id, types=(EventType.SUMMARY,), include_inactive=include_inactive
        )

    def level(self, session_id: str) -> int:
        """Thrash level: how many times the guard fired (capped); 0 is normal."""
        warnings = self.store.timeline(session_id, types=(EventType.WARNING,))
        n = sum(1 for w in warnings if w.payload.get("kind") == "thrash")
        return min(n, self.policy.max_level)

    def top_summaries(self, session_id: str) -> list[Event]:
        """Active summaries not merged into a higher one, oldest first."""
        return top_of(self.summaries(session_id))

    def covered_to(self, session_id: str, summaries: Sequence[Event] | None = None) -> int:
        """Last seq handled by a level-0 segment (summarised, or kept as originals)."""
        allsum = (
            summaries
            if summaries is not None
            else self.summaries(session_id, include_inactive=True)
        )
        return max(
            (int(s.payload.get("seq_to", -1)) for s in allsum if s.payload.get("level", 0) == 0),
            default=-1,
        )

    def rolled_back(self, session_id: str) -> list[Event]:
        """Segments whose summary failed the retention check (originals kept)."""
        return [
            s
            for s in self.summaries(session_id, include_inactive=True)
            if (s.payload.get("retention") or {}).get("outcome") == "rolled_back"
            and s.payload.get("level", 0) == 0
        ]

    def stats(self, session_id: str, inputs: SessionInputs | None = None) -> dict[str, Any]:
        if inputs is None:
            return stats_of(
                self.summaries(session_id, include_inactive=True), self.level(session_id)
            )
        return stats_of(inputs.summaries, inputs.level)

    # ------------------------------------------------------------ compaction
    def unit_tokens(self, unit: Unit, editor: Editor, counter: TokenCounter) -> int:
        ov = editor.overturned
        key = (
            *unit.ids,
            counter.encoding_name,
            tuple((i, tuple(ov[i])) for i in unit.ids if i in ov),
        )
        hit = self._unit_tokens.get(key)
        if hit is None:
            edited = editor.edit_unit(unit)
            hit = counter.count_messages(edited.messages, prime_reply=False) if edited else 0
            if len(self._unit_tokens) > 50_000:
                self._unit_tokens.clear()
            self._unit_tokens[key] = hit
        return hit

    def maybe_compact(
        self,
        session_id: str,
        *,
        window_tokens: int,
        counter: TokenCounter,
        force: bool = False,
        inputs: SessionInputs | None = None,
    ) -> CompactionReport:
        """Compact if the uncovered turns passed the trigger (or ``force``)."""
        if window_tokens <= 0:
            raise ValueError("window_tokens must be positive")
        with self._lock:
            inp = inputs or self.read_inputs(session_id)
            return self._maybe_compact(session_id, window_tokens, counter, force, inp)

    def read_inputs(self, session_id: str) -> SessionInputs:
        """The session's inputs straight from the store (no view at hand)."""
        _systems, units = read_units(self.store, session_id)
        return SessionInputs(
            units,
            self.summaries(session_id, include_inactive=True),
            self.level(session_id),
            self.overturned(session_id),
        )

    def _maybe_compact(
        self, session_id: str, window: int, counter: TokenCounter, force: bool,
        inp: SessionInputs,
    ) -> CompactionReport:  # fmt: skip
        p = self.policy
        report = CompactionReport(session_id, threshold=int(p.trigger_fraction * window))
        allsum = list(inp.summaries)
        covered = (
            inp.covered_to if inp.covered_to is not None else self.covered_to(session_id, allsum)
        )
        units = inp.units
        editor = Editor(self.edit_policy, inp.overturned, self.store.get_artifact)
        tail = units_after(units, covered)
        tokens = [self.unit_tokens(u, editor, counter) for u in tail]
        report.tail_tokens = sum(tokens)
        report.level = level = min(inp.level, p.max_level)
        if report.tail_tokens <= report.threshold and not force:
            report.reason = "below trigger"
            return report
        if not force:  # where a worker that never fell behind would have compacted
            cut = self._cut(allsum, tail, tokens, report.threshold)
            if cut is None:
                level, _wait = self._pace(session_id, allsum, tail, report, level, window, force)
                return report
            tail, tokens = tail[: cut + 1], tokens[: cut + 1]
            units = [u for u in units if u.seq_from <= tail[-1].seq_to]
        level, wait = self._pace(session_id, allsum, tail, report, level, window, force)
        if wait:
            return report
        keep = p.keep_fraction * window * 0.5**level
        min_turns = max(2, p.segment_turns >> level) if level else p.segment_turns
        segments = self._plan(tail[:-1] if len(tail) > 1 else [], tokens, keep, min_turns)
        # compaction per scope: a summary never mixes two business lines (scopes.py)
        segments = [r for seg in segments for r in runs(seg, lambda u: (e.scope for e in u.events))]
        if not segments:
            report.reason = "nothing old enough to compact"
            return report
        report.triggered = True
        report.reason = (
            "forced" if force else f"tail {report.tail_tokens} > trigger {report.threshold}"
        )
        seen = self._seen_until(session_id, editor, units, covered)
        last_seq = units[-1].seq_to if units else -1
        cooldown = p.thrash_turns * 2 ** (level - 1) if level else 0
        for seg in segments:
            self.pause()
            ev = self._segment(session_id, seg, editor, seen, counter,
                               {"at_seq": last_seq, "window_tokens": window,
                                "thrash_level": level, "cooldown_turns": cooldown})  # fmt: skip
            report.summaries.append(ev.id)
            report.source_tokens += int(ev.payload["source_tokens"])
            report.summary_tokens += int(ev.payload["summary_tokens"])
            if ev.payload["retention"]["outcome"] == "rolled_back":
                report.rolled_back.append(ev.id)
        self._seen[session_id] = (max(covered, segments[-1][-1].seq_to), seen)
        self._said.index(session_id, editor, units)
        made = sorted(self.store.get(report.summaries, include_inactive=True), key=_seq)
        report.merged = self._merge_all(session_id, counter, [*allsum, *made])
        return report

    def _pace(
        self,
        session_id: str,
        allsum: Sequence[Event],
        tail: Sequence[Unit],
        report: CompactionReport,
        level: int,
        window: int,
        force: bool,
    ) -> tuple[int, bool]:
        """(thrash level, wait?): back off after a recent compaction, or adapt to thrash."""
        last = max(allsum, key=lambda s: int(s.payload.get("at_seq", -1)), default=None)
        if last is None or force:
            return level, False
        at_seq = int(last.payload.get("at_seq", -1))
        turns_since = sum(u.turns for u in tail if u.seq_from > at_seq)
        cooldown = int(last.payload.get("cooldown_turns", 0))
        if turns_since < cooldown:
            report.reason = f"backing off: {turns_since}/{cooldown} turns since last compaction"
            return level, True
        if turns_since <= self.policy.thrash_turns:
            level = min(level + 1, self.policy.max_level)
            report.thrash, report.level = True, level
            self._warn_thrash(session_id, turns_since, report, level, window)
        return level, False

    def _cut(
        self,
        allsum: Sequence[Event],
        tail: Sequence[Unit],
        tokens: Sequence[int],
        threshold: int,
    ) -> int | None:
        """The unit a compaction is made at: the first that takes the uncovered tail past
        the trigger with the back-off after the last compaction over (``None``: no unit
        yet).  Cutting there, not wherever the tail has got to when the worker runs,
        gives the same summaries however far behind maintenance was."""
        last = max(allsum, key=lambda s: int(s.payload.get("at_seq", -1)), default=None)
        at_seq = int(last.payload.get("at_seq", -1)) if last is not None else -1
        cooldown = int(last.payload.get("cooldown_turns", 0)) if last is not None else 0
        total = turns_since = 0
        for i, (u, n) in enumerate(zip(tail, tokens, strict=True)):
            total += n
            turns_since += u.turns if u.seq_from > at_seq else 0
            if total > threshold and turns_since >= cooldown:
                return i
        return None

    def warm(self, session_id: str, inputs: SessionInputs) -> None:
        """Index the sentences of the session's turns now (a background catch-up), not
        in the first compaction or rebuild after a start, which would read them all."""
        with self._lock:
            covered = inputs.covered_to
            if covered is None:
                covered = self.covered_to(session_id, list(inputs.summaries))
            editor = Editor(self.edit_policy, inputs.overturned, self.store.get_artifact)
            self._seen[session_id] = (
                covered,
                self._seen_until(session_id, editor, inputs.units, covered),
            )
            self._said.index(session_id, editor, inputs.units)

    def _seen_until(
        self, session_id: str, editor: Editor, units: Sequence[Unit], covered: int
    ) -> set[str]:
        """Sentences said in turns up to ``covered`` (extended, not re-read, per call)."""
        upto, seen = self._seen.get(session_id, (-1, set()))
        if upto > covered:
            upto, seen = -1, set()
        editor.source_lines([u for u in units if upto < u.seq_to <= covered], seen=seen)
        return seen

    @staticmethod
    def _plan(
        tail: Sequence[Unit], tokens: Sequence[int], keep: float, min_turns: int
    ) -> list[list[Unit]]:
        remaining = float(sum(tokens))  # the whole tail, the newest unit included
        segments: list[list[Unit]] = []
        i = 0
        while remaining > keep and i < len(tail):
            j, turns = i, 0
            while j < len(tail) and turns < min_turns:
                turns += tail[j].turns
                j += 1
            if turns < min_turns:
                break
            segments.append(list(tail[i:j]))
            remaining -= sum(tokens[i:j])
            i = j
        return segments

    def _warn_thrash(
        self, session_id: str, turns_since: int, report: CompactionReport, level: int, window: int
    ) -> None:
        keep = int(self.policy.keep_fraction * window * 0.5**level)
        payload = {
            "kind": "thrash",
            "turns_since_compaction": turns_since,
            "tail_tokens": report.tail_tokens,
            "trigger_tokens": report.threshold,
            "level": level,
            "action": (
                f"compact harder (keep <= {keep} tokens uncompacted), shorter segments, "
                f"back off {self.policy.thrash_turns * 2 ** (level - 1)} turns, "
                f"immediate layer x{0.7**level:.2f}"
            ),
        }
        text = (
            f"Context refilled to the compaction trigger {turns_since} turn(s) after the last "
            f"compaction; adapting (level {level})."
        )
        self._append(
            session_id,
            EventType.WARNING,
            text,
            payload,
            key=f"thrash:{report.tail_tokens}:{turns_since}:{level}",
        )

    # --------------------------------------------------------------- segments
    def _summarize_checked(
        self, lines: Sequence[SourceLine], source_text: str
    ) -> tuple[str, dict[str, Any]]:
        keys = L.retention_keys(source_text)
        summary = self.summarizer.summarize(lines) if lines else ""
        missing = L.missing_keys(source_text, _check_text(summary), keys)
        attempts = 1
        while missing and attempts <= self.policy.retries:
            summary = self.summarizer.summarize(lines, must_keep=missing)
            missing = L.missing_keys(source_text, _check_text(summary), keys)
            attempts += 1
        if not lines:
            outcome = "empty"
        elif missing:
            outcome = "rolled_back"
        else:
            outcome = "ok" if attempts == 1 else "retried"
        return summary, {
            "checked": len(keys),
            "missing": missing,
            "attempts": attempts,
            "outcome": outcome,
        }

    def _segment(
        self,
        session_id: str,
        units: Sequence[Unit],
        editor: Editor,
        seen: set[str],
        counter: TokenCounter,
        extra: dict[str, Any],
        *,
        version: int = 1,
    ) -> Event:
        lines = editor.source_lines(units, seen=seen)
        source_text = "\n".join(ln.text for ln in lines)
        summary, retention = self._summarize_checked(lines, source_text)
        events = [e for u in units for e in u.events]
        raw = counter.count_messages([m for u in units for m in u.messages], prime_reply=False)
        edited = counter.count_text("\n".join(ln.render() for ln in lines))
        out = counter.count_text(summary)
        ids = [e.id for e in events]
        overturned = editor.overturned
        payload = {
            "level": 0,
            "seq_from": min(e.seq for e in events),
            "seq_to": max(e.seq for e in events),
            "turns": sum(u.turns for u in units),
            "source_ids": ids,
            "edited_tokens": edited,
            **self._accounting(raw, out, retention, version),
            "overturned_applied": sorted(_overturn_keys(ids, overturned)),
            **extra,
        }
        ev = self._append(
            session_id,
            EventType.SUMMARY,
            summary,
            payload,
            links={EdgeType.SUMMARIZES: tuple(ids)},
            scope=derived(e.scope for e in events),
            key=f"segment:{ids[0]}:{ids[-1]}:v{version}:{len(payload['overturned_applied'])}",
        )
        if retention["outcome"] == "rolled_back":
            self._roll_back(session_id, ev, retention["missing"])
        return ev

    def _accounting(
        self, source_tokens: int, summary_tokens: int, retention: dict[str, Any], version: int
    ) -> dict[str, Any]:
        """What every summary records about its cost, its check and its maker."""
        return {
            "source_tokens": source_tokens,
            "summary_tokens": summary_tokens,
            "ratio": round(summary_tokens / source_tokens, 4) if source_tokens else None,
            "retention": retention,
            "summarizer": self.summarizer.name,
            "version": version,
        }

    def _roll_back(self, session_id: str, ev: Event, missing: Sequence[str]) -> None:
        reason = "retention check failed: lost " + ", ".join(missing[:10]) + "; originals kept"
        self.writer.invalidate([ev.id], reason)
        self._append(
            session_id,
            EventType.WARNING,
            f"Summary of #{ev.payload['seq_from']}-#{ev.payload['seq_to']} rolled back: {reason}.",
            {"kind": "retention", "summary_id": ev.id, "missing": list(missing)},
            key=f"retention:{ev.id}",
            scope=ev.scope,
        )

    # ----------------------------------------------------------------- merges
    def _merge_all(
        self, session_id: str, counter: TokenCounter, allsum: list[Event] | None = None
    ) -> list[str]:
        """Merge full pools level by level.  ``allsum`` (every summary, any status) is
        extended with each merge made, so a long catch-up does not read every summary
        of the session back per merge."""
        merged: list[str] = []
        if allsum is None:
            allsum = self.summaries(session_id, include_inactive=True)
        pools = self._pools(allsum)
        while pools:  # lowest level first: its merges join the level above
            level = min(pools)
            pool = pools.pop(level)
            while chunks := self._full_chunks(pool):
                taken: set[str] = set()
                for children in chunks:
                    ev = self._merge(session_id, children, level + 1, counter)
                    merged.append(ev.id)
                    taken.update(c.id for c in children)
                    got = self.store.get([ev.id], include_inactive=True)
                    active = got and got[0].status.value == "active"
                    if active and level + 1 < self.policy.max_merge_level:
                        pools.setdefault(level + 1, []).append(got[0])
                pool = [s for s in pool if s.id not in taken]  # left-overs may join up
        return merged

    def _full_chunks(self, pool: Sequence[Event]) -> list[list[Event]]:
        """Consecutive groups of ``merge_after`` summaries of one scope (a merge never
        mixes two business lines), oldest first: one pass over the pool for all of
        them, so a long catch-up does not rescan the pool per merge."""
        n = self.policy.merge_after
        return [
            run[i : i + n]
            for run in runs(pool, lambda s: (s.scope,))
            for i in range(0, len(run) - n + 1, n)
        ]

    def _pools(self, allsum: Sequence[Event]) -> dict[int, list[Event]]:
        """Per level below the cap: active summaries no merge holds yet, oldest first
        (children of a merge that was rolled back are not tried again)."""
        active = [s for s in allsum if s.status.value == "active"]
        covered = {c for s in active for c in s.payload.get("children") or ()}
        tried = {
            c
            for s in allsum
            if s.status.value != "active"
            and (s.payload.get("retention") or {}).get("outcome") == "rolled_back"
            for c in s.payload.get("children") or ()
        }
        pools: dict[int, list[Event]] = {}
        for s in active:
            level = int(s.payload.get("level", 0))
            free = s.id not in covered and s.id not in tried
            if level < self.policy.max_merge_level and s.content and free:
                pools.setdefault(level, []).append(s)
        # by the turns they cover, not by when they were written (a rebuilt summary is
        # stored later than its neighbours, and must be merged with the same ones)
        return {lv: sorted(pool, key=_seq_from) for lv, pool in pools.items()}

    def _merge(
        self,
        session_id: str,
        children: Sequence[Event],
        level: int,
        counter: TokenCounter,
        *,
        version: int = 1,
        written: tuple[str, dict[str, Any]] | None = None,
    ) -> Event:
        """A summary of ``children`` one level up (``written``: its text and retention
        check already made, by :meth:`_patched`)."""
        if written is None:
            lines = [ln for c in children for ln in summary_lines(c)]
            written = self._summarize_checked(lines, "\n".join(ln.text for ln in lines))
        summary, retention = written
        src = sum(int(c.payload.get("summary_tokens", 0)) for c in children)
        out = counter.count_text(summary)
        raw_ids = [
            i
            for c in children
            for i in (c.payload.get("raw_ids") or c.payload.get("source_ids") or ())
        ]
        payload = {
            "level": level,
            "seq_from": min(int(c.payload.get("seq_from", c.seq)) for c in children),
            "seq_to": max(int(c.payload.get("seq_to", c.seq)) for c in children),
            "children": [c.id for c in children],
            "raw_ids": raw_ids,
            **self._accounting(src, out, retention, version),
            "overturned_applied": sorted(
                {k for c in children for k in c.payload.get("overturned_applied") or ()}
            ),
        }
        ev = self._append(
            session_id,
            EventType.SUMMARY,
            summary,
            payload,
            links={EdgeType.SUMMARIZES: tuple(c.id for c in children)},
            scope=derived(c.scope for c in children),
            key=f"merge:{':'.join(c.id for c in children)}:v{version}",
        )
        if retention["outcome"] == "rolled_back":
            self._roll_back(session_id, ev, retention["missing"])
        return ev

    # ---------------------------------------------------------------- refresh
    def refresh_stale(
        self, session_id: str, counter: TokenCounter, inputs: SessionInputs | None = None
    ) -> list[str]:
        """Rebuild summaries that still hold an instruction the user has overturned."""
        overturned = inputs.overturned if inputs else self.overturned(session_id)
        if not overturned:
            return []
        with self._lock:
            if inputs is not None and inputs.touched is not None:
                tops: Sequence[Event] = inputs.touched
            else:
                tops = top_of(inputs.summaries) if inputs else self.top_summaries(session_id)
            stale = [s for s in tops if self._stale(s, overturned)]
            if not stale:
                return []
            units = inputs.units if inputs else read_units(self.store, session_id)[1]
            editor = Editor(self.edit_policy, overturned, self.store.get_artifact)
            return [self._rebuild(session_id, s, editor, units, counter).id for s in stale]

    @staticmethod
    def _stale(s: Event, overturned: Mapping[str, Sequence[str]]) -> bool:
        raw = s.payload.get("raw_ids") or s.payload.get("source_ids") or ()
        return bool(
            _overturn_keys(raw, overturned) - set(s.payload.get("overturned_applied") or ())
        )

    def _rebuild(
        self,
        session_id: str,
        s: Event,
        editor: Editor,
        units: Sequence[Unit],
        counter: TokenCounter,
    ) -> Event:
        version = int(s.payload.get("version", 1)) + 1
        if int(s.payload.get("level", 0)) == 0:
            ids = set(s.payload.get("source_ids") or ())
            lo, hi = int(s.payload.get("seq_from", 0)), int(s.payload.get("seq_to", 1 << 62))
            seg = [u for u in units_between(units, lo, hi) if set(u.ids) & ids]
            if not seg:  # sources gone (purged): rebuild from the stored events
                _sys, seg = split_units(self.store.get(list(ids)))
            seen = self._said.before(session_id, editor, units, lo, seg)
            keep = {
                k: s.payload[k]
                for k in ("at_seq", "window_tokens", "thrash_level", "cooldown_turns")
                if k in s.payload
            }
            new = self._segment(session_id, seg, editor, seen, counter, keep, version=version)
        else:
            children = sorted(
                self.store.get(list(s.payload.get("children") or ()), include_inactive=True),
                key=_seq_from,
            )
            fresh = [
                self._rebuild(session_id, c, editor, units, counter)
                if self._stale(c, editor.overturned)
                else c
                for c in children
            ]
            new = self._merge(
                session_id,
                fresh,
                int(s.payload["level"]),
                counter,
                version=version,
                written=self._patched(s, children, fresh),
            )
        if s.status.value == "active":
            self.writer.invalidate([s.id], "rebuilt without an overturned instruction", by=new.id)
        return new

    def _patched(
        self, old: Event, children: Sequence[Event], fresh: Sequence[Event]
    ) -> tuple[str, dict[str, Any]] | None:
        """``old`` with only its rebuilt children's lines written again.

        Every line of an extractive summary names the turn it came from (``#seq``), so a
        child's lines are the ones in its turn range: a supersession rewrites the lines
        of the segment it touched, not the whole merge.  ``None`` (merge again in full)
        when a line names no turn (an LLM's notes) or a rebuilt child was rolled back."""
        rows = [ln.strip() for ln in (old.content or "").splitlines() if ln.strip()]
        found = [_LINE.match(r) for r in rows]
        if not rows or not all(found):
            return None
        seqs = [int(m["seq"]) for m in found if m]
        parts: list[str] = []
        checked, attempts = 0, 1
        for c, f in zip(children, fresh, strict=True):
            if c.id == f.id:
                lo, hi = _seq_from(c), int(c.payload.get("seq_to", c.seq))
                parts += [r for r, q in zip(rows, seqs, strict=True) if lo <= q <= hi]
                continue
            lines = summary_lines(f)
            if f.status.value != "active" or any(ln.role == "summary" for ln in lines):
                return None
            text, ret = self._summarize_checked(lines, "\n".join(ln.text for ln in lines))
            if ret["outcome"] == "rolled_back":
                return None
            parts += [r for r in text.splitlines() if r.strip()]
            checked, attempts = checked + ret["checked"], max(attempts, ret["attempts"])
        outcome = "ok" if attempts == 1 else "retried"
        return "\n".join(parts), {
            "checked": checked,
            "missing": [],
            "attempts": attempts,
            "outcome": outcome,
            "patched": True,
        }

    # ---------------------------------------------------------------- writing
    def _append(
        self,
        session_id: str,
        etype: EventType,
        content: str,
        payload: dict[str, Any],
        *,
        links: dict[EdgeType, tuple[str, ...]] | None = None,
        key: str,
        scope: str | None = None,
    ) -> Event:
        meta = self._session_meta(session_id)
        if scope is not None:  # of its sources (see scopes.py)
            meta["scope"] = scope
        ev = Event(
            id=event_id_for(self.store.tenant, session_id, f"compactor:{key}"),
            tenant=self.store.tenant,
            session_id=session_id,
            type=etype,
            role="system",
            content=content,
            payload=payload,
            links=links or {},
            meta=meta,
            source=_SOURCE,
        )
        self.writer.append([ev])
        got = self.store.get([ev.id], include_inactive=True)
        return got[0] if got else ev

    def _session_meta(self, session_id: str) -> dict[str, Any]:
        """Who the session's summaries belong to (read once per session)."""
        hit = self._meta.get(session_id)
        if hit is None:
            last = self.store.timeline(session_id, types=(EventType.USER_MESSAGE,), last=1)
            hit = {
                k: last[0].meta[k] for k in ("user_id", "agent_id") if last and last[0].meta.get(k)
            }
            if last:  # known once the user has spoken
                self._meta[session_id] = hit
                if len(self._meta) > 4096:
                    self._meta.pop(next(iter(self._meta)))
        return {**hit, "tags": ["compaction"]}


def stats_of(allsum: Sequence[Event], level: int) -> dict[str, Any]:
    """Segments, merges, roll-backs and compression of a session's summaries."""
    active = [s for s in allsum if s.status.value == "active"]
    seg = [s for s in active if s.payload.get("level", 0) == 0]
    src = sum(int(s.payload.get("source_tokens", 0)) for s in seg)
    dst = sum(int(s.payload.get("summary_tokens", 0)) for s in seg)
    rolled = [
        s
        for s in allsum
        if s.payload.get("level", 0) == 0
        and (s.payload.get("retention") or {}).get("outcome") == "rolled_back"
    ]
    counts = {
        "segments": len(seg),
        "merged": len(active) - len(seg),
        "source_tokens": src,
        "summary_tokens": dst,
    }
    return stats_row(counts, len(rolled), level)


def stats_row(counts: Mapping[str, int], rolled_back: int, level: int) -> dict[str, Any]:
    """The stats dict from its counts (segments, merged, source/summary tokens)."""
    src, dst = counts["source_tokens"], counts["summary_tokens"]
    return {
        "segments": counts["segments"],
        "merged": counts["merged"],
        "rolled_back": rolled_back,
        "source_tokens": src,
        "summary_tokens": dst,
        "ratio": dst / src if src else None,
        "thrash_level": level,
    }


def top_of(summaries: Sequence[Event]) -> list[Event]:
    """Active summaries not merged into a higher one, oldest first."""
    active = [s for s in summaries if s.status.value == "active"]
    covered = {c for s in active for c in s.payload.get("children") or ()}
    return [s for s in active if s.id not in covered]


def _seq(ev: Event) -> int:
    return ev.seq


def _seq_from(ev: Event) -> int:
    return int(ev.payload.get("seq_from", ev.seq))


def units_between(units: Sequence[Unit], lo: int, hi: int) -> list[Unit]:
    """The units overlapping seqs ``lo``..``hi`` (units are in seq order: bisected)."""
    i = bisect.bisect_left(units, lo, key=_unit_end)
    out = []
    while i < len(units) and units[i].seq_from <= hi:
        out.append(units[i])
        i += 1
    return out


def _unit_end(u: Unit) -> int:
    return u.seq_to


def units_after(units: Sequence[Unit], seq: int) -> list[Unit]:
    """The units that start after ``seq`` (units start in seq order: read from the end)."""
    i = len(units)
    while i > 0 and units[i - 1].seq_from > seq:
        i -= 1
    return list(units[i:])


def _overturn_keys(ids: Sequence[str], overturned: Mapping[str, Sequence[str]]) -> set[str]:
    return {f"{i}:{L.fold(t)}" for i in ids if i in overturned for t in overturned[i]}
