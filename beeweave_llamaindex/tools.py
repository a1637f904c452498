"""Memory tools for LlamaIndex agents: thin ``FunctionTool`` s over
:mod:`beeweave_core.memory_ops` (and, optionally, the ``memory`` file command set).

``session_id`` names the conversation the agent runs in, so a new memory can point at
the user turn it came from (pass the session given to ``instrument``).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.tools import FunctionTool
from typing_extensions import Unpack

from beeweave_core.memory_files import TOOL_DESCRIPTION, MemoryCommand, MemoryFiles
from beeweave_core.memory_ops import TOOL_SPECS, MemoryOps, OpsOptions, ToolSpec
from beeweave_core.weave import Weave


def _op_tool(ops: MemoryOps, spec: ToolSpec, session_id: str | None) -> FunctionTool:
    def run(**kwargs: Any) -> str:
        return ops.call(spec.name, kwargs, session_id=session_id)

    return FunctionTool.from_defaults(
        fn=run, name=spec.name, description=spec.description, fn_schema=spec.args
    )


def memory_tools(
    weave: Weave,
    *,
    session_id: str | None = None,
    files: bool = False,
    **options: Unpack[OpsOptions],
) -> list[FunctionTool]:
    """``remember``, ``recall``, ``update_memory``, ``forget`` and ``list_memories`` as
    LlamaIndex tools (plus the ``memory`` file tool with ``files=True``), so an agent can
    manage its long-term memory itself.

    Args:
        weave: The open weave the memories live in.
        session_id: The conversation a call belongs to (so a new memory can point at the
            turn it came from).
        files: Also the ``memory`` tool (view / create / str_replace ... on memory files).
        **options: ``user_id`` / ``scope`` pick the namespace (shared by all agents of
            that user and scope); ``agent_id`` records who wrote each memory;
            ``budget_tokens`` bounds each result, counted with ``model``'s tokenizer.

    Returns:
        The tools, ready for a LlamaIndex agent.

    Raises:
        TypeError: ``weave`` is not an open weave.
        ValueError: A bad ``scope`` or a ``budget_tokens`` that is not positive.
    """
    ops = MemoryOps(weave, **options)
    tools = [_op_tool(ops, spec, session_id) for spec in TOOL_SPECS]
    if files:
        handler = MemoryFiles(ops)

        def memory(**kwargs: Any) -> str:
            return handler.execute(kwargs, session_id=session_id)

        tools.append(
            FunctionTool.from_defaults(
                fn=memory, name="memory", description=TOOL_DESCRIPTION, fn_schema=MemoryCommand
            )
        )
    return tools


__all__ = ["memory_tools"]
