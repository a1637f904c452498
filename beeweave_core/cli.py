"""The ``beeweave`` command: a demo, a look into stored sessions, and benchmarks."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from beeweave_core.backends import store_exists
from beeweave_core.backends.neo4j.auth import Credentials, auth_from_env
from beeweave_core.checkpoints import CheckpointStore, PruneLimits
from beeweave_core.errors import StoreError, shown
from beeweave_core.events import AppendResult, Event
from beeweave_core.exports import export_thread, import_thread, parse_export
from beeweave_core.extras import install_hint, missing_modules
from beeweave_core.governance.retention import archived_in
from beeweave_core.private import write_private_text
from beeweave_core.scopes import ScopeError
from beeweave_core.store import NotFound
from beeweave_core.weave import Weave, default_url

app = typer.Typer(
    help="BeeWeave: a memory that lasts for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
bench_app = typer.Typer(
    help="Benchmarks: each prints a table and writes JSON.", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")
console = Console()

UrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url", help="Store URL (default: the embedded SQLite file under $BEEWEAVE_HOME)."
    ),
]
TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant to read and write.")]
ScopeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--scope", help="Business line to read and write (repeatable; default: every scope)."
    ),
]
AuthOpt = Annotated[
    str | None,
    typer.Option(
        "--auth", help="Neo4j credentials as user:password or user/password (or NEO4J_AUTH)."
    ),
]


def fail(message: str) -> NoReturn:
    """One clear line on stderr and a non-zero exit: what a shell user expects."""
    line = Text.assemble(("error:", "bold red"), " ", " ".join(str(message).split()))
    Console(stderr=True).print(line, highlight=False, soft_wrap=True)
    raise typer.Exit(code=1)


def require_extras(command: str, *extras: str) -> None:
    """A command whose optional packages are missing fails with the pip line that fixes it."""
    missing = missing_modules(extras)
    if missing:
        fail(f"{command} needs {', '.join(missing)} (not installed): {install_hint(extras)}")


def _auth(auth: str | None) -> Credentials | None:
    """``--auth``, else the environment; parsed as every other part of BeeWeave parses it."""
    try:
        return auth_from_env(auth)
    except ValueError as exc:
        fail(str(exc))


@contextmanager
def opened(
    url: str | None, tenant: str, auth: str | None = None, *, read: bool = False, **kw: Any
) -> Iterator[Weave]:
    """The weave a command works on; ``read``: a store that is not there is refused, not made."""
    if read and not store_exists(url):
        fail(f"no store at {shown(url or default_url(), 200)}: nothing to read, nothing created")
    try:
        weave = Weave.open(url, tenant=tenant, auth=_auth(auth), **kw)
    except ValueError as exc:
        fail(" ".join(str(exc).split())[:300])
    except Exception as exc:  # unreachable server, unreadable file …
        reason = " ".join(str(exc).split())[:200]
        fail(f"cannot open {shown(url or default_url())}: {type(exc).__name__}: {reason}")
    try:
        yield weave
    except ScopeError as exc:  # outside --scope: one line, not a traceback
        fail(str(exc))
    finally:
        weave.close()


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _short(text: str, n: int = 70) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def sessions_table(weave: Weave) -> Table:
    table = Table(title=f"Sessions (tenant {weave.tenant})")
    for col in ("session", "events", "by type", "tokens", "first", "last"):
        table.add_column(col, no_wrap=col in ("session", "by type"), min_width=5)
    for s in weave.store.sessions():
        counts = "\n".join(f"{k}={v}" for k, v in sorted(s.counts.items()))
        table.add_row(
            s.session_id, str(s.events), counts, str(s.tokens), _when(s.first_ts), _when(s.last_ts)
        )
    return table


def timeline_table(events: list[Event], title: str, *, compact: bool = False) -> Table:
    """A session's events; ``compact`` leaves out time and full ids (for the demo)."""
    table = Table(title=title)
    cols = ("seq", "type", "content") if compact else ("seq", "time", "type", "content", "id")
    widths = {"seq": 4, "time": 19, "type": 17}
    for col in cols:
        table.add_column(
            col,
            overflow="fold" if col == "id" else "ellipsis",
            no_wrap=col in widths,
            min_width=widths.get(col),
        )
    for ev in events:
        cells = {"seq": str(ev.seq), "time": _when(ev.ts), "type": ev.type.value,
                 "content": _short(ev.content or f"({ev.payload.get('model', 'model call')})"),
                 "id": ev.id}  # fmt: skip
        table.add_row(*(cells[c] for c in cols))
    return table


