"""Retention: events past their policy's age move to a cold archive and leave the hot store.

A policy is a list of rules, each naming event types and an age (raw conversation
after 90 days by default).  :func:`apply_retention` writes what expired, session by
session, to one gzip JSON Lines file (private, ``0600``) with a manifest beside it
holding the file's SHA-256 and counts; then it purges those events from the store
and the vector index (``weave.purge(ids=...)``).  ``beeweave import`` takes the
archive back (checked against its manifest first).

Summaries and memories are never expired by the default policy, so what was derived
from archived turns keeps working.  Their provenance is kept without touching them
(events are immutable): each run appends one note event per session (type
``warning``, ``payload.kind == "archived"``) naming the archive file and the archived
ids, linked ``REFERS_TO`` to every kept event that was derived from an archived one,
with ``{"archived_in": <file name>}`` on the edge.  :func:`archived_in` reads it back.
The edges from kept events to archived ones are stored in the archive and restored on
import, so the graph is whole again after a round trip.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from beeweave_core.checkpoints import CheckpointStore, PruneLimits
from beeweave_core.events import AppendResult, Edge, EdgeType, Event, EventType, event_id_for
from beeweave_core.exports import SessionExport, validate_export
from beeweave_core.paths import beeweave_home
from beeweave_core.private import open_private, private_dir, write_private_text
from beeweave_core.store import EventReader, Portability, SessionReader
from beeweave_core.store_writer import StoreWriter

ARCHIVE_FORMAT = "beeweave.archive/1"
#: The file in the home listing archive folders other than ``$BEEWEAVE_HOME/archive``.
ARCHIVE_DIRS_FILE = "archive-dirs"
log = logging.getLogger("beeweave")
DAY = 86_400.0
#: The raw conversation: what a user said and what the agent did, turn by turn.
RAW_CONVERSATION = frozenset(
    {
        EventType.USER_MESSAGE,
        EventType.ASSISTANT_MESSAGE,
        EventType.MODEL_CALL,
        EventType.TOOL_INVOCATION,
        EventType.TOOL_RESULT,
        EventType.INTERNAL_THOUGHT,
    }
)
NOTE_KIND = "archived"


@dataclass(frozen=True)
class RetentionRule:
    """Events of ``types`` older than ``after_days`` expire."""

    types: frozenset[EventType]
    after_days: float

    def __post_init__(self) -> None:
        if not self.after_days > 0:
            raise ValueError(f"after_days must be positive, got {self.after_days!r}")
        if not self.types:
            raise ValueError("a retention rule needs at least one event type")


#: Raw conversation after 90 days; assembly audit records after 30.  Summaries,
#: memories, system prompts and warnings stay.
DEFAULT_RULES = (
    RetentionRule(RAW_CONVERSATION, 90.0),
    RetentionRule(frozenset({EventType.RETRIEVAL}), 30.0),
)


@dataclass
class RetentionReport:
    """What a run archived (or, with ``dry_run``, would archive)."""

    archive: Path | None
    expired: dict[str, int] = field(default_factory=dict)
    purged: int = 0
    dry_run: bool = False

    @property
    def total(self) -> int:
        return sum(self.expired.values())


class ArchiveSource(SessionReader, Portability, Protocol):
    """What a retention run reads: the sessions, their events and edges, their exports."""


def expired_events(
    store: SessionReader, rules: Sequence[RetentionRule], now: float
) -> dict[str, list[Event]]:
    """Per session, the events (any status) some rule expires at ``now``."""
    out: dict[str, list[Event]] = {}
    for s in store.sessions():
        hits = [
            e
            for e in store.timeline(s.session_id, include_inactive=True)
            if any(e.type in r.types and e.ts < now - r.after_days * DAY for r in rules)
        ]
        if hits:
            out[s.session_id] = hits
    return out


def session_archive(store: ArchiveSource, session_id: str, ids: set[str]) -> dict[str, Any]:
    """One archive line: the export of ``ids`` plus the edges kept events point at them with."""
    data = store.export_session(session_id)
    incoming = [
        e.model_dump(mode="json")
        for e in store.edges(session_id=session_id)
        if e.dst in ids and e.src not in ids and e.type != EdgeType.NEXT
    ]
    return _restricted({"export": data, "incoming": incoming}, ids)


def _restricted(
    line: dict[str, Any], ids: set[str], gone: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """An archive line holding only the events ``ids``: their edges, the artifacts they
    point at, and the edges of kept events to them; no edge touches an id in ``gone``."""
    data = dict(line["export"])
    events = [r for r in data["events"] if r["id"] in ids]
    shas = {
        a["sha256"]
        for r in events
        for a in (r["payload"].get("$artifact"), r["payload"].get("$payload_artifact"))
        if isinstance(a, dict)
    }
    data["events"] = events
    data["edges"] = [e for e in data["edges"] if e["src"] in ids and e["dst"] not in gone]
    data["artifacts"] = {k: v for k, v in data["artifacts"].items() if k in shas}
    incoming = [e for e in line["incoming"] if e["dst"] in ids and e["src"] not in gone]
    return {"export": data, "incoming": incoming}


def write_archive(path: Path, tenant: str, lines: Iterable[dict[str, Any]], now: float) -> Path:
    """The gzip JSON Lines file (``0600``) and its manifest (``<file>.manifest.json``).

    Written beside and renamed into place, so a rewrite (a purge erasing from an
    archive) never leaves half a file under the archive's name."""
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    counts: dict[str, int] = {}
    with open_private(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for line in lines:
            counts[line["export"]["session_id"]] = len(line["export"]["events"])
            gz.write(json.dumps(line, ensure_ascii=False, sort_keys=True).encode() + b"\n")
    manifest = {
        "format": ARCHIVE_FORMAT,
        "tenant": tenant,
        "created": now,
        "file": path.name,
        "sha256": hashlib.sha256(tmp.read_bytes()).hexdigest(),
        "sessions": counts,
        "events": sum(counts.values()),
    }
    os.replace(tmp, path)
    write_private_text(manifest_path(path), json.dumps(manifest, indent=1, sort_keys=True))
    return path


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


class Retaining(Protocol):
    """What a retention run asks of its weave (a ``Weave`` is one): its tenant and store,
    a flush of what is still on its bus, a purge that archives may bring back, and the
    writer its provenance notes go through."""

    tenant: str
    store: ArchiveSource

    @property
    def writer(self) -> StoreWriter: ...
    def flush(self, timeout: float = ..., wait_index: bool = ...) -> bool: ...
    def purge(self, *, ids: Sequence[str] | None = None, tombstone: bool = True) -> int: ...


def apply_retention(
    weave: Retaining,
    archive_dir: Path,
    rules: Sequence[RetentionRule] = DEFAULT_RULES,
    *,
    now: float | None = None,
    dry_run: bool = False,
) -> RetentionReport:
    """Archive what ``rules`` expire, then purge it from the store and the vector index.

    The archive is complete and on disk (with its manifest) before anything is
    purged; a failure before that leaves the store as it was.
    """
    now = time.time() if now is None else now
    weave.flush()
    store = weave.store
    expired = expired_events(store, rules, now)
    report = RetentionReport(None, {s: len(v) for s, v in expired.items()}, dry_run=dry_run)
    if dry_run or not expired:
        return report
    _remember_dir(archive_dir)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    path = archive_dir / f"archive-{weave.tenant}-{stamp}.jsonl.gz"
    lines = [session_archive(store, s, {e.id for e in v}) for s, v in expired.items()]
    report.archive = write_archive(path, weave.tenant, lines, now)
    for line, (sid, events) in zip(lines, expired.items(), strict=True):
        # the note first: it takes the place after the session's newest event, so an
        # import gives the archived events their places back below it (written after
        # the purge, it took the place of an archived one: of all of them, 0)
        _note(weave.writer, sid, path.name, [e.id for e in events], line["incoming"], now)
        report.purged += weave.purge(ids=[e.id for e in events], tombstone=False)
    return report


def _note(
    writer: StoreWriter,
    session_id: str,
    file: str,
    ids: list[str],
    incoming: Sequence[dict[str, Any]],
    now: float,
) -> None:
    """The provenance note: which ids went to ``file``, linked to what was derived from them."""
    derived = sorted({e["src"] for e in incoming})
    note = Event(
        id=event_id_for(NOTE_KIND, session_id, file),
        session_id=session_id,
        type=EventType.WARNING,
        role="system",
        content=f"{len(ids)} event(s) archived in {file} by the retention policy.",
        payload={"kind": NOTE_KIND, "archive": file, "archived_ids": ids, "derived": derived},
        ts=now,
        source={"framework": "beeweave", "component": "retention"},
    )
    writer.append([note])
    writer.link(
        [
            Edge(src=note.id, dst=d, type=EdgeType.REFERS_TO, meta={"archived_in": file})
            for d in derived
        ]
    )


def archived_in(store: EventReader, event: Event) -> list[str]:
    """Archive files holding events ``event`` was derived from (newest note last)."""
    return [
        str(e.meta["archived_in"])
        for e in store.edges(event_id=event.id, direction="in", types=[EdgeType.REFERS_TO])
        if "archived_in" in e.meta
    ]


def prune_checkpoints(
    store: CheckpointStore, limits: PruneLimits, thread_ids: Sequence[str] | None = None
) -> list[str]:
    """Thin every thread (or ``thread_ids``) to ``limits``; returns the threads visited."""
    threads = (
        sorted({r.thread_id for r in store.list()}) if thread_ids is None else list(thread_ids)
    )
    store.prune(threads, limits=limits)
    return threads


# ------------------------------------------------------------------ reading back
def is_archive(raw: bytes) -> bool:
    return raw[:2] == b"\x1f\x8b"


@dataclass(frozen=True)
class ArchivedSession:
    export: SessionExport
    incoming: list[Edge]


def read_archive(path: Path) -> list[ArchivedSession]:
    """Check the archive against its manifest, then validate every session in it."""
    out = []
    for i, line in enumerate(_verified_text(path)[0].splitlines()):
        try:
            rec = json.loads(line)
            edges = [Edge.model_validate(e) for e in rec["incoming"]]
            out.append(ArchivedSession(validate_export(rec["export"]), edges))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"archive line {i + 1}: {exc}") from None
    return out


