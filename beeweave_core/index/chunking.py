"""Selective indexing: which events get vectors, and what text each vector stands for.

Embedding costs time (and money, with a hosted model); vectors of "ok" or of an empty
model-call marker only add noise to semantic search.  So only events with enough
text are embedded, and a big tool output is not embedded whole (a sentence model
reads ~256 tokens and would keep only the start): it becomes a few windows over
the text plus one *key-facts* chunk that keeps every number, id and code of the
whole output, so "what was the job id?" still finds it.  Lexical search indexes
everything regardless; this module only decides what the vector index sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from beeweave_core.events import SEARCHED_TYPES, Event, EventType
from beeweave_core.index.base import Chunk
from beeweave_core.text.segment import WORDLIKE_CHAR

#: Types worth a vector by default: what a search looks through.
DEFAULT_TYPES = SEARCHED_TYPES

_WORD = re.compile(r"[^\W_]+")
#: Ids, codes and numbers worth keeping from a long output.
_FACT = re.compile(
    r"""
    [A-Za-z][A-Za-z0-9]*[-_:/#][A-Za-z0-9][A-Za-z0-9\-_:/#.]*   # JOB-7731, orders_nightly, v1.2
  | [$€£¥]?\d[\d,.']*\d?\s?(?:%|[a-zA-Z]{1,4}\b)?             # 2,000  30s  $181  18.4M  44 min
  | [0-9a-f]{8,}                                              # hashes, hex ids
  | [\w.+-]+@[\w-]+\.[\w.]+                                   # e-mail addresses
    """,
    re.VERBOSE,
)


def text_size(text: str) -> int:
    """Words, counting each CJK or Hangul character as one (a character carries about a word)."""
    cjk = len(WORDLIKE_CHAR.findall(text))
    return len(_WORD.findall(WORDLIKE_CHAR.sub(" ", text))) + cjk


@dataclass(frozen=True)
class ChunkPolicy:
    """What gets embedded and how big texts are cut.

    ``min_words``: shorter texts are not embedded ("ok", "thanks!").
    ``max_chars``: texts up to this size are one chunk; longer ones are windowed.
    ``window`` / ``overlap``: window size and overlap in characters (~256 tokens).
    ``max_windows``: windows kept from a long text (start and end are kept first).
    ``max_fact_chars``: size of the key-facts chunk of a long text.
    ``recipe``: how a chunk becomes its vector (:data:`RECIPES`).
    """

    types: frozenset[EventType] = field(default=DEFAULT_TYPES)
    recipe: str = "context"
    min_words: int = 3
    max_chars: int = 1200
    window: int = 900
    overlap: int = 150
    max_windows: int = 4
    max_fact_chars: int = 1500

    def __post_init__(self) -> None:
        if self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}; known: {', '.join(RECIPES)}")

    def wants(self, event: Event) -> bool:
        return event.type in self.types


#: How chunk texts become stored vectors.  ``plain``: the unit vector of the chunk.
#: ``context``: that plus a unit vector of what the chunk answers, so a reply is also
#: found by its question ("Super good!" after "What did you think of the ice cream?").
#: Against a unit query the stored vector scores the sum of the two cosines.
#:
#: The context vector of a *short* text (under :data:`SHORT_WORDS`) is the model's
#: reading of (previous text + the chunk): such a text says little alone, and the
#: model reads the two together.  A longer text carries its own meaning, so its
#: context vector is the mean direction of its own vector and the previous text's,
#: which the batch has already embedded (the previous turn is usually a chunk of the
#: same batch): one model pass per chunk instead of three text-lengths.  On the
#: LoCoMo dev conversations (dense path alone, R@5/10/25) plain scored 0.41/0.50/0.64,
#: reading every chunk with its context 0.47/0.54/0.66, this split 0.46/0.55/0.67
#: at 1.3 text-lengths of model work per chunk instead of 2.8.
RECIPES = ("context", "plain")
#: What each recipe is recorded as on a vector (a recipe whose vectors change gets a
#: new key, so old vectors are re-embedded, never mixed with new ones).
RECIPE_KEYS = {"context": "context/2", "plain": "plain"}
CONTEXT_CHARS = 500
#: Below this many words (a CJK character counts one) a chunk is read with its context.
SHORT_WORDS = 16


def recipe_key(recipe: str) -> str:
    """The recipe as recorded in an :class:`~beeweave_core.index.base.EmbeddingIdentity`."""
    return RECIPE_KEYS.get(recipe, recipe)


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.clip(np.linalg.norm(m, axis=-1, keepdims=True), 1e-12, None)


def embed_texts(embeddings: Any, texts: Sequence[str], *, group: int = 256) -> np.ndarray:
    """Vectors of ``texts``, in order: the whole list in one call to a built-in model
    (``embed_array``: it batches by token count and runs batches in parallel itself),
    else ``embed_documents`` in groups of similar length.

    Local models pad a batch to its longest text, so one long tool output in a batch
    of short messages makes every message cost as much as it; grouping by length
    (each group within 2x) keeps short texts cheap.
    """
    direct = getattr(embeddings, "embed_array", None)
    if callable(direct):
        got = np.asarray(direct(list(texts)), dtype=np.float32)
        return got.reshape(len(texts), -1) if len(texts) else np.zeros((0, 0), np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: np.ndarray | None = None
    start = 0
    while start < len(order):
        end = start + 1
        base = max(1, len(texts[order[start]]))
        while end < len(order) and end - start < group and len(texts[order[end]]) <= 2 * base + 64:
            end += 1
        idx = order[start:end]
        got = np.asarray(embeddings.embed_documents([texts[i] for i in idx]), dtype=np.float32)
        got = got.reshape(len(idx), -1)
        if out is None:
            out = np.empty((len(texts), got.shape[1]), dtype=np.float32)
        out[idx] = got
        start = end
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def embed_chunks(embeddings: Any, chunks: Sequence[Chunk], recipe: str) -> list[list[float]]:
    """The stored vectors for ``chunks`` under ``recipe``: every distinct text of the
    batch (chunks, contexts, short chunks read with their context) in one call."""
    if not chunks:
        return []
    own_texts = [c.text for c in chunks]
    if recipe == "plain":
        return _unit(embed_texts(embeddings, own_texts)).tolist()
    joined: dict[int, str] = {}
    before: dict[int, str] = {}
    known = set(own_texts)
    for i, c in enumerate(chunks):
        if not c.context:
            continue  # first of its session: its own text twice keeps the scale
        if text_size(c.text) < SHORT_WORDS:
            joined[i] = f"{c.context[:CONTEXT_CHARS]}\n{c.text}"
        else:  # the previous chunk's own text when the batch has it, else its start
            before[i] = c.context if c.context in known else c.context[:CONTEXT_CHARS]
    unique = list(dict.fromkeys([*own_texts, *joined.values(), *before.values()]))
    found = _unit(embed_texts(embeddings, unique))
    vec = {t: found[n] for n, t in enumerate(unique)}
    own = np.stack([vec[t] for t in own_texts])
    ctx = own.copy()
    for i, t in joined.items():
        ctx[i] = vec[t]
    for i, t in before.items():
        ctx[i] = _unit(own[i] + vec[t])
    return (own + ctx).tolist()


def embed_query(embeddings: Any, text: str) -> list[float]:
    """A unit query vector (dot product with stored vectors = sum of cosines)."""
    return _unit(np.asarray(embeddings.embed_query(text), dtype=np.float32)).tolist()


def event_text(event: Event, full_content: str | None = None) -> str:
    """The text a vector stands for: the content, labelled with the tool or author."""
    content = full_content if full_content is not None else event.content
    payload = event.payload or {}
    name = payload.get("name") if isinstance(payload.get("name"), str) else None
    if not content.strip() and event.type in (EventType.TOOL_INVOCATION, EventType.TOOL_RESULT):
        body = payload.get("args" if event.type == EventType.TOOL_INVOCATION else "output")
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, default=str)
    speaker = event.meta.get("name") if isinstance(event.meta.get("name"), str) else None
    if event.type == EventType.TOOL_INVOCATION and name:
        return f"{name}({content})"
    if event.type == EventType.TOOL_RESULT and name:
        return f"{name} -> {content}"
    if speaker and not content.startswith(speaker):
        return f"{speaker}: {content}"
    return content


def _windows(text: str, policy: ChunkPolicy) -> list[str]:
    step = max(1, policy.window - policy.overlap)
    starts = list(range(0, max(1, len(text) - policy.overlap), step))
    if len(starts) > policy.max_windows:
        head = policy.max_windows // 2 + policy.max_windows % 2
        tail = policy.max_windows - head
        starts = starts[:head] + (starts[-tail:] if tail else [])
    out = []
    for s in starts:
        end = min(len(text), s + policy.window)
        # end at a line or sentence break near the window end when there is one
        cut = max(
            text.rfind("\n", s + policy.window // 2, end),
            text.rfind(". ", s + policy.window // 2, end),
        )
        if cut > 0 and end < len(text):
            end = cut + 1
        out.append(text[s:end].strip())
    return [w for w in out if w]


def key_facts(text: str, *, limit: int, seen: str = "") -> str:
    """The ids, codes and numbers of ``text`` a reader would ask about, within ``limit``.

    A long output is mostly repetition (800 rows of ``ORD-1xxxx``), and the value a
    user asks about later is often the odd one out (``TICKET-99812`` in row 400).
    So tokens are grouped by shape (digits as ``9``): rare shapes are kept whole,
    codes with letters before bare numbers; a crowded shape is summarised as its
    first and last member and a count.  Tokens already in ``seen`` (the embedded
    windows) are not repeated.
    """
    by_shape: dict[str, list[str]] = {}
    for m in _FACT.finditer(text):
        tok = m.group().strip(" ,.")
        if len(tok) < 2:
            continue
        members = by_shape.setdefault(re.sub(r"\d", "9", tok), [])
        if tok not in members:
            members.append(tok)
    rare_codes, rare_numbers, crowds = [], [], []
    for shape, members in by_shape.items():
        if len(members) > 3:
            crowds.append(f"{members[0]}…{members[-1]} ({len(members)} like {shape})")
            continue
        for tok in members:
            if tok in seen:
                continue
            (rare_codes if re.search(r"[A-Za-z@]", tok) else rare_numbers).append(tok)
    out, size = [], 0
    for tok in rare_codes + crowds + rare_numbers:
        if size + len(tok) + 1 > limit:
            continue
        out.append(tok)
        size += len(tok) + 1
    return " ".join(out)


def chunk_event(
    event: Event,
    policy: ChunkPolicy = ChunkPolicy(),
    *,
    load_artifact: Callable[[str], str | None] | None = None,
) -> list[Chunk]:
    """The chunks to embed for ``event`` (none when it is not worth a vector)."""
    if not policy.wants(event):
        return []
    full = None
    art = event.payload.get("$artifact") if isinstance(event.payload, dict) else None
    if isinstance(art, dict) and load_artifact is not None and art.get("sha256"):
        full = load_artifact(art["sha256"])
    text = event_text(event, full)
    if text_size(text) < policy.min_words:
        return []
    if len(text) <= policy.max_chars:
        return [Chunk.of(event, text)]
    label = ""
    name = event.payload.get("name") if isinstance(event.payload, dict) else None
    if isinstance(name, str):
        label = f"{name}: "
    parts = [label + w if label and not w.startswith(label) else w for w in _windows(text, policy)]
    facts = key_facts(text, limit=policy.max_fact_chars, seen="\n".join(parts))
    if facts:
        parts.append(f"{label}key facts: {facts}")
    return [Chunk.of(event, t, i) for i, t in enumerate(parts)]


def chunk_events(
    events: Iterable[Event],
    policy: ChunkPolicy = ChunkPolicy(),
    *,
    load_artifact: Callable[[str], str | None] | None = None,
) -> list[Chunk]:
    out: list[Chunk] = []
    for ev in events:
        out.extend(chunk_event(ev, policy, load_artifact=load_artifact))
    return out
