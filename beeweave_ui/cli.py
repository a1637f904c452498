"""``beeweave ui``: the command that serves this package's web UI over one store."""

from __future__ import annotations

from typing import Annotated

import typer

from beeweave_cli.common import (
    AuthOpt,
    ScopeOpt,
    TenantOpt,
    UrlOpt,
    console,
    opened,
    require_extras,
)

ui_app = typer.Typer()


@ui_app.command()
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
    from beeweave_ui.server import serve  # starlette: only once the extra is known there

    with opened(
        url, tenant, auth, scopes=scope or None, index_options={"backfill": False}
    ) as weave:  # read-mostly
        serve(weave, host=host, port=port, open_browser=open_browser, say=console.print)
