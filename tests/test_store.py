"""BeeWeaveStore (LangGraph ``BaseStore``) on both backends, and its key/value view.

LangGraph ships no store test suite in its wheels; ``langchain-tests`` has
``BaseStoreSyncTests``/``BaseStoreAsyncTests``, which are for LangChain's key/value
``BaseStore[str, V]`` — they run here against :meth:`BeeWeaveStore.key_value`.  The
LangGraph-store behaviour (namespaces, versions, filters, recall, TTL) is tested
directly.  Everything is real: SQLite files, the Neo4j server, the offline MiniLM
embeddings and the Chroma index for semantic recall.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_tests.integration_tests import BaseStoreAsyncTests, BaseStoreSyncTests
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError

from beeweave_core.events import EdgeType, EventType, Status
from beeweave_core.items import session_for
from beeweave_core.weave import Weave
from beeweave_langchain.store import BeeWeaveKeyValueStore, BeeWeaveStore

U1 = ("users", "u1", "memories")


class Clock:
    """The store's clock, moved by the test instead of sleeping (TTLs run in minutes)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def stores(backend: str, weave_factory: Callable[..., Weave]) -> Iterator[Callable[..., Any]]:
    """``stores(tenant=None, vectors=False, **store_kw)`` → a BeeWeaveStore on a fresh weave.

    ``vectors=None`` gives the weave its default vector index (offline MiniLM); it is
    off here, for speed, where a test does not need semantic recall.
    """
    made: list[BeeWeaveStore] = []

    def make(tenant: str | None = None, vectors: Any = False, **kw: Any) -> BeeWeaveStore:
        store = BeeWeaveStore(weave_factory(backend, tenant=tenant, index=vectors), **kw)
        made.append(store)
        return store

    yield make
    done: set[str] = set()
    for store in reversed(made):  # newest first: an older weave may be closed already
        purge = getattr(store.items.index, "purge_tenant", None)
        if purge is not None and store.items.index.tenant not in done:
            purge()
            done.add(store.items.index.tenant)


def _versions(store: BeeWeaveStore, namespace: tuple[str, ...], key: str) -> list[Any]:
    return store.weave.store.timeline(session_for(namespace, key), include_inactive=True)


def test_put_get_versions_and_delete(stores: Callable[..., Any]) -> None:
    clock = Clock()
    store = stores(clock=clock)
    assert store.get(U1, "food") is None
    store.put(U1, "food", {"text": "loves spicy noodles", "score": 3})
    first = store.get(U1, "food")
    assert first.value == {"text": "loves spicy noodles", "score": 3}
    assert first.namespace == U1 and first.created_at == first.updated_at
    clock.advance(1)
    store.put(U1, "food", {"text": "now prefers mild ramen", "score": 4})
    second = store.get(U1, "food")
    assert second.value["text"] == "now prefers mild ramen"
    assert second.created_at == first.created_at < second.updated_at

    # the history is the event graph: v2 SUPERSEDES v1, which is invalidated
    v1, v2 = _versions(store, U1, "food")
    assert v1.type == v2.type == EventType.MEMORY
    assert v1.status == Status.INVALIDATED and v2.status == Status.ACTIVE
    assert v2.links[EdgeType.SUPERSEDES] == (v1.id,)
    edges = store.weave.store.edges(event_id=v2.id, types=[EdgeType.SUPERSEDES])
    assert [(e.src, e.dst) for e in edges] == [(v2.id, v1.id)]
    assert v2.payload["lg_store"] == {"namespace": list(U1), "key": "food"}
    assert v2.payload["value"] == {"text": "now prefers mild ramen", "score": 4}

    store.delete(U1, "food")
    assert store.get(U1, "food") is None
    assert [e.status for e in _versions(store, U1, "food")] == [Status.INVALIDATED] * 2
    store.delete(U1, "food")  # deleting again is a no-op
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"x": 1})
    with pytest.raises(ValueError, match="dict"):
        store.put(U1, "k", ["not", "a", "dict"])  # type: ignore[arg-type]


