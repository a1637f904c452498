"""The engine's derived state follows changes made behind it, and is built once.

A purge (a session id used again afterwards starts its seqs again) and a memory tool's
``forget`` change the store behind the memory writer; its cursor and the memories it
compares new statements with must follow, or a new statement is skipped or taken for
one already known.  A reopened long session is read once, by the background catch-up:
the first turn after it reads no memory the catch-up read.

Real SQLite files, real tiktoken counts, no fakes; the wordings appear in no data set.
"""

from __future__ import annotations

from beeweave_core.context import engine as engine_module
from beeweave_core.events import EventType
from beeweave_core.weave import Weave

from .test_context_first_call import LONG, _assemble_counting_rows, _log, _wait

TS = 1_700_000_000.0


def _turn(weave: Weave, sid: str, user: str, answer: str = "Written down.") -> None:
    weave.emit("user_message", user, session_id=sid, role="user")
    weave.emit("assistant_message", answer, session_id=sid, role="assistant")
    assert weave.flush()


def _memories(weave: Weave, sid: str) -> list[str]:
    return [m.content for m in weave.store.timeline(sid, types=(EventType.MEMORY,))]


def test_a_session_purged_and_used_again_gets_its_memories(weave_factory):
    weave = weave_factory(index=False)
    _turn(weave, "hive", "The apiary gate code is 4471.")
    _turn(weave, "hive", "The smoker fuel is pine needles.")
    weave.assemble("hive", budget_tokens=800, record=False)
    assert len(_memories(weave, "hive")) == 2
    assert weave.purge(session_id="hive") > 0
    _turn(weave, "hive", "The apiary gate code is 9032.")  # seqs start again at 0
    weave.assemble("hive", budget_tokens=800, record=False)
    assert _memories(weave, "hive") == ["The apiary gate code is 9032."]


def test_a_forgotten_memory_said_again_is_remembered_again(weave_factory):
    weave = weave_factory(index=False)
    _turn(weave, "dock", "Our ferry leaves pier 6 at 07:40.")
    weave.assemble("dock", budget_tokens=800, record=False)
    (memory,) = weave.store.timeline("dock", types=(EventType.MEMORY,))
    weave.store.invalidate([memory.id], "said by mistake")  # (the UI's "forget")
    assert _memories(weave, "dock") == []
    _turn(weave, "dock", "Our ferry leaves pier 6 at 07:40.")
    weave.assemble("dock", budget_tokens=800, record=False)
    assert _memories(weave, "dock") == ["Our ferry leaves pier 6 at 07:40."]


def test_a_reopened_long_session_is_read_by_the_catch_up_not_by_the_next_turn(
    weave_factory, monkeypatch
):
    monkeypatch.setattr(engine_module, "BACKGROUND_EVENTS", LONG)
    first = weave_factory(index=False)
    sid = "studio"
    for i, m in enumerate(_log(0, 4 * LONG)):
        first.emit(f"{m['role']}_message", m["content"], session_id=sid, role=m["role"],
                   key=f"log-{i}", ts=TS + i)  # fmt: skip
    assert first.flush()
    first.assemble(sid, budget_tokens=600, model="gpt-4", record=False)
    _wait(first, sid)
    memories = len(_memories(first, sid))
    assert memories > LONG
    first.close()

    again = weave_factory(index=False, tenant=first.tenant)  # a new process, same file
    assert again.assemble(sid, budget_tokens=600, model="gpt-4", record=False).catching_up
    _wait(again, sid)
    old = _log(3, 1)[0]["content"]  # "Shelf 3 in the <studio> holds <n> <ware>."
    new = old.replace(old.split()[-2], "240")
    _turn(again, sid, new)  # the count changes
    ctx, read = _assemble_counting_rows(again, sid, 600)
    assert read < memories / 4, (read, memories)
    assert new in ctx.text() and old not in ctx.text()
    current = _memories(again, sid)
    assert new in current and old not in current
