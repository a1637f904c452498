"""BeeWeave's layered context as LangChain v1 agent middleware (``create_agent``).

``create_agent(model, tools, system_prompt=..., middleware=[BeeWeaveContextMiddleware(
weave, budget_tokens=8000)])``: around every model call the middleware records the
state's new messages and hands the model the assembled context — pinned system prompt,
working state, what recall finds for the latest request, latest turns verbatim, within
``budget_tokens`` exactly — instead of the full message list.  The agent's state is
left untouched, so a checkpointer still keeps the whole conversation.

It is :class:`~beeweave_langchain.hooks.BeeWeaveContextHook` in another harness: the
hook does the recording and assembly, this class only moves its result into the
:class:`~langchain.agents.middleware.ModelRequest`.  ``wrap_model_call`` (not
``before_model``) because the request, not the state, is what the model reads, and
because it sees the answer, which it records at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.config import get_config

from beeweave_core.weave import Weave
from beeweave_langchain.hooks import BeeWeaveContextHook, checkpointed

log = logging.getLogger("beeweave.langchain")


class BeeWeaveContextMiddleware(AgentMiddleware):
    """Replaces the model's message list with BeeWeave's assembled, budgeted context.

    Args:
        weave: The open weave that records and assembles.
        budget_tokens: The exact token budget of what the model reads.
        pin_system_prompt: Record the agent's ``system_prompt`` as the session's system
            prompt, so the assembler pins it inside the budget and the model reads it
            once; ``False`` leaves it outside the assembly (and outside the budget), as
            ``create_react_agent(prompt=...)`` does with the pre-model hook.
        **kw: :class:`~beeweave_langchain.hooks.BeeWeaveContextHook`'s other options
            (``session_id`` — default the run's ``thread_id`` —, ``model``,
            ``window_tokens``, ``record``, ``user_id``, ``agent_id`` and
            ``weave.assemble`` keywords); ``middleware.hook`` is that hook.

    Raises:
        ValueError: ``budget_tokens`` is not a positive int.
        TypeError: ``weave`` is not an open weave.
    """

    def __init__(
        self,
        weave: Weave,
        *,
        budget_tokens: int = 8_000,
        pin_system_prompt: bool = True,
        **kw: Any,
    ) -> None:
        super().__init__()
        self.hook = BeeWeaveContextHook(weave, budget_tokens=budget_tokens, **kw)
        self.pin_system_prompt = pin_system_prompt

    @property
    def last(self) -> Any:
        """The last :class:`~beeweave_core.context.AssembledContext` handed to the model."""
        return self.hook.last

    def _inputs(self, request: ModelRequest) -> tuple[str, list[BaseMessage]]:
        info = getattr(request.runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None) or (get_config().get("configurable") or {}).get(
            "thread_id"
        )
        messages = list(request.messages)
        if self.pin_system_prompt and request.system_message is not None:
            messages.insert(0, request.system_message)
        return self.hook.session(thread), messages

    def _request(self, request: ModelRequest, context: list[BaseMessage]) -> ModelRequest:
        if self.pin_system_prompt:  # the assembly leads with it
            return request.override(messages=context, system_message=None)
        return request.override(messages=context)

    def _record_answer(self, session_id: str, response: Any) -> None:
        """Record the answer now (the pre-model hook sees it only at the next call);
        the same key as the callback handler's, so a handler on the run adds nothing."""
        if not self.hook.record:
            return
        try:
            self.hook.record_messages(session_id, _answer_messages(response))
        except Exception:  # the answer is the agent's; BeeWeave failing must not lose it
            log.exception("beeweave: recording the model's answer failed; the agent goes on")

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> Any:
        """Hand the model the assembled context instead of the full message list, and
        record its answer at once.

        Args:
            request: The model call the agent is about to make.
            handler: Makes the call (the next middleware, then the model).

        Returns:
            What ``handler`` returned, unchanged.

        Raises:
            ValueError: The run names no session (no ``session_id``, no ``thread_id``).
        """
        sid, messages = self._inputs(request)
        ctx = self.hook.context(sid, messages, branch=checkpointed(get_config()))
        response = handler(self._request(request, ctx))
        self._record_answer(sid, response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        """Async twin of :meth:`wrap_model_call` (assembly runs on a worker thread).

        Args:
            request: The model call the agent is about to make.
            handler: Makes the call (the next middleware, then the model).

        Returns:
            What ``handler`` returned, unchanged.

        Raises:
            ValueError: The run names no session (no ``session_id``, no ``thread_id``).
        """
        sid, messages = self._inputs(request)
        branch = checkpointed(get_config())
        ctx = await self.hook.acontext(sid, messages, branch=branch)
        response = await handler(self._request(request, ctx))
        self._record_answer(sid, response)
        return response


def _answer_messages(response: Any) -> Sequence[BaseMessage]:
    """The messages of whatever an inner handler returned (response, extended, message)."""
    if isinstance(response, AIMessage):
        return [response]
    inner = getattr(response, "model_response", response)  # ExtendedModelResponse
    return list(getattr(inner, "result", None) or ())


__all__ = ["BeeWeaveContextMiddleware"]
