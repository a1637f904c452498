"""The capture bus's files: its write-ahead spool, overflow, and dead letters.

Every event the bus accepts is appended to this process's spool within one writer
tick, before the store is asked to take it; the spool is cut back once the store
has everything in it.  So an event is on disk whether the store answers or not,
and a crash leaves a spool that the next bus for the same store replays.

Each process keeps its own spool file and holds an exclusive ``flock`` on it while
alive, so several processes can share one folder: a spool whose lock can be taken
belongs to a process that died, and is replayed (ids are fixed before spooling,
so replaying twice stores nothing twice).  Files are read line by line, in
chunks, never loaded whole.  Names are ``<key>.<pid>-<random>.<kind>.jsonl`` where
``key`` is a hash of the store URL and tenant: no raw id reaches a path.

Line format (spool and overflow): ``{"n": <order in the process>, "event": {...}}``.
Dead letters: ``{"at": ts, "error": reason, "id", "session_id", "user_id", "item"}``.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from beeweave_core.private import FILE_MODE, open_private, private_dir

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process spool claiming
    fcntl = None  # type: ignore[assignment]

SPOOL, OVERFLOW, DRAINING = "spool", "overflow", "overflow-draining"
#: A record's (id, session_id, user_id): what a purge matches pending entries on.
Match = Callable[[str | None, str | None, str | None], bool]


def _lock(fd: int, *, block: bool) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        return True
    except OSError:
        return False


def read_lines(path: Path, start: int = 0, end: int | None = None) -> Iterator[tuple[bytes, int]]:
    """Complete lines of ``path`` from byte ``start`` (to ``end``), with the offset after each."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - a generator keeps it open while iterated
    except FileNotFoundError:
        return
    with f:
        f.seek(start)
        pos = start
        for line in f:
            if not line.endswith(b"\n") or (end is not None and pos + len(line) > end):
                return  # a half-written last line (crash mid-write) is not read
            pos += len(line)
            yield line, pos


def chunks(
    path: Path, size: int, start: int = 0, end: int | None = None
) -> Iterator[tuple[list[bytes], int]]:
    """``read_lines`` in lists of ``size`` lines (what one store call takes)."""
    batch: list[bytes] = []
    pos = start
    for line, pos in read_lines(path, start, end):
        batch.append(line)
        if len(batch) >= size:
            yield batch, pos
            batch = []
    if batch:
        yield batch, pos


def encode(n: int, record: dict[str, Any]) -> bytes:
    """One spool line.  ASCII-escaped: text with lone surrogates round-trips exactly."""
    return (json.dumps({"n": n, "event": record}) + "\n").encode("ascii")


