"""Working-state extraction from real sessions, in English and Chinese, and the
context edits it relies on."""

from __future__ import annotations

import json

from beeweave_core.context import Editor, cut_tool_output, split_units
from beeweave_core.context.editing import OVERTURNED_MARK, remove_overturned
from beeweave_core.events import Event, EventType
from beeweave_core.text import language as L

from .context_helpers import call, say


def _sections(ws):
    return {k: [i.text for i in getattr(ws, k)] for k in
            ("constraints", "preferences", "decisions", "done", "todos", "open_questions")}  # fmt: skip


_SECTION = {"constraint": "constraints", "preference": "preferences", "decision": "decisions",
            "artifact": "done"}  # fmt: skip


def _check_sections(weave, sid: str, ws) -> list[str]:
    """Every active memory of a pinned kind is in the working state, in the order said,
    and nothing else is: shown as the short user turn it was one sentence of (the turn's
    other memories share that item) or as its own sentence (which kind a statement is, is
    the classifier's call: it is scored by ``beeweave bench acts``, not here); returns the
    user statements remembered."""
    items = [i for name in _SECTION.values() for i in getattr(ws, name)]
    by_id = {mid: it for it in items for mid in it.event_ids}
    mems = list(weave.context.memories(sid))
    pinned = [m for m in mems if m.payload.get("kind") in _SECTION]
    for m in pinned:
        item = by_id[m.id]
        assert item.text == (m.payload.get("said") or m.content), (item, m.content)
        assert m.content in item.text
    assert set(by_id) == {m.id for m in pinned}
    return [m.content for m in mems if m.payload.get("source_role") != "tool"]


def test_english_working_state(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "system", "content": "You are DataOps."},
        {"role": "user", "content": "I need a nightly ETL job that copies the orders table into the warehouse."},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "It must finish within 45 minutes. Never touch the production schema. "
                                    "I prefer logs in JSON."},
        {"role": "assistant", "content": "Checking cost.", "tool_calls": [call("c1", "estimate_cost", {"rows": 18400000})]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"batches": 3680, "est_minutes": 38})},
        {"role": "user", "content": "Let's go with 2,000-row batches because the warehouse throttles big inserts. "
                                    "We still need to add alerting later."},
        {"role": "assistant", "content": "Done: job JOB-7731 is scheduled. Shall I run it for 02:00 UTC?"},
    ])  # fmt: skip
    ws = weave.context.working_state("s")
    said = _check_sections(weave, "s", ws)
    for sentence in ("It must finish within 45 minutes.", "Never touch the production schema.",
                     "I prefer logs in JSON."):  # fmt: skip
        assert sentence in said  # each statement is a memory of its own
    assert ws.goal and ws.goal.text.startswith("I need a nightly ETL job")
    (decision,) = [d for d in ws.decisions if "2,000-row" in d.text]
    assert decision.reason == "the warehouse throttles big inserts"
    s = _sections(ws)
    assert "estimate_cost(rows=18400000) → batches=3680; est_minutes=38" in s["done"]
    assert s["todos"] == ["We still need to add alerting later."]
    assert s["open_questions"] == ["Shall I run it for 02:00 UTC?"]
    rendered = ws.render()
    assert "Settled so far (oldest first):" in rendered
    assert "Let's go with 2,000-row batches because the warehouse throttles" in rendered
    assert "(reason:" not in rendered  # the reason is already in the sentence, not repeated
    # one list in the order said, each line tagged with its kind and turn
    lines = [ln for ln in rendered.splitlines() if ln.startswith("- (")]
    seqs = [int(ln.rsplit("[#", 1)[1].rstrip("]")) for ln in lines]
    assert seqs == sorted(seqs)


def test_chinese_working_state(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "user", "content": "帮我搭建一个 CSV 清洗流程。"},
        {"role": "user", "content": "同步任务最多只能跑 43 秒，超过就算失败。清洗后的结果一律写成 Parquet。"},
        {"role": "user", "content": "我更喜欢用中文写日志。"},
        {"role": "user", "content": "决定用 IQR 方法检测异常值，因为数据有长尾。接下来还需要补充单元测试。"},
        {"role": "assistant", "content": "已完成：生成了 report_2024.parquet，共 377120 行。要不要现在上传？"},
    ])  # fmt: skip
    ws = weave.context.working_state("s")
    said = _check_sections(weave, "s", ws)
    for sentence in ("同步任务最多只能跑 43 秒，超过就算失败。", "清洗后的结果一律写成 Parquet。",
                     "我更喜欢用中文写日志。"):  # fmt: skip
        assert sentence in said
    assert ws.goal and ws.goal.text == "帮我搭建一个 CSV 清洗流程。"
    (decision,) = [d for d in ws.decisions if d.text.startswith("决定用 IQR 方法")]
    assert decision.reason == "数据有长尾"
    s = _sections(ws)
    assert s["todos"] == ["接下来还需要补充单元测试。"]
    assert s["open_questions"] == ["要不要现在上传？"]


def test_acknowledgements_in_both_languages():
    for t in [
        "ok",
        "OK!",
        "sounds good",
        "great, continue",
        "perfect, thanks",
        "好的",
        "继续",
        "行，继续吧",
        "收到。",
    ]:
        assert L.is_ack(t), t
    for t in [
        "ok, use 3 retries",
        "yes",
        "no",
        "好的，超时改成 30 秒",
        "continue with the Postgres plan",
    ]:
        assert not L.is_ack(t), t


def test_edits_drop_acks_merge_repeats_and_cut_tool_dumps(weave_factory):
    weave = weave_factory(index=False)
    rows = [{"id": i, "status": ["ok", "warn", "skip"][i % 3], "score": i / 100} for i in range(90)]
    say(weave, "s", [
        {"role": "user", "content": "Profile the file. Keep the header row."},
        {"role": "assistant", "content": "", "tool_calls": [call("c", "profile_csv", {"path": "s3://b/o.csv"})]},
        {"role": "tool", "tool_call_id": "c", "content": json.dumps({"summary": {"rows_scanned": 209311}, "rows": rows})},
        {"role": "user", "content": "ok"},
        {"role": "user", "content": "Keep the header row. 好的"},
    ])  # fmt: skip
    _sys, units = split_units(weave.store.timeline("s"))
    editor = Editor()
    lines = editor.source_lines(units)
    texts = [ln.text for ln in lines]
    assert texts[0] == "Profile the file. Keep the header row."
    assert texts[1].startswith(
        "profile_csv(path=s3://b/o.csv) → summary.rows_scanned=209311; rows: 90 items"
    )
    assert "status: ok=30, skip=30, warn=30" in texts[1]
    assert len(texts) == 2, "the ack and the repeated sentence add nothing"
    tool_ev = units[1].events[-1]
    cut = cut_tool_output(tool_ev)
    assert cut is not None and "209311" in cut and len(cut) < len(tool_ev.content) / 5
    assert editor.edit_unit(units[2]) is None  # "ok"
    assert editor.edit_unit(units[2], keep_acks=True) is not None


def test_overturned_wording_is_removed_from_verbatim_text():
    ev = Event(id="e", session_id="s", type=EventType.USER_MESSAGE,
               content="Thanks.  Keep the output in   DuckDB. Also log to stdout.")  # fmt: skip
    editor = Editor(overturned={"e": ["Keep the output in DuckDB."]})
    assert editor.text_of(ev) == f"Thanks.  {OVERTURNED_MARK} Also log to stdout."
    assert remove_overturned("nothing here", ["absent"]) == "nothing here"
