"""The ``beeweave`` command: the store commands of this package, and the commands other
packages bring (``demo``, ``bench``, ``ui``, ``mcp``), each imported only when it is named.

So ``beeweave sessions`` imports neither the benchmarks, the web UI nor the MCP server, and
a command whose extra is missing fails with the pip line that installs it.
"""

from __future__ import annotations

import importlib

import click
import typer
from typer.core import TyperGroup

from beeweave_cli import reads, writes

#: The commands other packages define: name -> "module:Typer app".  Each module needs only
#: this package and the core to import; what its command needs beyond is imported by it.
ELSEWHERE = {
    "demo": "beeweave_demo.cli:demo_app",
    "mcp": "beeweave_mcp.cli:mcp_app",
    "ui": "beeweave_ui.cli:ui_app",
    "bench": "beeweave_bench.cli:bench_app",
}


class CommandsOnUse(TyperGroup):
    """A command group that imports a command of :data:`ELSEWHERE` when it is named (or
    listed by ``--help``), never before."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in ELSEWHERE if n not in self.commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in ELSEWHERE:
            module, _, attr = ELSEWHERE[cmd_name].partition(":")
            typer_app = getattr(importlib.import_module(module), attr)
            command = typer.main.get_command(typer_app)
            command.name = cmd_name  # a group's own name is unset; help shows this one
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    cls=CommandsOnUse,
    help="BeeWeave: a memory that lasts for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
for command in (reads.sessions, reads.show, reads.trace, reads.search, reads.stats):
    app.command()(command)
for command in (writes.purge, writes.forget):
    app.command()(command)
app.command("export")(writes.export_cmd)
app.command("import")(writes.import_cmd)
app.command()(writes.reindex)
app.add_typer(writes.tombstones_app, name="tombstones")
app.add_typer(writes.retention_app, name="retention")
