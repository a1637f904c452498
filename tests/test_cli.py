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
        [sys.executable, "-m", "beeweave_cli", *args],
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
def test_errors_are_one_clear_line_and_a_non_zero_exit(small_home, args, message):
    proc = run(small_home, *args, check=False)
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


# ------------------------------------------------------------ JSON, purge, forget
@pytest.fixture
def small_home(tmp_path: Path) -> Path:
    """Two users' sessions, written through the real API, vectors off for speed."""
    from beeweave_core.weave import Weave

    with Weave.open(f"sqlite:///{tmp_path / 'beeweave.db'}", index=False) as weave:
        for i in range(3):
            weave.emit("user_message", f"repot fern {i}", session_id="plants",
                       meta={"user_id": "iris"})  # fmt: skip
        weave.emit("user_message", "tune the cello", session_id="music", meta={"user_id": "otto"})
        weave.emit("user_message", "and the ficus", session_id="music", meta={"user_id": "iris"})
        assert weave.flush()
    return tmp_path


def test_read_commands_print_json(small_home):
    rows = json.loads(run(small_home, "sessions", "--json").stdout)
    assert {r["session_id"]: r["events"] for r in rows} == {"plants": 3, "music": 2}
    events = json.loads(run(small_home, "show", "plants", "--last", "2", "--json").stdout)
    assert [e["content"] for e in events] == ["repot fern 1", "repot fern 2"]
    chain = json.loads(run(small_home, "trace", events[0]["id"], "--json").stdout)
    assert chain[0]["depth"] == 0 and chain[0]["event"]["id"] == events[0]["id"]


@pytest.mark.parametrize("last", ["0", "-3"])
def test_show_last_must_be_positive(small_home, last):
    proc = run(small_home, "show", "plants", "--last", last, check=False)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "--last" in lines[0]


def test_purge_asks_and_refuses_without_a_terminal(small_home):
    proc = run(small_home, "purge", "--session", "plants", check=False)
    assert proc.returncode == 1 and "--yes" in proc.stderr
    assert json.loads(run(small_home, "show", "plants", "--json").stdout)  # nothing changed


def test_purge_session_and_user(small_home):
    assert "purged 3" in run(small_home, "purge", "--session", "plants", "--yes").stdout
    assert run(small_home, "show", "plants", check=False).returncode == 1
    assert "purged 1" in run(small_home, "purge", "--user", "iris", "--yes").stdout
    left = json.loads(run(small_home, "show", "music", "--all", "--json").stdout)
    assert [e["content"] for e in left] == ["tune the cello"]


def test_forget_hides_but_keeps_for_audit(small_home):
    first = json.loads(run(small_home, "show", "plants", "--json").stdout)[0]["id"]
    run(small_home, "forget", first, "--reason", "typo", "--yes")
    visible = json.loads(run(small_home, "show", "plants", "--json").stdout)
    assert first not in {e["id"] for e in visible}
    audit = json.loads(run(small_home, "show", "plants", "--all", "--json").stdout)
    gone = next(e for e in audit if e["id"] == first)
    assert gone["status"] == "invalidated" and gone["status_reason"] == "typo"
    proc = run(small_home, "forget", "no-such-event", "--yes", check=False)
    assert proc.returncode == 1


