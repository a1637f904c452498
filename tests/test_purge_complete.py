"""A purge leaves no copy of the text: not in the graph, the full-text index, the WAL,
the vector index, nor anywhere else under the home folder; and it does not come back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from beeweave_core.weave import Weave

from .conftest import neo4j_auth

#: Made-up words that appear nowhere else, so any byte match is a leak.
SECRET_WORDS = ("zorblatt", "quintessa", "vermillionkestrel")


def capture_secrets(weave: Weave) -> None:
    weave.emit("user_message", "my locker code is zorblatt quintessa 8841", session_id="locker")
    weave.emit("tool_result", "log line " * 12_000 + "vermillionkestrel", session_id="locker")
    weave.emit("user_message", "water the tomatoes on Friday", session_id="garden")
    assert weave.flush()
    assert weave.indexer is not None and weave.indexer.sync(120)


def leaks(home: Path) -> list[str]:
    found = []
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [
                f"{w} in {path.relative_to(home)}" for w in SECRET_WORDS if w.encode() in data
            ]
    return found


def test_sqlite_purge_leaves_no_file_with_the_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    with Weave.open(url, spool_dir=tmp_path / "spool") as weave:
        capture_secrets(weave)
        assert weave.retrieve("locker code", k=3)[0].event.session_id == "locker"
        assert leaks(tmp_path)  # the probe can see them before the purge
        assert weave.purge(session_id="locker") == 2
        assert weave.retrieve("zorblatt locker code", k=5, session_id="locker") == []
    assert leaks(tmp_path) == []
    # a restart (a new process: this one still has the words in freed memory, which
    # hnswlib may persist as the unused part of its buffers) brings nothing back
    proc = subprocess.run([sys.executable, "-c", RESTART, url, str(tmp_path / "spool")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "garden", proc.stderr[-2000:]
    assert leaks(tmp_path) == []


RESTART = """
import sys
from beeweave_core.weave import Weave
with Weave.open(sys.argv[1], spool_dir=sys.argv[2]) as weave:
    assert weave.indexer is not None and weave.indexer.sync(120)
    assert weave.store.timeline("locker", include_inactive=True) == []
    print(" ".join(h.event.session_id for h in weave.retrieve("tomatoes", k=3)))
"""


def test_neo4j_purge_removes_nodes_and_vectors(neo4j_uri: str, tmp_path: Path) -> None:
    import uuid

    tenant = f"t-{uuid.uuid4().hex[:10]}"
    with Weave.open(neo4j_uri, auth=neo4j_auth(), tenant=tenant,
                    spool_dir=tmp_path / "spool") as weave:  # fmt: skip
        capture_secrets(weave)
        driver = weave.store.driver  # type: ignore[attr-defined]

        def holding() -> int:
            records, _, _ = driver.execute_query(
                "MATCH (n) WHERE n.tenant = $t AND any(k IN keys(n) WHERE n[k] IS :: STRING "
                "AND (n[k] CONTAINS 'zorblatt' OR n[k] CONTAINS 'vermillionkestrel')) "
                "RETURN count(n) AS n",
                t=tenant,
            )
            return int(records[0]["n"])

        assert holding() >= 2  # the probe sees the event and the artifact
        weave.purge(session_id="locker")
        assert holding() == 0
        assert weave.retrieve("locker code zorblatt", k=5, session_id="locker") == []
        weave.purge(session_id="garden")
    assert leaks(tmp_path) == []


@pytest.mark.parametrize("words", [SECRET_WORDS])
def test_probe_finds_what_is_there(tmp_path: Path, words: tuple[str, ...]) -> None:
    """The leak probe itself can fail: a file holding a word is reported."""
    (tmp_path / "x.bin").write_bytes(b"\x00" + words[0].encode() + b"\x00")
    assert leaks(tmp_path) == [f"{words[0]} in x.bin"]


def test_store_item_and_checkpoints_purged_when_asked(tmp_path: Path) -> None:
    """``delete`` keeps an item's history for audit; ``purge`` removes every version,
    and ``purge(checkpoints=True)`` takes the LangGraph thread with the session."""
    from langgraph.checkpoint.base import empty_checkpoint

    from beeweave_langchain.checkpoint import BeeWeaveCheckpointer
    from beeweave_langchain.store import BeeWeaveStore

    url = f"sqlite:///{tmp_path / 'memory.db'}"
    with Weave.open(url, spool_dir=tmp_path / "spool", index=False) as weave:
        store = BeeWeaveStore(weave=weave)
        store.put(("users", "u1"), "locker", {"code": "zorblatt quintessa"})
        store.put(("users", "u1"), "locker", {"code": "vermillionkestrel"})
        assert store.get(("users", "u1"), "locker") is not None
        assert store.purge(("users", "u1"), "locker") == 2
        assert store.get(("users", "u1"), "locker") is None

        saver = BeeWeaveCheckpointer.from_weave(weave)
        config = {"configurable": {"thread_id": "locker", "checkpoint_ns": ""}}
        saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert saver.get_tuple(config) is not None
        weave.emit("user_message", "hello", session_id="locker")
        weave.purge(session_id="locker", checkpoints=True)
        assert saver.get_tuple(config) is None
    assert leaks(tmp_path) == []
