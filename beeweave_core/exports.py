"""The session export format, checked whole before anything of it is written.

An export file may come from anywhere: another machine, a user's editor, an attacker.
So an import first parses and validates all of it — the envelope, every event, every
edge, every artifact — and only then writes, in one go.  Artifacts are content
addressed: a body that does not hash to its key is refused, or an import could replace
the text that later, legitimate events of the tenant get back from ``get_artifact``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from beeweave_core.checkpoints import CheckpointRow, CheckpointStore, Typed, WriteRow
from beeweave_core.errors import invalid_line, shown
from beeweave_core.events import Edge, EdgeType, Event
from beeweave_core.payloads import sha256_text

if TYPE_CHECKING:
    from beeweave_core.events import AppendResult

EXPORT_FORMAT = "beeweave.session/1"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class _Envelope(BaseModel):
    """The top level of an export; events and edges are checked one by one after it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    format: Literal["beeweave.session/1"]
    tenant: str | None = None
    session_id: str
    events: list[dict[str, Any]]
    edges: list[dict[str, Any]] = []
    artifacts: dict[str, str | None] = {}
    #: LangGraph checkpoints of the thread whose id is the session id (optional).
    checkpoints: list[dict[str, Any]] = []


@dataclass(frozen=True)
class SessionExport:
    """A validated export: events of one session, extra edges, verified artifacts,
    and the thread's checkpoints (oldest first) so an imported thread can resume."""

    session_id: str
    events: list[Event]
    edges: list[Edge]
    artifacts: dict[str, str]
    checkpoints: list[CheckpointRow] = field(default_factory=list)