def _verified_text(path: Path) -> tuple[str, dict[str, Any]]:
    """The archive's text and manifest, once the file matches the manifest's SHA-256."""
    raw = path.read_bytes()
    mpath = manifest_path(path)
    if not mpath.is_file():
        raise ValueError(f"no manifest {mpath.name} beside the archive: cannot verify it")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"unreadable manifest {mpath.name}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != ARCHIVE_FORMAT:
        raise ValueError(f"{mpath.name} is not a BeeWeave archive manifest")
    if hashlib.sha256(raw).hexdigest() != manifest.get("sha256"):
        raise ValueError("the archive does not match the SHA-256 in its manifest")
    try:
        text = gzip.decompress(raw).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"corrupt archive: {exc}") from None
    return text, manifest


# ------------------------------------------------------------- erasing from archives
def archive_dirs() -> list[Path]:
    """Where this home's retention runs wrote archives: ``$BEEWEAVE_HOME/archive`` and
    every other folder a run was given (listed in ``$BEEWEAVE_HOME/archive-dirs``)."""
    listed = beeweave_home() / ARCHIVE_DIRS_FILE
    found = [beeweave_home() / "archive"]
    if listed.is_file():
        found += [Path(p) for p in listed.read_text(encoding="utf-8").splitlines() if p]
    return list(dict.fromkeys(p.resolve() for p in found))


