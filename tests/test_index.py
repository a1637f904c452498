"""Vector indexes (Chroma embedded, a real ``chroma run`` server, Neo4j), chunking, indexer.

Real parts only: the offline MiniLM model embeds every text, Chroma runs embedded
and as a server process on a loopback port, Neo4j is the test server.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import socket
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core.embeddings import MiniLMEmbeddings, default_embeddings
from beeweave_core.events import Event, EventType
from beeweave_core.index import Chunk, EmbeddingIdentity, EmbeddingMismatch, IndexFilter
from beeweave_core.index.base import IndexState
from beeweave_core.index.chroma import ChromaVectorIndex, close_client, make_client
from beeweave_core.index.chunking import ChunkPolicy, chunk_event, embed_chunks, embed_query
from beeweave_core.weave import Weave

from .conftest import neo4j_auth

T0 = 1_700_000_000.0
IDENT = EmbeddingIdentity("all-MiniLM-L6-v2-int8", "test", "plain")

TEXTS = {
    "etl": ("s1", "The nightly ETL job copies the orders table into the warehouse."),
    "cost": ("s1", "Estimated monthly cost is 181 dollars."),
    "pets": ("s2", "My dog loves long walks in the park."),
    "food": ("s2", "I baked a coconut cake for my sister's birthday."),
}


def event(key: str, **kw: Any) -> Event:
    sid, text = TEXTS[key]
    base = {"id": f"ev-{key}", "session_id": sid, "type": EventType.USER_MESSAGE,
            "content": text, "ts": T0 + list(TEXTS).index(key) * 100, "seq": list(TEXTS).index(key),
            "meta": {"user_id": "u-" + sid, "agent_id": "a1"}}  # fmt: skip
    base.update(kw)
    return Event(**base)


def chunks_and_vectors() -> tuple[list[Chunk], list[list[float]]]:
    chunks = [Chunk.of(event(k), TEXTS[k][1]) for k in TEXTS]
    # a second chunk of one event: results must still be one entry per event
    chunks.append(Chunk.of(event("etl"), "warehouse loading schedule", part=1))
    return chunks, embed_chunks(default_embeddings(), chunks, "plain")


def qvec(text: str) -> list[float]:
    return embed_query(default_embeddings(), text)


# ------------------------------------------------------------ chroma server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Chroma server (the ``chroma`` CLI chromadb ships) on a free loopback port."""
    exe = shutil.which("chroma")
    assert exe, "the chromadb package ships a `chroma` command; it is not on PATH"
    port = _free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    log = open(path / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [exe, "run", "--path", str(path / "data"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = make_client(url)
                try:
                    client.heartbeat()
                finally:
                    close_client(client)
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"chroma run did not come up: {(path / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


INDEX_BACKENDS = ["chroma", "chroma-http", "neo4j"]


def make_index(kind: str, request: pytest.FixtureRequest, tmp_path: Path, tenant: str,
               identity: EmbeddingIdentity = IDENT) -> Any:  # fmt: skip
    if kind == "chroma":
        return ChromaVectorIndex(tenant=tenant, identity=identity, location=tmp_path / "chroma")
    if kind == "chroma-http":
        url = request.getfixturevalue("chroma_server")
        return ChromaVectorIndex(tenant=tenant, identity=identity, location=url)
    from beeweave_core.backends.neo4j.events import Neo4jEventStore
    from beeweave_core.backends.neo4j.vectors import Neo4jVectorIndex

    uri = request.getfixturevalue("neo4j_uri")
    store = Neo4jEventStore(uri, tenant=tenant, auth=neo4j_auth())
    idx = Neo4jVectorIndex.for_store(store, identity=identity)
    request.addfinalizer(store.close)
    request.addfinalizer(idx.purge_tenant)
    return idx


@pytest.fixture(params=INDEX_BACKENDS)
def index_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def vindex(index_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    idx = make_index(index_kind, request, tmp_path, f"t-{uuid.uuid4().hex[:10]}")
    chunks, vectors = chunks_and_vectors()
    assert idx.upsert(chunks, vectors) == len(chunks)
    yield idx
    idx.close()


# ------------------------------------------------------- protocol conformance
def test_query_finds_meaning_one_entry_per_event(vindex):
    hits = vindex.query(qvec("when does the warehouse load run?"), k=3)
    assert hits[0][0] == "ev-etl"
    assert len({e for e, _ in hits}) == len(hits) == 3
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0001
    assert vindex.query(qvec("a pet dog"), k=1)[0][0] == "ev-pets"


def test_filters_are_applied(vindex):
    q = qvec("anything at all")
    assert {e for e, _ in vindex.query(q, k=10, filters=IndexFilter(session_ids=["s2"]))} == {
        "ev-pets", "ev-food"
    }  # fmt: skip
    assert {e for e, _ in vindex.query(q, k=10, filters=IndexFilter(user_id="u-s1"))} == {
        "ev-etl", "ev-cost"
    }  # fmt: skip
    since = IndexFilter(since=T0 + 150, until=T0 + 250)
    assert {e for e, _ in vindex.query(q, k=10, filters=since)} == {"ev-pets"}
    assert vindex.query(q, k=10, filters=IndexFilter(session_ids=[])) == []
    assert vindex.query(q, k=10, filters=IndexFilter(types=[EventType.TOOL_RESULT])) == []
    assert len(vindex.query(q, k=10, filters=IndexFilter(agent_id="a1"))) == 4


def test_ids_count_delete(vindex):
    assert vindex.ids() == {"ev-etl", "ev-cost", "ev-pets", "ev-food"}
    assert vindex.ids(["ev-etl", "nope"]) == {"ev-etl"}
    assert vindex.count() == 5
    assert vindex.delete(["ev-etl"]) == 2  # both chunks of the event
    assert "ev-etl" not in {e for e, _ in vindex.query(qvec("warehouse ETL"), k=10)}
    assert vindex.count() == 3


def test_state_round_trip_and_reset(vindex):
    assert vindex.load_state().sessions == {}
    vindex.save_state(IndexState(sessions={"s1": 7, "s2": 3}))
    assert vindex.load_state().sessions == {"s1": 7, "s2": 3}
    vindex.reset()
    assert vindex.count() == 0 and vindex.load_state().sessions == {}


def test_scores_are_inner_products_whatever_the_vector_length(index_kind, request, tmp_path):
    """A context-recipe vector is the sum of two unit vectors; every index scores it
    by its dot product with the query (the sum of the two cosines), so a long vector
    half along the query outranks a unit vector mostly along it, on every backend."""
    import numpy as np

    idx = make_index(index_kind, request, tmp_path, f"t-{uuid.uuid4().hex[:10]}",
                     EmbeddingIdentity("all-MiniLM-L6-v2-int8", "test", "context/2"))  # fmt: skip
    try:
        rng = np.random.default_rng(7)  # dense directions, like a model's vectors
        q, other, third = np.linalg.qr(rng.standard_normal((384, 3)))[0].T  # orthonormal
        both = q + other  # |v| = sqrt(2): cosine 0.71, dot product 1.0
        mostly = 0.9 * q + np.sqrt(1 - 0.81) * third  # |v| = 1: cosine = dot = 0.9
        chunks = [Chunk.of(event("etl"), "both"), Chunk.of(event("pets"), "mostly")]
        idx.upsert(chunks, [both.tolist(), mostly.tolist()])
        hits = idx.query(q.tolist(), k=2)
        assert [e for e, _ in hits] == ["ev-etl", "ev-pets"]
        assert [round(s, 2) for _, s in hits] == [1.0, 0.9]
    finally:
        idx.close()


def test_neo4j_vectors_of_the_older_layout_are_dropped_for_re_embedding(request, tmp_path):
    """Vectors an older BeeWeave stored normalised (``beeweave_vec_*``) rank in another
    order: opening the index drops that index and the tenant's vectors and state, so
    the indexer's gap check embeds every event again; the new layout is kept after."""
    from beeweave_core.backends.neo4j.vectors import Neo4jVectorIndex

    ident = EmbeddingIdentity("all-MiniLM-L6-v2-int8", f"layout-{uuid.uuid4().hex[:8]}", "plain")
    idx = make_index("neo4j", request, tmp_path, f"t-{uuid.uuid4().hex[:10]}", ident)
    chunks, vectors = chunks_and_vectors()
    idx.upsert(chunks, vectors)
    idx.save_state(IndexState(sessions={"s1": 1}))
    old = f"beeweave_vec_{ident.digest}"
    run = lambda q, **p: idx.driver.execute_query(q, p).records  # noqa: E731
    run(
        f"CREATE VECTOR INDEX {old} IF NOT EXISTS FOR (c:BeeweaveChunk) ON c.v_{ident.digest} "
        "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}"
    )
    run("MATCH (s:BeeweaveIndexState {tenant: $t}) REMOVE s.layout", t=idx.tenant)  # as before
    again = Neo4jVectorIndex(idx.driver, tenant=idx.tenant, identity=ident)
    assert again.count() == 0 and again.load_state().sessions == {}
    assert not run("SHOW INDEXES YIELD name WHERE name = $n RETURN name", n=old)
    again.upsert(chunks, vectors)
    again.save_state(IndexState(sessions={"s1": 1}))
    kept = Neo4jVectorIndex(idx.driver, tenant=idx.tenant, identity=ident)
    assert kept.count() == len(chunks) and kept.load_state().sessions == {"s1": 1}


def test_identities_never_mix(index_kind, vindex, request, tmp_path):
    other_ident = EmbeddingIdentity("all-MiniLM-L6-v2-int8", "test-v2", "plain")
    other = make_index(index_kind, request, tmp_path, vindex.tenant, other_ident)
    try:
        assert other.query(qvec("warehouse"), k=5) == []  # nothing of the first model
        assert other.other_identities() == {IDENT: 5}
        assert vindex.other_identities() == {}
        chunks, vectors = chunks_and_vectors()
        other.upsert(chunks[:1], vectors[:1])
        assert vindex.other_identities() == {other_ident: 1}
        vindex.drop_identity(other_ident)
        assert vindex.other_identities() == {}
        assert vindex.count() == 5  # its own vectors are untouched
    finally:
        other.close()


def test_wrong_dimension_is_a_mismatch(vindex):
    with pytest.raises(EmbeddingMismatch):
        vindex.query([0.1] * 17, k=3)
    with pytest.raises(EmbeddingMismatch):
        vindex.upsert([Chunk.of(event("etl"), "x")], [[0.1] * 17])


def test_tenants_are_isolated(index_kind, vindex, request, tmp_path):
    other = make_index(index_kind, request, tmp_path, vindex.tenant + "-b")
    try:
        assert other.query(qvec("warehouse"), k=5) == []
        assert other.ids() == set() and other.count() == 0
        assert other.other_identities() == {}
    finally:
        other.close()


def test_chroma_metadata_records_event_and_model(tmp_path):
    idx = ChromaVectorIndex(tenant="t", identity=IDENT, location=tmp_path / "c")
    chunks, vectors = chunks_and_vectors()
    idx.upsert(chunks, vectors)
    got = idx.collection.get(ids=["ev-etl#0"], include=["metadatas", "documents"])
    meta = got["metadatas"][0]
    assert meta == {
        "event_id": "ev-etl", "session_id": "s1", "seq": 0, "ts": T0, "type": "user_message",
        "part": 0, "user_id": "u-s1", "agent_id": "a1", "embedding_model": IDENT.name,
        "embedding_version": IDENT.version, "index_recipe": "plain", "scope": "",
    }  # fmt: skip
    assert got["documents"][0] is None  # the text stays in the event store only
    coll = idx.collection.metadata
    assert coll["beeweave_tenant"] == "t" and coll["embedding_version"] == "test"
    idx.close()


# ------------------------------------------------------------------ chunking
def test_selective_indexing():
    def mk(etype: EventType, text: str, **kw: Any) -> Event:
        return Event(id="e", session_id="s", type=etype, content=text, **kw)

    assert chunk_event(mk(EventType.USER_MESSAGE, "ok")) == []
    assert chunk_event(mk(EventType.USER_MESSAGE, "thanks!!")) == []
    assert chunk_event(mk(EventType.MODEL_CALL, "a model call with plenty of words")) == []
    assert len(chunk_event(mk(EventType.USER_MESSAGE, "please copy the orders"))) == 1
    assert len(chunk_event(mk(EventType.USER_MESSAGE, "我们决定使用两千行"))) == 1  # CJK counts
    inv = chunk_event(mk(EventType.TOOL_INVOCATION, '{"table": "orders"}',
                         payload={"name": "inspect_schema"}))  # fmt: skip
    assert inv[0].text.startswith("inspect_schema(")


def test_large_tool_output_keeps_numbers_and_ids():
    rows = [
        {"order_id": f"ORD-{10_000 + i}", "amount": round(12.5 + i * 1.37, 2)} for i in range(800)
    ]
    rows[400]["note"] = "escalated as TICKET-99812 by ops@example.com"
    text = json.dumps(rows)
    result = Event(id="big", session_id="s", type=EventType.TOOL_RESULT, content=text,
                   payload={"name": "run_sample"})  # fmt: skip
    policy = ChunkPolicy()
    chunks = chunk_event(result, policy)
    assert 2 <= len(chunks) <= policy.max_windows + 1
    assert all(len(c.text) <= policy.window + 20 for c in chunks[:-1])
    facts = chunks[-1].text
    assert facts.startswith("run_sample: key facts:")
    assert "TICKET-99812" in facts and "ops@example.com" in facts  # from the middle
    assert "ORD-10000" in facts
    assert all("TICKET-99812" not in c.text for c in chunks[:-1])  # only the facts kept it
    assert [c.id for c in chunks] == [f"big#{i}" for i in range(len(chunks))]


def test_artifact_full_text_is_chunked(sqlite_store):
    body = "header\n" + "filler line of output\n" * 4000 + "final status: JOB-55123 done\n"
    sqlite_store.append([Event(id="art", session_id="s", type=EventType.TOOL_RESULT,
                               content=body, payload={"name": "long_tool"})])  # fmt: skip
    stored = sqlite_store.get(["art"])[0]
    assert "$artifact" in stored.payload and "JOB-55123" not in stored.content
    chunks = chunk_event(stored, load_artifact=sqlite_store.get_artifact)
    assert any("JOB-55123" in c.text for c in chunks)


# ------------------------------------------------------------------- indexer
class CountingEmbeddings:
    """The real MiniLM model, counting the texts it embeds (to prove work is not redone)."""

    model_name = "all-MiniLM-L6-v2-int8"
    model_version = "counting"

    def __init__(self) -> None:
        self.inner = default_embeddings()
        self.texts = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class MiniLMv2(MiniLMEmbeddings):
    """The same weights under a new version label: what upgrading the model looks like."""

    model_version = "2.0-upgrade-test"  # type: ignore[assignment]


def fill(weave: Weave, sessions: int = 3, per: int = 20) -> None:
    for s in range(sessions):
        for i in range(per):
            weave.emit("user_message", f"session {s} message {i} about topic {s * per + i} "
                       "and the nightly warehouse load", session_id=f"sess-{s}",
                       meta={"user_id": "u1"}, ts=T0 + s * 1000 + i)  # fmt: skip
    assert weave.flush(60)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'w.db'}"


def test_gap_check_indexes_what_the_graph_has(tmp_path):
    """Graph first, vectors after: events stored with no indexer running get indexed on open."""
    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp", index=False)
    fill(w)
    w.close()
    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp")
    try:
        done = {f"sess-{s}": 19 for s in range(3)}
        deadline = time.monotonic() + 120
        while w.indexer.index.load_state().sessions != done and time.monotonic() < deadline:
            time.sleep(0.2)
        assert w.indexer.index.ids() == {
            e.id for s in range(3) for e in w.store.timeline(f"sess-{s}")
        }
        assert w.indexer.index.load_state().sessions == {f"sess-{s}": 19 for s in range(3)}
        # later writes arrive through the bus listener
        w.emit("user_message", "a brand new message about kayaks", session_id="sess-0")
        w.flush()
        assert w.indexer.sync(60)
        hits = w.retrieve("kayak trip", paths=["semantic"], k=1)
        assert hits and "kayaks" in hits[0].event.content
    finally:
        w.close()


def test_embedding_version_mismatch_is_detected(tmp_path, caplog):
    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp")
    fill(w, sessions=1, per=10)
    assert w.indexer.sync(120)
    w.indexer.gap_check()
    w.close()
    caplog.set_level(logging.WARNING, logger="beeweave.indexer")
    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp",
                   embeddings=MiniLMv2(), index_options={"backfill": False})  # fmt: skip
    try:
        idx = w.indexer
        _ = idx.index
        assert idx.needs_reindex
        assert "embedding model changed" in caplog.text and "beeweave reindex" in caplog.text
        assert len(idx.stale) == 1 and next(iter(idx.stale.values())) == 10
        with pytest.raises(EmbeddingMismatch, match="reindex"):
            idx.check()
        assert w.retrieve("warehouse load", paths=["semantic"]) == []  # never the old vectors
        assert w.retrieve("warehouse load", paths=["lexical"])  # recall still works
        res = idx.reindex()
        assert res.embedded_events == 10 and res.dropped_identities == 1
        idx.check()
        assert idx.status()["stale_identities"] == {}
        assert len(w.retrieve("warehouse load", paths=["semantic"], k=3)) == 3
    finally:
        w.close()


def test_reindex_resumes_after_interruption(tmp_path):
    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp", index=False)
    fill(w, sessions=3, per=40)
    w.close()
    counting = CountingEmbeddings()
    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp",
                   embeddings=counting, index_options={"backfill": False, "batch_size": 16})  # fmt: skip
    try:
        idx = w.indexer
        calls: list[tuple[int, int]] = []

        def crash_midway(done: int, total: int) -> None:
            calls.append((done, total))
            if done >= 48:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            idx.reindex(progress=crash_midway)
        first = idx.index.count()
        first_texts = counting.texts
        assert calls[0] == (0, 120) and first == 56  # 40 + 16: saved after each batch
        progress: list[tuple[int, int]] = []
        res = idx.reindex(progress=lambda d, t: progress.append((d, t)))
        assert idx.index.count() == 120
        assert res.embedded_events == 120 - first  # only what the first run had not done
        assert counting.texts - first_texts <= 2 * (120 - first)  # context recipe: 2 per chunk
        assert progress[-1][0] == progress[-1][1]
        assert idx.reindex().embedded_events == 0  # nothing left
        assert idx.reindex(full=True).embedded_events == 120
    finally:
        w.close()


def test_reindex_command_shows_progress(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from beeweave_cli.app import app

    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp", index=False)
    fill(w, sessions=2, per=5)
    w.close()
    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(app, ["reindex", "--url", sqlite_url(tmp_path), "--tenant", "t"])
    assert out.exit_code == 0, out.output
    assert "embedded" in out.output and "10 events" in out.output
    out = CliRunner().invoke(app, ["reindex", "--url", sqlite_url(tmp_path), "--tenant", "t"])
    assert "embedded 0" in out.output


def test_weave_on_chroma_server(tmp_path, chroma_server):
    w = Weave.open(sqlite_url(tmp_path), tenant=f"t-{uuid.uuid4().hex[:8]}",
                   spool_dir=tmp_path / "sp", vector_url=chroma_server)  # fmt: skip
    try:
        w.emit("user_message", "The deploy key rotates every 90 days.", session_id="s")
        w.emit("user_message", "Lunch was a tasty ramen bowl.", session_id="s")
        w.flush()
        assert w.indexer.sync(60)
        assert "chroma" in w.indexer.status()["index"].lower() and chroma_server in repr(
            w.indexer.index
        )
        hits = w.retrieve("how often do credentials change?", paths=["semantic"], k=1)
        assert "deploy key" in hits[0].event.content
    finally:
        w.close()


def test_an_index_on_a_chroma_server_closes_its_connections(chroma_server):
    """chromadb's own close leaves the client's HTTP pools open (chroma-core/chroma#2702)."""
    idx = ChromaVectorIndex(tenant=f"t-{uuid.uuid4().hex[:8]}", identity=IDENT,
                            location=chroma_server)  # fmt: skip
    chunks, vectors = chunks_and_vectors()
    idx.upsert(chunks, vectors)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idx.close()
        del idx
        gc.collect()
    assert not [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_vector_tenants_isolated_in_one_file(tmp_path):
    a = Weave.open(sqlite_url(tmp_path), tenant="alpha", spool_dir=tmp_path / "sp")
    b = Weave.open(sqlite_url(tmp_path), tenant="beta", spool_dir=tmp_path / "sp")
    try:
        a.emit("user_message", "alpha's secret recipe uses saffron and cardamom", session_id="s")
        b.emit("user_message", "beta likes plain toast in the morning", session_id="s")
        a.flush(), b.flush()
        assert a.indexer.sync(60) and b.indexer.sync(60)
        for w, mine in ((a, "saffron"), (b, "toast")):
            hits = w.retrieve("secret recipe spices breakfast", k=10)
            assert hits and all(mine in h.event.content for h in hits)
            assert all(h.event.tenant == w.tenant for h in hits)
    finally:
        a.close()
        b.close()


def test_env_switch_turns_the_index_off(tmp_path, monkeypatch):
    monkeypatch.setenv("BEEWEAVE_INDEX", "off")
    w = Weave.open(sqlite_url(tmp_path), tenant="t", spool_dir=tmp_path / "sp")
    try:
        assert w.indexer is None
        w.emit("user_message", "still searchable by words", session_id="s")
        w.flush()
        assert w.retrieve("searchable words")[0].paths.keys() >= {"lexical"}
    finally:
        w.close()
    assert not os.path.exists(tmp_path / "w.db.chroma")


def test_in_memory_stores_keep_their_vectors_apart(tmp_path):
    """``:memory:`` stores share chromadb's in-process client, never a collection."""
    a = Weave.open("sqlite:///:memory:", tenant="same", spool_dir=tmp_path / "a")
    b = Weave.open("sqlite:///:memory:", tenant="same", spool_dir=tmp_path / "b")
    try:
        a.emit("user_message", "alpha writes about saffron rice", session_id="s")
        b.emit("user_message", "beta writes about plain toast", session_id="s")
        a.flush(), b.flush()
        assert a.indexer.sync(60) and b.indexer.sync(60)
        assert a.indexer.errors == b.indexer.errors == 0  # both clients came up together
        got = b.retrieve("saffron rice", paths=["semantic"], k=5)
        assert "alpha writes about saffron rice" not in [h.event.content for h in got]
        got = b.retrieve("toast", paths=["semantic"], k=5)  # b's own vector is there
        assert [h.event.content for h in got] == ["beta writes about plain toast"]
        assert a.indexer.index.count() == 1  # b never pruned a's vectors as "gone"
    finally:
        a.close()
        b.close()


def test_chroma_reads_metadata_only_for_the_nearest_events(tmp_path, monkeypatch):
    """Same answer as reading every fetched chunk's metadata (events of several chunks,
    a chunk of another model version written straight into the collection, a filter
    that turns some events away), while reading far fewer of them."""
    idx = ChromaVectorIndex(tenant="t", identity=IDENT, location=tmp_path / "c")
    lines = [
        "The ferry to the island leaves at half past seven.", "Our quarterly audit found two "
        "missing receipts.", "She repotted the fern and moved it near the window.", "The "
        "build failed because a header file was renamed.", "He practised the cello scales "
        "before dinner.", "Tickets for the harbour concert sold out in an hour.", "The "
        "thermostat schedule drops to sixteen degrees at night.", "Please rotate the API key "
        "before Friday's release.", "The bakery on the corner closes early on Sundays.",
        "Snow closed the mountain pass for two days.",
    ]  # fmt: skip
    chunks = []
    for i, text in enumerate(lines):
        ev = Event(id=f"ev#{i}", session_id=f"s{i % 3}", content=text, ts=T0 + i, seq=i,
                   type=EventType.USER_MESSAGE if i % 2 else EventType.TOOL_RESULT)  # fmt: skip
        words = text.split()
        for part in range(1 + i % 3):  # one to three chunks per event
            chunks.append(Chunk.of(ev, " ".join(words[part * 3 :]) or text, part=part))
    vectors = embed_chunks(default_embeddings(), chunks, "plain")
    idx.upsert(chunks, vectors)
    coll = idx.collection
    other = dict(coll.get(ids=[chunks[0].id], include=["metadatas"])["metadatas"][0])
    other.update(embedding_version="another", event_id="ev-foreign")
    coll.upsert(ids=["ev-foreign#0"], embeddings=[vectors[0]], metadatas=[other])

    def every_metadata(vec: list[float], k: int, flt: IndexFilter | None) -> list:
        got = coll.query(query_embeddings=[vec], n_results=k * 3 + 10,
                         include=["metadatas", "distances"])  # fmt: skip
        best: dict[str, float] = {}
        for meta, dist in zip(got["metadatas"][0], got["distances"][0], strict=True):
            if meta["embedding_version"] != IDENT.version or (flt and not flt.accepts(meta)):
                continue
            best[meta["event_id"]] = max(best.get(meta["event_id"], -2.0), 1.0 - dist)
        return sorted(best.items(), key=lambda p: -p[1])[:k]

    read: list[int] = []
    real_get = coll.get
    monkeypatch.setattr(coll, "get", lambda ids=None, **kw: read.append(len(ids)) or real_get(
        ids=ids, **kw))  # fmt: skip
    only_messages = IndexFilter(types=[EventType.USER_MESSAGE])
    for query in ("when does the boat depart?", "a failing compile", "winter road closure"):
        vec = qvec(query)
        for k in (1, 3, 6):
            for flt in (None, only_messages):
                read.clear()
                assert idx.query(vec, k=k, filters=flt) == every_metadata(vec, k, flt)
                # the nearest events' chunks only, not all it fetched (k * 3 + 10, <= 20)
                assert 0 < sum(read) <= 2 * k + 3 < min(k * 3 + 10, len(chunks) + 1)
    assert "ev-foreign" not in {e for e, _ in idx.query(qvec("ferry island"), k=10)}
    idx.close()
