"""The backend seam: one URL → one backend that opens what lives beside the events.

Real SQLite files, real ``:memory:`` databases and the real Neo4j server; the auth
cases run the one parser through each of its users (CLI, test fixture, store).
"""

from __future__ import annotations

import gc
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from beeweave_core.backends import Backend, open_backend
from beeweave_core.backends.neo4j import tx as neo4j_tx
from beeweave_core.backends.neo4j.auth import auth_from_env, driver_auth, parse_auth
from beeweave_core.checkpoints import CheckpointRow, CheckpointStore
from beeweave_core.embeddings import default_embeddings
from beeweave_core.errors import StoreClosed
from beeweave_core.index.base import EmbeddingIdentity
from beeweave_core.items import ItemIndex, ItemRow
from beeweave_core.weave import Weave, open_store

from .conftest import neo4j_auth


def _checkpoint(thread: str, cid: str) -> CheckpointRow:
    return CheckpointRow(
        thread_id=thread,
        checkpoint_ns="",
        checkpoint_id=cid,
        parent_checkpoint_id=None,
        checkpoint=("json", b'{"v": 1}'),
        metadata={"source": "input", "step": -1},
        channel_versions={},
    )


def _item(key: str) -> ItemRow:
    now = time.time()
    return ItemRow(("notes", "trips"), key, {"text": "ferry leaves at dawn"}, "ev-1", now, now)


def _round_trip(writer_cp: CheckpointStore, reader_cp: CheckpointStore, writer_it: ItemIndex,
                reader_it: ItemIndex) -> tuple[bool, bool]:  # fmt: skip
    """Write through one pair of stores, read through the other: did each write show?"""
    writer_cp.put(_checkpoint("th-1", "cp-1"), {})
    writer_it.upsert(_item("k1"))
    seen_cp = reader_cp.get("th-1", "", "cp-1") is not None
    seen_it = reader_it.get("notes\x1ftrips", "k1", now=time.time()) is not None
    return seen_cp, seen_it


