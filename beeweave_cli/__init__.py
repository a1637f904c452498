"""The ``beeweave`` command line (``beeweave_cli.app``).  The core imports nothing from here:
this package sits above it, and the commands of the benchmarks, the UI, the MCP server and
the demo come from their own packages, imported when used."""

from __future__ import annotations


def main() -> None:
    """The console entry point: builds the command only when it runs."""
    from beeweave_cli.app import app

    app()
