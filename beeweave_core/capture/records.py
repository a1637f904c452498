"""What a queued item becomes on disk: its event record, redacted; or, refused, a dead letter.

Both the journal thread (building records, overflow lines) and the store thread
(records the store refuses) come here, so the JSON form of an event, the one place
anything captured is redacted, and the dead-letter entry are each written once.
The record is built without a pydantic model: this is all the journal does per
event, so it stays fast (the window in which an event is only in memory); the store
thread validates it into an :class:`~beeweave_core.events.Event`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, TypeVar

from beeweave_core.capture.item import Item, as_str
from beeweave_core.capture.spool import keys_of
from beeweave_core.capture.state import CaptureState
from beeweave_core.events import EdgeType, Event
from beeweave_core.governance.redaction import EVENT_FIELDS, redact_value
from beeweave_core.payloads import dumps, to_jsonable

T = TypeVar("T")
log = logging.getLogger("beeweave.bus")


def reason(exc: BaseException) -> str:
    """One bounded line saying why (a validation error's lines joined, not its first)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _raw(item: Any) -> Any:
    """A JSON form of whatever was refused, however broken its parts are."""
    if isinstance(item, Event):
        return item.to_record()
    if isinstance(item, dict):
        return item
    try:
        return to_jsonable(list(item))
    except Exception:
        out = []
        for part in item:
            try:
                out.append(to_jsonable(part))
            except Exception:
                out.append({"$unreadable": type(part).__name__})
        return out


def canonical(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with its payload, meta and source in canonical form (a record the journal
    did not build: a pre-built event, a spool another process or version left)."""
    for name in ("payload", "meta", "source"):
        if name in rec:
            rec[name] = to_jsonable(rec[name])
    return rec


class Records(CaptureState):
    """Event records, redaction and dead letters (a part of :class:`ContextBus`)."""

    def _record(self, it: Item) -> dict[str, Any]:
        """The event's JSON record, in canonical form, without building a model yet
        (the store thread validates it; a record it cannot validate is refused there, alone)."""
        content = it.content
        payload = dict(it.payload or {})
        if content is None:
            content = ""
        elif not isinstance(content, str):
            payload.setdefault("$content_value", to_jsonable(content))
            content = (
                content.decode("utf-8", "backslashreplace")
                if isinstance(content, bytes)
                else dumps(to_jsonable(content))
            )
        links = it.links
        return {
            "id": it.id,
            "tenant": self.tenant,
            "session_id": it.session_id,
            "seq": -1,
            "type": it.type,
            "role": it.role,
            "content": content,
            "payload": to_jsonable(payload),
            "ts": it.ts,
            "parents": list(it.parents or ()),
            "links": {
                as_str(k.value if isinstance(k, EdgeType) else k): list(v) for k, v in links.items()
            }
            if links
            else {},
            "meta": to_jsonable(dict(it.meta or {})),
            "source": to_jsonable(dict(it.source or {})),
            "status": "active",
            "status_reason": None,
        }

    def redact(self, value: T) -> T:
        """``value`` with personal data replaced (counted in ``stats()["redacted"]``, never
        logged); ``value`` itself without a redactor.  The one place anything BeeWeave
        writes — events, checkpoints, store items — is redacted.

        Args:
            value: A text, or a JSON-like value or checkpoint object holding texts.

        Returns:
            ``value`` with every string inside redacted, its types kept.
        """
        if self.redactor is None:
            return value
        found: Counter[str] = Counter()
        try:
            return redact_value(value, self.redactor, found)
        finally:
            if found:
                with self._redact_lock:
                    self._redacted_counts.update(found)

    def _redacted(self, rec: dict[str, Any]) -> dict[str, Any]:
        """``rec`` with personal data replaced in its text, payload, meta and source (ids kept)."""
        if self.redactor is None:
            return rec
        return {**rec, **{f: self.redact(rec[f]) for f in EVENT_FIELDS if f in rec}}

    def _refuse(self, item: Any, why: str) -> None:
        """Keep what was refused, with why, so nothing is lost silently."""
        self._refuse_all([(item, why)])

    def _refuse_all(self, refused: list[tuple[Any, str]]) -> None:
        """Dead-letter ``refused`` in one write, with one log line for all of them."""
        records = [self._dead_record(item, why) for item, why in refused]
        self._stats["refused"] += len(records)
        first = records[0]["error"]
        more = f" and {len(records) - 1} more" if len(records) > 1 else ""
        log.error(
            "beeweave: event refused (%s)%s; kept in %s", first[:200], more, self.dead_letter_path
        )
        try:
            self._dead.add(records)
        except Exception:
            log.exception("beeweave: could not write the dead-letter file")

    def _dead_record(self, item: Any, why: str) -> dict[str, Any]:
        why = self.redact(why)  # an error message may quote the value it refused
        if isinstance(item, Event):
            item = item.to_record()
        if isinstance(item, dict):
            eid, sid, user = keys_of(item)
        elif isinstance(item, Item):
            meta = item.meta if isinstance(item.meta, Mapping) else {}
            eid, sid, user = item.id, item.session_id, meta.get("user_id")
        else:
            eid = sid = user = None
        return {
            "at": time.time(),
            "error": why,
            "id": eid if isinstance(eid, str) else None,
            "session_id": sid if isinstance(sid, str) else None,
            "user_id": user if isinstance(user, str) else None,
            "item": self.redact(_raw(item)),
        }
