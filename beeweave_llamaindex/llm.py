"""A LlamaIndex ``LLM`` as the core's :class:`~beeweave_core.llm.TextLLM`.

The core asks an LLM for one reply to a system prompt and a user text (summaries,
memory extraction) and never imports LlamaIndex; this adapter turns that into a
two-message ``chat`` call and the reply back into text::

    config = WeaveConfig(context=ContextConfig(llm=LlamaIndexLLM(OpenAI(model="gpt-4o-mini"))))
"""

from __future__ import annotations

from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.base.llms.types import ChatMessage, ChatResponse

from beeweave_core.llm import TextLLM


def _messages(system: str, user: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


def _text(reply: ChatResponse) -> str:
    return str(reply.message.content or "")


class LlamaIndexLLM(TextLLM):
    """Any LlamaIndex LLM (``OpenAI``, ``Ollama``, ``MockLLM`` …), as the LLM that writes
    summaries and extracts memories.

    Args:
        llm: The LLM; its model name is recorded with what it wrote.

    Raises:
        TypeError: ``llm`` is not a LlamaIndex LLM.
    """

    def __init__(self, llm: BaseLLM) -> None:
        if not isinstance(llm, BaseLLM):
            raise TypeError(f"LlamaIndexLLM takes a LlamaIndex LLM, got {type(llm).__name__}")
        self.llm = llm
        name = llm.metadata.model_name
        self.name = name if name and name != "unknown" else type(llm).__name__

    def complete(self, system: str, user: str) -> str:
        """Ask the LLM for one reply, as the core's summaries and memory extraction do.

        Args:
            system: The instructions, sent as the system message.
            user: The text to work on, sent as the user message.

        Returns:
            The reply's text.
        """
        return _text(self.llm.chat(_messages(system, user)))

    async def acomplete(self, system: str, user: str) -> str:
        """Async twin of :meth:`complete` (the LLM's own ``achat``).

        Args:
            system: The instructions.
            user: The text to work on.

        Returns:
            The reply's text.
        """
        return _text(await self.llm.achat(_messages(system, user)))


__all__ = ["LlamaIndexLLM"]
