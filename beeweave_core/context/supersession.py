"""Supersession by meaning: a newer statement that gives another value to the same
setting replaces the older one, whatever words announce it (or none).

Each statement is parsed into settings (:mod:`beeweave_core.text.statements`): the slot
(what is set, values masked) and the values it asserts or rejects.  The
:class:`SlotIndex` keeps the statements still in force, indexed by slot word, and is
updated one statement at a time (:meth:`SlotIndex.observe`), so a caller holding a
cursor never re-reads a session.

Two slots name the same setting when they are equal, or when one is contained in the
other and the longer one has no link between slot and value (in "Let's make the schema
billing" the word *billing* is the value, not part of the slot).  Slots that share
words but each have a word of their own ("export batch size" / "import batch size")
are different settings: without a judge both stay.  With a judge (an LLM, as Graphiti
invalidates edges) such ambiguous pairs, when close enough by embedding or by words,
are asked about.  The rule-only path decides everything else alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from beeweave_core.events import Event
from beeweave_core.llm import TextLLM, as_text_llm
from beeweave_core.text import language as L
from beeweave_core.text.statements import Setting, settings

#: (older statement, newer statement) → does the newer replace the older?  ``None``
#: when the judge cannot tell (the rule decision stands).
Judge = Callable[[str, str], "bool | None"]
#: Similarity of two slot texts in [0, 1] (embedding cosine, or word overlap).
Similarity = Callable[[str, str], float]

#: Extra words an unlinked new statement may carry beyond the old slot (they are its
#: value); chosen by cross-validation over conversations (``beeweave bench supersession``).
MAX_UNLINKED_EXTRA = 2
#: Ambiguous pairs closer than this go to the judge (when one is configured).
JUDGE_FLOOR = 0.6

JUDGE_PROMPT = """Two statements from one conversation, the second said later.  Does the \
second give a new value to the SAME setting as the first (so the first is no longer \
true)?  Settings that only look alike (e.g. "export batch size" vs "import batch size") are \
different.  Answer with one word: yes or no."""


@dataclass(frozen=True)
class Entry:
    """A statement in force: its id, position and settings."""

    id: str
    seq: int
    text: str
    settings: tuple[Setting, ...]


@dataclass
class SlotIndex:
    """Statements in force, by slot word; see the module docstring."""

    judge: Judge | None = None
    similarity: Similarity | None = None
    max_unlinked_extra: int = MAX_UNLINKED_EXTRA
    judge_floor: float = JUDGE_FLOOR
    _entries: dict[str, Entry] = field(default_factory=dict)
    _by_word: dict[str, set[str]] = field(default_factory=dict)

    # ------------------------------------------------------------ updating
    def observe(
        self,
        event_id: str,
        text: str,
        seq: int = -1,
        *,
        supersede: bool = True,
        found: tuple[Setting, ...] | None = None,
    ) -> list[str]:
        """Add a statement (``found``: its settings, when already parsed); return the ids
        of the statements it supersedes (now removed)."""
        found = parse(text) if found is None else found
        gone = self.superseded_by(text, found) if supersede else []
        for i in gone:
            self.forget(i)
        if found:
            self.add(Entry(event_id, seq, text, found))
        return gone

    def observe_event(self, event: Event) -> list[str]:
        """:meth:`observe` for a stored event (a user turn or a memory), by its id and seq."""
        return self.observe(event.id, event.content or "", event.seq)

    def add(self, entry: Entry) -> None:
        self.forget(entry.id)
        self._entries[entry.id] = entry
        for w in _slot_words(entry):
            self._by_word.setdefault(w, set()).add(entry.id)

    def forget(self, entry_id: str) -> None:
        entry = self._entries.pop(entry_id, None)
        if entry is not None:
            for w in _slot_words(entry):
                self._by_word.get(w, set()).discard(entry_id)

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    # ------------------------------------------------------------- querying
    def superseded_by(self, text: str, found: tuple[Setting, ...] | None = None) -> list[str]:
        """Ids of the statements in force that ``text`` gives another value to."""
        found = parse(text) if found is None else found
        out: list[str] = []
        for new in found:
            if not new.is_setting:
                continue
            for entry_id in self._decide(new, text):
                if entry_id not in out:
                    out.append(entry_id)
        return out

    def _decide(self, new: Setting, text: str) -> list[str]:
        same: list[tuple[int, str]] = []
        for entry in self._candidates(new):
            for old in (s for s in entry.settings if s.is_setting):
                verdict = self.relation(old, new)
                if verdict == "ambiguous" and self._judged(entry.text, text, old, new):
                    verdict = "same"
                if verdict == "same" and _value_changed(old, new):
                    same.append((len(old.slot), entry.id))
                    break
        if not same:
            return []
        # "batch size" and "export batch size" both in force: the most specific one goes
        best = max(n for n, _ in same)
        return [i for n, i in same if n == best]

    def _candidates(self, new: Setting) -> list[Entry]:
        ids: set[str] = set()
        for w in new.slot:
            ids |= self._by_word.get(w, set())
        return sorted((self._entries[i] for i in ids), key=lambda e: e.seq)

    def relation(self, old: Setting, new: Setting) -> str:
        """``same``, ``distinct`` or ``ambiguous`` (see the module docstring)."""
        if not old.slot or not new.slot:
            return "distinct"
        if old.slot == new.slot:
            return "same"
        for named, unlinked in ((old, new), (new, old)):
            if not unlinked.linked and named.slot <= unlinked.terms:
                extra = unlinked.slot - named.slot  # the value, in an unlinked statement
                return "same" if len(extra) <= self.max_unlinked_extra else "ambiguous"
        return "ambiguous" if old.slot & new.slot else "distinct"

    def _judged(self, old_text: str, new_text: str, old: Setting, new: Setting) -> bool:
        if self.judge is None:
            return False
        a, b = " ".join(sorted(old.slot)), " ".join(sorted(new.slot))
        sim = self.similarity(a, b) if self.similarity else L.overlap(old.slot, new.slot)[1]
        if sim < self.judge_floor:
            return False
        try:
            return bool(self.judge(old_text, new_text))
        except Exception:  # a failing judge leaves the rule decision in place
            return False


def parse(text: str) -> tuple[Setting, ...]:
    """The settings of every sentence of ``text``."""
    return tuple(s for sent in L.sentences(text) for s in settings(sent) if s.slot)


def _slot_words(entry: Entry) -> Iterable[str]:
    return {w for s in entry.settings for w in s.slot}


_UNIT_TAIL = re.compile(r"\s+[^\W\d_]+$")


def _key(atom: str) -> str:
    """A value without its unit word: "5 attempts" and "5" are one value."""
    return _UNIT_TAIL.sub("", atom) if atom[:1].isdigit() or atom[:1] in "$€£¥" else atom


def _value_changed(old: Setting, new: Setting) -> bool:
    """Does ``new`` give ``old``'s setting another value (or reject ``old``'s)?"""
    old_vals = {_key(v) for v in old.values} | (old.slot - new.slot)
    new_vals = {_key(v) for v in new.values} | (new.slot - old.slot)
    rejected = {_key(v) for v in new.negated}
    if old_vals & rejected:
        return True
    if not new_vals or not old_vals:
        return False
    return not old_vals <= new_vals


def llm_judge(llm: TextLLM | Callable[[str], str]) -> Judge:
    """A :data:`Judge` that asks ``llm`` (a :class:`~beeweave_core.llm.TextLLM` or a
    function ``str -> str``)."""
    text_llm = as_text_llm(llm)

    def judge(older: str, newer: str) -> bool | None:
        reply = text_llm.complete(JUDGE_PROMPT, f"First: {older}\nLater: {newer}")
        word = (reply or "").strip().casefold()
        if word.startswith(("yes", "是")):
            return True
        if word.startswith(("no", "否", "不")):
            return False
        return None

    return judge


def default_similarity() -> Similarity:
    """Cosine of the offline MiniLM embeddings, loaded on first use; word overlap when
    the model is not available.  Only consulted to decide whether to ask the judge."""
    model: list[object] = []

    def sim(a: str, b: str) -> float:
        if not model:
            try:
                from beeweave_core.embeddings import embeddings_named

                # MiniLM whatever the index uses: the 0.6 bar was measured on its cosines
                model.append(embeddings_named("minilm"))
            except Exception:  # no model files: the lexical fallback decides
                model.append(None)
        emb = model[0]
        if emb is None:
            return L.overlap(a.split(), b.split())[1]
        try:
            va, vb = emb.embed_array([a, b])  # type: ignore[attr-defined]
        except Exception:
            return L.overlap(a.split(), b.split())[1]
        return float(va @ vb)

    return sim
