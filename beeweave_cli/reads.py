"""The commands that read a store: sessions, a timeline, a causal trace, recall, health."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from beeweave_cli.common import (
    AuthOpt,
    JsonOpt,
    ScopeOpt,
    TenantOpt,
    UrlOpt,
    console,
    fail,
    opened,
    print_json,
    sessions_table,
    short,
    timeline_table,
    trace_tree,
)
from beeweave_core.errors import shown
from beeweave_core.governance.health import weave_health
from beeweave_core.governance.retention import archived_in
from beeweave_core.store import NotFound
from beeweave_core.weave import Weave


def sessions(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List stored sessions with counts by type, tokens and times."""
    with opened(url, tenant, auth, read=True, scopes=scope or None) as weave:
        if as_json:
            print_json([s.model_dump(mode="json") for s in weave.store.sessions()])
        else:
            console.print(sessions_table(weave))


def show(
    session_id: str,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    last: Annotated[int | None, typer.Option(help="Only the latest N events (N >= 1).")] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Include deleted/invalidated events.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a session's timeline."""
    if last is not None and last < 1:
        fail(f"--last must be a positive number of events, got {last}")
    with opened(url, tenant, auth, read=True, scopes=scope or None) as weave:
        events = weave.store.timeline(session_id, last=last, include_inactive=all_)
        if not events:
            fail(f"no session {shown(session_id)} for tenant {shown(tenant)}")
        if as_json:
            print_json([e.to_record() for e in events])
        else:
            console.print(timeline_table(events, f"Timeline of {session_id}"))


def trace(
    event_id: str,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    depth: Annotated[int, typer.Option(help="How many causal hops to follow.")] = 6,
    as_json: JsonOpt = False,
) -> None:
    """Show the causal ancestry of one event as a tree."""
    if depth < 1:
        fail(f"--depth must be at least 1, got {depth}")
    with opened(url, tenant, auth, read=True, scopes=scope or None) as weave:
        try:
            if as_json:
                print_json(trace_records(weave, event_id, depth))
            else:
                console.print(trace_tree(weave, event_id, depth))
        except NotFound as exc:
            fail(str(exc.args[0]))


def search(
    query: str,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    user: Annotated[str | None, typer.Option(help="Every session of this user.")] = None,
    k: Annotated[int, typer.Option("--k", "-k", help="How many hits.")] = 10,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recall past events for QUERY (weave.retrieve: words, meaning, graph, recency)."""
    if k < 1:
        fail(f"--k must be a positive number of hits, got {k}")
    with opened(url, tenant, auth, read=True, scopes=scope or None) as weave:
        hits = weave.retrieve(query, session_id=session, user_id=user, k=k)
    if as_json:
        print_json([{**h.metadata(), "content": h.event.content} for h in hits])
        return
    table = Table(
        "rank",
        "score",
        "session",
        "seq",
        "type",
        "content",
        "paths",
        title=f"Search: {short(query, 60)}",
    )
    for n, h in enumerate(hits, 1):
        paths = " ".join(f"{p}={v:.2f}" for p, v in h.paths.items())
        table.add_row(
            str(n),
            f"{h.score:.3f}",
            short(h.event.session_id, 24),
            str(h.event.seq),
            h.event.type.value,
            short(h.event.content),
            paths,
        )
    console.print(table)


def trace_records(weave: Weave, event_id: str, depth: int) -> list[dict[str, Any]]:
    """The event and its ancestors with their distance, nearest first (``trace --json``)."""
    found = weave.store.get([event_id])
    if not found:
        raise NotFound(f"no event {shown(event_id)} for tenant {shown(weave.tenant)}")
    chain = [(found[0], 0), *weave.store.ancestors(event_id, depth=depth)]
    out: list[dict[str, Any]] = [{"depth": d, "event": ev.to_record()} for ev, d in chain]
    out[0]["archived_in"] = archived_in(weave.store, found[0])
    return out


def stats(
    session_id: Annotated[str | None, typer.Argument(help="One session (default: all).")] = None,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    budget: Annotated[int, typer.Option(help="Token budget of the amnesia check.")] = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Context health per session and pooled: compression, retrieval hit rate, amnesia."""
    if budget < 1:
        fail(f"--budget must be a positive number of tokens, got {budget}")
    with opened(
        url, tenant, auth, read=True, scopes=scope or None, index_options={"backfill": False}
    ) as weave:
        if session_id is not None and not weave.store.timeline(session_id, last=1):
            fail(f"no session {shown(session_id)} for tenant {shown(tenant)}")
        parts, total = weave_health(weave, session_id, budget_tokens=budget)
    rows = [*parts, total] if len(parts) != 1 else parts
    if as_json:
        print_json({"sessions": [h.to_dict() for h in parts], "pooled": total.to_dict()})
        return
    table = Table("session", "compression", "hit rate", "amnesia", "warnings", title="Health")
    for h in rows:
        pct = [
            "-" if v is None else f"{v:.0%}" for v in (h.compression_ratio, h.retrieval_hit_rate)
        ]
        a = h.amnesia
        table.add_row(
            h.scope,
            *pct,
            "-" if a is None else f"{a.carried}/{a.sampled}",
            "\n".join(h.warnings) or "ok",
        )
    console.print(table)
