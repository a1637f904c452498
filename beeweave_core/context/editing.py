"""Context editing: what is cut before anything is summarised or shown again.

Three cheap, lossless-in-spirit edits run on stored turns before they reach a model or
a summarizer: pure acknowledgements ("ok", "好的", "继续") are dropped, repeated
sentences are kept once, and a raw tool output over a size is cut to its key fields
and numbers (the full output stays in the store, one event id away).  A fourth edit
removes the wording of instructions the user has since overturned, so an old plan
cannot come back through a verbatim turn or a summary.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.context.messages import Unit, tool_args, tool_name
from beeweave_core.events import Event, EventType
from beeweave_core.text import language as L

#: Marker put where an overturned instruction was removed from a verbatim turn.
OVERTURNED_MARK = "[superseded instruction omitted]"


@dataclass(frozen=True)
class EditPolicy:
    """Knobs of the editor (the defaults are what the benchmarks use)."""

    drop_acks: bool = True
    merge_repeats: bool = True
    #: tool outputs longer than this (characters) are cut to key fields
    tool_output_max_chars: int = 1200
    #: at most this many key fields are kept from one tool output
    max_fields: int = 24


@dataclass(frozen=True)
class SourceLine:
    """One line of edited source text, with where it came from."""

    event_id: str
    seq: int
    role: str
    text: str

    def render(self) -> str:
        return f"#{self.seq} {self.role}: {self.text}"


# ------------------------------------------------------------- tool outputs
def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    s = str(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _list_digest(items: list[Any]) -> str:
    """``88 items {status: ok=30, warn=35; score: 0.0059-0.98}``: shape, not rows."""
    n = len(items)
    dicts = [x for x in items if isinstance(x, Mapping)]
    if not dicts:
        sample = ", ".join(_fmt(x) for x in items[:5] if _scalar(x))
        return f"{n} items" + (f" [{sample}{', ...' if n > 5 else ''}]" if sample else "")
    parts = []
    keys: list[str] = []
    for d in dicts[:50]:
        keys += [k for k in d if k not in keys]
    for k in keys[:8]:
        vals = [d.get(k) for d in dicts if _scalar(d.get(k))]
        if not vals:
            continue
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        distinct = {str(v) for v in vals}
        if len(distinct) <= 6 and len(distinct) < len(vals):
            counts: dict[str, int] = {}
            for v in vals:
                counts[str(v)] = counts.get(str(v), 0) + 1
            parts.append(f"{k}: " + ", ".join(f"{a}={b}" for a, b in sorted(counts.items())))
        elif nums and len(nums) == len(vals) and any(isinstance(v, float) for v in nums):
            parts.append(f"{k}: {_fmt(min(nums))}..{_fmt(max(nums))}")
    return f"{n} items" + (" {" + "; ".join(parts) + "}" if parts else "")


def key_fields(value: Any, *, max_fields: int = 24) -> list[str]:
    """Scalar fields (dotted paths) and list digests of a JSON-like value."""
    out: list[str] = []

    def walk(v: Any, prefix: str, depth: int) -> None:
        if len(out) >= max_fields:
            return
        if isinstance(v, Mapping):
            for k, x in v.items():
                path = f"{prefix}{k}"
                if _scalar(x):
                    out.append(f"{path}={_fmt(x)}")
                elif isinstance(x, list):
                    out.append(f"{path}: {_list_digest(x)}")
                elif depth < 3:
                    walk(x, path + ".", depth + 1)
                if len(out) >= max_fields:
                    return
        elif isinstance(v, list):
            out.append(f"{prefix or 'result'}: {_list_digest(v)}")
        elif _scalar(v):
            out.append(f"{prefix or 'result'}={_fmt(v)}")

    walk(value, "", 0)
    return out


#: Looks up the full text of a stored artifact by its SHA-256 (``store.get_artifact``).
Resolver = Callable[[str], "str | None"]


def _payload(ev: Event, resolve: Resolver | None) -> dict[str, Any]:
    p = ev.payload or {}
    art = p.get("$payload_artifact")
    if isinstance(art, Mapping) and resolve is not None:
        full = resolve(str(art.get("sha256")))
        if full:
            try:
                return dict(json.loads(full))
            except (ValueError, TypeError):
                pass
    return dict(p)


def full_content(ev: Event, resolve: Resolver | None = None) -> str:
    """The event's whole text, fetched from its artifact when only a preview is inline."""
    art = (ev.payload or {}).get("$artifact")
    if isinstance(art, Mapping) and resolve is not None:
        full = resolve(str(art.get("sha256")))
        if full is not None:
            return full
    return ev.content or ""


