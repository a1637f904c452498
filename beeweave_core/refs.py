"""REFERS_TO edges: a later tool call (or answer) that reuses a value an earlier tool returned.

The matching runs as a bus listener, on the capture writer thread, so parsing a big
tool output never costs the agent's thread anything.  Values are what an agent
copies from one tool into the next: numbers (at least three digits, or with a
fraction), ids and codes (``ORD-11499``, ``JOB-7731``, ``user@example.com``) and
whole strings of reasonable length.  Plain short words are ignored — they repeat by
chance.  The index is per session, bounded, and rebuilt from the store's recent tool
results the first time a session shows up after a restart.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from beeweave_core.events import Edge, EdgeType, Event, EventType

log = logging.getLogger("beeweave.refs")

MIN_STRING = 4
MAX_STRING = 200
MIN_INT = 100
MAX_SCALARS = 2_000  # per tool output: bounds the work on the writer thread
MAX_VALUES_PER_SESSION = 20_000
MAX_SESSIONS = 512
RELOAD_RESULTS = 200  # tool results re-read from the store after a restart

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_TOKEN = re.compile(r"[\w$€£][\w\-./:@#]*[\w]")
_IDLIKE = re.compile(r"\d|[-_@#]")


def _norm_number(x: float | int) -> str | None:
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            return None
        if x.is_integer():
            x = int(x)
        else:
            return format(x, ".10g")
    return str(x) if abs(x) >= MIN_INT else None


def _text_values(text: str, *, whole: bool) -> Iterator[str]:
    """Numbers and id-like tokens in ``text`` (and the whole text when ``whole``)."""
    stripped = text.strip()
    if whole and MIN_STRING <= len(stripped) <= MAX_STRING:
        yield "s:" + stripped.casefold()
    for m in _NUMBER.finditer(text):
        raw = m.group(0).replace(",", "")
        try:
            n = _norm_number(float(raw) if "." in raw else int(raw))
        except ValueError:
            continue
        if n is not None:
            yield "n:" + n
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if len(tok) >= MIN_STRING and _IDLIKE.search(tok) and not tok.replace(".", "").isdigit():
            yield "s:" + tok.casefold()


def values_of(obj: Any, *, whole_strings: bool = True, limit: int = MAX_SCALARS) -> set[str]:
    """The distinctive values inside a JSON-like object (or a text holding JSON)."""
    if isinstance(obj, str):
        s = obj.strip()
        if s[:1] in ("{", "[") and len(s) < 5_000_000:
            with contextlib.suppress(ValueError):
                obj = json.loads(s)
    out: set[str] = set()
    stack = [obj]
    seen = 0
    while stack and seen < limit:
        x = stack.pop()
        seen += 1
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, bool) or x is None:
            continue
        elif isinstance(x, (int, float)):
            n = _norm_number(x)
            if n is not None:
                out.add("n:" + n)
        elif isinstance(x, str):
            out.update(_text_values(x, whole=whole_strings))
    return out


class ValueRefLinker:
    """Bus listener that links reuse of tool-result values with REFERS_TO edges."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._index: OrderedDict[str, OrderedDict[str, str]] = OrderedDict()
        self.linked = 0

    def _session(self, session_id: str, batch_ids: set[str]) -> OrderedDict[str, str]:
        idx = self._index.get(session_id)
        if idx is not None:
            self._index.move_to_end(session_id)
            return idx
        idx = OrderedDict()
        self._index[session_id] = idx
        if len(self._index) > MAX_SESSIONS:
            self._index.popitem(last=False)
        try:  # after a restart: earlier results of this session are in the store only
            earlier = self.store.timeline(
                session_id, last=RELOAD_RESULTS, types=[EventType.TOOL_RESULT]
            )
        except Exception:
            log.debug("beeweave: could not reload tool results of %s", session_id, exc_info=True)
            earlier = []
        for ev in earlier:
            if ev.id not in batch_ids:
                self._add(idx, ev)
        return idx

    def _add(self, idx: OrderedDict[str, str], ev: Event) -> None:
        src = ev.payload.get("$content_value", ev.content)
        for v in values_of(src):
            idx[v] = ev.id
            idx.move_to_end(v)
        while len(idx) > MAX_VALUES_PER_SESSION:
            idx.popitem(last=False)

    def refs(self, ev: Event, idx: OrderedDict[str, str]) -> list[str]:
        if ev.type == EventType.TOOL_INVOCATION:
            found = values_of(ev.payload.get("args", ev.content))
        else:  # an answer: only numbers and ids, whole sentences never match
            found = values_of(ev.content, whole_strings=False)
        hits = {idx[v] for v in found if v in idx}
        hits.discard(ev.id)
        return sorted(hits)

    def __call__(self, events: list[Event]) -> None:
        batch_ids = {ev.id for ev in events}
        edges: list[Edge] = []
        for ev in events:
            if ev.type not in _WATCHED:
                continue
            idx = self._session(ev.session_id, batch_ids)
            if ev.type == EventType.TOOL_RESULT:
                self._add(idx, ev)
            else:
                edges.extend(
                    Edge(src=ev.id, dst=dst, type=EdgeType.REFERS_TO) for dst in self.refs(ev, idx)
                )
        if edges:
            self.linked += self.store.link(edges) or 0


_WATCHED = frozenset(
    {EventType.TOOL_RESULT, EventType.TOOL_INVOCATION, EventType.ASSISTANT_MESSAGE}
)
