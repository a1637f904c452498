"""A LangChain chat model (or completion model) as the core's :class:`~beeweave_core.llm.TextLLM`.

The core asks an LLM for one reply to a system prompt and a user text (summaries,
memory extraction) and never imports LangChain; this adapter turns that into a
``SystemMessage`` + ``HumanMessage`` call and the reply back into text::

    config = WeaveConfig(context=ContextConfig(llm=LangChainLLM(ChatOpenAI(model="gpt-4o-mini"))))
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable

from beeweave_core.llm import TextLLM


def text_of(reply: BaseMessage | str) -> str:
    """The text of a chat reply (string or content blocks) or of a completion string."""
    if isinstance(reply, str):
        return reply
    content = reply.content
    if isinstance(content, str):
        return content
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)


def model_name(model: Runnable[Any, Any]) -> str:
    """The name recorded with what the model wrote: its model id when it has one."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


class LangChainLLM(TextLLM):
    """Any LangChain ``BaseChatModel`` / ``BaseLLM`` (or runnable taking messages), as the
    LLM that writes summaries and extracts memories.

    Args:
        model: The model; its model id is recorded with what it wrote.

    Raises:
        TypeError: ``model`` is not a LangChain runnable.
    """

    def __init__(self, model: Runnable[Any, Any]) -> None:
        if not isinstance(model, Runnable):
            raise TypeError(f"LangChainLLM takes a LangChain model, got {type(model).__name__}")
        self.model = model
        self.name = model_name(model)

    @staticmethod
    def _messages(system: str, user: str) -> list[BaseMessage]:
        return [SystemMessage(content=system), HumanMessage(content=user)]

    def complete(self, system: str, user: str) -> str:
        """Ask the model for one reply, as the core's summaries and memory extraction do.

        Args:
            system: The instructions, sent as a ``SystemMessage``.
            user: The text to work on, sent as a ``HumanMessage``.

        Returns:
            The reply's text (content blocks joined).
        """
        return text_of(self.model.invoke(self._messages(system, user)))

    async def acomplete(self, system: str, user: str) -> str:
        """Async twin of :meth:`complete` (the model's own ``ainvoke``).

        Args:
            system: The instructions.
            user: The text to work on.

        Returns:
            The reply's text.
        """
        return text_of(await self.model.ainvoke(self._messages(system, user)))


__all__ = ["LangChainLLM", "model_name", "text_of"]
