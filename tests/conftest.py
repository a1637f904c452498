"""Shared fixtures: real backends only.

SQLite tests get a fresh file in a tmp dir.  Neo4j tests talk to the server named by
``NEO4J_URI`` (``scripts/neo4j-test-server start`` prints it); each test gets its own
tenant, purged afterwards.  A Neo4j test **fails** when no server answers: the README
test command starts one, so a missing server is a broken setup, not a reason to skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core.backends.neo4j.auth import Credentials, auth_from_env
from beeweave_core.store import EventStore
from beeweave_core.weave import Weave

BACKENDS = ["sqlite", "neo4j"]


def neo4j_auth() -> Credentials | None:
    """Credentials from NEO4J_AUTH (``none`` or ``user/password``) or NEO4J_USER/PASSWORD,
    parsed by the same function as the CLI and the stores."""
    return auth_from_env()


@pytest.fixture(scope="session")
def neo4j_uri() -> str:
    """The URI of a reachable Neo4j, or a loud failure saying how to start one."""
    uri = os.environ.get("NEO4J_URI")
    if not uri:
        pytest.fail(
            "NEO4J_URI is not set: start a server with `eval $(scripts/neo4j-test-server start)` "
            "(the README test command does this) or point NEO4J_URI at any Neo4j 5",
            pytrace=False,
        )
    import neo4j

    try:
        with neo4j.GraphDatabase.driver(uri, auth=neo4j_auth()) as driver:
            driver.verify_connectivity()
    except Exception as exc:
        pytest.fail(f"Neo4j at {uri} is not reachable: {exc}", pytrace=False)
    return uri


@pytest.fixture(scope="session", autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A home of the test run's own unless one is set: nothing a test writes there (a
    spool, the redaction key, the list of archive folders) lands in the user's home."""
    if os.environ.get("BEEWEAVE_HOME"):
        yield
        return
    os.environ["BEEWEAVE_HOME"] = str(tmp_path_factory.mktemp("home"))
    try:
        yield
    finally:
        os.environ.pop("BEEWEAVE_HOME", None)


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _purge_tenant(store: EventStore) -> None:
    for s in store.sessions():
        store.purge(session_id=s.session_id)
    cleanup = getattr(store, "purge_tenant", None)
    if callable(cleanup):
        cleanup()


def make_store(backend: str, tmp_path: Path, tenant: str | None = None) -> EventStore:
    tenant = tenant or _tenant()
    if backend == "sqlite":
        from beeweave_core.backends.sqlite.events import SQLiteEventStore

        return SQLiteEventStore(tmp_path / "events.db", tenant=tenant)
    if backend == "neo4j":
        from beeweave_core.backends.neo4j.events import Neo4jEventStore

        return Neo4jEventStore(os.environ["NEO4J_URI"], tenant=tenant, auth=neo4j_auth())
    raise ValueError(backend)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[EventStore]:
    store = make_store("sqlite", tmp_path)
    yield store
    store.close()


@pytest.fixture
def neo4j_store(neo4j_uri: str, tmp_path: Path) -> Iterator[EventStore]:
    store = make_store("neo4j", tmp_path)
    yield store
    _purge_tenant(store)
    store.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Parametrises a test over every backend; Neo4j ones need the server."""
    if request.param == "neo4j":
        request.getfixturevalue("neo4j_uri")
    return request.param


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[EventStore]:
    """An empty store of each backend, with a tenant of its own."""
    s = make_store(backend, tmp_path)
    yield s
    if backend == "neo4j":
        _purge_tenant(s)
    s.close()


def store_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'weave.db'}"
    return os.environ["NEO4J_URI"]


@pytest.fixture
def weave_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Weave]]:
    """``weave_factory(backend="sqlite", tenant=None, **open_kw)`` → an open Weave.

    Every weave made is closed (and its Neo4j tenant purged) after the test.  Pass the
    same ``tenant`` (and backend) twice to get two weaves on the same data, e.g. to
    simulate a process restart.
    """
    made: list[tuple[Weave, str]] = []

    def factory(backend: str = "sqlite", tenant: str | None = None, **kw: Any) -> Weave:
        if backend == "neo4j":
            request.getfixturevalue("neo4j_uri")
            kw.setdefault("auth", neo4j_auth())
        kw.setdefault("spool_dir", tmp_path / "spool")
        w = Weave.open(store_url(backend, tmp_path), tenant=tenant or _tenant(), **kw)
        made.append((w, backend))
        return w

    yield factory
    purged: set[str] = set()
    for w, backend in reversed(made):
        if backend == "neo4j" and w.tenant not in purged:
            try:
                w.flush(10)
                _purge_tenant(w.store)
            except Exception:
                pass
            purged.add(w.tenant)
        w.close()
