"""What the UI pages show, read from one tenant's store as plain JSON-ready dicts.

Every function reads through the weave's store, which is bound to one tenant, so no
page can show another tenant's rows.  Large sessions are read in windows of ``seq``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from beeweave_core.context.assembler import LAYERS
from beeweave_core.events import EdgeType, Event, EventType, Status
from beeweave_core.governance.health import pooled, session_health
from beeweave_core.memory.writer import expired
from beeweave_core.store import EventReader, NotFound, SessionReader
from beeweave_core.tokens import count_batch
from beeweave_core.weave import Weave

#: Events per graph window: enough to follow a run, few enough to lay out at once.
WINDOW = 400
MAX_WINDOW = 2_000
PREVIEW = 160
#: Edges walked for "what led to this event" (NEXT is order, not cause).
ANCESTRY_EDGES = (
    EdgeType.CAUSED_BY,
    EdgeType.REFERS_TO,
    EdgeType.DERIVED_FROM,
    EdgeType.SUMMARIZES,
)
ANCESTRY_DEPTH = 25
#: Agents are read from a session's latest events (the stats table does not keep them).
AGENT_SAMPLE = 500
UI_ACTION = "ui_action"


def _preview(text: str, n: int = PREVIEW) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def brief(ev: Event, tokens: int | None = None) -> dict[str, Any]:
    """An event as a row: enough to list it and link to it."""
    out: dict[str, Any] = {
        "id": ev.id,
        "session_id": ev.session_id,
        "seq": ev.seq,
        "type": ev.type.value,
        "role": ev.role,
        "preview": _preview(ev.content),
        "ts": ev.ts,
        "status": ev.status.value,
    }
    if tokens is not None:
        out["tokens"] = tokens
    return out


def sessions(store: SessionReader, query: str = "") -> list[dict[str, Any]]:
    """The session list, newest first; ``query`` filters by id, user or agent."""
    rows = []
    for s in store.sessions():
        agents = sorted(
            {str(e.agent_id) for e in store.timeline(s.session_id, last=AGENT_SAMPLE) if e.agent_id}
        )
        row = {
            "session_id": s.session_id,
            "events": s.events,
            "counts": s.counts,
            "tokens": s.tokens,
            "users": s.user_ids,
            "agents": agents,
            "first_ts": s.first_ts,
            "last_ts": s.last_ts,
        }
        hay = " ".join([s.session_id, *s.user_ids, *agents]).casefold()
        if query.casefold() in hay:
            rows.append(row)
    rows.sort(key=lambda r: r["last_ts"] or 0, reverse=True)
    return rows


def graph_window(
    store: SessionReader, session_id: str, seq_from: int | None = None, limit: int = WINDOW
) -> dict[str, Any]:
    """Events ``seq_from``… (default: the latest ``limit``) with the edges among them."""
    stats = store.session_stats(session_id)
    limit = max(1, min(int(limit), MAX_WINDOW))
    if seq_from is None:
        seq_from = max(0, stats.last_seq - limit + 1)
    seq_to = seq_from + limit - 1
    events = store.timeline(session_id, seq_from=seq_from, seq_to=seq_to, include_inactive=True)
    tokens = count_batch([e.content for e in events])
    ids = {e.id for e in events}
    hidden = sum(1 for e in events if e.status != Status.ACTIVE)
    edges = [
        {"src": e.src, "dst": e.dst, "type": e.type.value}
        for e in store.edges(session_id=session_id)
        if e.src in ids and e.dst in ids
    ]
    return {
        "session_id": session_id,
        "total": stats.events,
        "last_seq": stats.last_seq,
        "seq_from": seq_from,
        "seq_to": seq_to,
        "limit": limit,
        "shown": len(events) - hidden,
        "hidden": hidden,
        "nodes": [brief(e, t) for e, t in zip(events, tokens, strict=True)],
        "edges": edges,
    }


def event_detail(store: EventReader, event_id: str) -> dict[str, Any]:
    """One event in full, what led to it, and the assemblies that used or left it out."""
    found = store.get([event_id], include_inactive=True)
    if not found:
        raise NotFound(f"no event {event_id!r} for tenant {store.tenant!r}")
    ev = found[0]
    walk = store.ancestors(
        event_id, depth=ANCESTRY_DEPTH, edge_types=ANCESTRY_EDGES, include_inactive=True
    )
    return {
        **brief(ev),
        "content": ev.content,
        "payload": ev.payload,
        "meta": ev.meta,
        "source": ev.source,
        "status_reason": ev.status_reason,
        "parents": list(ev.parents),
        "links": {k.value: list(v) for k, v in ev.links.items()},
        "ancestors": [{**brief(a), "depth": d} for a, d in walk],
        "assemblies": assemblies_using(store, ev),
    }


def _piece_ids(pieces: Iterable[dict[str, Any]]) -> Iterable[tuple[str, dict[str, Any]]]:
    for p in pieces:
        for i in p.get("event_ids") or ():
            yield i, p


def assemblies_using(store: EventReader, ev: Event) -> list[dict[str, Any]]:
    """The session's recorded assemblies whose pieces came from ``ev`` (in or left out)."""
    out = []
    for a in store.timeline(ev.session_id, types=(EventType.RETRIEVAL,)):
        for how in ("included", "left_out"):
            hit = next((p for i, p in _piece_ids(a.payload.get(how) or ()) if i == ev.id), None)
            if hit is not None:
                out.append({**brief(a), "how": how, "layer": hit.get("layer")})
                break
    return out


