"""Supersession by meaning: a newer value for the same setting replaces the older one,
with or without a cue word, in English and Chinese; look-alike settings both stay;
acknowledgements, commands and questions are not remembered as facts.

Every wording here is written for this file (a kitchen order, a garden irrigation
schedule, a CI pipeline), not taken from any benchmark set.  Store-level tests run on
real SQLite files; the only fake is the LLM judge, labelled where it is made.
"""

from __future__ import annotations

import pytest

from beeweave_core.config import ContextConfig, WeaveConfig
from beeweave_core.context.supersession import SlotIndex
from beeweave_core.events import EdgeType, Status
from beeweave_core.text.statements import is_statement

from .context_helpers import chatter, memories, say


def _run(statements: list[str], **kw: object) -> tuple[SlotIndex, dict[str, list[str]]]:
    """Feed statements in order; return the index and who superseded whom."""
    index = SlotIndex(**kw)  # type: ignore[arg-type]
    gone: dict[str, list[str]] = {}
    for i, s in enumerate(statements):
        gone[s] = index.observe(s, s, i)
    return index, gone


# --------------------------------------------------------------- English
@pytest.mark.parametrize(
    ("old", "new"),
    [
        # plain restatement, no cue word
        ("The irrigation start time is 05:30.", "The irrigation start time is 06:15."),
        # a proposal with the value glued to the setting
        ("The drip duration is 40 minutes.", "Let's make the drip duration 25 minutes."),
        # set … to …
        ("The oven temperature is 180 degrees.", "Set the oven temperature to 200 degrees."),
        # use V for S, with the old value negated
        ("The build tool is Maven.", "Use Gradle for the build tool, not Maven."),
        # negation only: the old value is rejected without a new one
        ("The build tool is Maven.", "Don't use Maven for the build tool."),
        # a cue word is a hint, not a requirement
        ("The runner image is ubuntu-22.04.", "Update: the runner image is now ubuntu-24.04."),
        # a plain (lower-case) word as the value, announced without a link word
        ("The sauce base is cream.", "Let's make the sauce base tomato."),
        ("Cache the pip downloads for 3 days.", "Cache the pip downloads for 7 days."),
        # the value named first, the setting after ("X will be the Y")
        ("The release captain is Priya Nair.", "Marco Rossi will be the release captain."),
        # from … to …, and a negated clause before the new value
        ("The lint step runs 2 workers.", "Change the lint step from 2 to 6 workers."),
        ("The pot size is 8 litres.", "The pot size should no longer be 8; make it 12."),
    ],
)
def test_a_new_value_for_the_same_setting_supersedes(old: str, new: str) -> None:
    _, gone = _run([old, "The greenhouse fan was noisy this morning.", new])
    assert gone[new] == [old]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The drip duration is 40 minutes.", "Keep the drip duration at 40 minutes."),
        ("The build tool is Gradle.", "Use Gradle for the build tool."),
        ("The greenhouse fan was noisy this morning.", "The greenhouse fan was quiet at noon."),
    ],
)
def test_the_same_value_said_again_or_a_report_supersedes_nothing(old: str, new: str) -> None:
    _, gone = _run([old, new])
    assert gone[new] == []


def test_look_alike_settings_stay_distinct() -> None:
    stmts = [
        "The front bed watering time is 10 minutes.",
        "The back bed watering time is 15 minutes.",
        "The unit test timeout is 300 seconds.",
        "The integration test timeout is 900 seconds.",
        "The outbound courier is DHL.",
        "The inbound courier is UPS.",
        "Let's make the front bed watering time 12 minutes.",
        "Set the unit test timeout to 240 seconds.",
        "Change of plan: the outbound courier is FedEx now.",
    ]
    index, gone = _run(stmts)
    assert gone[stmts[6]] == [stmts[0]]
    assert gone[stmts[7]] == [stmts[2]]
    assert gone[stmts[8]] == [stmts[4]]
    for sibling in (stmts[1], stmts[3], stmts[5]):
        assert sibling in index


def test_the_index_observes_stored_events_one_at_a_time() -> None:
    from beeweave_core.events import Event, EventType

    def turn(seq: int, text: str) -> Event:
        return Event(id=f"e{seq}", session_id="s", type=EventType.USER_MESSAGE, content=text,
                     seq=seq)  # fmt: skip

    index = SlotIndex()
    assert index.observe_event(turn(1, "The nightly build starts at 02:00.")) == []
    assert index.observe_event(turn(2, "Start the nightly build at 03:30.")) == ["e1"]
    assert "e1" not in index and "e2" in index and len(index) == 1


def test_a_series_of_measurements_is_not_a_setting_changed() -> None:
    stmts = [f"Batch {i} finished in {30 + i} seconds." for i in range(4)]
    _, gone = _run(stmts)
    assert all(g == [] for g in gone.values())


# --------------------------------------------------------------- Chinese
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("灌溉开始时间是05:30。", "灌溉开始时间改到06:15吧。"),  # no cue word
        ("构建工具是Maven。", "构建工具用Gradle，不要用Maven。"),  # negation
        ("烤箱温度是180度。", "其实烤箱温度应该是200度。"),
        ("配菜是薯条。", "配菜换成土豆泥吧。"),  # a Chinese word as the value
        ("流水线超时是30分钟。", "流水线超时是45分钟。"),  # plain restatement
        ("缓存保留天数是3天。", "缓存保留天数从3天改成7天。"),
        ("喷头数量是4个。", "喷头数量不要4个了，改成6个。"),
    ],
)
def test_chinese_new_value_supersedes(old: str, new: str) -> None:
    _, gone = _run([old, "温室风扇今天早上有点吵。", new])
    assert gone[new] == [old]


