"""BeeWeave as an MCP server (``beeweave mcp``): memory tools, the ``memory`` file
command set, assembled context, and sessions/memories as resources, for any agent that
speaks the Model Context Protocol.  Needs the ``mcp`` extra (``pip install beeweave[mcp]``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beeweave_mcp.server import ServerOptions, build_server

__all__ = ["ServerOptions", "build_server"]


def __getattr__(name: str) -> object:
    """The server's names on first use: the ``beeweave mcp`` command imports this package
    without the ``mcp`` SDK, to name the extra that installs it."""
    if name in __all__:
        return getattr(importlib.import_module("beeweave_mcp.server"), name)
    raise AttributeError(f"module 'beeweave_mcp' has no attribute {name!r}")
