"""Memory tools for LangChain / LangGraph agents: thin ``StructuredTool`` s over
:mod:`beeweave_core.memory_ops` (and, optionally, the ``memory`` file command set).

The conversation a call belongs to (so a new memory can point at the user turn it came
from) is the ``session_id`` given here, else the run's ``beeweave_session_id`` metadata,
else LangGraph's ``thread_id`` -- the same rule as ``BeeWeaveCallbackHandler``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from typing_extensions import Unpack

from beeweave_core.memory_files import TOOL_DESCRIPTION, MemoryCommand, MemoryFiles
from beeweave_core.memory_ops import TOOL_SPECS, MemoryOps, OpsOptions, ToolSpec
from beeweave_core.weave import Weave


def _session(config: RunnableConfig | None, fixed: str | None) -> str | None:
    if fixed:
        return fixed
    config = config or {}
    md = config.get("metadata") or {}
    sid = md.get("beeweave_session_id") or (config.get("configurable") or {}).get("thread_id")
    return str(sid) if sid else None


def _op_tool(ops: MemoryOps, spec: ToolSpec, session_id: str | None) -> BaseTool:
    def run(config: RunnableConfig, **kwargs: Any) -> str:
        return ops.call(spec.name, kwargs, session_id=_session(config, session_id))

    return StructuredTool.from_function(
        func=run, name=spec.name, description=spec.description, args_schema=spec.args
    )


def _files_tool(files: MemoryFiles, session_id: str | None) -> BaseTool:
    def run(config: RunnableConfig, **kwargs: Any) -> str:
        return files.execute(kwargs, session_id=_session(config, session_id))

    return StructuredTool.from_function(
        func=run, name="memory", description=TOOL_DESCRIPTION, args_schema=MemoryCommand
    )


def memory_tools(
    weave: Weave,
    *,
    session_id: str | None = None,
    files: bool = False,
    **options: Unpack[OpsOptions],
) -> list[BaseTool]:
    """``remember``, ``recall``, ``update_memory``, ``forget`` and ``list_memories`` as
    LangChain tools (plus the ``memory`` file tool with ``files=True``), so an agent can
    manage its long-term memory itself.

    Args:
        weave: The open weave the memories live in.
        session_id: The conversation a call belongs to (``None``: the run's
            ``beeweave_session_id`` metadata, else LangGraph's ``thread_id``).
        files: Also the ``memory`` tool (view / create / str_replace ... on memory files).
        **options: ``user_id`` / ``scope`` pick the namespace (shared by all agents of
            that user and scope); ``agent_id`` records who wrote each memory;
            ``budget_tokens`` bounds each result, counted with ``model``'s tokenizer.

    Returns:
        The tools, ready for ``create_agent`` / ``create_react_agent``.

    Raises:
        TypeError: ``weave`` is not an open weave.
        ValueError: A bad ``scope`` or a ``budget_tokens`` that is not positive.
    """
    ops = MemoryOps(weave, **options)
    tools = [_op_tool(ops, spec, session_id) for spec in TOOL_SPECS]
    if files:
        tools.append(_files_tool(MemoryFiles(ops), session_id))
    return tools


__all__ = ["memory_tools"]
