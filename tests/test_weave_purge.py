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
