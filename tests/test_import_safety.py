"""Imports of untrusted export files, and servers that do not answer.

Every malformed file gets one line and exit 1 from ``beeweave import`` and writes
nothing; an artifact whose body does not hash to its key is refused on both backends;
an edge problem leaves no event behind; a wrong server fails within seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beeweave_core.errors import StoreError
from beeweave_core.events import Event, EventType, new_event_id
from beeweave_core.exports import parse_export, validate_export
from beeweave_core.payloads import sha256_text

from .conftest import BACKENDS, make_store

on_both = pytest.mark.parametrize("backend", BACKENDS)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BEEWEAVE_HOME": str(home), "BEEWEAVE_INDEX": "off"}
    return subprocess.run(
        [sys.executable, "-m", "beeweave_cli", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def a_session(store, sid: str = "greenhouse") -> dict:
    """A small real session whose tool result is big enough to become an artifact."""
    dump = "humidity 71%, soil 0.32 m3/m3; " * 4000
    u = Event(id=new_event_id(), session_id=sid, type=EventType.USER_MESSAGE,
              content="Water bed 4 at dawn")  # fmt: skip
    r = Event(id=new_event_id(), session_id=sid, type=EventType.TOOL_RESULT,
              content=dump, parents=[u.id])  # fmt: skip
    store.append([u, r])
    return store.export_session(sid)


@on_both
def test_valid_export_round_trips(backend, tmp_path, neo4j_if):
    store = make_store(backend, tmp_path)
    try:
        data = a_session(store)
        assert len(data["artifacts"]) == 1
        store.purge(session_id="greenhouse", tombstone=False)  # a move, not an erasure
        res = store.import_session(json.loads(json.dumps(data)))
        assert res.inserted == 2
        assert store.export_session("greenhouse") == data
    finally:
        store.close()


@on_both
def test_artifact_hash_mismatch_refused(backend, tmp_path, neo4j_if):
    """A forged body under a real digest would be served to later, honest events."""
    store = make_store(backend, tmp_path)
    try:
        data = a_session(store)
        sha = next(iter(data["artifacts"]))
        store.purge(session_id="greenhouse", tombstone=False)  # a move, not an erasure
        forged = {**data, "artifacts": {sha: "soil is dry everywhere"}}
        with pytest.raises(ValueError, match="does not match its SHA-256"):
            store.import_session(forged)
        assert store.get_artifact(sha) is None
        assert store.timeline("greenhouse", include_inactive=True) == []
    finally:
        store.close()


@on_both
def test_bad_edge_leaves_no_event(backend, tmp_path, neo4j_if):
    store = make_store(backend, tmp_path)
    try:
        data = a_session(store)
        store.purge(session_id="greenhouse", tombstone=False)  # a move, not an erasure
        src = data["events"][0]["id"]
        bad = {**data, "edges": [{"src": src, "dst": "x", "type": "LOVES"}]}
        with pytest.raises(ValueError, match="edge #0"):
            store.import_session(bad)
        assert store.timeline("greenhouse", include_inactive=True) == []
    finally:
        store.close()


@pytest.fixture
def neo4j_if(backend, request):
    """The Neo4j cases need the server; SQLite ones do not ask for it."""
    if backend == "neo4j":
        request.getfixturevalue("neo4j_uri")


# ----------------------------------------------------------------- the CLI, one line each
MALFORMED: dict[str, bytes] = {
    "top-level list": b"[1, 2, 3]",
    "top-level string": b'"beeweave"',
    "no events": json.dumps({"format": "beeweave.session/1", "session_id": "s"}).encode(),
    "events not a list": json.dumps(
        {"format": "beeweave.session/1", "session_id": "s", "events": {"a": 1}}
    ).encode(),
    "edges not a list": json.dumps(
        {"format": "beeweave.session/1", "session_id": "s", "events": [], "edges": "x"}
    ).encode(),
    "artifacts a list": json.dumps(
        {"format": "beeweave.session/1", "session_id": "s", "events": [], "artifacts": []}
    ).encode(),
    "deep nesting": b"[" * 200_000 + b"]" * 200_000,
    "not UTF-8": b'{"format": "\xff\xfe beeweave"}',
    "not JSON": b"format: beeweave.session/1",
    "event without a type": json.dumps(
        {"format": "beeweave.session/1", "session_id": "s", "events": [{"id": "e1"}]}
    ).encode(),
    "malformed checkpoint": json.dumps(
        {
            "format": "beeweave.session/1",
            "session_id": "s",
            "events": [],
            "checkpoints": [{"checkpoint_ns": "", "checkpoint_id": 7}],
        }
    ).encode(),
    "checkpoint blob not base64": json.dumps(
        {
            "format": "beeweave.session/1",
            "session_id": "s",
            "events": [],
            "checkpoints": [
                {
                    "checkpoint_ns": "",
                    "checkpoint_id": "c1",
                    "checkpoint": ["json", "%%"],
                    "metadata": {},
                    "channel_versions": {},
                }
            ],
        }
    ).encode(),
    "huge id echoed": json.dumps(
        {"format": "beeweave.session/1", "session_id": "s" * 100_000, "events": [{"x": 1}]}
    ).encode(),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_cli_import_malformed_is_one_line(case, tmp_path):
    path = tmp_path / "in.json"
    path.write_bytes(MALFORMED[case])
    proc = cli(tmp_path, "import", str(path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr[:2000]
    assert len(lines[0]) < 400
    assert "Traceback" not in proc.stderr
    assert "s" * 200 not in proc.stderr  # a bounded echo of the input


def test_parse_export_each_flaw_is_a_value_error():
    for raw in MALFORMED.values():
        with pytest.raises(ValueError):
            parse_export(raw)
    with pytest.raises(ValueError, match="top level is a list"):
        validate_export([])


def test_cli_export_into_missing_folder(tmp_path):
    proc = cli(tmp_path, "export", "s1", "-o", str(tmp_path / "nowhere" / "x.json"))
    assert proc.returncode == 1
    assert len([x for x in proc.stderr.splitlines() if x.strip()]) == 1


def test_export_file_is_private(tmp_path):
    from beeweave_core.weave import Weave

    with Weave.open(f"sqlite:///{tmp_path / 'beeweave.db'}", index=False) as weave:
        weave.emit("user_message", "prune the roses", session_id="garden")
        weave.flush()
    out = tmp_path / "garden.json"
    proc = cli(tmp_path, "export", "garden", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_mode & 0o077 == 0


def test_unreachable_server_fails_fast(tmp_path):
    from beeweave_core.weave import Weave

    t0 = time.monotonic()
    with pytest.raises(StoreError, match="not reachable"):
        Weave.open("bolt://127.0.0.1:1", index=False)
    assert time.monotonic() - t0 <= 5.5
    t0 = time.monotonic()
    proc = cli(tmp_path, "sessions", "--url", "bolt://127.0.0.1:1")
    assert proc.returncode == 1
    assert len([x for x in proc.stderr.splitlines() if x.strip()]) == 1
    assert time.monotonic() - t0 <= 8.0  # 5 s plus starting a Python process


def test_forged_digest_is_caught_before_any_write():
    body = "pump 2 runs 14 minutes"
    good = {"format": "beeweave.session/1", "session_id": "s", "events": [],
            "artifacts": {sha256_text(body): body}}  # fmt: skip
    assert validate_export(good).artifacts == {sha256_text(body): body}
    with pytest.raises(ValueError, match="not a SHA-256"):
        validate_export({**good, "artifacts": {"abc": body}})