def test_export_import_resumes_a_langgraph_thread(tmp_path):
    """Checkpoints travel with the session: the imported thread resumes with get_state."""
    from langgraph.prebuilt import create_react_agent

    from beeweave_core.weave import Weave
    from beeweave_langchain.checkpoint import BeeWeaveCheckpointer

    from .langchain_helpers import TOOLS, fake_model

    def agent_on(home: Path, start: int):
        weave = Weave.open(f"sqlite:///{home / 'beeweave.db'}", index=False)
        saver = BeeWeaveCheckpointer.from_weave(weave)
        model = fake_model(2, start)  # FAKE LLM (labelled): scripted tool-calling turns
        return weave, create_react_agent(model, TOOLS, checkpointer=saver)

    config = {"configurable": {"thread_id": "porch-repair"}}
    source, target = tmp_path / "a", tmp_path / "b"
    source.mkdir(), target.mkdir()
    weave, agent = agent_on(source, 0)
    for text in ("quote for porch boards", "use cedar, not pine"):
        agent.invoke({"messages": [("user", text)]}, config)
    before = agent.get_state(config)
    weave.close()

    out = tmp_path / "thread.json"
    run(source, "export", "porch-repair", "-o", str(out))
    assert json.loads(out.read_text())["checkpoints"]
    assert "checkpoints" in run(target, "import", str(out)).stdout

    weave, agent = agent_on(target, 2)
    try:
        after = agent.get_state(config)
        assert after.values["messages"] == before.values["messages"]
        assert (
            after.config["configurable"]["checkpoint_id"]
            == (before.config["configurable"]["checkpoint_id"])
        )
        agent.invoke({"messages": [("user", "and paint it green")]}, config)
        assert len(agent.get_state(config).values["messages"]) > len(after.values["messages"])
    finally:
        weave.close()


def test_tombstones_list_and_lift(small_home):
    run(small_home, "purge", "--session", "plants", "--yes")
    rows = json.loads(run(small_home, "tombstones", "list", "--json").stdout)
    assert [(r["kind"], r["value"]) for r in rows] == [("session", "plants")]
    proc = run(small_home, "tombstones", "lift", "--session", "plants", check=False)
    assert proc.returncode == 1 and "--yes" in proc.stderr  # asks first
    out = run(small_home, "tombstones", "lift", "--session", "plants", "--yes").stdout
    assert "lifted the tombstone of session 'plants'" in out
    assert json.loads(run(small_home, "tombstones", "list", "--json").stdout) == []
    proc = run(small_home, "tombstones", "lift", "--session", "plants", "--yes", check=False)
    assert proc.returncode == 1 and "no tombstone for session 'plants'" in proc.stderr


# ------------------------------------------------------------ first contact (issue 33)
READS = [("sessions",), ("show", "s1"), ("trace", "e1"), ("stats",), ("search", "fern"),
         ("export", "s1", "-o", "out.json"), ("purge", "--session", "s1", "--yes"),
         ("forget", "e1", "--yes")]  # fmt: skip


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_reading_a_store_that_is_not_there_creates_nothing(tmp_path, args):
    home, missing = tmp_path / "home", tmp_path / "nonexistent" / "dir" / "x.db"
    proc = subprocess.run(
        [sys.executable, "-m", "beeweave_cli", *args, "--url", f"sqlite:///{missing}"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "BEEWEAVE_HOME": str(home), "COLUMNS": "200"},
    )  # fmt: skip
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "no store at" in lines[0], proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder, database, spool


@pytest.mark.parametrize(
    "target", [("--session", "nope"), ("--user", "nobody"), ("--event", "no-such-id")]
)
def test_purging_what_is_not_there_fails_like_show(small_home, target):
    proc = run(small_home, "purge", *target, "--yes", check=False)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "no " in lines[0]
    assert len(json.loads(run(small_home, "sessions", "--json").stdout)) == 2  # nothing purged


def test_search_recalls_with_session_and_user_filters(small_home):
    hits = json.loads(run(small_home, "search", "fern", "--session", "plants", "--json").stdout)
    assert hits and {h["session_id"] for h in hits} == {"plants"}
    assert "repot fern" in hits[0]["content"] and hits[0]["score"] > 0
    mine = json.loads(run(small_home, "search", "cello", "--user", "otto", "--json").stdout)
    assert mine[0]["content"] == "tune the cello"  # otto's sessions: music only
    assert {h["session_id"] for h in mine} == {"music"}
    table = run(small_home, "search", "ficus", "-k", "1").stdout
    assert "and the ficus" in table and "music" in table
    assert run(small_home, "search", "x", "-k", "0", check=False).returncode == 1


def test_trace_echoes_a_huge_id_bounded(small_home):
    proc = run(small_home, "trace", "e" * 100_000, check=False)
    assert proc.returncode == 1 and len(proc.stderr) < 300 and "100,002 chars" in proc.stderr