def test_search_filters_prefix_and_paging(stores: Callable[..., Any]) -> None:
    store = stores()
    for i in range(6):
        store.put(("docs", "team-a"), f"d{i}", {"n": i, "tag": "even" if i % 2 == 0 else "odd"})
    store.put(("docs", "team-ab"), "x", {"n": 100, "tag": "even"})  # not under ("docs", "team-a")
    store.put(("other",), "y", {"n": 7})

    keys = [it.key for it in store.search(("docs", "team-a"), limit=10)]
    assert keys == ["d0", "d1", "d2", "d3", "d4", "d5"]  # insertion order, as InMemoryStore
    assert [it.key for it in store.search(("docs", "team-a"), limit=2, offset=1)] == ["d1", "d2"]
    assert {it.key for it in store.search(("docs",), limit=20)} == {f"d{i}" for i in range(6)} | {
        "x"
    }
    assert len(store.search((), limit=20)) == 8
    got = store.search(("docs",), filter={"tag": "even", "n": {"$gte": 2, "$ne": 100}})
    assert sorted(it.key for it in got) == ["d2", "d4"]
    assert [it.key for it in store.search(("docs",), filter={"n": {"$lt": 1}})] == ["d0"]
    assert all(it.score is None for it in got)


def test_list_namespaces(stores: Callable[..., Any]) -> None:
    store = stores()
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x", "c"), ("z", "c")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "x", "c"),
        ("z", "c"),
    ]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("a", "x", "c"), ("z", "c")]
    assert store.list_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c"), ("a", "x", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "c")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x", "c")]
    store.delete(("z", "c"), "k")
    assert ("z", "c") not in store.list_namespaces()


def test_semantic_search_through_the_vector_index(stores: Callable[..., Any]) -> None:
    store = stores(vectors=None)  # the weave's default vector index (offline MiniLM)
    facts = {
        "pet": "Has a golden retriever named Biscuit who loves the beach",
        "job": "Works as a data engineer maintaining the nightly orders pipeline",
        "food": "Vegetarian; allergic to peanuts",
        "city": "Moved from Lisbon to Berlin last spring",
    }
    for key, text in facts.items():
        store.put(U1, key, {"text": text})
    store.put(("users", "u2", "memories"), "pet", {"text": "Owns two cats"})
    hits = store.search(U1, query="which animal does the user own?", limit=2)
    assert hits[0].key == "pet" and hits[0].score is not None
    assert all(h.namespace == U1 for h in hits)
    hits = store.search(U1, query="what should I avoid cooking for them", limit=1)
    assert hits[0].key == "food"
    # a changed item is found by its new text, not its old one
    store.put(U1, "city", {"text": "Lives in Tokyo now, near Shibuya"})
    hits = store.search(U1, query="Where does the user live? Japan", limit=1)
    assert hits[0].key == "city" and "Tokyo" in hits[0].value["text"]
    # every item of the namespace comes back, matches first, the rest unscored
    everything = store.search(U1, query="Biscuit beach", limit=10)
    assert everything[0].key == "pet" and {h.key for h in everything} == set(facts)


def test_lexical_recall_without_a_vector_index(stores: Callable[..., Any]) -> None:
    store = stores(index={"fields": ["text"]})  # only "text" is searchable; no vectors
    store.put(U1, "order", {"text": "Refund RF-4411 approved for ORD-10017", "extra": "zzz"})
    store.put(U1, "other", {"text": "Weekly sync moved to Thursday", "extra": "ORD-10017"})
    hits = store.search(U1, query="ORD-10017", limit=2)
    # only the indexed field is searchable: "extra" is stored but not indexed; with no
    # embeddings there is no similarity (score), only the lexical rank
    assert hits[0].key == "order" and hits[0].rank is not None and hits[0].score is None
    assert hits[1].key == "other" and hits[1].rank is None
    store.put(U1, "hidden", {"text": "ORD-10017 duplicate"}, index=False)
    assert store.search(U1, query="duplicate", limit=3)[0].rank is None


