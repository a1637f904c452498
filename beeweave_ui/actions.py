"""The only writes the UI makes: purge, invalidate or confirm one memory.

Each is recorded as a ``warning`` event of kind ``ui_action`` in the memory's session,
written before the change, so the audit trail says who asked and why even when the
memory itself is gone.  A purge record keeps the memory's id and kind, not its text:
purging is how a user makes BeeWeave forget something.
"""

from __future__ import annotations

from typing import Any

from beeweave_core.events import EdgeType, Event, EventType, new_event_id
from beeweave_core.store import NotFound
from beeweave_core.weave import Weave
from beeweave_ui.reads import UI_ACTION

ACTIONS = ("purge", "invalidate", "confirm")
MAX_REASON = 500


def apply(weave: Weave, memory_id: str, action: str, reason: str = "") -> dict[str, Any]:
    """Do ``action`` to the memory event ``memory_id`` of this tenant; returns what happened."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    reason = " ".join(str(reason or "").split())[:MAX_REASON]
    if action == "invalidate" and not reason:
        raise ValueError("invalidating a memory needs a reason")
    found = weave.store.get([memory_id], include_inactive=True)
    if not found or found[0].type != EventType.MEMORY:
        raise NotFound(f"no memory {memory_id!r} for tenant {weave.tenant!r}")
    mem = found[0]
    record = _record(weave, mem, action, reason)
    changed = 1
    if action == "purge":
        changed = weave.purge(ids=[mem.id])
    elif action == "invalidate":
        changed = weave.store.invalidate([mem.id], f"{reason} (beeweave ui)")
        if weave.indexer is not None:
            weave.indexer.forget([mem.id])
    return {"action": action, "memory_id": mem.id, "changed": changed, "record_id": record}


def _record(weave: Weave, mem: Event, action: str, reason: str) -> str:
    """Write the audit event synchronously (so the page reloads with it in place)."""
    text = f"Memory #{mem.seq} ({mem.payload.get('kind', 'memory')}) {action}d in beeweave ui"
    links = {} if action == "purge" else {EdgeType.REFERS_TO: (mem.id,)}
    ev = Event(
        id=new_event_id(),
        session_id=mem.session_id,
        type=EventType.WARNING,
        role="system",
        content=text + (f": {reason}" if reason else "."),
        payload={
            "kind": UI_ACTION,
            "action": action,
            "memory_id": mem.id,
            "memory_kind": mem.payload.get("kind"),
            "reason": reason,
        },
        links=links,
        meta={k: v for k, v in mem.meta.items() if k in ("user_id", "agent_id")},
        source={"framework": "beeweave", "component": "ui"},
    )
    weave.writer.append([ev])
    return ev.id