def assemblies(store: EventReader, session_id: str) -> list[dict[str, Any]]:
    """Every recorded assembly of a session (``retrieval`` events from the context engine)."""
    rows = []
    for a in store.timeline(session_id, types=(EventType.RETRIEVAL,), include_inactive=True):
        p = a.payload
        rows.append(
            {
                **brief(a),
                **_query(a),
                "total_tokens": p.get("total_tokens"),
                "budget_tokens": p.get("budget_tokens"),
                "phase": p.get("phase"),
                "included": len(p.get("included") or ()),
                "left_out": len(p.get("left_out") or ()),
            }
        )
    return rows


def assembly(store: EventReader, event_id: str) -> dict[str, Any]:
    """One assembly: its accounts, and each piece's source events resolved to rows."""
    found = store.get([event_id], include_inactive=True)
    if not found or found[0].type != EventType.RETRIEVAL:
        raise NotFound(f"no assembly {event_id!r} for tenant {store.tenant!r}")
    ev = found[0]
    p = ev.payload
    wanted = list(
        dict.fromkeys(
            i for how in ("included", "left_out") for i, _ in _piece_ids(p.get(how) or ())
        )
    )
    sources = {e.id: brief(e) for e in store.get(wanted, include_inactive=True)}
    return {
        **brief(ev),
        **_query(ev),
        "payload": p,
        "sources": sources,
        "layers": _layer_rows(p),
    }


def _query(record: Event) -> dict[str, Any]:
    """An assembly's question: the query it was given, else the latest user message it
    recalled for (``asked`` says which); records older than ``recall_query`` have none."""
    recalled = record.payload.get("recall_query")
    return {"query": record.content or recalled or "", "asked": bool(record.content)}


def _layer_rows(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Tokens per layer against the layer's share of the budget, from the audit record."""
    budgets = p.get("budget_by_layer") or {}  # absent in records older than this field
    tokens = p.get("tokens_by_layer") or {}
    order = [n for n in LAYERS if n in tokens] + [n for n in tokens if n not in LAYERS]
    return [{"layer": n, "tokens": tokens[n], "budget": budgets.get(n)} for n in order]


def memories(store: EventReader, session_id: str) -> list[dict[str, Any]]:
    """Memory events of any status, with their version chain, and what the user did to them."""
    mems = store.timeline(session_id, types=(EventType.MEMORY,), include_inactive=True)
    sup = store.edges(session_id=session_id, types=(EdgeType.SUPERSEDES,))
    superseded_by: dict[str, list[str]] = {}
    for e in sup:
        superseded_by.setdefault(e.dst, []).append(e.src)
    actions = _ui_actions(store, session_id)
    rows = []
    for m in mems:
        p = m.payload
        rows.append(
            {
                **brief(m),
                "content": m.content,
                "kind": p.get("kind"),
                "version": p.get("version"),
                "revision_of": p.get("revision_of"),
                "supersedes": list(p.get("supersedes") or ()),
                "superseded_by": superseded_by.get(m.id, []),
                "status_reason": m.status_reason,
                "source_ids": list(p.get("source_ids") or ()),
                "dormant": expired(m),
                "actions": actions.get(m.id, []),
            }
        )
    return rows


def _ui_actions(store: EventReader, session_id: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for w in store.timeline(session_id, types=(EventType.WARNING,)):
        if w.payload.get("kind") == UI_ACTION:
            out.setdefault(str(w.payload.get("memory_id")), []).append(
                {
                    "action": w.payload.get("action"),
                    "reason": w.payload.get("reason"),
                    "ts": w.ts,
                    "id": w.id,
                }
            )
    return out


def search(
    weave: Weave, query: str, *, session_id: str | None = None, k: int = 10
) -> list[dict[str, Any]]:
    """``weave.retrieve`` with each hit's per-path scores and ranks."""
    hits = weave.retrieve(query, session_id=session_id or None, k=max(1, min(int(k), 50)))
    return [
        {
            **brief(h.event),
            "score": h.score,
            "paths": h.paths,
            "ranks": h.ranks,
            "via": list(h.provenance.via),
            "duplicates": list(h.provenance.duplicates),
        }
        for h in hits
    ]


def health(store: SessionReader, session_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """Context-health metrics per session and pooled (amnesia needs an assembly: not here)."""
    ids = list(session_ids) if session_ids else [s.session_id for s in store.sessions()]
    parts = [session_health(store, sid) for sid in ids]
    return {"sessions": [h.to_dict() for h in parts], "pooled": pooled(parts).to_dict()}
