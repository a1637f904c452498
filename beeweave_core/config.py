"""``WeaveConfig``: every setting a weave's parts read, typed, fixed when the weave opens.

One frozen dataclass per part: :class:`IndexConfig` (the vector indexer),
:class:`RetrievalConfig` (fused recall) and :class:`ContextConfig` (assembly,
compaction, memory).  ``Weave`` hands each part its own section, so a part never
looks settings up in a shared dict and a misspelt setting fails when the weave opens,
not at first use.  Change a setting with :func:`dataclasses.replace`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

from beeweave_core.events import EventType
from beeweave_core.ranking import DAY, DEFAULT_HALF_LIFE_DAYS, RRF_K

if TYPE_CHECKING:
    from beeweave_core.context.assembler import LayerShares
    from beeweave_core.context.compactor import CompactionPolicy
    from beeweave_core.context.editing import EditPolicy
    from beeweave_core.context.summarizers import Summarizer
    from beeweave_core.index.base import Embedder, VectorIndex
    from beeweave_core.index.chunking import ChunkPolicy
    from beeweave_core.llm import TextLLM

#: ``BEEWEAVE_INDEX=off`` opens weaves without a vector index unless one is asked for.
ENV_INDEX = "BEEWEAVE_INDEX"
#: The index kinds named by a string; ``"off"`` is the same as ``index=False``.
INDEX_KINDS = ("auto", "chroma", "neo4j", "off")

PATHS = ("recent", "semantic", "lexical", "temporal", "metadata", "graph", "feedback")

#: How much an event of each type is worth as an answer, before fusion weights: what
#: was said and what tools returned is what answers are made of (1.0), a memory
#: distils it (1.2), a summary paraphrases it (0.9); thoughts, prompts and warnings
#: are context rather than answers, and echoes of earlier recall, model-call markers
#: and checkpoints are bookkeeping (they mostly link the graph).
DEFAULT_TYPE_WEIGHTS: dict[EventType, float] = {
    EventType.USER_MESSAGE: 1.0,
    EventType.ASSISTANT_MESSAGE: 1.0,
    EventType.TOOL_RESULT: 1.0,
    EventType.TOOL_INVOCATION: 0.8,
    EventType.MEMORY: 1.2,
    EventType.SUMMARY: 0.9,
    EventType.INTERNAL_THOUGHT: 0.6,
    EventType.SYSTEM_PROMPT: 0.5,
    EventType.ERROR: 0.8,
    EventType.WARNING: 0.5,
    EventType.RETRIEVAL: 0.3,  # an echo of what was recalled before
    EventType.MODEL_CALL: 0.2,
    EventType.CHECKPOINT: 0.1,
}


@dataclass(frozen=True)
class IndexConfig:
    """The vector index behind semantic recall.

    Attributes:
        kind: ``None``/``"auto"`` (Neo4j's own index for a Neo4j store, else Chroma),
            ``"chroma"``, ``"neo4j"``, a ready :class:`~beeweave_core.index.VectorIndex`,
            or ``"off"`` for none (``BEEWEAVE_INDEX=off`` turns ``None`` into ``"off"``).
        embeddings: Any LangChain-style ``Embeddings`` (default: the offline MiniLM).
        vector_url: A Chroma directory or ``http(s)://host:port`` server.
        policy: What is embedded and how texts are chunked (default ``ChunkPolicy()``).
        backfill: Run the gap check when the weave opens.
        batch_size: Events per embedding batch.
        retry_interval: Seconds before a failed batch is retried.

    Raises:
        ValueError: An unknown index name, a ``batch_size`` that is not a positive int,
            or a ``retry_interval`` that is not positive.
        TypeError: ``kind`` is neither a string nor a ``VectorIndex``.
    """

    kind: str | VectorIndex | None = None
    embeddings: Embedder | None = None
    vector_url: str | None = None
    policy: ChunkPolicy | None = None
    backfill: bool = True
    batch_size: int = 256
    retry_interval: float = 30.0

    def __post_init__(self) -> None:
        if isinstance(self.kind, str) and self.kind.lower() not in INDEX_KINDS:
            raise ValueError(
                f"unknown index {self.kind!r}: expected {', '.join(INDEX_KINDS)} or a VectorIndex"
            )
        if self.kind is not None and not isinstance(self.kind, str):
            from beeweave_core.index.base import VectorIndex

            if not isinstance(self.kind, VectorIndex):
                raise TypeError(
                    f"index must be 'chroma', 'neo4j' or a VectorIndex, got {self.kind!r}"
                )
        if (
            isinstance(self.batch_size, bool)
            or not isinstance(self.batch_size, int)
            or self.batch_size <= 0
        ):
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        if self.retry_interval <= 0:
            raise ValueError(f"retry_interval must be positive, got {self.retry_interval!r}")

    @property
    def enabled(self) -> bool:
        """Whether the weave gets a vector index at all."""
        if isinstance(self.kind, str):
            return self.kind.lower() != "off"
        if self.kind is None:
            return os.environ.get(ENV_INDEX, "").lower() not in ("0", "off", "false", "none")
        return True

    @classmethod
    def from_options(
        cls,
        *,
        index: str | VectorIndex | bool | None = None,
        embeddings: Embedder | None = None,
        vector_url: str | None = None,
        index_options: Mapping[str, object] | None = None,
        base: IndexConfig | None = None,
    ) -> IndexConfig:
        """The section ``Weave.open``'s keyword arguments name, over ``base``.

        Args:
            index: The ``kind``: ``False`` means ``"off"``, ``True`` ``"auto"``, ``None``
                keeps ``base``'s.
            embeddings: The embedder (``None``: ``base``'s).
            vector_url: The Chroma directory or server (``None``: ``base``'s).
            index_options: The other fields (``policy``, ``backfill``, ``batch_size``,
                ``retry_interval``).
            base: The section to change (``None``: the defaults).

        Returns:
            A new section; ``base`` is left as it is.

        Raises:
            ValueError: ``index_options`` names an unknown field, or a value is invalid.
        """
        known = {f.name for f in fields(cls)} - {"kind", "embeddings", "vector_url"}
        extra = dict(index_options or {})
        unknown = set(extra) - known
        if unknown:
            raise ValueError(f"unknown index option(s) {sorted(unknown)}; known: {sorted(known)}")
        given: dict[str, object] = dict(extra)
        if index is not None:
            given["kind"] = "off" if index is False else ("auto" if index is True else index)
        if embeddings is not None:
            given["embeddings"] = embeddings
        if vector_url is not None:
            given["vector_url"] = vector_url
        return replace(base or cls(), **given)


@dataclass(frozen=True)
class RetrievalConfig:
    """Knobs of fusion; the defaults suit an agent's working memory.

    The semantic and temporal weights, the graph weight, ``rrf_k`` and ``neighbours``
    are what ``beeweave bench locomo`` chooses by leave-one-conversation-out
    cross-validation over its five development conversations (semantic 0.5, temporal
    2, graph 0.25, ``rrf_k`` 3, neighbours 2: the pick over all five folds, with
    ``neighbour_decay`` and ``author_boost``; each fold's pick, made without the
    conversation it is scored on, is in the bench's output).  The graph weight was
    measured on chat only (no tool calls): a trace's causal edges may deserve more.

    Attributes:
        weights: Per path, multiplies its reciprocal-rank term (0 turns it off).
            Lexical is the strongest content path, semantic (a paraphrase) and temporal
            (a date) each find what it misses; ``recent`` half, since it suggests events
            by position, not content; ``metadata`` least, since filters alone say nothing
            about the query.
        fusion: ``"rrf"`` (weighted reciprocal rank) or ``"score"`` (weighted sum of
            min-max normalised scores, a convex combination).
        rrf_k: The reciprocal-rank constant (:data:`beeweave_core.ranking.RRF_K` says
            why it is small).
        type_weights: Per event type, multiplies the fused score.
        half_life: Seconds after which an event's score is halved (towards
            ``decay_floor``); a memory decays with its own kind's half-life instead
            (:data:`beeweave_core.ranking.HALF_LIFE_DAYS`); ``None`` disables recency
            decay.
        decay_floor: 0.5, so age only reorders near-ties: an old event keeps at least
            half its score and a strong old match still beats a weak new one.
        candidates: How many results each path fetches before fusion (50: twice the
            largest ``k`` the benchmarks ask for, so gating and dedup still leave enough).
        recent_n: The session's last turns offered by ``recent`` (about one exchange
            of tool calls and replies).
        graph_seeds: How many of the best hits the graph path starts from (8: most of
            a default top 10).
        graph_depth: Causal hops the graph path follows (4 reach the user question
            behind a tool result: result → call → message → model call → question).
        neighbours: Turns either side in the session the graph path adds (2: an answer
            often spans a question, its reply and a follow-up).
        hop_decay: How much of a seed's score the graph path passes on: the graph
            weight's share to a direct neighbour, halved per further causal hop.
        neighbour_decay: The same per turn of distance for session neighbours: 1.0, so
            a turn two away from a hit inherits as much as the next one (a question, its
            reply and a follow-up answer together); chosen with the fusion weights by
            the bench's cross-validation (0.5 or 1.0: 1.0 in every fold).
        author_boost: When the query names exactly one of the candidates' authors
            (``meta["name"]``, a speaker of a multi-party chat) by every word of the
            name, that author's events score ``1 + author_boost`` times as much: "what
            did Ana say about the shed?" prefers Ana's own turns, without dropping what
            others said of it.  Chosen by the bench's cross-validation among 0, 1 and 2
            (2 in every fold).
        time_margin: Days added after a date the query names (people talk about
            things after they happen).
        feedback_seeds: The ``feedback`` path's second lexical round adds to the query
            the ``feedback_terms`` words most shared by the first round's
            ``feedback_seeds`` best lexical hits (3; its weight 0.5, chosen by the
            bench's cross-validation between 0 and 0.5).
        feedback_terms: See ``feedback_seeds`` (20).
        dedup: Whether hits of the same text (case and spacing aside) are merged into
            the first (the others named in its provenance's ``duplicates``).
        index_wait: Seconds to wait for the vector indexer to catch up first.

    Raises:
        ValueError: A setting is out of its range, or ``weights`` names an unknown path.
    """

    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "semantic": 0.5,
            "lexical": 1.0,
            "temporal": 2.0,
            "recent": 0.5,
            "metadata": 0.3,
            "graph": 0.25,
            "feedback": 0.5,
        }
    )
    fusion: str = "rrf"
    rrf_k: float = RRF_K
    type_weights: Mapping[EventType, float] = field(
        default_factory=lambda: dict(DEFAULT_TYPE_WEIGHTS)
    )
    half_life: float | None = DEFAULT_HALF_LIFE_DAYS * DAY
    decay_floor: float = 0.5
    candidates: int = 50
    recent_n: int = 10
    graph_seeds: int = 8
    graph_depth: int = 4
    neighbours: int = 2
    hop_decay: float = 0.5
    neighbour_decay: float = 1.0
    author_boost: float = 2.0
    time_margin: float = 14.0
    feedback_seeds: int = 3
    feedback_terms: int = 20
    dedup: bool = True
    index_wait: float = 1.0

    def __post_init__(self) -> None:
        if self.fusion not in ("rrf", "score"):
            raise ValueError(f"fusion must be 'rrf' or 'score', got {self.fusion!r}")
        if self.rrf_k <= 0 or self.candidates <= 0:
            raise ValueError("rrf_k and candidates must be positive")
        if self.half_life is not None and self.half_life <= 0:
            raise ValueError("half_life must be positive (or None for no decay)")
        if not 0.0 <= self.decay_floor <= 1.0:
            raise ValueError("decay_floor must be between 0 and 1")
        if not 0.0 <= self.neighbour_decay <= 1.0:
            raise ValueError("neighbour_decay must be between 0 and 1")
        for name in ("feedback_seeds", "feedback_terms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        if self.author_boost < 0:
            raise ValueError("author_boost must not be negative")
        bad = set(self.weights) - set(PATHS)
        if bad:
            raise ValueError(f"weights for unknown path(s) {sorted(bad)}")


@dataclass(frozen=True)
class ContextConfig:
    """Assembly, compaction and long-term memory (``weave.context``).

    Attributes:
        summarizer: Writes compaction summaries (default: extractive, no model).
        llm: A :class:`~beeweave_core.llm.TextLLM` (framework models are wrapped by
            their integration package: ``LangChainLLM``, ``LlamaIndexLLM``) or a
            function ``str -> str``; a shortcut for ``summarizer=LLMSummarizer(llm)``.
        policy: When and how to compact.
        edit_policy: What the immediate layer drops or cuts.
        memory_llm: A chat model that extracts memories the rules miss (optional).
        presets: Layer shares per phase, over the built-in ones.
        catch_up_in_background: Maintenance (memories, supersession, compaction) runs
            in a background worker while ``assemble`` reads what it last published
            (True, the default: no call waits for it); False makes each ``assemble``
            first wait until maintenance has read everything stored (the answer is then
            complete, as a test or a batch job may want, at a call's cost).
    """

    summarizer: Summarizer | None = None
    llm: TextLLM | Callable[[str], str] | None = None
    policy: CompactionPolicy | None = None
    edit_policy: EditPolicy | None = None
    memory_llm: TextLLM | Callable[[str], str] | None = None
    presets: Mapping[str, LayerShares] = field(default_factory=dict)
    catch_up_in_background: bool = True


@dataclass(frozen=True)
class WeaveConfig:
    """Everything a weave's parts are configured with; see each section.

    Attributes:
        index: The vector index behind semantic recall.
        retrieval: The knobs of fused recall.
        context: Assembly, compaction and long-term memory.

    Raises:
        TypeError: A section is not of its config class.
    """

    index: IndexConfig = field(default_factory=IndexConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    context: ContextConfig = field(default_factory=ContextConfig)

    def __post_init__(self) -> None:
        for name, kind in (
            ("index", IndexConfig),
            ("retrieval", RetrievalConfig),
            ("context", ContextConfig),
        ):
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise TypeError(f"WeaveConfig.{name} must be a {kind.__name__}, got {value!r}")


__all__ = [
    "DAY",
    "DEFAULT_TYPE_WEIGHTS",
    "ENV_INDEX",
    "PATHS",
    "ContextConfig",
    "IndexConfig",
    "RetrievalConfig",
    "WeaveConfig",
]
