"""The MCP server: BeeWeave's memory operations, the ``memory`` command set and
``get_context`` as tools; sessions and memories as resources.

The tenant, user, agent and scope are fixed when the server starts (they are not tool
arguments), so a client cannot read or write another tenant's or user's memory; a
tool's ``scope`` argument naming another scope is refused in one ``error:`` line, and a
memory id of another scope is not found.  Tools
are thin: each forwards to :mod:`beeweave_core.memory_ops`,
:mod:`beeweave_core.memory_files` or ``weave.assemble``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field, ValidationError

from beeweave_core import __version__
from beeweave_core.errors import invalid_line
from beeweave_core.events import EventType
from beeweave_core.memory_files import TOOL_DESCRIPTION, MemoryCommand, MemoryFiles
from beeweave_core.memory_ops import (
    DEFAULT_SCOPE,
    TOOL_SPECS,
    MemoryOpError,
    MemoryOps,
    is_namespace,
)
from beeweave_core.tokens import DEFAULT_MODEL
from beeweave_core.weave import Weave

#: How many of a session's latest events the session resource shows.
SESSION_TAIL = 50
MAX_CONTEXT_TOKENS = 200_000


@dataclass(frozen=True)
class ServerOptions:
    """What a server is fixed to at start, so a client cannot reach another user's memory.

    Attributes:
        user_id: The user whose memories and sessions the tools read and write.
        agent_id: Recorded as the writer of each memory.
        scope: The namespace memories are written to and read from (the shared one is
            read too); a tool call naming another is refused.
        budget_tokens: The token bound of each memory tool's result.
        model: Whose tokenizer counts the budgets.
    """

    user_id: str | None = None
    agent_id: str | None = None
    scope: str = DEFAULT_SCOPE
    budget_tokens: int = 400
    model: str | None = DEFAULT_MODEL


def _as_function(
    name: str, args: type[BaseModel], run: Callable[[dict[str, Any]], str]
) -> Callable[..., str]:
    """A function whose signature is ``args``'s fields, so the SDK derives the same input
    schema the LangChain and LlamaIndex tools show (one definition of each tool)."""
    params = []
    for field_name, f in args.model_fields.items():
        default = (
            inspect.Parameter.empty if f.is_required() else f.get_default(call_default_factory=True)
        )
        hint = Annotated[f.annotation, Field(description=f.description)]
        params.append(
            inspect.Parameter(
                field_name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint
            )
        )

    def tool(**kwargs: Any) -> str:
        return run({k: v for k, v in kwargs.items() if v is not None})

    tool.__name__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    return tool


def get_context(
    weave: Weave, opts: ServerOptions, session_id: str, query: str | None, budget_tokens: int
) -> dict[str, Any]:
    """The assembled, token-budgeted context of ``session_id`` (messages + accounts)."""
    if not session_id or is_namespace(session_id):
        raise MemoryOpError(f"not a conversation session: {session_id!r}")
    if not 0 < budget_tokens <= MAX_CONTEXT_TOKENS:
        raise MemoryOpError(f"budget_tokens must be between 1 and {MAX_CONTEXT_TOKENS:,}")
    known = {s.session_id: s for s in weave.store.sessions()}
    stats = known.get(session_id)
    if opts.user_id and stats is not None and stats.user_ids and opts.user_id not in stats.user_ids:
        raise MemoryOpError(f"session {session_id!r} belongs to another user")
    ctx = weave.assemble(
        session_id,
        query or None,
        budget_tokens=budget_tokens,
        model=opts.model,
        user_id=opts.user_id,
    )
    return {
        "session_id": session_id,
        "messages": ctx.messages,
        "total_tokens": ctx.total_tokens,
        "budget_tokens": ctx.budget_tokens,
        "tokens_by_layer": ctx.tokens_by_layer,
        "retrieval_event_id": ctx.retrieval_event_id,
    }


class _Server(MCPServer):
    """Arguments the SDK refuses (a missing field, a string for a number) come back as one
    ``error:`` line, like every tool's own refusals, not pydantic's lines and a URL."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            line = f"error: {name}: {invalid_line(exc.__cause__)}"
            return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True)


