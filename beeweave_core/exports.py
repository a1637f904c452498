"""The session export format, checked whole before anything of it is written.

An export file may come from anywhere: another machine, a user's editor, an attacker.
So an import first parses and validates all of it — the envelope, every event, every
edge, every artifact — and only then writes, in one go.  Artifacts are content
addressed: a body that does not hash to its key is refused, or an import could replace
the text that later, legitimate events of the tenant get back from ``get_artifact``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from beeweave_core.errors import shown
from beeweave_core.events import Edge, EdgeType, Event
from beeweave_core.payloads import sha256_text

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


@dataclass(frozen=True)
class SessionExport:
    """A validated export: events of one session, extra edges, verified artifacts."""

    session_id: str
    events: list[Event]
    edges: list[Edge]
    artifacts: dict[str, str]


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
        raise ValueError(f"bad export: {_first_error(exc)}") from None
    events = [_event(i, rec, env.session_id) for i, rec in enumerate(env.events)]
    ids = {e.id for e in events}
    if len(ids) != len(events):
        raise ValueError("bad export: an event id appears twice")
    edges = [_edge(i, rec, ids) for i, rec in enumerate(env.edges)]
    return SessionExport(env.session_id, events, edges, _artifacts(env.artifacts))


def _event(i: int, record: dict[str, Any], session_id: str) -> Event:
    try:
        event = Event.from_record(record)
    except (ValidationError, ValueError, TypeError) as exc:
        raise ValueError(f"bad export: event #{i}: {_first_error(exc)}") from None
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
        raise ValueError(f"bad export: edge #{i}: {_first_error(exc)}") from None
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


def _first_error(exc: Exception) -> str:
    """The first problem pydantic found, in one short line."""
    if isinstance(exc, ValidationError) and exc.errors():
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "value"
        return f"{where}: {err.get('msg', 'invalid')}"
    return " ".join(str(exc).split())[:120]