# ---------------------------------------------------------------- SQLite
def test_sqlite_file_keeps_everything_in_one_file(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    backend = open_backend(f"sqlite:///{db}", tenant="acme")
    try:
        assert isinstance(backend, Backend)
        assert backend.tenant == "acme" and backend.events.tenant == "acme"
        cp, items = backend.checkpoints(), backend.items()
        assert _round_trip(cp, backend.checkpoints(), items, backend.items()) == (True, True)
        tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
        assert {"events", "lg_checkpoints", "lg_store_items"} <= tables
        assert backend.vector_kind() == "chroma"
        assert backend.vector_kind("CHROMA", "/elsewhere") == "chroma"
        assert backend.chroma_location() == f"{db}.chroma"
        assert backend.required_packages() == ["chromadb"]
    finally:
        backend.close()
    with pytest.raises(StoreClosed):  # the backend closed what it opened
        cp.get("th-1", "", "cp-1")
    with pytest.raises(RuntimeError, match="closed"):
        backend.items()


def test_sqlite_file_has_no_neo4j_vector_index(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        with pytest.raises(ValueError, match="needs a neo4j store"):
            backend.vector_kind("neo4j")
        with pytest.raises(ValueError, match="unknown index 'faiss'"):
            backend.required_packages(kind="faiss")
    finally:
        backend.close()


def test_memory_database_is_shared_by_checkpoints_and_items() -> None:
    backend = open_backend("sqlite:///:memory:", tenant="mem")
    other = open_backend("sqlite:///:memory:", tenant="mem")
    try:
        seen = _round_trip(backend.checkpoints(), backend.checkpoints(), backend.items(),
                           backend.items())  # fmt: skip
        assert seen == (True, True)
        # a second :memory: backend is a database of its own: nothing leaks across
        assert other.checkpoints().get("th-1", "", "cp-1") is None
        assert other.items().get("notes\x1ftrips", "k1", now=time.time()) is None
        assert backend.chroma_location() is None  # vectors stay in memory too
    finally:
        backend.close()
        other.close()


def test_memory_weave_items_and_checkpoints_see_each_others_events(tmp_path: Path) -> None:
    """The item store writes events and pointers; on ``:memory:`` both must be one database."""
    from beeweave_core.items import ItemStore

    with Weave.open("sqlite:///:memory:", spool_dir=tmp_path / "sp", index=False) as weave:
        row = ItemStore(weave).put(("prefs",), "tea", {"kind": "oolong"}, text="likes oolong")
        assert [e.id for e in weave.store.get([row.event_id])] == [row.event_id]
        assert weave.backend.items().get("prefs", "tea", now=time.time()) is not None


def test_open_store_closes_its_own_connection(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'e.db'}", tenant="x")
    assert store.sessions() == []
    store.close()
    with pytest.raises(StoreClosed):
        store.sessions()


# ----------------------------------------------------------------- Neo4j
@pytest.fixture
def neo4j_backend(neo4j_uri: str) -> Iterator[Backend]:
    backend = open_backend(neo4j_uri, tenant=f"t-{uuid.uuid4().hex[:12]}", auth=neo4j_auth())
    yield backend
    for part in (backend.checkpoints(), backend.items()):
        part.purge_tenant()  # type: ignore[attr-defined]
    backend.close()


def test_neo4j_parts_share_the_driver(neo4j_backend: Backend) -> None:
    driver = neo4j_backend.events.driver  # type: ignore[attr-defined]
    cp, items = neo4j_backend.checkpoints(), neo4j_backend.items()
    assert cp.driver is driver and items.driver is driver  # type: ignore[attr-defined]
    seen = _round_trip(cp, neo4j_backend.checkpoints(), items, neo4j_backend.items())
    assert seen == (True, True)
    assert neo4j_backend.vector_kind() == "neo4j"
    assert neo4j_backend.vector_kind(vector_url="http://127.0.0.1:1") == "chroma"
    assert neo4j_backend.required_packages() == []
    identity = EmbeddingIdentity.of(default_embeddings())
    vectors = neo4j_backend.vectors(identity)
    assert type(vectors).__name__ == "Neo4jVectorIndex" and vectors.driver is driver  # type: ignore[attr-defined]


def test_neo4j_weave_has_a_neo4j_backend(neo4j_uri: str, tmp_path: Path) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    with Weave.open(neo4j_uri, tenant=tenant, auth=neo4j_auth(), spool_dir=tmp_path,
                    index=False) as weave:  # fmt: skip
        assert type(weave.backend).__name__ == "Neo4jBackend"
        assert weave.store is weave.backend.events


# -------------------------------------------------------------- bad URLs
BAD_URLS = [
    (123, "must be a string"),
    ("sqlite://agent.db", "bad SQLite URL"),
    ("sqlite:///", "no file path"),
    ("postgres://db.example/agent", "unsupported store URL"),
    ("bolt://", "no host"),
    ("neo4j://:7687", "no host"),
    ("bolt://graph.example:seven", "port must be a number"),
    ("neo4j://[::1", "bad store URL"),
    ("sqlite\n:///x.db", "bad SQLite URL"),
]


@pytest.mark.parametrize(("url", "why"), BAD_URLS)
def test_bad_url_is_a_one_line_value_error(url: object, why: str) -> None:
    with pytest.raises(ValueError, match=why) as caught:
        open_backend(url)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ auth
AUTH_CASES = [
    ("none", None),
    ("NONE", None),
    ("neo4j:secret", ("neo4j", "secret")),
    ("neo4j/secret", ("neo4j", "secret")),
    ("neo4j:pa:ss/wd", ("neo4j", "pa:ss/wd")),
    ("neo4j/pa:ss/wd", ("neo4j", "pa:ss/wd")),
    ("reader:/slash-first", ("reader", "/slash-first")),
    ("reader/:colon-first", ("reader", ":colon-first")),
    ("admin:", ("admin", "")),
]


@pytest.mark.parametrize(("text", "expected"), AUTH_CASES)
def test_auth_is_parsed_the_same_everywhere(
    text: str, expected: tuple[str, str] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from beeweave_cli.common import credentials as _auth

    monkeypatch.delenv("NEO4J_USER", raising=False)
    monkeypatch.delenv("NEO4J_PASSWORD", raising=False)
    assert parse_auth(text) == expected
    assert _auth(text) == expected  # the CLI's --auth
    assert driver_auth(text) == expected  # what a store hands the driver
    monkeypatch.setenv("NEO4J_AUTH", text)
    assert neo4j_auth() == expected  # the tests' fixture
    assert _auth(None) == expected  # the CLI without --auth


@pytest.mark.parametrize("text", ["hunter2", ":hunter2", "/hunter2", ""])
def test_bad_auth_is_a_value_error_that_hides_the_secret(text: str) -> None:
    with pytest.raises(ValueError, match="bad Neo4j auth") as caught:
        parse_auth(text)
    assert "\n" not in str(caught.value) and "hunter2" not in str(caught.value)


def test_auth_falls_back_to_user_and_password_variables() -> None:
    env = {"NEO4J_USER": "svc", "NEO4J_PASSWORD": "p:w/d"}
    assert auth_from_env(None, env) == ("svc", "p:w/d")
    assert auth_from_env("other/x", env) == ("other", "x")  # explicit wins
    assert auth_from_env(None, {}) is None


def test_store_accepts_auth_text(neo4j_uri: str) -> None:
    """The store parses text with the same function (the test server ignores the password)."""
    from beeweave_core.backends.neo4j.events import Neo4jEventStore

    store = Neo4jEventStore(neo4j_uri, tenant=f"t-{uuid.uuid4().hex[:8]}", auth="neo4j:pa:ss/wd")
    try:
        assert store.sessions() == []
    finally:
        store.close()


# ------------------------------------------------------ schema set-up cache
def test_schema_cache_forgets_a_collected_driver(neo4j_uri: str) -> None:
    """Keyed weakly: a new driver never inherits a dead one's "already done" (ids recur)."""
    import neo4j

    statements = ("CREATE INDEX beeweave_test_probe IF NOT EXISTS FOR (n:BwProbe) ON (n.k)",)
    driver = neo4j.GraphDatabase.driver(neo4j_uri, auth=neo4j_auth())
    neo4j_tx.ensure_schema(driver, None, statements)
    before = len(neo4j_tx.SCHEMA_DONE)
    assert driver in neo4j_tx.SCHEMA_DONE
    driver.close()
    del driver
    gc.collect()
    assert len(neo4j_tx.SCHEMA_DONE) <= before - 1  # (other dead drivers may go too)


def test_driver_tokens_and_pairs_pass_through_unparsed() -> None:
    import neo4j

    token = neo4j.basic_auth("svc", "a:b/c")
    assert driver_auth(token) is token
    assert driver_auth(("svc", "a:b/c")) == ("svc", "a:b/c")
    assert driver_auth(None) is None
