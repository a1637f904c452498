"""Purging through the Weave removes an event everywhere: graph, full text and vectors."""

from __future__ import annotations

from beeweave_core.events import EventType


def test_purge_removes_vectors_too(weave_factory, backend):
    weave = weave_factory(backend)
    keep = weave.emit(EventType.USER_MESSAGE, "The warehouse loads orders every night at two",
                      session_id="keep")  # fmt: skip
    gone = [
        weave.emit(
            EventType.USER_MESSAGE,
            f"My card number ends in 44{i} and expires soon",
            session_id="forget-me",
        )  # fmt: skip
        for i in range(3)
    ]
    weave.flush()
    assert weave.indexer is not None and weave.indexer.sync(60)
    index = weave.indexer.index
    assert index.ids(gone + [keep]) == set(gone + [keep])

    assert weave.purge(session_id="forget-me") == 3
    assert index.ids(gone) == set()
    assert index.ids([keep]) == {keep}
    assert weave.store.timeline("forget-me", include_inactive=True) == []
    hits = weave.retrieve("card number expires", k=10)
    assert all(h.event.session_id != "forget-me" for h in hits)

    assert weave.purge(ids=[keep]) == 1
    assert index.ids([keep]) == set()


def test_an_event_stored_while_a_user_purge_runs_loses_its_vector_too(
    weave_factory, backend, monkeypatch
):
    """A purge drops the user's pending copies, then deletes what is stored: an event
    stored in between (a sibling process, here stored at that exact moment) is deleted
    by the store's user purge, and its vector must go with it."""
    from beeweave_core.events import Event, new_event_id

    weave = weave_factory(backend)
    first = weave.emit(EventType.USER_MESSAGE, "my locker code is 8841", session_id="s1",
                       meta={"user_id": "rosa"})  # fmt: skip
    weave.flush()
    forget = weave.bus.forget
    late = Event(id=new_event_id(), session_id="s2", type=EventType.USER_MESSAGE,
                 content="my bike code is 5512", meta={"user_id": "rosa"})  # fmt: skip
    embedded: list[set[str]] = []

    def forget_then_store(match):  # noqa: ANN001, ANN202 (the bus's own signature)
        dropped = forget(match)
        weave.writer.append([late])  # stored (and embedded) while the purge runs
        assert weave.indexer is not None and weave.indexer.sync(60)
        embedded.append(weave.indexer.index.ids([first, late.id]))
        return dropped

    monkeypatch.setattr(weave.bus, "forget", forget_then_store)
    assert weave.purge(user_id="rosa") == 2
    assert embedded == [{first, late.id}]  # the probe saw both vectors before the delete
    assert weave.store.get([first, late.id], include_inactive=True) == []
    assert weave.indexer.index.ids([first, late.id]) == set()


def test_a_tombstone_refuses_copies_until_an_operator_lifts_it(weave_factory, backend):
    """Until lifted, a purged session, user or event is refused on re-import; after the
    operator lifts its tombstone, the same copy is accepted."""
    import pytest

    from beeweave_core.scopes import ScopeError

    weave = weave_factory(backend, index=False)
    note = weave.emit(EventType.USER_MESSAGE, "bench the gate", session_id="s0")
    weave.emit(EventType.USER_MESSAGE, "paint the shed", session_id="s1")
    weave.emit(EventType.USER_MESSAGE, "oil the hinge", session_id="s2", meta={"user_id": "rosa"})
    weave.flush()
    copies = {sid: weave.store.export_session(sid) for sid in ("s0", "s1", "s2")}
    weave.purge(session_id="s1")
    weave.purge(user_id="rosa")
    weave.purge(ids=[note])
    marks = {(t.kind, t.value) for t in weave.tombstones()}
    assert marks == {("session", "s1"), ("user", "rosa"), ("event", note)}
    for sid, named in (("s1", {"session_id": "s1"}), ("s2", {"user_id": "rosa"}),
                       ("s0", {"event_id": note})):  # fmt: skip
        assert weave.store.import_session(copies[sid]).inserted == 0  # refused: purged
        assert weave.lift_tombstone(**named) is True
        assert weave.lift_tombstone(**named) is False  # nothing left to lift
        assert weave.store.import_session(copies[sid]).inserted == 1
    assert weave.tombstones() == []
    with pytest.raises(ValueError, match="exactly one"):
        weave.lift_tombstone(session_id="s1", user_id="rosa")
    with pytest.raises(ScopeError, match="every scope"):
        weave_factory(backend, tenant=weave.tenant, index=False, scopes={"support"}).tombstones()