def _parse_output(ev: Event, resolve: Resolver | None = None) -> Any:
    p = _payload(ev, resolve)
    if "output" in p and not isinstance(p["output"], str):
        return p["output"]
    text = full_content(ev, resolve)
    try:
        return json.loads(text)
    except ValueError:
        return None


def _text_digest(text: str, limit: int) -> str:
    """Non-JSON output: keep lines with numbers or error words, within ``limit`` chars."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep: list[str] = []
    size = 0
    for i, ln in enumerate(lines):
        interesting = (
            i < 3
            or L.numbers(ln)
            or any(w in ln.casefold() for w in ("error", "fail", "warn", "exception", "total", "="))
        )
        if interesting and size + len(ln) <= limit:
            keep.append(ln[:200])
            size += len(keep[-1])
    return " | ".join(keep) + (
        f" | ... ({len(lines) - len(keep)} more lines)" if len(keep) < len(lines) else ""
    )


def cut_tool_output(
    ev: Event, policy: EditPolicy = EditPolicy(), resolve: Resolver | None = None
) -> str | None:
    """The key fields of a tool result too big to show whole, else ``None``."""
    text = ev.content or ""
    big = "$artifact" in (ev.payload or {}) or len(text) > policy.tool_output_max_chars
    if not big:
        return None
    value = _parse_output(ev, resolve)
    text = full_content(ev, resolve)
    if value is not None:
        fields = key_fields(value, max_fields=policy.max_fields)
        body = "; ".join(fields)
    else:
        body = _text_digest(text, policy.tool_output_max_chars // 2)
    return (
        f"[{tool_name(ev)} output cut to key fields by BeeWeave; full output: event {ev.id}] {body}"
    )


def tool_digest(
    result: Event,
    invocation: Event | None,
    policy: EditPolicy = EditPolicy(),
    resolve: Resolver | None = None,
) -> str:
    """``name(args) → key fields``: one line that says what a tool call did and found."""
    name = tool_name(invocation or result)
    args = tool_args(invocation) if invocation is not None else None
    if isinstance(args, Mapping):
        arg_text = ", ".join(f"{k}={_fmt(v)}" for k, v in list(args.items())[:6])
    elif args:
        arg_text = _fmt(args)
    else:
        arg_text = ""
    value = _parse_output(result, resolve)
    if value is not None:
        body = "; ".join(key_fields(value, max_fields=policy.max_fields))
    else:
        text = full_content(result, resolve)
        body = text if len(text) <= 300 else _text_digest(text, 300)
    return f"{name}({arg_text}) → {body}"


# ---------------------------------------------------------------- overturned
def remove_overturned(text: str, clauses: Sequence[str]) -> str:
    """``text`` without the overturned instruction wording (marked where it was)."""
    out = text
    for c in sorted(clauses, key=len, reverse=True):
        c = c.strip()
        if not c:
            continue
        idx = L.fold(out).find(L.fold(c))
        if idx < 0:
            continue
        # map the folded index back: fold only collapses whitespace and case
        start = _unfolded_index(out, idx, skip_space=True)
        end = _unfolded_index(out, idx + len(L.fold(c)))
        out = out[:start] + OVERTURNED_MARK + out[end:]
    return out


def _unfolded_index(text: str, folded_idx: int, *, skip_space: bool = False) -> int:
    """Index in ``text`` of position ``folded_idx`` of ``fold(text)``."""
    count = 0
    prev_space = True
    for i, ch in enumerate(text):
        if count >= folded_idx and not (skip_space and ch.isspace()):
            return i
        if ch.isspace():
            if not prev_space:
                count += 1
            prev_space = True
        else:
            count += len(ch.casefold())
            prev_space = False
    return len(text)


# -------------------------------------------------------------------- editor
@dataclass
class Editor:
    """Applies the edits to units; ``overturned`` maps event id → overturned wording."""

    policy: EditPolicy = field(default_factory=EditPolicy)
    overturned: Mapping[str, Sequence[str]] = field(default_factory=dict)
    resolve: Resolver | None = None

    def text_of(self, ev: Event) -> str:
        text = ev.content or ""
        if ev.id in self.overturned:
            text = remove_overturned(text, self.overturned[ev.id])
        return text

    def edit_unit(self, unit: Unit, *, keep_acks: bool = False) -> Unit | None:
        """A unit as the immediate layer shows it; ``None`` when nothing is left."""
        if unit.kind == "user":
            ev = unit.events[0]
            text = self.text_of(ev)
            if self.policy.drop_acks and not keep_acks and L.is_ack(text):
                return None
            if text.strip() == OVERTURNED_MARK:
                return None
            return Unit(unit.kind, unit.events, [{"role": "user", "content": text}])
        messages: list[dict[str, Any]] = []
        by_id = {e.id: e for e in unit.events}
        for m in unit.messages:
            m = dict(m)
            if m["role"] == "tool":
                ev = by_id.get(unit.results.get(m["tool_call_id"], ""))
                if ev is not None:
                    m["content"] = cut_tool_output(ev, self.policy, self.resolve) or self.text_of(
                        ev
                    )
            elif (
                m["role"] == "assistant"
                and unit.events
                and unit.events[0].type == EventType.ASSISTANT_MESSAGE
            ):
                m["content"] = self.text_of(unit.events[0])
            messages.append(m)
        return Unit(unit.kind, unit.events, messages, unit.results)

    def source_lines(
        self, units: Sequence[Unit], *, seen: set[str] | None = None
    ) -> list[SourceLine]:
        """Edited lines for a summarizer: no acks, no repeats, tool outputs digested.

        ``seen`` holds folded sentences already said (earlier segments); it is updated,
        so a repeated remark is summarised once for the whole session.
        """
        seen = seen if seen is not None else set()
        lines: list[SourceLine] = []
        for unit in units:
            invocations = {e.id: e for e in unit.events if e.type == EventType.TOOL_INVOCATION}
            for ev in unit.events:
                if ev.type == EventType.TOOL_INVOCATION:
                    continue
                if ev.type == EventType.TOOL_RESULT:
                    inv = next((invocations[p] for p in ev.parents if p in invocations), None)
                    if inv is None and invocations:
                        inv = next(iter(invocations.values()))
                    digest = tool_digest(ev, inv, self.policy, self.resolve)
                    lines.append(SourceLine(ev.id, ev.seq, "tool", digest))
                    continue
                role = "user" if ev.type == EventType.USER_MESSAGE else "assistant"
                kept = []
                for s in L.sentences(self.text_of(ev)):
                    f = L.fold(s)
                    if self.policy.drop_acks and (L.is_ack(s) or L.is_transient(s)):
                        continue
                    if OVERTURNED_MARK.casefold() in f and len(f) <= len(OVERTURNED_MARK) + 2:
                        continue
                    if self.policy.merge_repeats:
                        if f in seen:
                            continue
                        seen.add(f)
                    kept.append(s)
                if kept:
                    lines.append(SourceLine(ev.id, ev.seq, role, " ".join(kept)))
        return lines


class FirstSaid:
    """Per session: which unit first said each sentence, indexed once as units arrive.

    A rebuilt segment must not repeat what earlier turns said.  Collecting every earlier
    turn's sentences per rebuild costs the whole history; this index answers "said
    before seq ``lo``?" for just the rebuilt segment's sentences.  Earlier turns count
    as they were said (an overturned sentence still counts as said)."""

    def __init__(self) -> None:
        self._cache = SeenCache()
        self._first: dict[str, tuple[int, dict[str, int]]] = {}

    def before(
        self,
        session_id: str,
        editor: Editor,
        units: Sequence[Unit],
        lo: int,
        segment: Sequence[Unit],
    ) -> set[str]:
        """The sentences of ``segment`` that a unit ending before ``lo`` already said."""
        first = self.index(session_id, editor, units)
        said = {f for u in segment for f in self._cache.of(editor, u)}
        return {f for f in said if first.get(f, lo) < lo}

    def index(self, session_id: str, editor: Editor, units: Sequence[Unit]) -> dict[str, int]:
        """Index the units not indexed yet (compaction calls it as it goes, so a
        rebuild finds the index caught up)."""
        upto, first = self._first.get(session_id, (-1, {}))
        plain = Editor(editor.policy, {}, editor.resolve)
        start = bisect.bisect_right(units, upto, key=_unit_end)
        for u in units[start:]:
            for f in self._cache.of(plain, u):
                first.setdefault(f, u.seq_to)
        if units:
            upto = max(upto, units[-1].seq_to)
        self._first[session_id] = (upto, first)
        return first


def _unit_end(u: Unit) -> int:
    return u.seq_to


class SeenCache:
    """Per unit (and the overturned wording of its events): the folded sentences it says."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._sets: dict[tuple[Any, ...], frozenset[str]] = {}

    def of(self, editor: Editor, unit: Unit) -> frozenset[str]:
        ids = tuple(unit.ids)
        ov = editor.overturned
        key = (id(editor.policy), ids, tuple((i, tuple(ov[i])) for i in ids if i in ov))
        hit = self._sets.get(key)
        if hit is None:
            seen: set[str] = set()
            editor.source_lines([unit], seen=seen)
            if len(self._sets) >= self.max_entries:
                self._sets.clear()
            hit = self._sets[key] = frozenset(seen)
        return hit