def test_chinese_look_alikes_stay_distinct() -> None:
    stmts = ["前院浇水时长是10分钟。", "后院浇水时长是15分钟。", "前院浇水时长换成12分钟吧。"]
    index, gone = _run(stmts)
    assert gone[stmts[2]] == [stmts[0]]
    assert stmts[1] in index


# ------------------------------------------------------------------ judge
class FakeJudgeLLM:
    """FAKE LLM (labelled): answers the supersession judge with a fixed word and records
    what it was asked; any other prompt (memory extraction) gets an empty reply."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, prompt: str) -> str:
        if "same setting" not in prompt.casefold():
            return ""
        self.asked.append(prompt)
        return self.answer


AMBIGUOUS = ["The side dish is fries.", "The kids menu side dish is salad."]


def test_ambiguous_pairs_stay_without_a_judge() -> None:
    index, gone = _run(AMBIGUOUS)
    assert gone[AMBIGUOUS[1]] == [] and AMBIGUOUS[0] in index


@pytest.mark.parametrize(("answer", "superseded"), [("yes", True), ("no", False)])
def test_the_llm_judge_decides_ambiguous_pairs(answer: str, superseded: bool) -> None:
    from beeweave_core.context.supersession import llm_judge

    fake = FakeJudgeLLM(answer)
    _, gone = _run(AMBIGUOUS, judge=llm_judge(fake))
    assert len(fake.asked) == 1 and "fries" in fake.asked[0] and "salad" in fake.asked[0]
    assert gone[AMBIGUOUS[1]] == ([AMBIGUOUS[0]] if superseded else [])


def test_a_clear_change_never_asks_the_judge() -> None:
    from beeweave_core.context.supersession import llm_judge

    fake = FakeJudgeLLM("no")
    _, gone = _run(["The side dish is fries.", "The side dish is salad."], judge=llm_judge(fake))
    assert fake.asked == [] and gone["The side dish is salad."] == ["The side dish is fries."]


def test_the_memory_writer_uses_the_configured_llm_as_judge(weave_factory) -> None:
    fake = FakeJudgeLLM("yes")
    weave = weave_factory(index=False, config=WeaveConfig(context=ContextConfig(memory_llm=fake)))
    say(weave, "s", [{"role": "user", "content": AMBIGUOUS[0]}, *chatter(1),
                     {"role": "user", "content": AMBIGUOUS[1]}])  # fmt: skip
    weave.context.update("s")
    active = [m.content for m in memories(weave, "s")]
    assert fake.asked and AMBIGUOUS[1] in active and AMBIGUOUS[0] not in active


# ------------------------------------------------------------ sentence form
@pytest.mark.parametrize(
    "text",
    [
        "sure, logged #42",
        "好的，收到 #8",
        "Check pipeline_7.",
        "Restart the runner.",
        "Can you check the oven?",
        "Is the drip duration 25 minutes",
        "What is the irrigation start time?",
        "请看一下构建日志。",
        "烤箱温度是多少呢",
        "配菜是什么？",
    ],
)
def test_acks_commands_and_questions_are_not_statements(text: str) -> None:
    assert not is_statement(text)


@pytest.mark.parametrize(
    "text",
    [
        "The irrigation start time is 05:30.",
        "Always run the lint job before the tests.",
        "Use Gradle for the build tool.",
        "Let's make the drip duration 25 minutes.",
        "构建工具是Gradle。",
        "以后都用Gradle构建。",
    ],
)
def test_facts_and_lasting_instructions_are_statements(text: str) -> None:
    assert is_statement(text)


def test_acks_commands_and_questions_are_not_stored_as_memories(weave_factory) -> None:
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "user", "content": "Check pipeline_7."},
        {"role": "assistant", "content": "sure, logged #42"},
        {"role": "user", "content": "What is the drip duration for bed 3?"},
        {"role": "user", "content": "请看一下构建日志 build_19。"},
        {"role": "user", "content": "The drip duration for bed 3 is 25 minutes."},
    ])  # fmt: skip
    weave.context.update("s")
    assert [m.content for m in memories(weave, "s")] == [
        "The drip duration for bed 3 is 25 minutes."
    ]


# ------------------------------------------------------- through the store
def test_superseded_memory_keeps_provenance_and_leaves_the_prompt(weave_factory) -> None:
    weave = weave_factory(index=False)
    ids = say(weave, "kitchen", [
        {"role": "user", "content": "The dessert for table 9 is tiramisu."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "The starter for table 9 is burrata."},
        *chatter(3),
        {"role": "user", "content": "Let's make the dessert for table 9 panna cotta."},
        *chatter(2),
        {"role": "user", "content": "餐后饮料是拿铁。"},
        {"role": "user", "content": "餐后饮料换成美式吧。"},
    ])  # fmt: skip
    weave.context.update("kitchen")
    every = memories(weave, "kitchen", include_inactive=True)
    old = next(m for m in every if "tiramisu" in m.content)
    new = next(m for m in every if "panna cotta" in m.content)
    assert old.status == Status.INVALIDATED and new.status == Status.ACTIVE
    assert old.id in [
        e.dst for e in weave.store.edges(event_id=new.id, types=[EdgeType.SUPERSEDES])
    ]
    # provenance stays: the old memory still points at the user turn it came from
    assert ids[0] in [
        e.dst for e in weave.store.edges(event_id=old.id, types=[EdgeType.DERIVED_FROM])
    ]
    zh_old = next(m for m in every if "拿铁" in m.content)
    assert zh_old.status == Status.INVALIDATED
    ctx = weave.assemble("kitchen", "What is the dessert for table 9?", budget_tokens=600)
    text = ctx.text()
    assert "panna cotta" in text and "burrata" in text and "美式" in text
    assert "tiramisu" not in text and "拿铁" not in text
