"""How much ``emit()`` costs the agent's thread, beside the cheapest possible hand-offs."""

from __future__ import annotations

import queue
import tempfile
import time
from typing import Any

from beeweave_bench.waits import flush_until
from beeweave_core.weave import Weave


def _noop(*args: Any, **kwargs: Any) -> str:
    return ""


def _time_calls(fn: Any, n: int, *, payload: dict[str, Any]) -> list[float]:
    clock = time.perf_counter_ns
    samples = [0.0] * n
    for i in range(n):
        t0 = clock()
        fn(
            "tool_result",
            "result text of about sixty characters, numbers 42 and 3.14",
            session_id="bench",
            payload=payload,
        )
        samples[i] = (clock() - t0) / 1000.0
    return samples


def run(n: int = 100_000) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-call cost in µs of emit() vs a no-op call vs ``queue.put_nowait``."""
    from beeweave_bench.report import median, percentile

    payload = {"name": "search", "output": {"hits": 3}}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        weave = Weave.open(f"sqlite:///{tmp}/bench.db", spool_dir=tmp, max_high=2 * n)
        q: queue.Queue[Any] = queue.Queue()

        def put(*args: Any, **kwargs: Any) -> None:
            q.put_nowait((args, kwargs))

        cases = [("no-op call", _noop), ("queue.put_nowait", put), ("weave.emit", weave.emit)]
        for _name, fn in cases:
            _time_calls(fn, min(n, 5_000), payload=payload)  # warm-up
        for name, fn in cases:
            s = _time_calls(fn, n, payload=payload)
            rows.append(
                {
                    "case": name,
                    "calls": n,
                    "median_us": median(s),
                    "p99_us": percentile(s, 99),
                    "mean_us": sum(s) / n,
                }
            )
        t0 = time.perf_counter()
        flush_until(weave, 300)
        drain = time.perf_counter() - t0
        stats = weave.stats()
        weave.close()
    emit = rows[-1]
    base = rows[1]
    summary = {
        "emit_median_us": emit["median_us"],
        "emit_vs_put_nowait": emit["median_us"] / base["median_us"],
        "target_median_us": 20.0,
        "meets_target": emit["median_us"] <= 20.0,
        "drain_after_s": drain,
        "written": stats["written"],
    }
    return rows, summary