class EditCache:
    """Edited units and their token costs, kept across calls (stored turns never change).

    Only the newest turns that can fit are edited per call, so a call costs what its
    immediate layer can hold, not what the session holds.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._units: dict[tuple[Any, ...], Unit | None] = {}
        self._costs: dict[tuple[Any, ...], int] = {}

    def _key(self, editor: Editor, unit: Unit, keep_acks: bool) -> tuple[Any, ...]:
        ov = editor.overturned
        sig = tuple((i, tuple(ov[i])) for i in unit.ids if i in ov)
        return (*unit.ids, len(unit.messages), keep_acks, sig)

    def edit(self, editor: Editor, unit: Unit, keep_acks: bool) -> tuple[Unit | None, Any]:
        key = self._key(editor, unit, keep_acks)
        if key not in self._units:
            if len(self._units) > self.max_entries:
                self._units.clear()
                self._costs.clear()
            self._units[key] = editor.edit_unit(unit, keep_acks=keep_acks)
        return self._units[key], key

    def cost(self, key: tuple[Any, ...], unit: Unit, counter: Any) -> int:
        ckey = (*key, counter.encoding_name)
        hit = self._costs.get(ckey)
        if hit is None:
            hit = self._costs[ckey] = sum(counter.count_message(m) for m in unit.messages)
        return hit

    def newest(
        self, editor: Editor, units: Sequence[Unit], counter: Any, room: int
    ) -> tuple[list[Unit], list[tuple[Unit, str]], bool]:
        """(edited newest units that may fit ``room``, what editing dropped and why,
        whether that is the whole history).

        Acks and repeated turns are dropped (the latest user message, and the one that
        opens the conversation, always kept), big tool outputs cut, overturned wording out.
        """
        last_user = next(
            (i for i in range(len(units) - 1, -1, -1) if units[i].kind == "user"), None
        )
        opening = 0 if units and units[0].kind == "user" else None  # keeps the history valid
        out: list[Unit] = []
        dropped: list[tuple[Unit, str]] = []
        seen: set[str] = set()
        used = 0
        for i in range(len(units) - 1, -1, -1):
            if used > room:
                return out[::-1], dropped[::-1], False
            edited, key = self.edit(editor, units[i], keep_acks=i in (last_user, opening))
            if edited is None:
                dropped.append((units[i], "edited out: acknowledgement or overturned instruction"))
                continue
            if editor.policy.merge_repeats and edited.kind != "tool_group":
                fold = L.fold(edited.messages[0].get("content") or "")
                if fold and fold in seen and i != last_user:
                    dropped.append((units[i], "edited out: repeats a later turn"))
                    continue
                seen.add(fold)
            used += self.cost(key, edited, counter)
            out.append(edited)
        return out[::-1], dropped[::-1], used <= room