def test_ttl_expires_refreshes_and_sweeps(stores: Callable[..., Any]) -> None:
    clock = Clock()
    store = stores(ttl={"default_ttl": 10, "refresh_on_read": True}, clock=clock)  # minutes
    store.put(U1, "short", {"v": 1})
    store.put(U1, "forever", {"v": 2}, ttl=None)
    clock.advance(8 * 60)
    assert store.get(U1, "short") is not None  # read refreshes the TTL
    clock.advance(8 * 60)  # 16 min after the put: alive only because of the refresh
    assert store.get(U1, "short", refresh_ttl=False) is not None
    clock.advance(3 * 60)  # 11 min after the refresh (that read did not refresh)
    assert store.get(U1, "short") is None  # expired: never returned
    assert [i.key for i in store.search(U1)] == ["forever"]
    assert store.sweep_ttl() == 1
    (short,) = _versions(store, U1, "short")
    (forever,) = _versions(store, U1, "forever")
    assert short.status == Status.INVALIDATED and short.status_reason == "expired (TTL)"
    assert forever.status == Status.ACTIVE


async def test_async_api_and_graph_injection(stores: Callable[..., Any]) -> None:
    store = stores()
    await store.aput(U1, "a", {"v": 1})
    assert (await store.aget(U1, "a")).value == {"v": 1}
    assert [i.key for i in await store.asearch(("users",))] == ["a"]
    assert await store.alist_namespaces() == [U1]
    await store.adelete(U1, "a")
    assert await store.aget(U1, "a") is None

    class State(TypedDict):
        user: str
        seen: Annotated[list[int], lambda a, b: a + b]

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        ns = ("users", state["user"], "visits")
        n = len(store.search(ns, limit=100))
        store.put(ns, f"visit-{n}", {"n": n})
        return {"seen": [n]}

    b = StateGraph(State)
    b.add_node("remember", remember)
    b.add_edge(START, "remember")
    b.add_edge("remember", END)
    graph = b.compile(store=store)
    for _ in range(3):
        out = await graph.ainvoke({"user": "u9", "seen": []})
    assert out["seen"] == [2]
    assert sorted(i.key for i in store.search(("users", "u9"))) == ["visit-0", "visit-1", "visit-2"]


def test_persists_across_reopen_and_isolates_tenants(stores: Callable[..., Any]) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    first = stores(tenant)
    first.put(U1, "k", {"v": "kept"})
    first.weave.close()
    again = stores(tenant)  # a new process on the same file / database
    assert again.get(U1, "k").value == {"v": "kept"}
    other = stores(f"o-{uuid.uuid4().hex[:10]}")
    assert other.get(U1, "k") is None and other.list_namespaces() == []
    other.put(U1, "k", {"v": "theirs"})
    assert again.get(U1, "k").value == {"v": "kept"}


def _all_versions(store: BeeWeaveStore, *items: tuple[tuple[str, ...], str]) -> list[str]:
    return [e.id for ns, key in items for e in _versions(store, ns, key)]


def test_a_user_purge_erases_the_users_items_every_version_and_vector(
    stores: Callable[..., Any],
) -> None:
    """Items under ("users", user) are the user's: ``weave.purge(user_id=)`` takes every
    version (deleted ones too, which ``delete`` keeps for audit) and their vectors."""
    store = stores(vectors=None)
    rosa, memories = ("users", "rosa"), ("users", "rosa", "memories")
    store.put(memories, "locker", {"text": "locker code zorblatt"})
    store.put(memories, "locker", {"text": "locker code vermillionkestrel"})
    store.put(rosa, "pet", {"text": "owns a heron called Quill"})
    store.delete(rosa, "pet")
    store.put(("users", "rosa10"), "pet", {"text": "owns a cat"})  # another user, same start
    mine = _all_versions(store, (memories, "locker"), (rosa, "pet"))
    assert len(mine) == 3 and store.weave.indexer.sync(120)
    index = store.weave.indexer.index
    current = store.get(memories, "locker").value  # the probe sees the live version's vector
    assert current["text"].endswith("vermillionkestrel") and len(index.ids(mine)) == 1
    store.weave.purge(user_id="rosa")
    assert _all_versions(store, (memories, "locker"), (rosa, "pet")) == []
    assert store.weave.store.get(mine, include_inactive=True) == []
    assert index.ids(mine) == set()
    assert store.get(memories, "locker") is None and store.search(rosa) == []
    assert store.get(("users", "rosa10"), "pet").value == {"text": "owns a cat"}


