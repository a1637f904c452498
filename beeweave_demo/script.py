"""A scripted, offline agent conversation for ``beeweave demo``.

It stands in for a real agent run: a task with numeric constraints, tool calls
with their results (one of them large), chatter, and a late change of plan — the
things a memory must keep or let go of.  Events go through the capture bus exactly
as framework hooks would send them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.events import EventType
from beeweave_core.weave import Weave

SYSTEM = "You are DataOps, an agent that builds and runs data pipelines. Be precise about numbers."


@dataclass
class Step:
    kind: str  # user | assistant | tool
    text: str = ""
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    output: Any = None


def _orders_sample(n: int) -> list[dict[str, Any]]:
    return [
        {
            "order_id": f"ORD-{10_000 + i}",
            "amount_eur": round(12.5 + i * 1.37, 2),
            "region": "EU-West",
        }
        for i in range(n)
    ]


SCRIPT: list[Step] = [
    Step(
        "user",
        "Hi! I need a nightly ETL job that copies the `orders` table from Postgres into the "
        "analytics warehouse.",
    ),
    Step("assistant", "Sure. What constraints should the job respect?"),
    Step(
        "user",
        "It must finish within 45 minutes, use batches of 5,000 rows, and every API call "
        "needs a timeout of 30 seconds. Budget is at most $200 per month. Never touch the "
        "production schema.",
    ),
    Step(
        "assistant",
        "Understood: 45 min window, 5,000-row batches, 30 s timeout, ≤ $200/month, "
        "read-only on prod. Let me look at the table first.",
        tool="inspect_schema",
        args={"table": "orders"},
        output={
            "table": "orders",
            "rows": 18_400_000,
            "columns": ["order_id", "amount_eur", "region", "created_at"],
            "primary_key": "order_id",
        },
    ),
    Step(
        "assistant",
        "The table has 18.4 M rows. I'll estimate the cost of a full nightly copy.",
        tool="estimate_cost",
        args={"rows": 18_400_000, "batch_size": 5000},
        output={"batches": 3680, "est_minutes": 38, "est_monthly_usd": 164.0},
    ),
    Step("user", "ok"),
    Step(
        "assistant", "Estimate: 3,680 batches, about 38 minutes, $164/month — inside both limits."
    ),
    Step("user", "Great, thanks! How's the weather where the servers are, by the way? 😄"),
    Step("assistant", "I can't see the weather, but the EU-West region is running fine."),
    Step(
        "assistant",
        "Running a sample batch to validate the mapping.",
        tool="run_sample",
        args={"table": "orders", "limit": 1500, "timeout_s": 30},
        output={"rows": _orders_sample(1500), "elapsed_s": 2.8},
    ),
    Step(
        "assistant",
        "Sample OK: 1,500 rows in 2.8 s; order ORD-11499 maps cleanly (amount_eur 2066.13).",
    ),
    Step(
        "user",
        "Change of plan: use batches of 2,000 rows instead of 5,000 — the warehouse "
        "throttles big inserts.",
    ),
    Step(
        "assistant",
        "Noted: batch size is now 2,000 rows (the 5,000 plan is void).",
        tool="estimate_cost",
        args={"rows": 18_400_000, "batch_size": 2000},
        output={"batches": 9200, "est_minutes": 44, "est_monthly_usd": 181.0},
    ),
    Step(
        "assistant",
        "With 2,000-row batches: 9,200 batches, 44 minutes, $181/month — still under "
        "45 min and $200. Shall I schedule it for 02:00 UTC?",
    ),
    Step("user", "Yes, schedule it for 02:00 UTC."),
    Step(
        "assistant",
        "Scheduling the job.",
        tool="schedule_job",
        args={"name": "orders_nightly", "cron": "0 2 * * *", "batch_size": 2000, "timeout_s": 30},
        output={"job_id": "JOB-7731", "next_run": "02:00 UTC", "status": "scheduled"},
    ),
    Step(
        "assistant",
        "Done: job JOB-7731 runs nightly at 02:00 UTC with 2,000-row batches and a 30 s timeout.",
    ),
]


def run_script(weave: Weave, session_id: str, *, user_id: str = "demo-user") -> dict[str, str]:
    """Emit the scripted run; return a few ids worth showing (keyed by role)."""
    meta = {"user_id": user_id, "agent_id": "dataops"}
    src = {"framework": "beeweave-demo"}
    ids: dict[str, str] = {}
    sys_id = weave.emit(EventType.SYSTEM_PROMPT, SYSTEM, session_id=session_id, role="system",
                        meta=meta, source=src, key="system")  # fmt: skip
    last_user = sys_id
    prev_result: str | None = None
    for i, step in enumerate(SCRIPT):
        key = f"step-{i}"
        if step.kind == "user":
            last_user = weave.emit(EventType.USER_MESSAGE, step.text, session_id=session_id,
                                   role="user", meta=meta, source=src, key=key)  # fmt: skip
            prev_result = None
            continue
        parents = [prev_result] if prev_result else [last_user]
        call = weave.emit(EventType.MODEL_CALL, "", session_id=session_id, role="assistant",
                          parents=parents, payload={"model": "scripted", "turn": i}, meta=meta,
                          source=src, key=f"{key}-call")  # fmt: skip
        msg = weave.emit(EventType.ASSISTANT_MESSAGE, step.text, session_id=session_id,
                         role="assistant", parents=[call], meta=meta, source=src,
                         key=f"{key}-msg",
                         links={"REFERS_TO": [prev_result]} if prev_result else None)  # fmt: skip
        prev_result = None
        if step.tool:
            inv = weave.emit(EventType.TOOL_INVOCATION, json.dumps(step.args),
                             session_id=session_id, role="assistant", parents=[msg],
                             payload={"name": step.tool, "args": step.args}, meta=meta,
                             source=src, key=f"{key}-tool")  # fmt: skip
            out_text = json.dumps(step.output, ensure_ascii=False)
            prev_result = weave.emit(EventType.TOOL_RESULT, out_text, session_id=session_id,
                                     role="tool", parents=[inv],
                                     payload={"name": step.tool, "output": step.output},
                                     meta=meta, source=src, key=f"{key}-result")  # fmt: skip
            ids.setdefault(f"tool_result:{step.tool}", prev_result)
    ids["last_user"] = last_user
    return ids
