"""Dormancy with an injected clock: unaffirmed long-term memories are asked about, not assumed."""

from __future__ import annotations

import time

import pytest

from beeweave_core.memory.dormancy import DAY, DormancyPolicy
from beeweave_core.store import NotFound
from beeweave_core.weave import Weave

from .context_helpers import chatter, say

PREF = "I prefer weekly reports written in metric units."
FACT = "The greenhouse has exactly 12 tomato beds along the south wall."


@pytest.fixture
def weave(backend: str, weave_factory) -> Weave:
    """Each test on SQLite and on the real Neo4j (confirmations are notes and edges)."""
    return weave_factory(backend, index=False)


def at(w: Weave, t: float, **kw) -> None:
    w.context.dormancy = DormancyPolicy(clock=lambda: t, **kw)


def look(w: Weave, query: str):
    """The working state, and what the memory layers (working, recalled) injected: the
    session's own turns may still hold the words verbatim in the immediate layer."""
    ctx = w.assemble("g", query, budget_tokens=900, record=False)
    text = "\n".join(p.text for p in ctx.provenance if p.layer in ("working", "recalled"))
    return ctx.working_state, text


def test_dormant_memory_needs_confirmation_then_wakes(weave: Weave):
    now = time.time()
    say(weave, "g", [{"role": "user", "content": PREF}, {"role": "assistant", "content": "Sure."},
                     {"role": "user", "content": FACT}, {"role": "assistant", "content": "Noted."}],
        ts=now - 60)  # fmt: skip
    say(weave, "g", chatter(40), ts=now - 30, prefix="chat")  # a history that does not fit
    at(weave, now)
    ws, _ = look(weave, "anything new today?")
    assert ws.to_dict()["preferences"] == [PREF]  # fresh: pinned
    mems = {m.content: m.id for m in weave.context.memories("g")}
    assert set(mems) == {PREF, FACT}

    at(weave, now + 200 * DAY)  # nobody affirmed them for 200 days
    ws, text = look(weave, "anything new today?")
    assert ws.preferences == [] and ws.needs_confirmation == []
    assert "metric" not in text and "tomato" not in text  # not injected on their own
    ws, text = look(weave, "how many tomato beds does the greenhouse have?")
    asked = [i.text for i in ws.needs_confirmation]
    assert asked == [f"{FACT} (not confirmed for 200 days: confirm before relying on it)"]
    assert "not confirmed for 200 days" in text and ws.preferences == []

    weave.confirm(mems[FACT])  # the clock says day 200: affirmed now
    ws, text = look(weave, "how many tomato beds does the greenhouse have?")
    assert ws.needs_confirmation == [] and "not confirmed" not in text
    ws, text = look(weave, "which units should the weekly reports use?")
    assert [i.event_ids for i in ws.needs_confirmation] == [(mems[PREF],)]  # still asleep
    assert "metric units. (not confirmed for 200 days" in text
    weave.confirm(mems[PREF])
    ws, _ = look(weave, "anything new today?")
    assert ws.to_dict()["preferences"] == [PREF]  # pinned again


def test_user_restating_wakes_and_policy_is_configurable(weave: Weave):
    now = time.time()
    say(weave, "g", [{"role": "user", "content": PREF}, {"role": "assistant", "content": "Sure."}],
        ts=now - 60)  # fmt: skip
    say(weave, "g", chatter(40), ts=now - 30, prefix="chat")
    at(weave, now + 40 * DAY)
    ws, _ = look(weave, "the weekly reports")
    assert ws.to_dict()["preferences"] == [PREF]  # 40 days < the 180-day default
    at(weave, now + 40 * DAY, after_days=30)
    ws, _ = look(weave, "the weekly reports")
    assert ws.preferences == [] and len(ws.needs_confirmation) == 1
    say(weave, "g", [{"role": "user", "content": PREF}], ts=now + 40 * DAY, prefix="again")
    ws, _ = look(weave, "the weekly reports")
    assert ws.to_dict()["preferences"] == [PREF] and ws.needs_confirmation == []
    with pytest.raises(NotFound):
        weave.confirm("no-such-memory")
    with pytest.raises(ValueError, match="after_days"):
        DormancyPolicy(after_days=0)


def test_amnesia_check_does_not_count_dormant_memories(weave: Weave):
    from beeweave_core.governance.health import weave_health

    now = time.time()
    say(weave, "g", [{"role": "user", "content": FACT}, {"role": "assistant", "content": "Ok."}],
        ts=now - 60)  # fmt: skip
    weave.context.update("g")
    at(weave, now)
    (fresh,), _ = weave_health(weave, "g")
    assert fresh.amnesia is not None and fresh.amnesia.sampled == 1
    at(weave, now + 365 * DAY)
    (old,), _ = weave_health(weave, "g")
    assert old.amnesia is not None and old.amnesia.sampled == 0 and old.warnings == []
