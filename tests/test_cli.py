"""The ``beeweave`` command, run as a user would (a real process, a real store)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import neo4j_auth


def run(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BEEWEAVE_HOME": str(home), "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "beeweave_core.cli", *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    home = tmp_path_factory.mktemp("home")
    out = run(home, "demo", "--session", "demo-cli").stdout
    return home, "demo-cli", out


def test_demo_shows_what_was_kept(demo_home):
    home, sid, out = demo_home
    assert (home / "beeweave.db").exists()  # the embedded default, under BEEWEAVE_HOME
    assert "Captured 39 events" in out
    assert "Causal chain behind the schedule_job tool result" in out
    assert "CAUSED_BY" in out and "Yes, schedule it for 02:00 UTC." in out
    assert "artifact sha256:" in out  # the 100 kB tool output was kept whole, once
    assert "JOB-7731" in out  # recall answered from the stored run
    assert re.search(r"Full history: [\d,]+ tokens → assembled: [\d,]+", out)


def test_sessions_show_trace(demo_home):
    home, sid, _ = demo_home
    assert sid in run(home, "sessions").stdout
    assert len(run(home, "show", sid, "--last", "3").stdout.splitlines()) < 20
    timeline = run(home, "show", sid).stdout
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    row = next(x for x in timeline.splitlines() if "tool_result" in x and "JOB-7731" in x)
    tree = run(home, "trace", re.search(uuid, row).group()).stdout
    assert "CAUSED_BY tool_invocation" in tree and "Yes, schedule it for 02:00 UTC." in tree


def test_export_import_round_trip(demo_home, tmp_path):
    home, sid, _ = demo_home
    out = tmp_path / "s.json"
    run(home, "export", sid, "-o", str(out))
    data = json.loads(out.read_text())
    assert data["session_id"] == sid and len(data["events"]) >= 39
    other = tmp_path / "other-home"
    assert "imported" in run(other, "import", str(out)).stdout
    again = tmp_path / "again.json"
    run(other, "export", sid, "-o", str(again))
    assert json.loads(again.read_text())["events"] == data["events"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "no-such-session"), "no session 'no-such-session'"),
        (("trace", "no-such-event"), "no event 'no-such-event'"),
        (("export", "no-such-session"), "no session 'no-such-session'"),
        (("sessions", "--url", "mysql://x"), "unsupported store URL"),
        (("demo", "--url", "sqlite://relative"), "bad SQLite URL"),
    ],
)
def test_errors_are_one_clear_line_and_a_non_zero_exit(tmp_path, args, message):
    proc = run(tmp_path, *args, check=False)
    assert proc.returncode == 1
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


def test_import_of_a_bad_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run(tmp_path, "import", str(bad), check=False)
    assert proc.returncode == 1 and "cannot import" in proc.stderr and "not JSON" in proc.stderr


def test_demo_on_neo4j(neo4j_uri, tmp_path):
    auth = neo4j_auth()
    extra = ["--auth", f"{auth[0]}:{auth[1]}"] if auth else []
    tenant = f"cli-{os.getpid()}"
    out = run(tmp_path, "demo", "--url", neo4j_uri, "--tenant", tenant, *extra).stdout
    assert "Captured 39 events" in out and "CAUSED_BY" in out
    from beeweave_core.backends.neo4j.events import Neo4jEventStore

    with Neo4jEventStore(neo4j_uri, tenant=tenant, auth=auth) as store:
        (stats,) = store.sessions()
        assert stats.counts["tool_result"] == 5 and stats.counts["user_message"] == 6
        store.purge_tenant()