def build_server(weave: Weave, opts: ServerOptions | None = None) -> MCPServer:
    """An :class:`MCPServer` over ``weave`` (its tenant) for ``opts``'s user, agent, scope:
    the memory tools, the ``memory`` file tool, ``get_context``, and sessions and memories
    as resources.

    Args:
        weave: The open weave the server reads and writes.
        opts: What the server is fixed to (``None``: the defaults).

    Returns:
        The server, not yet running (``server.run("stdio")``).

    Raises:
        ValueError: A bad ``scope`` or a ``budget_tokens`` that is not positive.
    """
    opts = opts or ServerOptions()
    ops = MemoryOps(
        weave,
        user_id=opts.user_id,
        agent_id=opts.agent_id,
        scope=opts.scope,
        budget_tokens=opts.budget_tokens,
        model=opts.model,
        scope_fixed=True,
    )
    files = MemoryFiles(ops)
    server = _Server(
        name="beeweave",
        version=__version__,
        instructions="Long-term memory for this agent: recall before a task, remember what "
        "must outlive the conversation; get_context gives a session's assembled context.",
    )
    for spec in TOOL_SPECS:
        server.add_tool(
            _as_function(spec.name, spec.args, _op(ops, spec.name)),
            name=spec.name,
            description=spec.description,
        )
    server.add_tool(
        _as_function("memory", MemoryCommand, files.execute),
        name="memory",
        description=TOOL_DESCRIPTION,
    )

    @server.tool(
        name="get_context",
        description="The assembled, token-budgeted context "
        "(messages) for a session's next model call.",
    )
    def context_tool(session_id: str, query: str = "", budget_tokens: int = 2000) -> str:
        try:
            return json.dumps(get_context(weave, opts, session_id, query, budget_tokens))
        except (MemoryOpError, ValueError, PermissionError) as exc:  # PermissionError: scopes
            return f"error: {exc}"

    _resources(server, weave, ops)
    return server


def _op(ops: MemoryOps, name: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda args: ops.call(name, args)


def _resources(server: MCPServer, weave: Weave, ops: MemoryOps) -> None:
    @server.resource(
        "beeweave://sessions",
        name="sessions",
        mime_type="application/json",
        description="Conversation sessions of this tenant (and user).",
    )
    def sessions() -> str:
        rows = [
            s for s in weave.store.sessions(user_id=ops.user_id) if not is_namespace(s.session_id)
        ]
        return json.dumps(
            [{"session_id": s.session_id, "events": s.events, "last_ts": s.last_ts} for s in rows]
        )

    @server.resource(
        "beeweave://sessions/{session_id}",
        name="session",
        mime_type="text/plain",
        description="A session's latest events.",
    )
    def session(session_id: str) -> str:
        stats = {s.session_id for s in weave.store.sessions(user_id=ops.user_id)}
        if session_id not in stats or is_namespace(session_id):
            return f"error: no session {session_id!r}"
        events = weave.store.timeline(session_id, last=SESSION_TAIL)
        return "\n".join(
            f"#{e.seq} {e.type.value} [{e.id}] {' '.join(e.content.split())[:300]}"
            for e in events
            if e.type != EventType.MODEL_CALL
        )

    @server.resource(
        "beeweave://memories",
        name="memories",
        mime_type="text/plain",
        description="Current memories of this agent's scope and the shared one.",
    )
    def memories() -> str:
        return ops.list(limit=100).text


def serve(
    weave: Weave,
    opts: ServerOptions,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Run the server on stdio (stdout is the protocol: ``announce`` must not print
    there) or on streamable HTTP (see :mod:`beeweave_mcp.http`)."""
    server = build_server(weave, opts)
    if transport == "stdio":
        server.run("stdio")
        return
    if transport != "http":
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
    from beeweave_mcp.http import serve_http

    serve_http(server, host=host, port=port, token=token, announce=announce)
