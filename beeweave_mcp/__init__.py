"""BeeWeave as an MCP server (``beeweave mcp``): memory tools, the ``memory`` file
command set, assembled context, and sessions/memories as resources, for any agent that
speaks the Model Context Protocol.  Needs the ``mcp`` extra (``pip install beeweave[mcp]``).
"""

from beeweave_mcp.server import ServerOptions, build_server

__all__ = ["ServerOptions", "build_server"]