def trace_tree(weave: Weave, event_id: str, depth: int = 6) -> Tree:
    """The causal chain behind an event, as a tree (nearest cause first)."""
    found = weave.store.get([event_id])
    if not found:
        raise NotFound(f"no event {shown(event_id)} for tenant {shown(weave.tenant)}")
    root = found[0]
    tree = Tree(f"[bold]{root.type.value}[/] #{root.seq}: {_short(root.content)}")
    for file in archived_in(weave.store, root):  # causes the retention policy moved out
        tree.add(f"[dim]DERIVED_FROM[/] events archived in {file}")
    nodes = {root.id: tree}
    for ev, _dist in weave.store.ancestors(event_id, depth=depth):
        # attach each ancestor under the closest already-shown event that points at it
        edges = weave.store.edges(event_id=ev.id, direction="in")
        parent = next((nodes[e.src] for e in edges if e.src in nodes), tree)
        label = next((e.type.value for e in edges if e.src in nodes), "CAUSED_BY")
        nodes[ev.id] = parent.add(
            f"[dim]{label}[/] [bold]{ev.type.value}[/] #{ev.seq}: {_short(ev.content)}"
        )
    return tree


# --------------------------------------------------------------------- commands
@app.command()
def demo(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    session: Annotated[str | None, typer.Option(help="Session id (default: a new one).")] = None,
) -> None:
    """Run a scripted agent conversation offline and show what BeeWeave kept."""
    from beeweave_demo.script import run_script

    session_id = session or f"demo-{uuid.uuid4().hex[:8]}"
    with opened(url, tenant, auth, scopes=scope or None) as weave:
        console.rule("[bold]BeeWeave demo")
        console.print(
            f"Store: [cyan]{weave.url}[/]  tenant: [cyan]{tenant}[/]  session: [cyan]{session_id}[/]"
        )
        t0 = time.perf_counter()
        ids = run_script(weave, session_id)
        weave.flush()
        console.print(
            f"Captured {weave.stats()['written']} events through the bus in "
            f"{(time.perf_counter() - t0) * 1000:.0f} ms (non-blocking emit, batched writes)."
        )
        console.print(sessions_table(weave))
        console.print(
            timeline_table(
                weave.store.timeline(session_id), f"Timeline of {session_id}", compact=True
            )
        )
        rid = ids["tool_result:schedule_job"]
        console.print("\n[bold]Causal chain behind the schedule_job tool result:[/]")
        console.print(trace_tree(weave, rid))
        big = next((e for e in weave.store.timeline(session_id) if "$artifact" in e.payload), None)
        if big is not None:
            art = big.payload["$artifact"]
            console.print(
                f"\nLarge tool output (#{big.seq}) kept in full as artifact "
                f"sha256:{art['sha256'][:12]}… ({art['chars']:,} chars); the event holds a preview."
            )
        for hook in _demo_extensions:
            hook(weave, session_id, console)
        console.print(
            f"\nData lives in [cyan]{weave.url}[/] (spool: {weave.bus.spool_path.parent})."
        )


#: Later layers (recall, context assembly) append sections to the demo here.
_demo_extensions: list[Callable[[Weave, str, Console], None]] = []


def _recall_demo(weave: Weave, session_id: str, console: Console) -> None:
    """One recall question over the demo session, hits with paths and provenance."""
    from beeweave_demo.recall import show_recall

    show_recall(weave, session_id, console)


_demo_extensions.append(_recall_demo)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def print_json(value: object) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=1) + "\n")


@app.command()
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


@app.command()
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


@app.command()
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


@app.command()
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
    table = Table("rank", "score", "session", "seq", "type", "content", "paths",
                  title=f"Search: {_short(query, 60)}")  # fmt: skip
    for n, h in enumerate(hits, 1):
        paths = " ".join(f"{p}={v:.2f}" for p, v in h.paths.items())
        table.add_row(str(n), f"{h.score:.3f}", _short(h.event.session_id, 24),
                      str(h.event.seq), h.event.type.value, _short(h.event.content), paths)  # fmt: skip
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


@app.command()
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
    from beeweave_core.governance.health import weave_health

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
        table.add_row(h.scope, *pct, "-" if a is None else f"{a.carried}/{a.sampled}",
                      "\n".join(h.warnings) or "ok")  # fmt: skip
    console.print(table)


YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def confirmed(question: str, yes: bool) -> None:
    """Ask before destroying data; without a terminal, only ``--yes`` may go on."""
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"{question} Refusing without --yes (no terminal to ask).")
    if not typer.confirm(question, default=False):
        fail("nothing was changed")


@app.command()
def purge(
    session: Annotated[
        str | None, typer.Option("--session", help="Purge one whole session.")
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Purge every event of one user (meta.user_id).")
    ] = None,
    event: Annotated[
        list[str] | None, typer.Option("--event", help="Purge these events (repeatable).")
    ] = None,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    yes: YesOpt = False,
) -> None:
    """Delete for good: the graph, full-text and vector indexes (the right to be forgotten)."""
    chosen = [x for x in (session, user, event) if x]
    if len(chosen) != 1:
        fail("purge takes exactly one of --session, --user or --event")
    with opened(url, tenant, auth, read=True, scopes=scope or None) as weave:
        _purge_target_exists(weave, session, user, event or [])
        if session is not None:
            confirmed(f"Purge session {shown(session)} of tenant {shown(tenant)}?", yes)
            n = weave.purge(session_id=session)
        else:
            ids = list(event or []) if user is None else weave.user_event_ids(user)
            what = f"{len(ids)} event(s) of user {shown(user)}" if user else f"{len(ids)} event(s)"
            confirmed(f"Purge {what} of tenant {shown(tenant)}?", yes)
            if user is not None:  # also drops the user's events still pending on disk
                n = weave.purge(user_id=user)
            else:
                n = weave.purge(ids=ids) if ids else 0
        console.print(f"purged {n} event(s)")


