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
    """The purge reads the user's events, then deletes them: one stored in between (a
    sibling process, here stored at that exact moment) is deleted by the store's user
    purge, and its vector must go with it."""
    from beeweave_core.events import Event, new_event_id

    weave = weave_factory(backend)
    first = weave.emit(EventType.USER_MESSAGE, "my locker code is 8841", session_id="s1",
                       meta={"user_id": "rosa"})  # fmt: skip
    weave.flush()
    read = weave.user_event_ids
    late = Event(id=new_event_id(), session_id="s2", type=EventType.USER_MESSAGE, content="my bike code is 5512",
                 meta={"user_id": "rosa"})  # fmt: skip

    embedded: list[set[str]] = []

    def read_then_store(user_id: str) -> list[str]:
        found = read(user_id)
        weave.writer.append([late])  # stored (and embedded) after the purge read the user
        assert weave.indexer is not None and weave.indexer.sync(60)
        embedded.append(weave.indexer.index.ids([first, late.id]))
        return found

    monkeypatch.setattr(weave, "user_event_ids", read_then_store)
    assert weave.purge(user_id="rosa") == 2
    assert embedded == [{first, late.id}]  # the probe saw both vectors before the delete
    assert weave.store.get([first, late.id], include_inactive=True) == []
    assert weave.indexer.index.ids([first, late.id]) == set()
