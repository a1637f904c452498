"""The commands that change a store: forget, purge, tombstones, export and import,
retention, reindex.  Each asks before it destroys and names what it changed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from beeweave_cli.common import (
    AuthOpt,
    JsonOpt,
    ScopeOpt,
    TenantOpt,
    UrlOpt,
    YesOpt,
    checkpoint_store,
    confirmed,
    console,
    fail,
    opened,
    print_json,
    when,
)
from beeweave_core.checkpoints import PruneLimits
from beeweave_core.errors import StoreError, shown
from beeweave_core.events import AppendResult
from beeweave_core.exports import export_thread, import_thread, parse_export
from beeweave_core.governance import retention as R
from beeweave_core.paths import beeweave_home
from beeweave_core.private import write_private_text
from beeweave_core.store import NotFound
from beeweave_core.weave import Weave


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


@tombstones_app.command("list")
def tombstones_list(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    auth: AuthOpt = None,
    as_json: JsonOpt = False,
) -> None:
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
        table.add_row(t.kind, t.value, when(t.at))
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


def import_cmd(
    path: Path,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
) -> None:
    """Import a session exported by ``beeweave export``, or a retention archive (``.jsonl.gz``)
    (checked whole before any write)."""
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
    with opened(url, tenant, auth, scopes=scope or None) as weave:
        try:
            res = R.import_archive(weave.writer, sessions)
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
