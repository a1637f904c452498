"""What every ``beeweave`` command shares: its options, one-line errors, the weave it opens,
and the tables several commands print.

The commands of other packages (``beeweave_bench``, ``beeweave_ui``, ``beeweave_mcp``)
take their options and helpers from here, so a command reads and fails the same way
wherever it lives.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
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
from beeweave_core.checkpoints import CheckpointStore
from beeweave_core.errors import shown
from beeweave_core.events import Event
from beeweave_core.extras import install_hint, missing_modules
from beeweave_core.governance.retention import archived_in
from beeweave_core.scopes import ScopeError
from beeweave_core.store import NotFound
from beeweave_core.weave import Weave, default_url

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


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="JSON file to write.")]


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


def credentials(auth: str | None) -> Credentials | None:
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
        weave = Weave.open(url, tenant=tenant, auth=credentials(auth), **kw)
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


def print_json(value: object) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=1) + "\n")


def confirmed(question: str, yes: bool) -> None:
    """Ask before destroying data; without a terminal, only ``--yes`` may go on."""
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"{question} Refusing without --yes (no terminal to ask).")
    if not typer.confirm(question, default=False):
        fail("nothing was changed")


@contextmanager
def checkpoint_store(weave: Weave) -> Iterator[CheckpointStore]:
    """The checkpoints kept beside the weave's events (closed after use)."""
    store = weave.backend.checkpoints()
    try:
        yield store
    finally:
        store.close()


def when(ts: float | None) -> str:
    """A stored time as a reader sees it (UTC, to the second)."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def short(text: str, n: int = 70) -> str:
    """One line of at most ``n`` characters: a table cell never breaks the layout."""
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def sessions_table(weave: Weave) -> Table:
    table = Table(title=f"Sessions (tenant {weave.tenant})")
    for col in ("session", "events", "by type", "tokens", "first", "last"):
        table.add_column(col, no_wrap=col in ("session", "by type"), min_width=5)
    for s in weave.store.sessions():
        counts = "\n".join(f"{k}={v}" for k, v in sorted(s.counts.items()))
        table.add_row(
            s.session_id, str(s.events), counts, str(s.tokens), when(s.first_ts), when(s.last_ts)
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
        cells = {
            "seq": str(ev.seq),
            "time": when(ev.ts),
            "type": ev.type.value,
            "content": short(ev.content or f"({ev.payload.get('model', 'model call')})"),
            "id": ev.id,
        }
        table.add_row(*(cells[c] for c in cols))
    return table


def trace_tree(weave: Weave, event_id: str, depth: int = 6) -> Tree:
    """The causal chain behind an event, as a tree (nearest cause first)."""
    found = weave.store.get([event_id])
    if not found:
        raise NotFound(f"no event {shown(event_id)} for tenant {shown(weave.tenant)}")
    root = found[0]
    tree = Tree(f"[bold]{root.type.value}[/] #{root.seq}: {short(root.content)}")
    for file in archived_in(weave.store, root):  # causes the retention policy moved out
        tree.add(f"[dim]DERIVED_FROM[/] events archived in {file}")
    nodes = {root.id: tree}
    for ev, _dist in weave.store.ancestors(event_id, depth=depth):
        # attach each ancestor under the closest already-shown event that points at it
        edges = weave.store.edges(event_id=ev.id, direction="in")
        parent = next((nodes[e.src] for e in edges if e.src in nodes), tree)
        label = next((e.type.value for e in edges if e.src in nodes), "CAUSED_BY")
        nodes[ev.id] = parent.add(
            f"[dim]{label}[/] [bold]{ev.type.value}[/] #{ev.seq}: {short(ev.content)}"
        )
    return tree
