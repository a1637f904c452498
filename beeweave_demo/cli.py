"""``beeweave demo``: a scripted agent conversation, offline, and what BeeWeave kept of it
(the timeline, a causal chain, a recall question, the assembled context)."""

from __future__ import annotations

import time
import uuid
from typing import Annotated

import typer

from beeweave_cli.common import (
    AuthOpt,
    ScopeOpt,
    TenantOpt,
    UrlOpt,
    console,
    opened,
    sessions_table,
    timeline_table,
    trace_tree,
)
from beeweave_demo.context import show_assembled_context
from beeweave_demo.recall import show_recall
from beeweave_demo.script import run_script

demo_app = typer.Typer()


@demo_app.command()
def demo(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    scope: ScopeOpt = None,
    auth: AuthOpt = None,
    session: Annotated[str | None, typer.Option(help="Session id (default: a new one).")] = None,
) -> None:
    """Run a scripted agent conversation offline and show what BeeWeave kept."""
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
        show_recall(weave, session_id, console)
        show_assembled_context(weave, session_id, console)
        console.print(
            f"\nData lives in [cyan]{weave.url}[/] (spool: {weave.bus.spool_path.parent})."
        )
