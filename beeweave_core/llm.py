"""The one shape of LLM the core calls: a system prompt and a user text in, reply text out.

The core never imports a framework.  What it asks of a model — summarize these turns,
extract memories from this message — is one prompt and one reply, so that is the whole
protocol.  Chat models of a framework are wrapped by that framework's package
(``beeweave_langchain.LangChainLLM``, ``beeweave_llamaindex.LlamaIndexLLM``); a plain
function ``str -> str`` is wrapped here (:class:`FunctionLLM`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, runtime_checkable

ADAPTERS_HINT = (
    "wrap a LangChain chat model in beeweave_langchain.LangChainLLM, a LlamaIndex LLM in "
    "beeweave_llamaindex.LlamaIndexLLM, or pass a function str -> str"
)


@runtime_checkable
class TextLLM(Protocol):
    """An LLM the core can call.  ``name`` is recorded with what it wrote (provenance).

    Subclass it to inherit ``acomplete`` (``complete`` on a worker thread); any object
    with these three members fits without subclassing.
    """

    name: str

    def complete(self, system: str, user: str) -> str: ...

    async def acomplete(self, system: str, user: str) -> str:
        return await asyncio.to_thread(self.complete, system, user)


class FunctionLLM(TextLLM):
    """A plain function ``prompt -> reply`` as a :class:`TextLLM`.

    The function gets the system prompt and the user text joined by a blank line, as a
    completion model would.  A reply that is not a string is a ``TypeError``: a chat
    model's message object here means a framework model was passed unwrapped.
    """

    def __init__(self, fn: Callable[[str], str], *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__

    def complete(self, system: str, user: str) -> str:
        reply = self.fn(f"{system}\n\n{user}")
        if not isinstance(reply, str):
            raise TypeError(
                f"the LLM function returned {type(reply).__name__}, not str: {ADAPTERS_HINT}"
            )
        return reply


def as_text_llm(llm: TextLLM | Callable[[str], str]) -> TextLLM:
    """``llm`` as a :class:`TextLLM`; anything else is a ``TypeError`` naming the adapters."""
    if isinstance(llm, TextLLM):
        return llm
    if callable(llm):
        return FunctionLLM(llm)
    raise TypeError(f"unsupported LLM {type(llm).__name__}: {ADAPTERS_HINT}")


__all__ = ["ADAPTERS_HINT", "FunctionLLM", "TextLLM", "as_text_llm"]