def test_purging_a_key_removes_every_version_and_its_vectors(stores: Callable[..., Any]) -> None:
    """``delete`` invalidates (the versions stay for audit); ``purge`` erases them all."""
    store = stores(vectors=None)
    store.put(U1, "locker", {"text": "locker code zorblatt"})
    store.put(U1, "locker", {"text": "locker code vermillionkestrel"})
    store.put(U1, "pet", {"text": "owns a heron"})
    store.delete(U1, "pet")
    assert store.get(U1, "pet") is None and len(_versions(store, U1, "pet")) == 1  # kept
    versions = _all_versions(store, (U1, "locker"))
    assert len(versions) == 2 and store.weave.indexer.sync(120)
    index = store.weave.indexer.index
    assert len(index.ids(versions)) == 1  # the live version's vector
    assert store.purge(U1, "locker") == 2
    assert _versions(store, U1, "locker") == [] and index.ids(versions) == set()
    assert store.get(U1, "locker") is None
    assert store.purge(U1, "pet") == 1 and _versions(store, U1, "pet") == []


def test_a_put_dated_before_the_items_purge_raises_instead_of_vanishing(
    stores: Callable[..., Any],
) -> None:
    """A clock behind the purge's dates the new version as a copy of erased data: the
    store refuses it, and ``put`` says so instead of returning as if it were kept."""
    clock = Clock()
    clock.advance(-3600)  # an hour behind the wall clock the purge is dated by
    store = stores(clock=clock)
    store.put(U1, "bike", {"text": "the blue bike waits in bay 3"})
    store.purge(U1, "bike")
    with pytest.raises(ValueError, match="purge") as err:
        store.put(U1, "bike", {"text": "the red bike waits in bay 5"})
    assert "\n" not in str(err.value)
    assert store.get(U1, "bike") is None and _versions(store, U1, "bike") == []
    clock.advance(7200)  # after the purge: a new item, kept
    store.put(U1, "bike", {"text": "the red bike waits in bay 5"})
    assert store.get(U1, "bike").value == {"text": "the red bike waits in bay 5"}


# ------------------------------------------- langchain-tests key/value suites
@pytest.fixture
def kv_weave(backend: str, weave_factory: Callable[..., Weave]) -> Iterator[BeeWeaveStore]:
    store = BeeWeaveStore(weave_factory(backend, index=False))
    yield store
    purge = getattr(store.items.index, "purge_tenant", None)
    if purge is not None:
        purge()


class TestKeyValueSync(BaseStoreSyncTests[bytes]):
    @pytest.fixture
    def kv_store(self, kv_weave: BeeWeaveStore) -> BeeWeaveKeyValueStore:
        return kv_weave.key_value(("kv", uuid.uuid4().hex))

    @pytest.fixture
    def three_values(self) -> tuple[bytes, bytes, bytes]:
        return b"foo", b"bar\x00\xff", "baz ✓".encode()


class TestKeyValueAsync(BaseStoreAsyncTests[dict]):
    @pytest.fixture
    async def kv_store(self, kv_weave: BeeWeaveStore) -> BeeWeaveKeyValueStore:
        return kv_weave.key_value(("kv", uuid.uuid4().hex))

    @pytest.fixture
    def three_values(self) -> tuple[dict, dict, dict]:
        return {"a": 1}, {"b": [1, 2.5, None]}, {"c": {"nested": "✓"}}
