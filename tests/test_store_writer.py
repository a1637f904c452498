"""BeeWeave's own writes go through one ``StoreWriter`` per store: redacted, put in the
store's write scope, stored, then told to subscribers; the context engine's views are one,
so a memory tool's invalidation reaches them without a re-read.  Real SQLite files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from beeweave_core import Weave
from beeweave_core.context import ContextEngine
from beeweave_core.events import Event, EventType, Status, new_event_id
from beeweave_core.governance import default_redactor
from beeweave_core.memory_ops import MemoryOps, namespace
from beeweave_core.store_writer import StoreWriter

EMAIL = "ines.quarrow@tidewell.example"


class Recorder:
    """A subscriber that keeps what it is told (a ``WriteSubscriber``)."""

    def __init__(self) -> None:
        self.stored: list[Event] = []
        self.changes: list[tuple[list[str], Status]] = []

    def on_stored(self, events: list[Event]) -> None:
        self.stored += events

    def own_change(self, change: Callable[[], int], ids: Sequence[str], status: Status) -> int:
        n = change()
        self.changes.append((list(ids), status))
        return n


def _note(text: str) -> Event:
    return Event(id=new_event_id(), session_id="desk", type=EventType.WARNING, content=text)


def test_a_subscriber_sees_each_write_as_the_store_keeps_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    redactor = default_redactor(tmp_path)
    with Weave.open(url, spool_dir=tmp_path / "sp", index=False, scopes="billing",
                    redactor=redactor) as weave:  # fmt: skip
        writer = weave.writer
        assert weave.writer is writer and writer.store is weave.store  # built once
        seen = Recorder()
        writer.subscribe(seen)
        note = _note(f"Send the invoice to {EMAIL}.")
        assert writer.append([note]).ids == [note.id]
        (stored,) = weave.store.get([note.id])
        assert EMAIL not in stored.content and "[EMAIL:" in stored.content  # redacted
        assert stored.meta["scope"] == "billing"  # the store's write scope, set before
        (told,) = seen.stored
        assert (told.id, told.content, told.meta) == (note.id, stored.content, stored.meta)

        writer.append([note])  # stored already: nobody is told again
        assert len(seen.stored) == 1
        assert writer.invalidate([note.id], "sent") == 1
        assert seen.changes == [([note.id], Status.INVALIDATED)]
        assert weave.store.get([note.id], include_inactive=True)[0].status == Status.INVALIDATED

        writer.unsubscribe(seen)
        writer.append([_note("Another note.")])
        assert len(seen.stored) == 1


def test_a_memory_tool_invalidation_reaches_the_engine_view_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with Weave.open(url, spool_dir=tmp_path / "sp", index=False) as weave:
        ops = MemoryOps(weave, user_id="u1")
        mid = ops.remember("Invoices go out on the first Monday of the month.").ids[0]
        engine = weave.context
        assert engine.writer is weave.writer and engine.store is weave.store
        ns = namespace("u1", "default")
        view, _read = engine.views.get(ns)
        assert mid in view.memory.memories
        epoch = engine.views.outside_changes()

        ops.forget(mid, "they go out on the second Monday now")
        assert mid not in view.memory.memories  # applied to the view as the store changed
        again, read = engine.views.get(ns)
        assert again is view and read == 0  # not dropped, nothing read again
        assert engine.views.outside_changes() == epoch
        assert weave.store.get([mid], include_inactive=True)[0].status == Status.INVALIDATED


def test_an_engine_on_a_plain_store_writes_through_a_writer_of_its_own(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with Weave.open(url, spool_dir=tmp_path / "sp", index=False) as weave:
        engine = ContextEngine(weave.store)
        assert isinstance(engine.writer, StoreWriter) and engine.writer is not weave.writer
        assert engine.store is weave.store and engine.writer.store is weave.store
        engine.close()
