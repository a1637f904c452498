"""``beeweave mcp``: the command that serves this package's MCP server over one store."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from beeweave_cli.common import AuthOpt, TenantOpt, UrlOpt, fail, opened, require_extras

mcp_app = typer.Typer()


@mcp_app.command("mcp")
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
    from beeweave_mcp.server import ServerOptions, serve  # mcp: only once the extra is known there

    err = Console(stderr=True)  # on stdio, stdout is the protocol
    with opened(url, tenant, auth, scopes=weave_scope or None) as weave:
        try:
            opts = ServerOptions(user_id=user, agent_id=agent, scope=scope)
            serve(
                weave,
                opts,
                transport=transport,
                host=host,
                port=port,
                token=token,
                announce=lambda m: err.print(m, highlight=False, soft_wrap=True),
            )
        except ValueError as exc:
            fail(str(exc))
