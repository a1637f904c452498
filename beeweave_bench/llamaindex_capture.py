"""``beeweave bench capture --framework llamaindex``: what ``instrument()`` costs an agent run.

One workload — a ``FunctionAgent`` turn (model → tool → model) with a FAKE LLM
(llama-index-core's ``MockFunctionCallingLLM``) so only LlamaIndex's own machinery runs —
is timed three ways in the same process: no handlers, LlamaIndex's own in-memory span
tracer (``SimpleSpanHandler``, the cheapest tracer it ships) and BeeWeave's event + span
handlers.  The cases take turns run by run (none, tracer, BeeWeave, none, …), and an
overhead is the median of each run's difference from the "no handlers" run next to it:
an agent run is ~10 ms with ±2 ms of drift, so medians of separate rounds of runs move the
~0.5 ms overheads by more than they differ.  A second view times the recorder's hooks
called directly (µs per hook).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import tempfile
import time
from collections.abc import Callable
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
from beeweave_bench.waits import flush_until
from beeweave_core.weave import Weave
from beeweave_llamaindex.instrumentation import BeeWeaveEventHandler

WARM_UP = 5
HOOKS_PER_RUN = 8  # run span, 2 x (chat start, chat end), call_tool span enter/exit, tool span


def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id}: shipped"


def _script(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """FAKE LLM: one tool call, then an answer."""
    if messages[-1].role.value == "tool":
        return ChatMessage(role="assistant", content=f"Order status: {messages[-1].content}")
    return ChatMessage(
        role="assistant",
        blocks=[
            ToolCallBlock(tool_call_id="c1", tool_name="lookup", tool_kwargs={"order_id": "ORD-1"})
        ],
    )


Switch = tuple[Callable[[], object], Callable[[], object]]


def _time_turns(
    agent: FunctionAgent, cases: dict[str, Switch], runs: int
) -> dict[str, list[float]]:
    """µs per agent run of each case, the cases taking turns run by run."""

    async def go() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {c: [] for c in cases}
        for _ in range(runs):
            for case, (attach, detach) in cases.items():
                attach()
                t0 = time.perf_counter_ns()
                await agent.run("where is ORD-1?", memory=ChatMemoryBuffer.from_defaults())
                out[case].append((time.perf_counter_ns() - t0) / 1000.0)
                detach()
        return out

    return asyncio.run(go())


def _paired(samples: dict[str, list[float]], case: str, base: str) -> float:
    return median([a - b for a, b in zip(samples[case], samples[base], strict=True)])


def _direct(handler: BeeWeaveEventHandler, n: int) -> list[float]:
    """µs per hook of the recorder, driven as LlamaIndex's dispatcher would."""
    span = handler.span_handler
    bound = inspect.signature(lambda ev=None: None).bind(ev=None)
    msgs = [ChatMessage(role="user", content="where is ORD-1?")]
    resp = ChatResponse(
        message=ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id="c1", tool_name="lookup", tool_kwargs={"order_id": "ORD-1"}
                )
            ],
        )
    )
    out = ToolOutput(tool_name="lookup", content="ORD-1: shipped", raw_input={}, raw_output="x")
    samples = []
    for i in range(max(1, n // 6)):
        root, llm, step = f"run-{i}", f"llm-{i}", f"step-{i}"
        call = ToolCall(tool_name="lookup", tool_kwargs={"order_id": "ORD-1"}, tool_id=f"c{i}")
        bound.arguments["ev"] = call
        t0 = time.perf_counter_ns()
        span.span_enter(root, bound, None, None)
        span.span_enter(llm, bound, None, root)
        handler.handle(
            LLMChatStartEvent(messages=msgs, additional_kwargs={}, model_dict={}, span_id=llm)
        )
        handler.handle(LLMChatEndEvent(messages=msgs, response=resp, span_id=llm))
        span.span_enter(step, bound, None, root)
        span.span_exit(
            step,
            bound,
            None,
            ToolCallResult(
                tool_name="lookup",
                tool_kwargs={},
                tool_id=f"c{i}",
                tool_output=out,
                return_direct=False,
            ),
        )
        samples.append((time.perf_counter_ns() - t0) / 6000.0)
        span.span_exit(root, bound, None, None)
    return samples


def run(n: int = 100_000) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``n`` ≈ hooks per case (agent runs per case = n / 100, at least 50)."""
    runs = max(50, n // 100)
    d = get_dispatcher()
    with tempfile.TemporaryDirectory() as tmp:
        weave = Weave.open(
            f"sqlite:///{tmp}/bench.db", spool_dir=tmp, index=False, max_high=20 * runs + 10 * n
        )
        agent = FunctionAgent(
            tools=[FunctionTool.from_defaults(lookup)],
            llm=MockFunctionCallingLLM(response_generator=_script),
        )
        tracer = SimpleSpanHandler()
        bee = BeeWeaveEventHandler(weave=weave, session_id="bench")

        def untrace() -> None:
            d.span_handlers = [h for h in d.span_handlers if h is not tracer]
            tracer.completed_spans.clear()

        cases: dict[str, Switch] = {
            "no handlers": (lambda: None, lambda: None),
            "SimpleSpanHandler": (lambda: d.add_span_handler(tracer), untrace),
            "BeeWeave instrument()": (lambda: bee.attach(d), bee.detach),
        }
        _time_turns(agent, cases, WARM_UP)
        gc.collect()
        samples = _time_turns(agent, cases, runs)
        direct = _direct(BeeWeaveEventHandler(weave=weave, session_id="direct"), n)
        t0 = time.perf_counter()
        flush_until(weave, 120)
        drain = time.perf_counter() - t0
        stats = weave.stats()
        weave.close()
    rows = [{"case": c, "runs": len(s), "median_us_per_run": median(s),
             "p95_us_per_run": percentile(s, 95)} for c, s in samples.items()]  # fmt: skip
    simple, bw = (_paired(samples, c, "no handlers") for c in list(cases)[1:])
    rows.append({"case": "BeeWeave hooks called directly", "runs": len(direct),
                 "median_us_per_run": median(direct) * HOOKS_PER_RUN,
                 "p95_us_per_run": percentile(direct, 95) * HOOKS_PER_RUN})  # fmt: skip
    summary = {
        "overhead_us_per_run_beeweave": bw,
        "overhead_us_per_run_simple_span_handler": simple,
        "beeweave_vs_simple_span_handler_overhead": bw / max(simple, 1e-9),
        "beeweave_us_per_hook_direct": median(direct),
        "drain_after_s": drain,
        "written": stats["written"],
        "capture_failures": bee.failures,
    }
    return rows, summary