def parse_export(raw: bytes | str) -> SessionExport:
    """Decode, parse and validate an export file's content; any flaw is one ``ValueError``."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text (byte {exc.start}): not a BeeWeave export") from None
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply: not a BeeWeave export") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    return validate_export(data)


def validate_export(data: object) -> SessionExport:
    """Check a parsed export whole: the envelope, then every event, edge and artifact."""
    if not isinstance(data, dict):
        raise ValueError(f"not a BeeWeave session export: the top level is a {type(data).__name__}")
    if data.get("format") != EXPORT_FORMAT:
        raise ValueError(f"not a BeeWeave session export (format={shown(data.get('format'))})")
    try:
        env = _Envelope.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"bad export: {invalid_line(exc)}") from None
    events = [_event(i, rec, env.session_id) for i, rec in enumerate(env.events)]
    ids = {e.id for e in events}
    if len(ids) != len(events):
        raise ValueError("bad export: an event id appears twice")
    edges = [_edge(i, rec, ids) for i, rec in enumerate(env.edges)]
    rows = [_checkpoint(i, rec, env.session_id) for i, rec in enumerate(env.checkpoints)]
    return SessionExport(env.session_id, events, edges, _artifacts(env.artifacts), rows)


def _event(i: int, record: dict[str, Any], session_id: str) -> Event:
    try:
        event = Event.from_record(record)
    except (ValidationError, ValueError, TypeError) as exc:
        raise ValueError(f"bad export: event #{i}: {invalid_line(exc)}") from None
    if event.session_id != session_id:
        raise ValueError(
            f"bad export: event #{i} belongs to session {shown(event.session_id)}, "
            f"not {shown(session_id)}"
        )
    return event


def _edge(i: int, record: dict[str, Any], ids: set[str]) -> Edge:
    try:
        edge = Edge.model_validate(record)
    except (ValidationError, ValueError, TypeError) as exc:
        raise ValueError(f"bad export: edge #{i}: {invalid_line(exc)}") from None
    if edge.type == EdgeType.NEXT:
        raise ValueError(f"bad export: edge #{i} is NEXT, which follows the session order")
    if edge.src not in ids:
        raise ValueError(f"bad export: edge #{i} starts at {shown(edge.src)}, not in the export")
    return edge


def _artifacts(raw: dict[str, str | None]) -> dict[str, str]:
    out: dict[str, str] = {}
    for sha, body in raw.items():
        if not _SHA256.match(sha):
            raise ValueError(f"bad export: artifact key {shown(sha)} is not a SHA-256 hex digest")
        if body is None:  # exported while the artifact was already gone
            continue
        if sha256_text(body) != sha:
            raise ValueError(f"bad export: artifact {sha[:12]}… does not match its SHA-256")
        out[sha] = body
    return out


# ------------------------------------------------------------------ checkpoints
def _typed_json(value: Typed) -> list[str]:
    return [value[0], base64.b64encode(value[1]).decode("ascii")]


def _typed(value: object, where: str) -> Typed:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(x, str) for x in value)):
        raise ValueError(f"bad export: {where}: expected [type, base64]")
    try:
        return value[0], base64.b64decode(value[1], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"bad export: {where}: not base64") from None


def checkpoint_records(store: CheckpointStore, thread_id: str) -> list[dict[str, Any]]:
    """Every checkpoint of ``thread_id`` (all namespaces) in JSON form, oldest first."""
    rows = list(store.list(thread_id=thread_id))
    rows.reverse()  # ``list`` is newest first; import replays parents before children
    return [
        {
            "checkpoint_ns": r.checkpoint_ns,
            "checkpoint_id": r.checkpoint_id,
            "parent_checkpoint_id": r.parent_checkpoint_id,
            "checkpoint": _typed_json(r.checkpoint),
            "metadata": r.metadata,
            "metadata_exact": _typed_json(r.metadata_exact) if r.metadata_exact else None,
            "channel_versions": r.channel_versions,
            "values": {ch: _typed_json(v) for ch, v in r.values.items()},
            "writes": [
                {
                    "task_id": w.task_id,
                    "task_path": w.task_path,
                    "idx": w.idx,
                    "channel": w.channel,
                    "value": _typed_json(w.value),
                }
                for w in r.writes
            ],
        }
        for r in rows
    ]


def _checkpoint(i: int, rec: dict[str, Any], thread_id: str) -> CheckpointRow:
    where = f"checkpoint #{i}"
    try:
        exact = rec.get("metadata_exact")
        return CheckpointRow(
            thread_id=thread_id,
            checkpoint_ns=_text(rec["checkpoint_ns"], where),
            checkpoint_id=_text(rec["checkpoint_id"], where),
            parent_checkpoint_id=rec.get("parent_checkpoint_id"),
            checkpoint=_typed(rec["checkpoint"], where),
            metadata=dict(rec["metadata"]),
            channel_versions={str(k): str(v) for k, v in dict(rec["channel_versions"]).items()},
            values={str(ch): _typed(v, where) for ch, v in dict(rec.get("values", {})).items()},
            writes=[_write(w, where) for w in rec.get("writes", [])],
            metadata_exact=_typed(exact, where) if exact is not None else None,
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"bad export: {where}: missing or malformed {exc}") from None


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"bad export: {where}: expected text, got {shown(value)}")
    return value


def _write(rec: dict[str, Any], where: str) -> WriteRow:
    return WriteRow(
        task_id=_text(rec["task_id"], where),
        task_path=_text(rec.get("task_path", ""), where),
        idx=int(rec["idx"]),
        channel=_text(rec["channel"], where),
        value=_typed(rec["value"], where),
    )


def restore_checkpoints(store: CheckpointStore, rows: Iterable[CheckpointRow]) -> int:
    """Write exported checkpoints back, parents first, with their blobs and pending writes."""
    n = 0
    for row in rows:
        blobs = {
            (ch, row.channel_versions[ch]): v
            for ch, v in row.values.items()
            if ch in row.channel_versions
        }
        store.put(row, blobs)
        if row.writes:
            store.put_writes(row.thread_id, row.checkpoint_ns, row.checkpoint_id, row.writes)
        n += 1
    return n


# ------------------------------------------------------------ a whole session
class SessionStore(Protocol):
    """What a whole-thread export and import ask of the event store (``store.py``'s
    ``EventStore`` is one; this module sits below it, as the export format's home)."""

    def export_session(self, session_id: str) -> dict[str, Any]: ...
    def import_session(self, data: dict[str, Any] | SessionExport) -> AppendResult: ...
    def purge(self, *, ids: Sequence[str] | None = None, tombstone: bool = True) -> list[str]: ...


def export_thread(
    events: SessionStore, checkpoints: CheckpointStore | None, session_id: str
) -> dict[str, Any]:
    """A session's export plus, when a checkpointer kept its thread, the checkpoints."""
    data = events.export_session(session_id)
    if checkpoints is not None:
        rows = checkpoint_records(checkpoints, session_id)
        if rows:
            data["checkpoints"] = rows
    return data


def import_thread(
    events: SessionStore, checkpoints: CheckpointStore | None, export: SessionExport
) -> AppendResult:
    """Import events, then checkpoints; if the checkpoints fail, the events go again."""
    if export.checkpoints and checkpoints is None:
        raise ValueError("the export holds checkpoints but this store keeps none")
    result = events.import_session(export)
    if export.checkpoints and checkpoints is not None:
        try:
            restore_checkpoints(checkpoints, export.checkpoints)
        except Exception:
            checkpoints.delete_thread(export.session_id)
            if result.ids:
                events.purge(ids=result.ids, tombstone=False)
            raise
    return result
