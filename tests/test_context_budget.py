"""The budget is never exceeded and a tool call is never split from its result.

Property test over random sessions (English and Chinese text, huge tool outputs,
parallel calls, unanswered calls, acknowledgements) and random budgets and phases, on
a real SQLite store; counts are re-done independently with ``TokenCounter``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from beeweave_core.tokens import TokenCounter

from .context_helpers import call, say

WORDS = ["timeout", "batch", "must", "never", "JOB-7731", "42", "5,000", "zone_label", "ok", "超时",
         "必须", "中位数", "数据", "the", "rows", "请", "HarvestBot/7.4", "https://x.example/a", "好的"]  # fmt: skip
_ids = itertools.count()

text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=60).map(" ".join)
big_text = st.integers(min_value=1, max_value=400).map(
    lambda n: json.dumps(
        {"summary": {"n": n}, "rows": [{"id": i, "v": "x" * (i % 7)} for i in range(n)]}
    )
)


@st.composite
def tool_group(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(min_value=1, max_value=3))
    ids = [f"c{next(_ids)}" for _ in range(n)]
    answered = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    msgs: list[dict[str, Any]] = [{"role": "assistant", "content": draw(st.sampled_from(["", "Working."])),
                                   "tool_calls": [call(i, f"tool{k}", {"q": k}) for k, i in enumerate(ids)]}]  # fmt: skip
    for i, ok in zip(ids, answered, strict=True):
        if ok:
            out = draw(st.one_of(text, text, text, big_text))  # mostly small, so groups fit
            msgs.append({"role": "tool", "tool_call_id": i, "content": out})
    return msgs


turn = st.one_of(
    text.map(lambda t: [{"role": "user", "content": t}]),
    text.map(lambda t: [{"role": "assistant", "content": t}]),
    st.sampled_from(["ok", "好的", "继续", "thanks"]).map(
        lambda t: [{"role": "user", "content": t}]
    ),
    tool_group(),
)
session = st.tuples(
    st.lists(turn, min_size=0, max_size=25),
    st.one_of(st.just([]), tool_group()),  # often end on a tool group: the boundary case
    st.one_of(st.just([]), text.map(lambda t: [{"role": "user", "content": t}])),
).map(lambda p: [m for t in p[0] for m in t] + p[1] + p[2])


def check_pairs(messages: list[dict[str, Any]]) -> None:
    i = 0
    while i < len(messages):
        m = messages[i]
        if m["role"] == "tool":
            pytest.fail(f"tool message {m['tool_call_id']} without the call right before it")
        calls = m.get("tool_calls") or []
        if calls:
            want = {c["id"] for c in calls}
            got = [x.get("tool_call_id") for x in messages[i + 1 : i + 1 + len(calls)]]
            assert set(got) == want and all(
                x["role"] == "tool" for x in messages[i + 1 : i + 1 + len(calls)]
            ), f"calls {want} not followed by exactly their results {got}"
            i += 1 + len(calls)
        else:
            i += 1


@pytest.fixture(scope="module")
def shared_weave(tmp_path_factory: pytest.TempPathFactory):
    from beeweave_core.weave import Weave

    tmp = tmp_path_factory.mktemp("budget")
    w = Weave.open(f"sqlite:///{tmp}/b.db", spool_dir=tmp, index=False)
    yield w
    w.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    msgs=session,
    system=st.sampled_from(["", "You are terse.", "你是一个数据助手。Keep answers short."]),
    budget=st.integers(min_value=40, max_value=3000),
    phase=st.sampled_from([None, "requirement", "execution", "closing"]),
    model=st.sampled_from(["gpt-4", "gpt-4o-mini"]),
    include_query=st.booleans(),
    single_system=st.booleans(),
)
def test_budget_never_exceeded_and_tool_pairs_whole(
    shared_weave, msgs, system, budget, phase, model, include_query, single_system
):
    sid = f"s{next(_ids)}"
    if system:
        msgs = [{"role": "system", "content": system}, *msgs]
    if msgs:
        say(shared_weave, sid, msgs)
    ctx = shared_weave.assemble(sid, "what timeout?", budget_tokens=budget, model=model, phase=phase,
                                include_query=include_query, single_system=single_system)  # fmt: skip
    counted = TokenCounter(model).count_messages(ctx.messages)
    assert counted == ctx.total_tokens
    assert ctx.total_tokens <= budget
    check_pairs(ctx.messages)
    event("tool group shown" if any(m.get("tool_calls") for m in ctx.messages) else "no tool group")
    event("within 10 tokens of the budget" if budget - ctx.total_tokens <= 10 else "slack > 10")
    if system:  # pinned: always there, first, whole
        assert ctx.messages[0]["role"] == "system" and ctx.messages[0]["content"].startswith(system)
    if not single_system:
        assert sum(ctx.tokens_by_layer.values()) + ctx.overhead_tokens == ctx.total_tokens


def test_budget_below_the_pinned_system_layer_is_a_clear_error(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [{"role": "system", "content": "You are a very careful assistant. " * 20},
                     {"role": "user", "content": "hi"}])  # fmt: skip
    with pytest.raises(ValueError, match="pinned system layer"):
        weave.assemble("s", budget_tokens=30)
    with pytest.raises(ValueError, match="positive int"):
        weave.assemble("s", budget_tokens=0)
    with pytest.raises(ValueError, match="unknown phase"):
        weave.assemble("s", budget_tokens=500, phase="lunch")


def test_latest_user_message_is_cut_not_dropped_when_alone_too_big(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [{"role": "user", "content": "word " * 3000}])
    ctx = weave.assemble("s", budget_tokens=200)
    assert ctx.total_tokens <= 200
    assert ctx.messages[-1]["role"] == "user" and ctx.messages[-1]["content"].endswith(
        "[cut by BeeWeave]"
    )


def test_tool_group_stays_whole_at_every_budget(weave_factory):
    """Sweep the budget one step at a time across the size of a 3-call group."""
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Profile the three tables, please."},
        {"role": "assistant", "content": "Profiling.", "tool_calls": [
            call("a", "profile", {"t": "orders"}), call("b", "profile", {"t": "users"}),
            call("c", "profile", {"t": "items"})]},
        {"role": "tool", "tool_call_id": "a", "content": json.dumps({"rows": 18400, "nulls": 3})},
        {"role": "tool", "tool_call_id": "b", "content": "users: 5,120 rows, 0 nulls, key user_id"},
        {"role": "tool", "tool_call_id": "c", "content": json.dumps({"rows": 977, "nulls": 41, "key": "sku"})},
        {"role": "user", "content": "Which table has the most nulls?"},
    ])  # fmt: skip
    shown = 0
    for budget in range(40, 420, 3):
        ctx = weave.assemble("s", budget_tokens=budget, record=False)
        assert ctx.total_tokens <= budget
        check_pairs(ctx.messages)
        calls = [m for m in ctx.messages if m.get("tool_calls")]
        shown += bool(calls)
        if calls:
            assert len(calls[0]["tool_calls"]) == 3
            assert sum(1 for m in ctx.messages if m["role"] == "tool") == 3
    assert shown > 10, "the sweep should reach budgets where the whole group fits"
