"""Scopes: which business lines (``billing``, ``support`` …) a reader may see and a writer may fill.

Tenants keep customers apart; scopes layer permissions *inside* one tenant, so a
support agent's weave never recalls what the billing agent was told.  The rule lives
here once; stores, the retriever, the context engine and the item store only ask it.

* An event, memory or store item carries at most one scope (``meta["scope"]``);
  ``None`` is *unscoped* and is visible to every reader (shared ground: a system
  prompt, company-wide facts).
* A reader opened with ``scopes={"support"}`` sees its scopes and unscoped
  records; ``scopes=None`` (the default) is unrestricted.  Listings and searches
  leave other scopes out *in the query*; an explicit read of another scope's record
  (by id, its ancestry or edges, the export of its session) raises
  :class:`ScopeError` instead of quietly answering less.
* A writer writes only into its scopes: a record naming another scope is refused.
  A record naming none gets the writer's scope when it has exactly one; a writer
  with several must name one.  An unrestricted writer keeps what it is given.
* Derived records (summaries, memories, assembly records) take the scope of what
  they were made from; sources of two scopes are never merged into one record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeAlias, TypeVar

from beeweave_core.errors import shown

#: What a reader may see: a set of scope names, or ``None`` for every scope.
Readable: TypeAlias = frozenset[str] | None
#: Where an event keeps its scope (beside ``user_id`` and ``agent_id``).
META_KEY = "scope"
MAX_SCOPE_LEN = 128
T = TypeVar("T")


class ScopeError(PermissionError):
    """A read or write reached outside the scopes this weave was opened with."""


def check_name(scope: object) -> str:
    """``scope`` if it is a valid scope name, else a one-line ``ValueError``."""
    if type(scope) is not str:
        raise ValueError(f"a scope must be a string, got {type(scope).__name__}")
    if not scope or len(scope) > MAX_SCOPE_LEN or not scope.isprintable() or scope != scope.strip():
        raise ValueError(
            f"scope {shown(scope)} must be 1-{MAX_SCOPE_LEN} printable characters "
            "without surrounding spaces"
        )
    return scope


def normalize(scopes: Iterable[str] | str | None) -> Readable:
    """A reader's scopes as a frozen set (``"a"`` means ``{"a"}``); ``None`` stays ``None``."""
    if scopes is None:
        return None
    if isinstance(scopes, str):
        scopes = [scopes]
    out = frozenset(check_name(s) for s in scopes)
    if not out:
        raise ValueError("scopes must name at least one scope (None means every scope)")
    return out


def visible(scope: str | None, readable: Readable) -> bool:
    """Whether a record of ``scope`` may be shown to a reader of ``readable``."""
    return readable is None or scope is None or scope in readable


def scope_of(meta: Mapping[str, object]) -> str | None:
    """The scope an event's ``meta`` names (``None``: unscoped); a bad one is a ``ValueError``."""
    value = meta.get(META_KEY)
    return None if value is None else check_name(value)


def narrow(readable: Readable, requested: Iterable[str] | str | None) -> Readable:
    """The scopes of one call: ``requested`` within ``readable`` (never wider)."""
    wanted = normalize(requested)
    if wanted is None:
        return readable
    if readable is not None and not wanted <= readable:
        raise ScopeError(
            f"scope(s) {_names(wanted - readable)} are outside this weave's scopes "
            f"{_names(readable)}"
        )
    return wanted


def write_scope(named: str | None, writable: Readable) -> str | None:
    """The scope a new record is stored with, or :class:`ScopeError` if it may not be."""
    if named is not None:
        check_name(named)
        if writable is not None and named not in writable:
            raise ScopeError(
                f"cannot write into scope {named!r}: this weave writes {_names(writable)}"
            )
        return named
    if writable is None:
        return None
    if len(writable) == 1:
        return next(iter(writable))
    raise ScopeError(f"this weave writes several scopes {_names(writable)}: name one (scope=…)")


def with_scope(
    meta: Mapping[str, object] | None, writable: Readable, named: str | None = None
) -> Mapping[str, object] | None:
    """``meta`` of a new record, carrying the scope it is written under (``named``, else
    ``meta["scope"]``, else the writer's one scope; :func:`write_scope` decides)."""
    if named is None and meta:
        named = scope_of(meta)
    if named is None and writable is None:
        return meta
    resolved = write_scope(named, writable)
    if resolved is None or (meta and meta.get(META_KEY) == resolved):
        return meta
    return {**(meta or {}), META_KEY: resolved}


def refuse(ids: Iterable[str], readable: Readable) -> None:
    """Raise the error for an explicit read of records outside ``readable``."""
    some = sorted(ids)
    more = f" (+{len(some) - 3} more)" if len(some) > 3 else ""
    raise ScopeError(
        f"event {', '.join(shown(i) for i in some[:3])}{more} belongs to a scope outside "
        f"{_names(readable)}"
    )


def refuse_artifact(sha256: str, readable: Readable) -> None:
    """Raise the error for an artifact only events outside ``readable`` refer to."""
    raise ScopeError(f"artifact {sha256[:12]}… belongs to a scope outside {_names(readable)}")


def derived(scopes: Iterable[str | None]) -> str | None:
    """The scope of a record made from sources of ``scopes`` (unscoped ones add nothing).

    Sources of two scopes have no common scope: callers split them first (a
    summary per scope); here that is an error, never a silent pick.
    """
    named = {s for s in scopes if s is not None}
    if len(named) > 1:
        raise ScopeError(f"sources span several scopes {_names(frozenset(named))}")
    return next(iter(named), None)


def runs(items: Sequence[T], scopes_in: Callable[[T], Iterable[str | None]]) -> list[list[T]]:
    """Consecutive ``items`` split wherever the scope changes, so nothing derived from
    one run mixes scopes.  Unscoped items join the run they fall in; an item that
    itself holds two scopes is left out (no record made from it could have one)."""
    out: list[list[T]] = []
    current: list[T] = []
    scope: str | None = None
    for item in items:
        named = {s for s in scopes_in(item) if s is not None}
        if len(named) > 1 or (named and scope is not None and scope not in named):
            if current:
                out.append(current)
            current, scope = [], None
            if len(named) > 1:
                continue
        current.append(item)
        scope = next(iter(named), scope)
    if current:
        out.append(current)
    return out


def _names(scopes: Readable) -> str:
    return "every scope" if scopes is None else "{" + ", ".join(sorted(scopes)) + "}"


__all__ = [
    "META_KEY",
    "Readable",
    "ScopeError",
    "check_name",
    "derived",
    "narrow",
    "normalize",
    "refuse",
    "refuse_artifact",
    "runs",
    "scope_of",
    "visible",
    "with_scope",
    "write_scope",
]