tombstones_app = typer.Typer(help="Tombstones: what purges erased, refused on every import.")
app.add_typer(tombstones_app, name="tombstones")


@tombstones_app.command("list")
def tombstones_list(
    url: UrlOpt = None, tenant: TenantOpt = "default", auth: AuthOpt = None,
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """What purges erased (kind, value, when): copies of these are refused."""
    with opened(url, tenant, auth, read=True) as weave:
        found = weave.tombstones()
    if as_json:
        print_json([t._asdict() for t in found])
        return
    table = Table(title=f"Tombstones (tenant {tenant})")
    for col in ("kind", "value", "purged"):
        table.add_column(col, overflow="fold")
    for t in found:
        table.add_row(t.kind, t.value, _when(t.at))
    console.print(table)


@tombstones_app.command("lift")
def tombstones_lift(
    session: Annotated[str | None, typer.Option("--session", help="A purged session.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="A purged user.")] = None,
    event: Annotated[str | None, typer.Option("--event", help="A purged event id.")] = None,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    auth: AuthOpt = None,
    yes: YesOpt = False,
) -> None:
    """Lift one tombstone: copies of that purged record are stored again (a re-import works)."""
    named = {k: v for k, v in (("session", session), ("user", user), ("event", event)) if v}
    if len(named) != 1:
        fail("tombstones lift takes exactly one of --session, --user or --event")
    ((kind, value),) = named.items()
    with opened(url, tenant, auth, read=True) as weave:
        confirmed(
            f"Lift the tombstone of {kind} {shown(value)}? Its copies will be kept again.", yes
        )
        if not weave.lift_tombstone(**{f"{kind}_id": value}):
            fail(f"no tombstone for {kind} {shown(value)} in tenant {shown(tenant)}")
    console.print(f"lifted the tombstone of {kind} {shown(value)}")


def _purge_target_exists(
    weave: Weave, session: str | None, user: str | None, events: list[str]
) -> None:
    """A purge of nothing is a typo: it fails like ``show`` and ``export`` (and writes no
    tombstone for a session that never was)."""
    tenant = shown(weave.tenant)
    if session is not None and not weave.store.timeline(session, last=1, include_inactive=True):
        fail(f"no session {shown(session)} for tenant {tenant}")
    if user is not None and not weave.user_event_ids(user):
        fail(f"no events of user {shown(user)} for tenant {tenant}")
    known = {e.id for e in weave.store.get(events, include_inactive=True)} if events else set()
    missing = [x for x in events if x not in known]
    if missing:
        fail(f"no event {shown(missing[0])} for tenant {tenant}")


@app.command()
def forget(
    event: Annotated[list[str], typer.Argument(help="Event ids to forget.")],
    reason: Annotated[str, typer.Option(help="Why (kept with the events).")] = "forgotten by user",
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    yes: YesOpt = False,
) -> None:
    """Hide events from every read (recall, context) but keep them for audit (``show --all``)."""
    with opened(url, tenant, auth, read=True, scopes=scope or None) as weave:
        _purge_target_exists(weave, None, None, event)
        confirmed(f"Forget {len(event)} event(s) of tenant {shown(tenant)}?", yes)
        n = weave.store.invalidate(event, reason)
        if weave.indexer is not None:
            weave.indexer.forget(event)
        console.print(f"forgot {n} event(s)")


@contextmanager
def checkpoint_store(weave: Weave) -> Iterator[CheckpointStore]:
    """The checkpoints kept beside the weave's events (closed after use)."""
    store = weave.backend.checkpoints()
    try:
        yield store
    finally:
        store.close()


@app.command("export")
def export_cmd(
    session_id: str,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="File (default: stdout).")] = None,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
) -> None:
    """Export a session (events, edges, artifacts, and its LangGraph checkpoints) to JSON."""
    with (
        opened(url, tenant, auth, read=True, scopes=scope or None) as weave,
        checkpoint_store(weave) as checkpoints,
    ):
        try:
            data = export_thread(weave.store, checkpoints, session_id)
        except NotFound as exc:
            fail(str(exc.args[0]))
        text = json.dumps(data, ensure_ascii=False, indent=1)
        if out is None:
            sys.stdout.write(text + "\n")
            return
        if not out.parent.is_dir():
            fail(f"cannot write {shown(str(out))}: folder {shown(str(out.parent))} does not exist")
        try:  # an export holds a user's conversation: readable by its owner only
            write_private_text(out, text)
        except OSError as exc:
            fail(f"cannot write {shown(str(out))}: {exc.strerror}")
        console.print(f"wrote {len(data['events'])} events to {out}")


@app.command("import")
def import_cmd(
    path: Path,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
) -> None:
    """Import a session exported by ``beeweave export``, or a retention archive (``.jsonl.gz``)
    (checked whole before any write)."""
    from beeweave_core.governance import retention as R

    try:
        raw = path.read_bytes()
        if R.is_archive(raw):
            return _import_archive(R.read_archive(path), url, tenant, auth, scope)
        export = parse_export(raw)
    except OSError as exc:
        fail(f"cannot read {shown(str(path))}: {exc.strerror}")
    except ValueError as exc:
        fail(f"cannot import {shown(str(path))}: {exc}")
    with (
        opened(url, tenant, auth, scopes=scope or None) as weave,
        checkpoint_store(weave) as checkpoints,
    ):
        try:
            res = import_thread(weave.store, checkpoints, export)
        except (ValueError, StoreError) as exc:
            fail(" ".join(str(exc).split())[:300])
        console.print(
            f"imported {res.inserted} events ({res.duplicates} already present{_refused(res)}), "
            f"{len(export.checkpoints)} checkpoints"
        )


def _import_archive(
    sessions: list[Any], url: str | None, tenant: str, auth: str | None, scope: list[str] | None
) -> None:
    from beeweave_core.governance.retention import import_archive

    with opened(url, tenant, auth, scopes=scope or None) as weave:
        try:
            res = import_archive(weave.writer, sessions)
        except (ValueError, StoreError) as exc:
            fail(" ".join(str(exc).split())[:300])
    console.print(
        f"imported {res.inserted} events ({res.duplicates} already present{_refused(res)}) "
        "from the archive"
    )


def _refused(res: AppendResult) -> str:
    """The import's note on events a purge erased (refused by the store's tombstones)."""
    return f", {len(res.purged)} refused: purged" if res.purged else ""


retention_app = typer.Typer(help="Retention: archive what expired, prune the rest.")
app.add_typer(retention_app, name="retention")


@retention_app.command("apply")
def retention_apply(
    rule: Annotated[
        list[str] | None,
        typer.Option("--rule", help="TYPES=DAYS, repeatable (default: raw=90, retrieval=30)."),
    ] = None,
    archive_dir: Annotated[
        Path | None, typer.Option(help="Where archives go (default: $BEEWEAVE_HOME/archive).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what expired.")] = False,
    keep_checkpoints: Annotated[
        int | None, typer.Option(help="Keep the newest N checkpoints per thread.")
    ] = None,
    checkpoint_days: Annotated[
        float | None, typer.Option(help="Drop checkpoints older than this (newest stays).")
    ] = None,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
) -> None:
    """Archive expired events to a gzip JSON Lines file (with manifest) and purge them."""
    from beeweave_core.governance import retention as R
    from beeweave_core.paths import beeweave_home

    try:
        rules = [R.parse_rule(r) for r in rule] if rule else list(R.DEFAULT_RULES)
    except ValueError as exc:
        fail(str(exc))
    folder = archive_dir or beeweave_home() / "archive"
    limits = None
    if keep_checkpoints is not None or checkpoint_days is not None:
        if (keep_checkpoints is not None and keep_checkpoints < 1) or (
            checkpoint_days is not None and checkpoint_days <= 0
        ):
            fail("--keep-checkpoints and --checkpoint-days must be positive")
        limits = PruneLimits(keep_last=keep_checkpoints or 1 << 30, max_age_days=checkpoint_days)
    with opened(url, tenant, auth, scopes=scope or None) as weave:
        report = R.apply_retention(weave, folder, rules, dry_run=dry_run)
        if limits is not None and not dry_run:
            with checkpoint_store(weave) as checkpoints:
                threads = R.prune_checkpoints(checkpoints, limits)
            console.print(f"pruned checkpoints of {len(threads)} thread(s)")
    verb = "would archive" if dry_run else "archived"
    console.print(f"{verb} {report.total} event(s) from {len(report.expired)} session(s)")
    if report.archive is not None:
        console.print(f"archive: {report.archive} (purged {report.purged})")


@app.command()
def reindex(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    full: Annotated[
        bool, typer.Option("--full", help="Re-embed everything (default: resume / fill gaps).")
    ] = False,
    prune: Annotated[
        bool, typer.Option("--prune", help="Also drop vectors of deleted or purged events.")
    ] = False,
    keep_stale: Annotated[
        bool, typer.Option("--keep-stale", help="Keep vectors of other embedding models.")
    ] = False,
) -> None:
    """Bring the vector index up to date with the store (resumable; Ctrl-C is safe)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    # no background gap check: this command does it, with a progress bar
    with opened(
        url, tenant, auth, scopes=scope or None, index_options={"backfill": False}
    ) as weave:
        indexer = weave.indexer
        if indexer is None:
            fail("this weave has no vector index (opened with index=False)")
        status = indexer.status()
        if status["busy"]:
            fail(status["busy"])
        console.print(f"index: {status['index']}  embeddings: {status['identity']}")
        for ident, n in status["stale_identities"].items():
            console.print(f"[yellow]vectors of another model:[/] {ident} ({n}); re-embedding")
        columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console) as bar:
            task = bar.add_task("events", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            try:
                res = indexer.reindex(
                    full=full, prune=prune, drop_stale=not keep_stale, progress=progress
                )
            except KeyboardInterrupt:
                bar.stop()
                fail("interrupted: progress is saved; run `beeweave reindex` again to resume")
        console.print(
            f"scanned {res.scanned} events in {res.sessions} sessions, embedded "
            f"{res.embedded_events} ({res.chunks} vectors) in {res.seconds:.1f} s; dropped "
            f"{res.dropped_identities} stale model(s), pruned {res.pruned}"
        )


@app.command()
def ui(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    host: Annotated[
        str, typer.Option(help="Address to bind (beyond loopback: token needed).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the browser.")] = False,
) -> None:
    """A local web UI: sessions, the causal graph, assembled context, memories, search."""
    require_extras("ui", "ui")
    from beeweave_ui.server import serve

    with opened(
        url, tenant, auth, scopes=scope or None, index_options={"backfill": False}
    ) as weave:  # read-mostly
        serve(weave, host=host, port=port, open_browser=open_browser, say=console.print)


def main() -> None:  # pragma: no cover - console entry point alias
    app()


@app.command("mcp")
def mcp_server(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    weave_scope: Annotated[
        list[str] | None,
        typer.Option("--weave-scope", help="Business line served (repeatable; default: all)."),
    ] = None,
    auth: AuthOpt = None,
    user: Annotated[str | None, typer.Option("--user", help="User whose memory is served.")] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="agent_id recorded on writes.")
    ] = None,
    scope: Annotated[str, typer.Option("--scope", help="Memory namespace.")] = "default",
    transport: Annotated[str, typer.Option("--transport", help="stdio or http.")] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP port.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="BEEWEAVE_MCP_TOKEN",
            help="Bearer token for HTTP (generated when binding beyond localhost).",
        ),
    ] = None,
) -> None:
    """Serve memory tools, memory files and assembled context over MCP (stdio or HTTP)."""
    require_extras("mcp", "mcp")
    from beeweave_mcp.server import ServerOptions, serve

    err = Console(stderr=True)  # on stdio, stdout is the protocol
    with opened(url, tenant, auth, scopes=weave_scope or None) as weave:
        try:
            opts = ServerOptions(user_id=user, agent_id=agent, scope=scope)
            serve(weave, opts, transport=transport, host=host, port=port, token=token,
                  announce=lambda m: err.print(m, highlight=False, soft_wrap=True))  # fmt: skip
        except ValueError as exc:
            fail(str(exc))


# -------------------------------------------------------------------- benchmarks
OutOpt = Annotated[Path | None, typer.Option("--out", help="JSON file to write.")]


@bench_app.command("capture")
def bench_capture(
    n: Annotated[int, typer.Option(help="Calls per case.")] = 100_000,
    framework: Annotated[
        str | None, typer.Option(help="Also measure a framework handler: langchain, llamaindex.")
    ] = None,
    out: OutOpt = None,
) -> None:
    """emit() cost on the caller's thread vs a no-op call and queue.put_nowait."""
    from beeweave_bench import capture
    from beeweave_bench.report import report

    if framework is not None:
        runner = _framework_capture.get(framework)
        if runner is None:
            fail(
                f"unknown framework {framework!r}; known: {', '.join(_framework_capture) or 'none'}"
            )
        require_extras(f"bench capture --framework {framework}", framework)
        rows, summary = runner(n)
    else:
        rows, summary = capture.run(n)
    report("capture" if framework is None else f"capture {framework}", rows, out=out,
           params={"n": n, "framework": framework, **summary},
           notes=[f"{k}: {v}" for k, v in summary.items()])  # fmt: skip


#: Framework capture benchmarks, by the name of the extra that installs the framework.
_framework_capture: dict[str, Callable[[int], tuple[list[dict[str, Any]], dict[str, Any]]]] = {}


def _langchain_capture(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from beeweave_bench.langchain_capture import run

    return run(n)


_framework_capture["langchain"] = _langchain_capture


def _llamaindex_capture(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from beeweave_bench.llamaindex_capture import run

    return run(n)


_framework_capture["llamaindex"] = _llamaindex_capture


@bench_app.command("ingest")
def bench_ingest(
    backend: Annotated[str, typer.Option(help="Comma-separated: sqlite,neo4j.")] = "sqlite",
    events: Annotated[int, typer.Option(help="Events to write (batched).")] = 100_000,
    single: Annotated[int, typer.Option(help="Events written one by one.")] = 2_000,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """Events/s batched vs one-by-one and ancestry p50/p95, every backend in one run."""
    from beeweave_bench import ingest
    from beeweave_bench.report import report

    backends = [b.strip() for b in backend.split(",") if b.strip()]
    if "neo4j" in backends:
        require_extras("bench ingest --backend neo4j", "neo4j")
    try:
        rows = ingest.run(backends, n=events, single=single, auth=_auth(auth))
    except ValueError as exc:
        fail(str(exc))
    notes = ["targets: SQLite batched >= 20,000 ev/s; Neo4j batched >= 5,000 ev/s"]
    report("ingest", rows, out=out, params={"events": events, "single": single}, notes=notes)


@bench_app.command("scale")
def bench_scale(
    backend: Annotated[str, typer.Option(help="sqlite or neo4j.")] = "sqlite",
    max_events: Annotated[int, typer.Option(help="Largest step (10k, 30k, 100k, ...).")] = 300_000,
    vector_share: Annotated[float, typer.Option(help="Share of events embedded.")] = 0.005,
    queries: Annotated[int, typer.Option(help="Retrieve calls per scope and step.")] = 30,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """Retrieve/assemble latency, size and memory as one store grows step by step."""
    from beeweave_bench import scale
    from beeweave_bench.report import report

    cfg = scale.ScaleRun(backend, max_events, vector_share, queries, auth=_auth(auth))
    try:
        rows = scale.run(cfg, on_row=scale.print_row)
    except ValueError as exc:
        fail(str(exc))
    report("scale", rows, out=out, params=vars(cfg) | {"auth": None}, notes=[scale.TARGETS])


@bench_app.command("checkpoint")
def bench_checkpoint(
    steps: Annotated[
        int, typer.Option(help="Checkpoints per thread (messages grow by one).")
    ] = 200,
    rounds: Annotated[
        int | None,
        typer.Option(
            help="Rounds, each in another order of the savers (default: one per saver, "
            "two if their number is odd: each runs in every place, after every other)."
        ),
    ] = None,
    reads: Annotated[int, typer.Option(help="get_tuple calls per round (list: a quarter).")] = 200,
    neo4j: Annotated[
        str | None, typer.Option("--neo4j", help="Neo4j URI to add (default: $NEO4J_URI).")
    ] = None,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """put/get_tuple/list latency of BeeWeaveCheckpointer vs InMemorySaver and AsyncSqliteSaver."""

    uri = neo4j or os.environ.get("NEO4J_URI")
    require_extras("bench checkpoint", "langgraph", "bench", *(["neo4j"] if uri else []))
    from beeweave_bench import checkpoint
    from beeweave_bench.report import report

    rows, summary = checkpoint.run(
        steps=steps, rounds=rounds, reads=reads, neo4j_uri=uri, auth=_auth(auth)
    )
    notes = [
        f"target: BeeWeave sqlite <= {checkpoint.TARGET_RATIO}x AsyncSqliteSaver "
        "(median; put, get_tuple, list)",
        *(
            ["target: BeeWeave neo4j <= 1.0x Neo4jSaver (median; list, both put_writes)"]
            if uri
            else []
        ),
        *(f"{k}: {v}" for k, v in summary.items()),
    ]
    report("checkpoint", rows, out=out,
           params={"steps": steps, "rounds": rounds, "reads": reads, "neo4j": bool(uri), **summary},
           notes=notes)  # fmt: skip


@bench_app.command("durability")
def bench_durability(
    neo4j_script: Annotated[
        Path | None,
        typer.Option(help="scripts/neo4j-test-server: adds the Neo4j stop/start scenario."),
    ] = None,
    neo4j_port: Annotated[
        int, typer.Option(help="Port for that scenario's own Neo4j (never a shared one).")
    ] = 7795,
    burst: Annotated[int, typer.Option(help="Events in the burst scenarios.")] = 20_000,
    seed: Annotated[int, typer.Option(help="Seed for the kill times.")] = 7,
    out: OutOpt = None,
) -> None:
    """Events lost per failure (SIGKILL, SIGTERM, store outage, lock, poison, purge)."""
    from beeweave_bench import durability
    from beeweave_bench.report import report

    if neo4j_script is not None and not neo4j_script.is_file():
        fail(f"no such script: {neo4j_script}")
    rows = durability.run(
        neo4j_script=neo4j_script.resolve() if neo4j_script else None,
        neo4j_port=neo4j_port, seed=seed, burst=burst,
    )  # fmt: skip
    notes = [
        f"contract: an event is on disk {durability.CONTRACT_WINDOW * 1000:.0f} ms after emit() "
        "while the writer keeps up, and at most max_high (1,000) events are only in memory; "
        "SIGTERM and exit lose nothing",
        "'lost beyond window': lost events emitted more than that window before the kill",
    ]
    report("durability", [durability.table_row(r) for r in rows], out=out,
           params={"burst": burst, "seed": seed, "details": rows}, notes=notes)  # fmt: skip


@bench_app.command("context")
def bench_context(
    scenarios: Annotated[
        Path, typer.Option(help="Directory of scenario JSON files (see its README).")
    ],
    out: OutOpt = None,
) -> None:
    """Retention, stale rate and token share: BeeWeave vs full history, trim_messages, ChatMemoryBuffer."""
    require_extras("bench context", "langchain", "llamaindex")
    from beeweave_bench import context
    from beeweave_bench.report import report

    try:
        rows, details, extra = context.run(scenarios)
    except ValueError as exc:
        fail(str(exc))
    mine = [r for r in rows if r["system"] == "beeweave"]
    bee = mine[0]
    kinds = [r for r in mine[1:]] or [bee]
    ok = (all(r["retention"] >= 0.97 for r in kinds) and bee["stale_rate"] <= 0.02
          and bee["within_budget"] == 1.0 and extra["fit_verbatim"] == 1.0)  # fmt: skip
    notes = [
        "target: beeweave retention >= 0.97 on every kind, stale <= 0.02 (in order), within "
        f"budget, every turn verbatim when the history fits: {'MET' if ok else 'NOT MET'}",
        "stale_rate: a forbidden wording with no expected one after it (stale_any: anywhere), "
        "over probes with a forbid list; tokens are exact cl100k_base counts",
        f"summary compression ratio (summary/source tokens): {extra['summary_compression_ratio']}",
        "short sessions (history fits): BeeWeave tokens <= full history in "
        f"{extra['short_session_le_full_history']:.0%} of cases (target 100%)",
        f"fit check (budget above the history): every turn verbatim in "
        f"{extra['fit_verbatim']:.0%} of scenarios (target 100%)",
    ]
    report("context", rows, out=out, params={"scenarios": str(scenarios), **extra, "details": details},
           notes=notes)  # fmt: skip


@bench_app.command("assemble")
def bench_assemble(
    sizes: Annotated[
        str, typer.Option(help="Comma-separated session sizes (events) on SQLite.")
    ] = "1000,10000,100000",
    calls: Annotated[int, typer.Option(help="Timed agent-loop turns per size and workload.")] = 30,
    neo4j: Annotated[
        str | None, typer.Option("--neo4j", help="Neo4j URI for one row (default: $NEO4J_URI).")
    ] = None,
    neo4j_size: Annotated[int, typer.Option(help="Session size of the Neo4j row.")] = 10_000,
    langgraph: Annotated[
        bool, typer.Option(help="Also time the LangGraph hook against InMemorySaver.")
    ] = True,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """Every assemble call of an agent loop (p50, p95, worst) as a session grows."""
    import os

    from beeweave_bench import assemble
    from beeweave_bench.report import report

    if langgraph:
        require_extras("bench assemble", "langgraph", "langchain")
    try:
        ns = tuple(int(x) for x in sizes.split(",") if x.strip())
    except ValueError:
        fail(f"--sizes must be comma-separated integers, got {sizes!r}")
    uri = neo4j or os.environ.get("NEO4J_URI")
    rows, verdict = assemble.run(sizes=ns, calls=calls, neo4j_uri=uri, auth=_auth(auth),
                                 neo4j_size=neo4j_size, langgraph=langgraph,
                                 progress=lambda m: console.print(f"[dim]{m}[/]"))  # fmt: skip
    notes = ["targets: worst <= 3x p50 at 10k; p50 at 10k and 100k <= 2x p50 at 1k (both "
             "workloads); LangGraph hook's added time <= 2x InMemorySaver's turn + 5 ms",
             "gc_paused_calls: calls a full garbage collection (the interpreter's, every "
             "thread stopped for gc_pause_max_ms) fell in; worst_no_gc_over_p50 leaves them out",
             *(f"{k}: {v}" for k, v in verdict.items())]  # fmt: skip
    report("assemble", rows, out=out, params={"sizes": ns, "calls": calls, **verdict}, notes=notes,
           console=Console(width=max(console.width, 160)))  # fmt: skip


@bench_app.command("supersession")
def bench_supersession(
    write: Annotated[
        bool, typer.Option(help="Save the scorer fitted on every conversation (the shipped one).")
    ] = False,
    scenarios: Annotated[
        list[Path] | None,
        typer.Option(help="Directories of scenario JSON files (repeat the option)."),
    ] = None,
    out: OutOpt = None,
) -> None:
    """Supersession alone: its scorer fitted and its threshold chosen by leave-one-conversation-out."""
    from beeweave_bench import supersession
    from beeweave_bench.report import report
    from beeweave_core.memory.supersession import WEIGHTS

    if not scenarios:
        fail("--scenarios DIR is needed (one or more directories of scenario files)")
    try:
        rows, summary = supersession.run(scenarios, write=WEIGHTS if write else None)
    except ValueError as exc:
        fail(str(exc))
    notes = [f"{k}: {v}" for k, v in summary.items()]
    report("supersession", rows, out=out, params=summary, notes=notes)


def _context_demo(weave: Weave, session_id: str, console: Console) -> None:
    """Ends the demo with the assembled context for a late question (imported on use)."""
    from beeweave_demo.context import show_assembled_context

    show_assembled_context(weave, session_id, console)


_demo_extensions.append(_context_demo)


@bench_app.command("acts")
def bench_acts(
    write: Annotated[
        bool, typer.Option(help="Save the classifier fitted on the whole corpus (the shipped one).")
    ] = False,
    per_act: Annotated[
        int, typer.Option(help="Generated training sentences per act (the shipped fit: 320).")
    ] = 320,
    out: OutOpt = None,
) -> None:
    """The speech-act classifier: cross-validated on generated sentences, judged on others."""
    from beeweave_bench import acts
    from beeweave_bench.report import report

    if per_act < 10:
        fail(f"--per-act must be at least 10, got {per_act}")
    rows, summary = acts.run(write=acts.WEIGHTS if write else None, per_act=per_act)
    report("acts", rows, out=out, params=summary, notes=[f"{k}: {v}" for k, v in summary.items()])


@bench_app.command("locomo")
def bench_locomo(
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="LoCoMo data: the public locomo10.json, or a directory of conversation files.",
        ),
    ],
    limit: Annotated[
        int | None, typer.Option(help="Only the first N questions per conversation.")
    ] = None,
    backend: Annotated[
        str, typer.Option(help="sqlite, or neo4j ($NEO4J_URI, a tenant of its own, removed after).")
    ] = "sqlite",
    context_budget: Annotated[
        int,
        typer.Option(help="Also score the assembled context at this budget (0: recall only)."),
    ] = 0,
    context_modes: Annotated[
        str, typer.Option(help="Layouts for the context part: 'one session', 'per session'.")
    ] = "one session,per session",
    out: OutOpt = None,
) -> None:
    """Evidence recall@k / hit@k on LoCoMo: BM25, dense, naive RRF and BeeWeave, one run.

    BeeWeave's fusion settings are also chosen by leave-one-conversation-out
    cross-validation (``bw-cv``: held-out figures; ``bw-cv-dev``: on the rest).  With
    ``--context-budget N``, also what reaches the model: ``assemble`` at N tokens beside
    retrieve-and-pack, the newest turns and the whole history, in the same run (table
    ``locomo-context``: evidence turns whole in the context, gold answer in it, tokens).
    """
    require_extras("bench locomo", "chroma", "bench")
    from beeweave_bench import locomo
    from beeweave_bench.report import report

    if not data.exists():
        fail(f"--data {data} does not exist (get locomo10.json from the LoCoMo repository)")
    if backend not in ("sqlite", "neo4j"):
        fail(f"--backend must be sqlite or neo4j, got {backend!r}")
    url = os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687") if backend == "neo4j" else None
    try:
        rows, summary = locomo.run(
            data, limit=limit, progress=lambda m: console.print(f"[dim]{m}[/]"), store_url=url
        )
    except ValueError as exc:
        fail(str(exc))
    notes = locomo.verdict(rows) + locomo.cv_notes(summary)
    notes += [f"{k}: {v}" for k, v in summary.items() if k not in ("conversations", "cv")]
    report("locomo", rows, out=out, params={"data": str(data), "limit": limit, **summary},
           notes=notes, console=Console(width=max(console.width, 150)))  # fmt: skip
    if context_budget > 0:
        _bench_locomo_context(data, context_budget, context_modes, limit, out)


def _bench_locomo_context(
    data: Path, budget: int, modes: str, limit: int | None, out: Path | None
) -> None:
    from beeweave_bench import locomo_context
    from beeweave_bench.report import report

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(locomo_context.MODES))
    if unknown or not chosen:
        fail(f"--context-modes takes {', '.join(locomo_context.MODES)}; got {modes!r}")
    rows = locomo_context.run(data, budget=budget, modes=chosen, limit=limit,
                              progress=lambda m: console.print(f"[dim]{m}[/]"))  # fmt: skip
    path = out.with_name(out.stem + "-context" + out.suffix) if out else None
    report("locomo-context", rows, out=path, params={"data": str(data), "budget": budget,
           "modes": chosen, "limit": limit}, console=Console(width=max(console.width, 150)))  # fmt: skip


@bench_app.command("recall-zh")
def bench_recall_zh(
    en: Annotated[
        Path | None,
        typer.Option("--en", help="LoCoMo data to score in the same run, beside the Chinese set."),
    ] = None,
    out: OutOpt = None,
) -> None:
    """Evidence recall@k on the packaged Chinese conversations: lexical, dense, fused."""
    require_extras("bench recall-zh", "chroma", "bench")
    from beeweave_bench import recall_zh
    from beeweave_bench.report import report

    if en is not None and not en.exists():
        fail(f"--en {en} does not exist")
    try:
        rows, summary = recall_zh.run(en=en, progress=lambda m: console.print(f"[dim]{m}[/]"))
    except ValueError as exc:
        fail(str(exc))
    notes = [f"{name}: {info['turns']} turns, {info['questions']} questions, "
             f"{info.get('index_turns_per_s')} turns/s indexed" for name, info in summary.items()]  # fmt: skip
    report("recall-zh", rows, out=out, params={"en": str(en) if en else None, **summary},
           notes=notes, console=Console(width=max(console.width, 150)))  # fmt: skip


if __name__ == "__main__":  # python -m beeweave_core.cli
    app()
