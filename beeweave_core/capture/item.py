"""The queued record: what ``emit()`` hands the journal thread, one named tuple per event.

:class:`Item` is built on the agent's thread for every event, so ``emit()`` builds it
with ``tuple.__new__`` (half of what the generated ``Item(...)`` constructor costs,
within ~0.1 µs of a plain tuple: ``emit()`` measured 2% slower than with the positional
tuple this replaced, paired runs, the journal asleep); the journal reads it by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from beeweave_core.events import Event


class Item(NamedTuple):
    """One ``emit()`` as queued, checked and with its id, not yet an event record."""

    n: int  #: order in this process (the journal writes in this order)
    id: str
    type: str
    content: Any
    session_id: str
    role: str | None
    payload: Mapping[str, Any] | None
    parents: Sequence[str]
    links: Mapping[Any, Sequence[str]] | None
    meta: Mapping[str, Any] | None
    source: Mapping[str, Any] | None
    ts: float
    coalesce_key: str | None
    high: bool  #: high priority: never coalesced, never dropped


class Submitted(NamedTuple):
    """One ``submit()``: an event the caller built, written as it is."""

    n: int
    event: Event


#: What the high and low queues hold.
Queued = Item | Submitted


def as_str(value: Any) -> Any:
    """A ``str`` subclass (an enum, a custom id type) as a plain, hashable ``str``."""
    return str.__str__(value) if isinstance(value, str) and type(value) is not str else value
