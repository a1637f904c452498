"""``assemble`` is a pure read: it writes only its audit record, never waits for
maintenance, answers a long unread session from its newest turns, cuts a huge query, and
sends the history as it is while it fits — real SQLite stores, the real tokenizer."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beeweave_core.context.maintenance import MAX_LAG
from beeweave_core.context.request import MAX_QUERY_TOKENS
from beeweave_core.context.tail import EarlySystems
from beeweave_core.events import EventType
from beeweave_core.tokens import TokenCounter
from beeweave_langchain.history import BeeWeaveChatMessageHistory

from .context_helpers import call, memories, say


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _errands(n: int, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        out.append({"role": "user", "content": f"Put errand {i} on the list: pick up {i + 3} "
                    f"parcels at the depot on Quay Street before {9 + i % 8} o'clock."})  # fmt: skip
        out.append({"role": "assistant", "content": f"Errand {i} is on the list."})
    return out


def test_an_assembly_writes_only_its_audit_record(weave_factory: Any, tmp_path: Path) -> None:
    weave = weave_factory(index=False)
    say(weave, "errands", [{"role": "system", "content": "You plan errands."}, *_errands(60)])
    weave.store.sessions()  # the store's own token-count cache, filled by any listing
    before = {e.id: e.status for e in weave.store.timeline("errands", include_inactive=True)}
    with weave.context.maintenance.step_lock:  # no maintenance step can write meanwhile
        ctx = weave.assemble("errands", "parcels at the depot", budget_tokens=400)
        weave.flush()
        after = {e.id: e for e in weave.store.timeline("errands", include_inactive=True)}
    assert ctx.total_tokens <= 400 < ctx.full_history_tokens
    new = [e for i, e in after.items() if i not in before]
    assert [e.type for e in new] == [EventType.RETRIEVAL] and new[0].id == ctx.retrieval_event_id
    assert {i: after[i].status for i in before} == before  # nothing invalidated or deleted
    # without the record: nothing at all
    weave.context.update("errands")  # (the read asked for compaction at its window)
    files = _files(tmp_path)
    with weave.context.maintenance.step_lock:
        stored = len(weave.store.timeline("errands", include_inactive=True))
        weave.assemble("errands", "parcels at the depot", budget_tokens=400, record=False)
        weave.flush()
        assert len(weave.store.timeline("errands", include_inactive=True)) == stored
    assert _files(tmp_path).keys() == files.keys()


def test_an_assembly_does_not_wait_for_a_maintenance_step_held_open(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    say(weave, "errands", _errands(40))
    engine = weave.context
    entered, release = threading.Event(), threading.Event()
    real = engine.memory.process

    def held(*a: Any, **kw: Any) -> list[str]:
        entered.set()
        release.wait(30)  # a step that takes as long as the test wants
        return real(*a, **kw)

    engine.memory.process = held  # type: ignore[method-assign]
    try:
        say(weave, "errands", _errands(3, start=40), maintain=False)
        engine.on_batch(weave.store.timeline("errands", last=1))
        assert entered.wait(10)  # the worker is inside a step, holding its locks
        t0 = time.monotonic()
        ctx = weave.assemble("errands", "which errand has 42 parcels?", budget_tokens=600)
        took = time.monotonic() - t0
        assert took < 5, took  # answered while the step is still held
        assert "42 parcels" in ctx.text()  # the unmaintained tail, read verbatim
        assert not release.is_set()
    finally:
        release.set()
        engine.memory.process = real  # type: ignore[method-assign]


def test_a_loop_that_never_pauses_still_gets_its_memories(weave_factory: Any) -> None:
    """Maintenance waits for a pause in the stored batches (an agent's loop goes first),
    but never longer than ``MAX_LAG``: a loop storing a turn every few milliseconds is
    maintained while it runs, not only after it stops."""
    weave = weave_factory(index=False)
    maintained = weave.context.maintenance
    end, k, seen = time.monotonic() + 4 * MAX_LAG, 0, False
    while time.monotonic() < end and not seen:
        for m in _errands(1, start=k):
            weave.emit(EventType.USER_MESSAGE if m["role"] == "user" else
                       EventType.ASSISTANT_MESSAGE, m["content"], session_id="loop",
                       role=m["role"])  # fmt: skip
        weave.flush()
        k += 1
        seen = maintained.snapshot("loop").cursor > 0
        time.sleep(0.01)
    assert seen, f"no maintenance in {4 * MAX_LAG} s of a loop that never paused ({k} turns)"


def test_a_long_unread_session_is_answered_from_its_newest_turns(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    say(weave, "long", _errands(400), maintain=False)  # written by "another process"
    ctx = weave.assemble("long", "which errand is last?", budget_tokens=500)
    assert ctx.total_tokens <= 500 and "Errand 399" in ctx.text()
    assert ctx.catching_up  # maintenance has not read it yet: the read did not wait
    weave.context.update("long")
    assert not weave.context.catching_up("long")
    assert any("parcels" in m.content for m in memories(weave, "long"))
    again = weave.assemble("long", "which errand is last?", budget_tokens=500)
    assert not again.catching_up and "Errand 399" in again.text()


def test_system_prompts_read_before_maintenance_follow_adds_and_deletes(
    weave_factory: Any,
) -> None:
    weave = weave_factory(index=False)
    store = weave.store
    say(weave, "briefed", [{"role": "system", "content": "Reply in Portuguese."}, *_errands(30)],
        maintain=False)  # fmt: skip
    early = EarlySystems()
    newest = store.timeline("briefed", last=1)[0].seq
    assert [e.content for e in early.of(store, "briefed", newest)] == ["Reply in Portuguese."]
    say(weave, "briefed", [{"role": "system", "content": "Keep every reply under fifty words."}],
        maintain=False)  # fmt: skip
    first = store.timeline("briefed", types=(EventType.SYSTEM_PROMPT,))[0]
    store.soft_delete([first.id], "withdrawn")
    got = early.of(store, "briefed", newest)
    assert [e.content for e in got] == ["Keep every reply under fifty words."]


def test_an_engine_told_not_to_catch_up_in_the_background_waits_for_maintenance(
    weave_factory: Any,
) -> None:
    from beeweave_core.config import ContextConfig, WeaveConfig

    cfg = WeaveConfig(context=ContextConfig(catch_up_in_background=False))
    weave = weave_factory(index=False, config=cfg)
    say(weave, "long", _errands(400), maintain=False)
    ctx = weave.assemble("long", "which errand is last?", budget_tokens=500)
    assert not ctx.catching_up  # the same call without the option answers from the tail
    assert any("parcels" in m.content for m in memories(weave, "long"))


def test_a_huge_query_is_cut_before_it_is_searched(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    say(weave, "errands", _errands(30))
    huge = "parcels at the depot " * 250_000  # 5 MB
    ctx = weave.assemble("errands", huge, budget_tokens=400, model="gpt-4")
    assert ctx.query is not None and len(ctx.query) < 10_000 and ctx.total_tokens <= 400
    assert TokenCounter("gpt-4").count_text(ctx.query) <= MAX_QUERY_TOKENS


def test_bad_requests_are_one_line_errors(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    with pytest.raises(TypeError, match="budget_tokens"):
        weave.assemble("s")
    with pytest.raises(ValueError, match="budget_tokens must be a positive int"):
        weave.assemble("s", budget_tokens=0)
    with pytest.raises(TypeError, match="unknown option"):
        weave.assemble("s", budget_tokens=100, dry_run=True)
    with pytest.raises(TypeError, match="session_id"):
        weave.assemble(None, budget_tokens=100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="query"):
        weave.assemble("s", 42, budget_tokens=100)  # type: ignore[arg-type]


def test_memory_inspection_writes_nothing(weave_factory: Any) -> None:
    from beeweave_langchain.memory import BeeWeaveMemory

    weave = weave_factory(index=False)
    say(weave, "chain", _errands(30))
    memory = BeeWeaveMemory(weave=weave, session_id="chain", max_token_limit=300)
    before = [e.id for e in weave.store.timeline("chain", include_inactive=True)]
    with weave.context.maintenance.step_lock:
        shown = memory.inspect({"input": "which parcels?"})["history"]
        weave.flush()
        assert [e.id for e in weave.store.timeline("chain", include_inactive=True)] == before
    assert "parcels" in shown and memory.last_context.total_tokens <= 300


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


def test_a_session_that_fits_is_sent_as_it_is(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    system = {"role": "system", "content": "You plan errands."}
    turns = _errands(20)
    say(weave, "short", [system, *turns])
    counter = TokenCounter("gpt-4o-mini")
    buffer = counter.count_messages([system, *turns])
    ctx = weave.assemble("short", "what is on the list?", budget_tokens=buffer + 50)
    assert ctx.total_tokens <= buffer == ctx.full_history_tokens
    assert ctx.messages == [system, *turns]  # the history as it is, nothing added or hidden
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
            msgs.append({"role": "tool", "tool_call_id": f"t{i}",
                         "content": f"bay {i}: {i * 3} crates " * 8})  # fmt: skip
    say(weave, "bays", msgs, maintain=False)
    ctx = weave.assemble("bays", budget_tokens=budget, record=False)
    assert ctx.total_tokens <= budget
    convo = [m for m in ctx.messages if m["role"] != "system"]
    if convo and len(convo) < len(msgs):  # the whole history may start elsewhere
        assert convo[0]["role"] == "user", convo


def test_bench_assemble_reports_every_call_of_both_workloads(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import json

    from typer.testing import CliRunner

    from beeweave_cli.app import app

    monkeypatch.delenv("NEO4J_URI", raising=False)  # SQLite rows only
    out = tmp_path / "assemble.json"
    res = CliRunner().invoke(app, ["bench", "assemble", "--sizes", "40,120", "--calls", "3",
                                   "--no-langgraph", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())["rows"]
    assert [(r["workload"], r["size"]) for r in rows] == [
        ("restated", 40),
        ("notes", 40),
        ("restated", 120),
        ("notes", 120),
    ]
    for r in rows:
        assert r["calls"] == 3 and 0 < r["p50_ms"] <= r["worst_ms"] and r["buffer_p50_ms"] > 0
        assert r["worst_over_p50"] >= 1.0
        assert r["worst_no_gc_over_p50"] <= r["worst_over_p50"] and r["gc_paused_calls"] >= 0


def test_the_assemble_bench_marks_the_calls_a_full_collection_paused() -> None:
    import gc
    import time

    from beeweave_bench.assemble import FullCollections

    with FullCollections() as full:
        t0 = time.perf_counter()
        gc.collect()
        t1 = time.perf_counter()
        t2 = time.perf_counter()
    assert full.paused(t0, t1) and not full.paused(t1 + 1e-6, t2 + 1e-6)
