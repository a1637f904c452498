"""``BeeWeaveMemory``: a drop-in for ``ConversationBufferMemory`` that does not grow forever.

Legacy chains (``ConversationChain``, ``LLMChain`` with memory, ``AgentExecutor``)
take a ``memory=``.  ``BeeWeaveMemory()`` takes the same arguments as
``ConversationBufferMemory(...)`` (``memory_key``, ``input_key``, ``output_key``,
``return_messages``, ``human_prefix``, ``ai_prefix``, ``chat_memory``) plus
``ConversationTokenBufferMemory``'s ``max_token_limit``, and offers the same
attributes (``buffer``, ``buffer_as_str``, ``buffer_as_messages``).  What the chain
reads changes: instead of the whole transcript, the layered context BeeWeave
assembles (pinned system prompt, working state, recalled memories and summaries,
latest turns verbatim), never more than ``max_token_limit`` tokens.  Turns are saved
as events, so they survive the process and are searchable.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_classic.memory.utils import get_prompt_input_key
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, get_buffer_string
from pydantic import ConfigDict, Field, PrivateAttr

from beeweave_core.tokens import DEFAULT_MODEL
from beeweave_core.weave import Weave
from beeweave_langchain.history import BeeWeaveChatMessageHistory
from beeweave_langchain.messages import dicts_to_messages


def _new_session_id() -> str:
    return f"memory-{uuid.uuid4().hex[:12]}"


class BeeWeaveMemory(BaseMemory):
    """Token-budgeted conversation memory for legacy LangChain chains.

    ``load_memory_variables`` returns ``{memory_key: context}`` — a list of messages
    when ``return_messages`` is true, else one string with ``human_prefix`` /
    ``ai_prefix`` labels (as ``ConversationBufferMemory`` gives).  ``max_token_limit``
    is exact for ``model``'s tokenizer.  ``save_context`` records the turn;
    ``clear`` hides the session (soft delete, recoverable).

    With no ``weave`` it opens ``Weave.open()`` (the default SQLite file); with no
    ``session_id`` it makes one (read it back from ``memory.session_id``).  A given
    ``chat_memory`` stays the history of record, as with ``ConversationBufferMemory``:
    its messages are copied into the weave at start and every turn goes to both.

    Attributes:
        weave: The open weave (``None``: ``Weave.open()``, the default SQLite file).
        session_id: The conversation (default: a new ``memory-…`` id).
        chat_memory: A history of record kept beside the weave (default: the weave's).
        memory_key: The key the chain reads the context under.
        input_key: The input holding the user's words (default: the only other input).
        output_key: The output holding the answer (default: the only output, or
            ``"output"``).
        return_messages: Give messages instead of one labelled string.
        human_prefix: The label of the user's turns in the string form.
        ai_prefix: The label of the model's turns in the string form.
        max_token_limit: The exact token budget of the context.
        model: Whose tokenizer counts the budget.
        user_id: Put into every turn's ``meta``, and given to assembly.
        agent_id: Put into every turn's ``meta``.
        assemble_kwargs: More options for ``weave.assemble`` (``phase``,
            ``single_system`` ...).
        last_context: The last assembly (tokens per layer, provenance), for inspection.

    Raises:
        ValueError: ``max_token_limit`` is not positive.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    weave: Weave | None = Field(default=None, exclude=True)
    session_id: str = Field(default_factory=_new_session_id)
    chat_memory: BaseChatMessageHistory | None = Field(default=None, exclude=True)
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
    #: Extra keyword arguments for ``weave.assemble`` (``phase``, ``single_system`` …).
    assemble_kwargs: dict[str, Any] = Field(default_factory=dict)

    _history: BeeWeaveChatMessageHistory = PrivateAttr()
    #: The last assembly (tokens per layer, provenance), for inspection.
    last_context: Any = Field(default=None, exclude=True)

    def model_post_init(self, __context: Any) -> None:
        """Open the default weave if none was given and copy a given history into it.

        Args:
            __context: Pydantic's validation context (unused).

        Raises:
            ValueError: ``max_token_limit`` is not positive.
        """
        if self.max_token_limit <= 0:
            raise ValueError(f"max_token_limit must be positive, got {self.max_token_limit}")
        if self.weave is None:
            self.weave = Weave.open()
        self._history = BeeWeaveChatMessageHistory(
            self.weave, self.session_id, user_id=self.user_id, agent_id=self.agent_id
        )
        if self.chat_memory is None:
            self.chat_memory = self._history
        else:  # the given history is read once: its turns become events (keys dedupe reruns)
            earlier = self.chat_memory.messages
            if earlier and not self._history.messages:
                self._history.add_messages(earlier)

    @property
    def _weave(self) -> Weave:
        assert self.weave is not None  # set in model_post_init
        return self.weave

    # ------------------------------------------- ConversationBufferMemory's surface
    @property
    def buffer(self) -> str | list[BaseMessage]:
        """The whole conversation (not budgeted): messages if ``return_messages``, else text."""
        return self.buffer_as_messages if self.return_messages else self.buffer_as_str

    @property
    def buffer_as_str(self) -> str:
        """The whole conversation as one string with ``human_prefix`` / ``ai_prefix`` labels."""
        return get_buffer_string(
            self.buffer_as_messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix
        )

    @property
    def buffer_as_messages(self) -> list[BaseMessage]:
        """The whole conversation (not budgeted) as messages, from the history of record."""
        assert self.chat_memory is not None  # set in model_post_init
        return list(self.chat_memory.messages)

    async def abuffer(self) -> str | list[BaseMessage]:
        """Async twin of :attr:`buffer` (read on a worker thread).

        Returns:
            The whole conversation: messages if ``return_messages``, else text.
        """
        return await asyncio.to_thread(lambda: self.buffer)

    @property
    def memory_variables(self) -> list[str]:
        """The one key this memory fills in: ``memory_key``."""
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
        return {
            "budget_tokens": self.max_token_limit,
            "model": self.model,
            "user_id": self.user_id,
            **self.assemble_kwargs,
        }

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

    def _empty(self) -> dict[str, Any]:
        """What the chain reads when the store is closed or down: no history."""
        return {self.memory_key: [] if self.return_messages else ""}

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The context the chain reads: assembled, within ``max_token_limit`` tokens.

        Args:
            inputs: The chain's inputs; the user's words steer recall.

        Returns:
            ``{memory_key: context}``: messages if ``return_messages``, else labelled
            text; empty (one warning) when the store is closed or down.
        """
        query = self._query(inputs)
        return self._history.fallback.run(
            lambda: self._format(
                self._weave.assemble(self.session_id, query, **self._assemble_kw())
            ),
            self._empty,
        )

    def inspect(self, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
        """What ``load_memory_variables`` would return, without the audit record: for
        looking at the context without leaving a trace of it.

        Args:
            inputs: The chain's inputs (``None``: none, so recall has no query).

        Returns:
            ``{memory_key: context}``, as :meth:`load_memory_variables` gives it.
        """
        kw = {**self._assemble_kw(), "record": False}
        return self._format(self.weave.assemble(self.session_id, self._query(inputs or {}), **kw))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async twin of :meth:`load_memory_variables` (on a worker thread).

        Args:
            inputs: The chain's inputs.

        Returns:
            ``{memory_key: context}``.
        """
        return await asyncio.to_thread(self.load_memory_variables, inputs)

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
        return [
            _as_message(inputs, in_key, HumanMessage, "inputs"),
            _as_message(outputs, out_key, AIMessage, "outputs"),
        ]

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Record a turn (the user's words and the answer) as events, and in a given
        ``chat_memory``.

        Args:
            inputs: The chain's inputs (``input_key`` picks the user's words).
            outputs: The chain's outputs (``output_key`` picks the answer).

        Raises:
            ValueError: Several outputs and no ``output_key``, or a value that is None.
        """
        turn = self._turn(inputs, outputs)
        if self.chat_memory is not self._history:
            self.chat_memory.add_messages(turn)  # type: ignore[union-attr]
        self._history.add_messages(turn)

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async twin of :meth:`save_context` (on a worker thread).

        Args:
            inputs: The chain's inputs.
            outputs: The chain's outputs.
        """
        await asyncio.to_thread(self.save_context, inputs, outputs)

    def clear(self) -> None:
        """Hide the session from every read (a soft delete, recoverable) and clear a
        given ``chat_memory``."""
        if self.chat_memory is not self._history:
            self.chat_memory.clear()  # type: ignore[union-attr]
        self._history.clear()

    async def aclear(self) -> None:
        """Async twin of :meth:`clear` (on a worker thread)."""
        await asyncio.to_thread(self.clear)


def _as_message(
    values: dict[str, Any], key: str, cls: type[BaseMessage], where: str
) -> BaseMessage:
    """``values[key]`` as a message; nothing to say is refused, never stored as "None"."""
    value = values[key]
    if value is None:
        raise ValueError(
            f"save_context: {where}[{key!r}] is None; pass the turn's text (or a message)"
        )
    if isinstance(value, BaseMessage):
        return value
    return cls(content=value if isinstance(value, str) else str(value))
