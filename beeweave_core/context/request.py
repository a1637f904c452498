"""``AssembleRequest``: everything one ``assemble`` call is asked, checked once.

A request is a value: the read path takes it and nothing else, so what a call may do
is visible in one place.  Bad input is one ``ValueError``/``TypeError`` line naming the
argument; a query longer than :data:`~beeweave_core.tokens.MAX_QUERY_TOKENS` is cut
before it reaches ranking, so a huge query costs what a normal one does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TypedDict

from typing_extensions import Required

from beeweave_core.tokens import DEFAULT_MODEL, MAX_QUERY_TOKENS, TokenCounter, bounded_query


@dataclass(frozen=True)
class AssembleRequest:
    """One call's question: whose context, for what, within how many tokens.

    ``query`` steers recall (default: the latest user message); it is appended as a user
    message only with ``include_query``.  ``phase`` picks the recent/recalled split
    (``requirement`` / ``execution`` / ``closing``; inferred when ``None``).
    ``lineage`` is the ids of the conversation events on the branch being resumed (a
    LangGraph checkpoint's messages).  ``agent_id``: that agent's turns and the user's
    only.  ``window_tokens`` tells maintenance the window compaction measures against
    (default: the budget).  ``record``: send the audit record through the bus.
    ``flush``: make captured events readable first (the capture bus, not maintenance).
    """

    session_id: str
    budget_tokens: int
    query: str | None = None
    model: str | None = DEFAULT_MODEL
    counter: TokenCounter | None = field(default=None, compare=False)
    phase: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    lineage: frozenset[str] | None = None
    include_query: bool = False
    single_system: bool = False
    use_retriever: bool | None = None
    window_tokens: int | None = None
    record: bool = True
    flush: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.session_id, str) or not self.session_id:
            raise TypeError(
                f"session_id must be a non-empty string, got {type(self.session_id).__name__}"
            )
        _positive("budget_tokens", self.budget_tokens)
        if self.window_tokens is not None:
            _positive("window_tokens", self.window_tokens)
        if self.query is not None and not isinstance(self.query, str):
            raise TypeError(f"query must be a string or None, got {type(self.query).__name__}")
        for name in ("user_id", "agent_id", "phase", "model"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a string or None, got {type(value).__name__}")
        if self.counter is not None and not isinstance(self.counter, TokenCounter):
            raise TypeError(f"counter must be a TokenCounter, got {type(self.counter).__name__}")

    @classmethod
    def of(
        cls, session_id: str, query: str | None, options: Mapping[str, object]
    ) -> AssembleRequest:
        """A request from ``assemble``'s keyword arguments (unknown ones are an error)."""
        known = set(cls.__dataclass_fields__) - {"session_id", "query"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"assemble() got unknown option(s) {unknown}; known: {', '.join(sorted(known))}"
            )
        if "budget_tokens" not in options:
            raise TypeError("assemble() needs budget_tokens=… (the prompt's token budget)")
        kw = dict(options)
        lineage = kw.get("lineage")
        if lineage is not None:
            if isinstance(lineage, str) or not isinstance(lineage, Collection):
                raise TypeError("lineage must be a collection of event ids")
            kw["lineage"] = frozenset(str(i) for i in lineage)
        return cls(session_id=session_id, query=query, **kw)  # type: ignore[arg-type]

    def bounded(self, counter: TokenCounter) -> AssembleRequest:
        """This request with its query cut to :data:`MAX_QUERY_TOKENS` tokens."""
        q = self.query
        cut = q if q is None else bounded_query(q, counter)
        return self if cut == q else replace(self, query=cut)


class AssembleOptions(TypedDict, total=False):
    """``assemble``'s keyword arguments (the fields of :class:`AssembleRequest`)."""

    budget_tokens: Required[int]
    model: str | None
    counter: TokenCounter | None
    phase: str | None
    user_id: str | None
    agent_id: str | None
    lineage: Collection[str] | None
    include_query: bool
    single_system: bool
    use_retriever: bool | None
    window_tokens: int | None
    record: bool
    flush: bool


def _positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


__all__ = ["MAX_QUERY_TOKENS", "AssembleOptions", "AssembleRequest"]