def _remember_dir(folder: Path) -> None:
    """List ``folder`` in the home, so a later purge finds the archives written there."""
    folder = folder.resolve()
    known = archive_dirs()
    if folder not in known:
        private_dir(beeweave_home())
        with open_private(beeweave_home() / ARCHIVE_DIRS_FILE, "a") as f:
            f.write(f"{folder}\n")


def erase_from_archives(tenant: str, erased: Callable[[list[Event]], set[str]]) -> int:
    """Rewrite ``tenant``'s archives (in :func:`archive_dirs`) without the events a purge
    erased (``erased`` names them among a session's archived events); an archive left
    empty is deleted with its manifest.  Returns the events taken out.  An archive that
    does not match its manifest is left as it is (logged): ``import`` refuses it anyway,
    and tombstones keep its erased events out."""
    n = 0
    for folder in archive_dirs():
        for path in sorted(folder.glob("archive-*.jsonl.gz")) if folder.is_dir() else ():
            try:
                n += _erase_from(path, tenant, erased)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("beeweave: archive %s not rewritten: %s", path, exc)
    return n


def _erase_from(path: Path, tenant: str, erased: Callable[[list[Event]], set[str]]) -> int:
    text, manifest = _verified_text(path)
    if manifest.get("tenant") != tenant:
        return 0
    lines = [json.loads(x) for x in text.splitlines()]
    kept: list[dict[str, Any]] = []
    n = 0
    for line in lines:
        events = [Event.from_record(r) for r in line["export"]["events"]]
        gone = erased(events)
        n += len(gone)
        rest = {e.id for e in events} - gone
        if rest:
            kept.append(_restricted(line, rest, frozenset(gone)) if gone else line)
    if not n:
        return 0
    if kept:
        write_archive(path, tenant, kept, float(manifest.get("created") or time.time()))
    else:
        path.unlink()
        manifest_path(path).unlink(missing_ok=True)
    return n


