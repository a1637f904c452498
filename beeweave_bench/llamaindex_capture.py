"""``beeweave bench capture --framework llamaindex``: what ``instrument()`` costs an agent run.

One workload — a ``FunctionAgent`` turn (model → tool → model) with a FAKE LLM
(llama-index-core's ``MockFunctionCallingLLM``) so only LlamaIndex's own machinery runs —
is timed three ways in the same process: no handlers, LlamaIndex's own in-memory span
tracer (``SimpleSpanHandler``, the cheapest tracer it ships) and BeeWeave's event + span
handlers.  Cases are interleaved in rounds so drift on a shared machine hits all alike.
A second view times the recorder's hooks called directly (µs per hook).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import tempfile
import time
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ToolCall, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, ToolCallBlock
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMChatStartEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool, ToolOutput

from beeweave_bench.report import median, percentile
from beeweave_core.weave import Weave
from beeweave_llamaindex.instrumentation import BeeWeaveEventHandler

ROUNDS = 5
HOOKS_PER_RUN = 8  # run span, 2 x (chat start, chat end), call_tool span enter/exit, tool span


def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id}: shipped"


def _script(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """FAKE LLM: one tool call, then an answer."""
    if messages[-1].role.value == "tool":
        return ChatMessage(role="assistant", content=f"Order status: {messages[-1].content}")
    return ChatMessage(role="assistant", blocks=[ToolCallBlock(
        tool_call_id="c1", tool_name="lookup", tool_kwargs={"order_id": "ORD-1"})])  # fmt: skip


def _time_runs(agent: FunctionAgent, runs: int) -> list[float]:
    async def go() -> list[float]:
        out = []
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            await agent.run("where is ORD-1?", memory=ChatMemoryBuffer.from_defaults())
            out.append((time.perf_counter_ns() - t0) / 1000.0)
        return out

    return asyncio.run(go())


def _direct(handler: BeeWeaveEventHandler, n: int) -> list[float]:
    """µs per hook of the recorder, driven as LlamaIndex's dispatcher would."""
    span = handler.span_handler
    bound = inspect.signature(lambda ev=None: None).bind(ev=None)
    msgs = [ChatMessage(role="user", content="where is ORD-1?")]
    resp = ChatResponse(message=ChatMessage(role="assistant", blocks=[ToolCallBlock(
        tool_call_id="c1", tool_name="lookup", tool_kwargs={"order_id": "ORD-1"})]))  # fmt: skip
    out = ToolOutput(tool_name="lookup", content="ORD-1: shipped", raw_input={}, raw_output="x")
    samples = []
    for i in range(max(1, n // 6)):
        root, llm, step = f"run-{i}", f"llm-{i}", f"step-{i}"
        call = ToolCall(tool_name="lookup", tool_kwargs={"order_id": "ORD-1"}, tool_id=f"c{i}")
        bound.arguments["ev"] = call
        t0 = time.perf_counter_ns()
        span.span_enter(root, bound, None, None)
        span.span_enter(llm, bound, None, root)
        handler.handle(LLMChatStartEvent(messages=msgs, additional_kwargs={}, model_dict={},
                                         span_id=llm))  # fmt: skip
        handler.handle(LLMChatEndEvent(messages=msgs, response=resp, span_id=llm))
        span.span_enter(step, bound, None, root)
        span.span_exit(step, bound, None, ToolCallResult(tool_name="lookup", tool_kwargs={},
                       tool_id=f"c{i}", tool_output=out, return_direct=False))  # fmt: skip
        samples.append((time.perf_counter_ns() - t0) / 6000.0)
        span.span_exit(root, bound, None, None)
    return samples


def run(n: int = 100_000) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``n`` ≈ hooks per case (agent runs = n / 100, at least 10 per round)."""
    runs = max(ROUNDS * 10, n // 100)
    per_round = runs // ROUNDS
    d = get_dispatcher()
    with tempfile.TemporaryDirectory() as tmp:
        weave = Weave.open(f"sqlite:///{tmp}/bench.db", spool_dir=tmp, index=False,
                           max_high=20 * runs + 10 * n)  # fmt: skip
        agent = FunctionAgent(tools=[FunctionTool.from_defaults(lookup)],
                              llm=MockFunctionCallingLLM(response_generator=_script))  # fmt: skip
        tracer = SimpleSpanHandler()
        bee = BeeWeaveEventHandler(weave=weave, session_id="bench")

        def attach(case: str) -> None:
            if case == "SimpleSpanHandler":
                d.add_span_handler(tracer)
            elif case == "BeeWeave instrument()":
                bee.attach(d)

        def detach() -> None:
            d.span_handlers = [h for h in d.span_handlers if h is not tracer]
            bee.detach()

        cases = ["no handlers", "SimpleSpanHandler", "BeeWeave instrument()"]
        samples: dict[str, list[float]] = {c: [] for c in cases}
        for c in cases:  # warm-up
            attach(c)
            _time_runs(agent, 5)
            detach()
        for _ in range(ROUNDS):
            for c in cases:
                attach(c)
                gc.collect()
                samples[c] += _time_runs(agent, per_round)
                detach()
                tracer.completed_spans.clear()
        direct = _direct(BeeWeaveEventHandler(weave=weave, session_id="direct"), n)
        t0 = time.perf_counter()
        weave.flush(300)
        drain = time.perf_counter() - t0
        stats = weave.stats()
        weave.close()
    rows = [{"case": c, "runs": len(s), "median_us_per_run": median(s),
             "p95_us_per_run": percentile(s, 95)} for c, s in samples.items()]  # fmt: skip
    base, simple, bw = (median(samples[c]) for c in cases)
    rows.append({"case": "BeeWeave hooks called directly", "runs": len(direct),
                 "median_us_per_run": median(direct) * HOOKS_PER_RUN,
                 "p95_us_per_run": percentile(direct, 95) * HOOKS_PER_RUN})  # fmt: skip
    summary = {
        "overhead_us_per_run_beeweave": bw - base,
        "overhead_us_per_run_simple_span_handler": simple - base,
        "beeweave_vs_simple_span_handler_overhead": (bw - base) / max(simple - base, 1e-9),
        "beeweave_us_per_hook_direct": median(direct),
        "drain_after_s": drain,
        "written": stats["written"],
        "capture_failures": bee.failures,
    }
    return rows, summary
