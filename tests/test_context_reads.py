"""Reads that change nothing, a prompt never bigger than the buffer, and a window that
opens on a user turn — on real SQLite stores with the real tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beeweave_core.tokens import TokenCounter
from beeweave_langchain.history import BeeWeaveChatMessageHistory

from .context_helpers import call, say


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _errands(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append({"role": "user", "content": f"Put errand {i} on the list: pick up {i + 3} "
                    f"parcels at the depot on Quay Street before {9 + i % 8} o'clock."})  # fmt: skip
        out.append({"role": "assistant", "content": f"Errand {i} is on the list."})
    return out


def test_dry_run_writes_nothing(weave_factory: Any, tmp_path: Path) -> None:
    weave = weave_factory(index=False)
    say(weave, "errands", [{"role": "system", "content": "You plan errands."}, *_errands(60)])
    weave.flush()
    weave.store.sessions()  # the store's own token-count cache, filled by any listing
    before_events = weave.store.timeline("errands", include_inactive=True)
    before_files = _files(tmp_path)
    ctx = weave.assemble("errands", "parcels at the depot", budget_tokens=400, dry_run=True)
    assert ctx.total_tokens <= 400 and ctx.retrieval_event_id is None and ctx.compaction is None
    weave.flush()
    after = weave.store.timeline("errands", include_inactive=True)
    assert [e.id for e in after] == [e.id for e in before_events]  # no memory, summary, audit
    assert _files(tmp_path) == before_files
    # the same call for real writes: memories, summaries and the audit record
    weave.assemble("errands", "parcels at the depot", budget_tokens=400)
    weave.flush()
    assert len(weave.store.timeline("errands", include_inactive=True)) > len(after)


def test_memory_inspection_writes_nothing(weave_factory: Any) -> None:
    from beeweave_langchain.memory import BeeWeaveMemory

    weave = weave_factory(index=False)
    say(weave, "chain", _errands(30))
    memory = BeeWeaveMemory(weave=weave, session_id="chain", max_token_limit=300)
    before = [e.id for e in weave.store.timeline("chain", include_inactive=True)]
    shown = memory.inspect({"input": "which parcels?"})["history"]
    weave.flush()
    assert "parcels" in shown and memory.last_context.total_tokens <= 300
    assert [e.id for e in weave.store.timeline("chain", include_inactive=True)] == before


def test_a_cleared_session_stays_gone_after_an_assembly(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    say(weave, "scratch", _errands(4))
    weave.assemble("scratch", budget_tokens=300)
    weave.flush()
    assert "scratch" in {s.session_id for s in weave.store.sessions()}
    BeeWeaveChatMessageHistory(weave, "scratch").clear()
    ctx = weave.assemble("scratch", budget_tokens=300)
    weave.flush()
    assert ctx.retrieval_event_id is None and "errand" not in ctx.text().lower()
    assert "scratch" not in {s.session_id for s in weave.store.sessions()}


def test_short_session_is_never_bigger_than_the_buffer(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    system = {"role": "system", "content": "You plan errands."}
    turns = _errands(20)
    say(weave, "short", [system, *turns])
    counter = TokenCounter("gpt-4o-mini")
    buffer = counter.count_messages([system, *turns])
    ctx = weave.assemble("short", "what is on the list?", budget_tokens=buffer + 50)
    assert ctx.total_tokens <= buffer == ctx.full_history_tokens
    assert ctx.messages == [system, *turns]  # the history as it is, nothing added
    assert ctx.tokens_by_layer["working"] == ctx.tokens_by_layer["recalled"] == 0


_KINDS = st.lists(st.sampled_from(["user", "answer", "tool"]), min_size=1, max_size=14)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kinds=_KINDS, budget=st.integers(min_value=60, max_value=700))
def test_the_window_opens_on_a_user_message(
    weave_factory: Any, kinds: list[str], budget: int
) -> None:
    weave = weave_factory(index=False)
    msgs: list[dict[str, Any]] = []
    for i, kind in enumerate(kinds):
        if kind == "user":
            msgs.append({"role": "user", "content": f"Step {i}: check crate {i * 7} at bay {i}."})
        elif kind == "answer":
            msgs.append({"role": "assistant", "content": f"Crate {i * 7} checked, bay {i} clear."})
        else:
            msgs.append({"role": "assistant", "content": "",
                         "tool_calls": [call(f"t{i}", "scan_bay", {"bay": i})]})  # fmt: skip
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": f"t{i}",
                    "content": f"bay {i}: {i * 3} crates " * 8,
                }
            )
    say(weave, "bays", msgs)
    ctx = weave.assemble("bays", budget_tokens=budget, record=False)
    assert ctx.total_tokens <= budget
    convo = [m for m in ctx.messages if m["role"] != "system"]
    if convo:
        assert convo[0]["role"] == "user", convo


def test_bench_assemble_reports_p50_first_call_and_the_buffer_baseline(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import json

    from typer.testing import CliRunner

    from beeweave_core.cli import app

    monkeypatch.delenv("NEO4J_URI", raising=False)  # SQLite rows only
    out = tmp_path / "assemble.json"
    res = CliRunner().invoke(app, ["bench", "assemble", "--sizes", "40,120", "--calls", "3",
                                   "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())["rows"]
    assert [r["backend"] for r in rows] == ["sqlite", "sqlite"]
    assert rows[0]["events"] < rows[1]["events"]
    for r in rows:
        assert r["p50_ms"] > 0 and r["first_call_ms"] > 0 and r["buffer_p50_ms"] > 0