def import_archive(writer: StoreWriter, sessions: Sequence[ArchivedSession]) -> AppendResult:
    """Put archived events back, then the edges kept events had to them.  Events a
    purge erased since the archive was written stay out (``purged``).

    The events go back through the store's own import (``writer.store``): they are
    records as they were stored (redacted and scoped then), with their seq and status
    kept, which the writer's append would not keep.  The edges go through the writer."""
    store = writer.store
    total = AppendResult()
    for s in sessions:
        res = store.import_session(s.export)
        total.inserted += res.inserted
        total.duplicates += res.duplicates
        total.ids += res.ids
        total.purged += res.purged
        present = {e.id for e in store.get([e.src for e in s.incoming], include_inactive=True)}
        writer.link([e for e in s.incoming if e.src in present])
    return total


def parse_rule(text: str) -> RetentionRule:
    """``TYPES=DAYS``: ``raw=90``, ``retrieval=30``, ``tool_result+tool_invocation=14``.

    ``raw`` names the raw conversation (:data:`RAW_CONVERSATION`).
    """
    what, sep, days = text.partition("=")
    if not sep:
        raise ValueError(f"retention rule {text!r}: expected TYPES=DAYS, e.g. raw=90")
    types: set[EventType] = set()
    for name in filter(None, (n.strip() for n in what.split("+"))):
        if name == "raw":
            types |= RAW_CONVERSATION
            continue
        try:
            types.add(EventType(name))
        except ValueError:
            known = ", ".join(["raw", *(t.value for t in EventType)])
            raise ValueError(
                f"retention rule {text!r}: unknown type {name!r}; known: {known}"
            ) from None
    try:
        age = float(days)
    except ValueError:
        raise ValueError(f"retention rule {text!r}: {days!r} is not a number of days") from None
    return RetentionRule(frozenset(types), age)