def keys_of(record: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(id, session_id, user_id) of an event record, for purge matching."""
    meta = record.get("meta")
    user = meta.get("user_id") if isinstance(meta, dict) else None
    return record.get("id"), record.get("session_id"), user


def line_matches(line: bytes, match: Match) -> bool:
    try:
        rec = json.loads(line)
    except ValueError:
        return False
    event = rec.get("event") if isinstance(rec, dict) else None
    ids = keys_of(event) if isinstance(event, dict) else keys_of(rec)
    return match(*(x if isinstance(x, str) else None for x in ids))


def filter_file(path: Path, drop: Callable[[bytes], bool], start: int = 0) -> int:
    """Rewrite ``path`` from byte ``start`` without the lines ``drop`` picks, in place.

    In place (truncate and copy back) so an open handle and a held lock stay valid.
    Returns the number of lines dropped.
    """
    if not path.exists():
        return 0
    tmp = path.with_name(path.name + ".rewrite")
    dropped = 0
    with open_private(tmp, "wb") as out:
        for line, _ in read_lines(path, start):
            if drop(line):
                dropped += 1
            else:
                out.write(line)
    if dropped == 0 and start == 0:
        tmp.unlink(missing_ok=True)
        return 0
    with open(path, "r+b") as f, open(tmp, "rb") as src:
        f.truncate(0)
        while block := src.read(1 << 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    tmp.unlink(missing_ok=True)
    return dropped


class Spool:
    """This process's append-only spool, locked while the process lives."""

    def __init__(self, folder: str | os.PathLike[str], key: str) -> None:
        self.folder = private_dir(folder)
        self.key = key
        self.tag = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.path = self.file(SPOOL)
        # Locked under a name no other process globs, then renamed into place: a spool
        # is never visible unlocked, so no other process can take it for an orphan.
        fresh = self.path.with_name(self.path.name + ".new")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        os.fchmod(fd, FILE_MODE)
        _lock(fd, block=True)
        os.replace(fresh, self.path)
        self._f: IO[bytes] = os.fdopen(fd, "ab", buffering=0)
        self.end = 0
        self._synced = time.monotonic()

    def file(self, kind: str, tag: str | None = None) -> Path:
        return self.folder / f"{self.key}.{tag or self.tag}.{kind}.jsonl"

    def append(self, data: bytes) -> int:
        """Write ``data`` (whole lines); the new end offset.  fsync at most once a second
        (a killed process loses nothing written; fsync only guards a power cut)."""
        if data:
            self._f.write(data)
            self.end += len(data)
            now = time.monotonic()
            if now - self._synced > 1.0:
                os.fsync(self._f.fileno())
                self._synced = now
        return self.end

    def reset(self) -> None:
        """Everything in the file is stored: cut it back to empty."""
        os.ftruncate(self._f.fileno(), 0)
        self.end = 0

    def rewrite(self, match: Match, start: int) -> int:
        """Drop what a purge names, and what is stored already (before ``start``)."""
        dropped = filter_file(self.path, lambda line: line_matches(line, match), start)
        self.end = self.path.stat().st_size
        return dropped

    def close(self) -> None:
        """Release the lock; an empty spool is removed, a non-empty one left for replay."""
        try:
            os.fsync(self._f.fileno())
            if self.end == 0 and os.fstat(self._f.fileno()).st_size == 0:
                self.path.unlink(missing_ok=True)
        finally:
            self._f.close()

    def orphans(self) -> list[tuple[Path, IO[bytes] | None]]:
        """Spool and overflow files left by dead processes for this key, oldest data first,
        each with the handle that holds its lock (keep it until the file is replayed)."""
        found: list[tuple[Path, IO[bytes] | None]] = []
        tags = {p.name.split(".")[1] for p in self.folder.glob(f"{self.key}.*.jsonl")}
        for tag in sorted(tags - {self.tag}):
            spool = self.file(SPOOL, tag)
            handle = None
            if spool.exists():
                try:
                    handle = open(spool, "rb")  # noqa: SIM115 - held until replayed
                except FileNotFoundError:
                    continue
                if not _lock(handle.fileno(), block=False):
                    handle.close()  # a live process owns it
                    continue
                found.append((spool, handle))
            for kind in (DRAINING, OVERFLOW):
                if self.file(kind, tag).exists():
                    found.append((self.file(kind, tag), None))
        return found


class DeadLetters:
    """Refused events with their reasons; purge and retention rewrite it under a lock."""

    def __init__(self, path: Path, *, retention_days: float | None) -> None:
        self.path = path
        self._lockfile = path.with_name(path.name + ".lock")
        if retention_days is not None and path.exists():
            cutoff = time.time() - retention_days * 86_400
            self.drop(lambda rec: not isinstance(rec.get("at"), (int, float)) or rec["at"] < cutoff)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lockfile, os.O_WRONLY | os.O_CREAT, FILE_MODE)
        try:
            _lock(fd, block=True)
            yield
        finally:
            os.close(fd)

    def add(self, records: Sequence[dict[str, Any]]) -> None:
        """Append ``records`` under one lock and one open (a flood of bad input is
        written at file speed, not one lock per line)."""
        if not records:
            return
        text = "".join(json.dumps(r, default=str) + "\n" for r in records)
        with self._locked(), open_private(self.path, "a") as f:
            f.write(text)

    def drop(self, pick: Callable[[dict[str, Any]], bool]) -> int:
        """Remove the entries ``pick`` selects (purge, retention)."""

        def dropping(line: bytes) -> bool:
            try:
                rec = json.loads(line)
            except ValueError:
                return False
            return isinstance(rec, dict) and pick(rec)

        with self._locked():
            return filter_file(self.path, dropping)

    def forget(self, match: Match) -> int:
        return self.drop(
            lambda rec: match(
                *(
                    rec.get(k) if isinstance(rec.get(k), str) else None
                    for k in ("id", "session_id", "user_id")
                )
            )
        )
