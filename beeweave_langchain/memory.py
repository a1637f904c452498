"""``BeeWeaveMemory``: a drop-in for ``ConversationBufferMemory`` that does not grow forever.

Legacy chains (``ConversationChain``, ``LLMChain`` with memory, ``AgentExecutor``)
take a ``memory=``.  Swapping ``ConversationBufferMemory(...)`` for
``BeeWeaveMemory(weave=..., session_id=..., ...)`` keeps every argument a buffer-memory
user passes (``memory_key``, ``input_key``, ``output_key``, ``return_messages``,
``human_prefix``, ``ai_prefix``) and changes what the chain reads: instead of the
whole transcript, the layered context BeeWeave assembles (pinned system prompt,
working state, recalled memories and summaries, latest turns verbatim), never more
than ``max_token_limit`` tokens.  Turns are saved as events, so they survive the
process and are searchable.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_classic.memory.utils import get_prompt_input_key
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, get_buffer_string
from pydantic import ConfigDict, Field, PrivateAttr

from beeweave_core.tokens import DEFAULT_MODEL
from beeweave_langchain.history import BeeWeaveChatMessageHistory
from beeweave_langchain.messages import dicts_to_messages


class BeeWeaveMemory(BaseMemory):
    """Token-budgeted conversation memory for legacy LangChain chains.

    ``load_memory_variables`` returns ``{memory_key: context}`` — a list of messages
    when ``return_messages`` is true, else one string with ``human_prefix`` /
    ``ai_prefix`` labels (as ``ConversationBufferMemory`` gives).  ``max_token_limit``
    is exact for ``model``'s tokenizer.  ``save_context`` records the turn;
    ``clear`` hides the session (soft delete, recoverable).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    weave: Any = Field(exclude=True)
    session_id: str
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    max_token_limit: int = 2_000
    model: str | None = DEFAULT_MODEL
    user_id: str | None = None
    agent_id: str | None = None
    compact: bool = True
    #: Extra keyword arguments for ``weave.assemble`` (``phase``, ``single_system`` …).
    assemble_kwargs: dict[str, Any] = Field(default_factory=dict)

    _history: BeeWeaveChatMessageHistory = PrivateAttr()
    #: The last assembly (tokens per layer, provenance), for inspection.
    last_context: Any = Field(default=None, exclude=True)

    def model_post_init(self, __context: Any) -> None:
        if self.max_token_limit <= 0:
            raise ValueError(f"max_token_limit must be positive, got {self.max_token_limit}")
        self._history = BeeWeaveChatMessageHistory(
            self.weave, self.session_id, user_id=self.user_id, agent_id=self.agent_id
        )

    @property
    def chat_memory(self) -> BeeWeaveChatMessageHistory:
        """The session's full history (what ``ConversationBufferMemory.chat_memory`` is)."""
        return self._history

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    # ------------------------------------------------------------------ reads
    def _query(self, inputs: dict[str, Any]) -> str | None:
        key = self.input_key
        if key is None:
            try:
                key = get_prompt_input_key(inputs, self.memory_variables)
            except ValueError:
                return None
        value = inputs.get(key)
        return value if isinstance(value, str) and value else None

    def _assemble_kw(self) -> dict[str, Any]:
        return {"budget_tokens": self.max_token_limit, "model": self.model,
                "compact": self.compact, "user_id": self.user_id, **self.assemble_kwargs}  # fmt: skip

    def _format(self, ctx: Any) -> dict[str, Any]:
        self.last_context = ctx
        messages: list[BaseMessage] = dicts_to_messages(ctx.messages)
        if self.return_messages:
            return {self.memory_key: messages}
        return {
            self.memory_key: get_buffer_string(
                messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix
            )
        }

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        ctx = self.weave.assemble(self.session_id, self._query(inputs), **self._assemble_kw())
        return self._format(ctx)

    def inspect(self, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
        """What ``load_memory_variables`` would return, writing nothing (no memories,
        compaction or audit record): for looking at the context without changing it."""
        kw = {**self._assemble_kw(), "dry_run": True}
        return self._format(self.weave.assemble(self.session_id, self._query(inputs or {}), **kw))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        ctx = await self.weave.aassemble(
            self.session_id, self._query(inputs), **self._assemble_kw()
        )
        return self._format(ctx)

    # ----------------------------------------------------------------- writes
    def _turn(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> list[BaseMessage]:
        """The (human, ai) pair a turn adds — with ``ConversationBufferMemory``'s key rules."""
        in_key = self.input_key or get_prompt_input_key(inputs, self.memory_variables)
        if self.output_key is not None:
            out_key = self.output_key
        elif len(outputs) == 1:
            out_key = next(iter(outputs))
        elif "output" in outputs:
            out_key = "output"
        else:
            raise ValueError(
                f"Got multiple output keys: {list(outputs)}, cannot determine which to store "
                "in memory. Please set the 'output_key' explicitly."
            )
        return [_as_message(inputs[in_key], HumanMessage), _as_message(outputs[out_key], AIMessage)]

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        self._history.add_messages(self._turn(inputs, outputs))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        await self._history.aadd_messages(self._turn(inputs, outputs))

    def clear(self) -> None:
        self._history.clear()

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)


def _as_message(value: Any, cls: type[BaseMessage]) -> BaseMessage:
    if isinstance(value, BaseMessage):
        return value
    return cls(content=value if isinstance(value, str) else str(value))
