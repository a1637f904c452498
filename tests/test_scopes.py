"""Scopes (business lines inside one tenant), on SQLite and on the real Neo4j.

The property: events of several scopes, with randomly drawn text over one shared
vocabulary (so every query matches every scope), are read back through every read path
by weaves opened with some of the scopes; not one event, id or text of another scope
comes back.  The same enumeration run by an unrestricted weave does see the other
scopes, so the check can fail.  Explicit reads and writes outside a weave's scopes are
refused with a ``ScopeError``; derived records keep the scope of their sources.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from beeweave_core.events import EdgeType, Event, EventType
from beeweave_core.items import ItemStore
from beeweave_core.scopes import ScopeError
from beeweave_core.weave import Weave
from beeweave_langchain.checkpoint import BeeWeaveCheckpointer

SCOPES = ("billing", "support", "legal")
#: A marker per scope (and one for unscoped events) woven into each event's text.
MARK = {"billing": "qzbil", "support": "qzsup", "legal": "qzleg", None: "qzall"}
WORDS = (
    "ledger", "router", "contract", "refund", "outage", "clause", "invoice", "firmware",
    "renewal", "ticket", "deadline", "warranty", "account", "password", "shipment", "audit",
    "courier", "voucher", "modem", "tariff",
)  # fmt: skip
QUERIES = ("refund invoice deadline", "router firmware outage", "contract clause warranty")
NOW = 1_760_000_000.0


@dataclass
class Corpus:
    """What the unrestricted writer stored: ids and sessions by scope."""

    ids: dict[str | None, set[str]] = field(default_factory=dict)
    sessions: dict[str, set[str | None]] = field(default_factory=dict)
    items: dict[str | None, list[tuple[tuple[str, ...], str]]] = field(default_factory=dict)
    #: A LangGraph thread per scope, and the artifact (sha256) of a long tool result.
    threads: dict[str | None, str] = field(default_factory=dict)
    artifacts: dict[str | None, str] = field(default_factory=dict)

    def foreign(self, readable: set[str]) -> tuple[set[str], list[str]]:
        """Ids (of events and of sessions holding nothing else) and markers a reader of
        ``readable`` must never see."""
        other = [s for s in SCOPES if s not in readable]
        ids = set().union(*(self.ids.get(s, set()) for s in other))
        ids |= {sid for sid, ss in self.sessions.items() if ss - {None} and not ss & readable}
        ids |= {self.artifacts[s] for s in other if s in self.artifacts}
        return ids, [MARK[s] for s in other]


def _sentence(rng: random.Random, scope: str | None, n: int) -> str:
    words = rng.sample(WORDS, rng.randint(5, 9))
    return f"{' '.join(words).capitalize()} {MARK[scope]}{n}."


def _fill(w: Weave, seed: int) -> Corpus:
    """Sessions per scope, one unscoped, one mixing every scope; items of each scope."""
    rng = random.Random(seed)
    c = Corpus()
    n = 0
    plan = [(f"{s}-{i}", [s]) for s in SCOPES for i in range(2)]
    plan += [("shared", [None]), ("mixed", [*SCOPES, None])]
    for sid, scopes in plan:
        prev: str | None = None
        for turn in range(6):
            scope = scopes[turn % len(scopes)]
            role = "user" if turn % 2 == 0 else "assistant"
            text = _sentence(rng, scope, n)
            if role == "user" and turn == 2:  # something the memory rules keep
                text = f"From now on always send the {rng.choice(WORDS)} report. {text}"
            eid = w.emit(f"{role}_message", text, session_id=sid, role=role, scope=scope,
                         parents=[prev] if prev else [], meta={"user_id": "u1"},
                         ts=NOW - 3600 + n)  # fmt: skip
            c.ids.setdefault(scope, set()).add(eid)
            c.sessions.setdefault(sid, set()).add(scope)
            prev, n = eid, n + 1
    w.flush(60, wait_index=True)
    for scope in (*SCOPES, None):
        ns, key = ("notes", MARK[scope]), f"k{n}"
        row = ItemStore(w).put(ns, key, {"text": _sentence(rng, scope, n)},
                               text=_sentence(rng, scope, n), scope=scope)  # fmt: skip
        c.ids.setdefault(scope, set()).add(row.event_id)
        c.items.setdefault(scope, []).append((ns, key))
        n += 1
    for scope in (*SCOPES, None):  # a long tool result: its full text is an artifact
        long = " ".join(_sentence(rng, scope, n + k) for k in range(1400))
        eid = w.emit("tool_result", long, session_id=f"tools-{MARK[scope]}", scope=scope)
        c.ids.setdefault(scope, set()).add(eid)
        c.sessions[f"tools-{MARK[scope]}"] = {scope}
        n += 1400
    w.flush(60)
    for scope in (*SCOPES, None):
        (e,) = w.store.timeline(f"tools-{MARK[scope]}")
        c.artifacts[scope] = e.payload["$artifact"]["sha256"]
    _threads(w, rng, c)
    return c


def _threads(w: Weave, rng: random.Random, c: Corpus) -> None:
    """Two checkpoints per thread: the first names its scope, the second inherits it."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = BeeWeaveCheckpointer(w, record_messages=False)
    for scope in (*SCOPES, None):
        tid = f"graph-{MARK[scope]}"
        cfg: dict[str, Any] = {"configurable": {"thread_id": tid, "checkpoint_ns": "",
                                                "scope": scope}}  # fmt: skip
        version = None
        for step in range(2):
            version = saver.get_next_version(version, None)
            cp = empty_checkpoint()
            cp["channel_values"] = {"notes": _sentence(rng, scope, 90_000 + step)}
            cp["channel_versions"] = {"notes": version}
            cfg = saver.put(cfg, cp, {"source": "loop", "step": step}, {"notes": version})
        saver.put_writes(cfg, [("notes", _sentence(rng, scope, 95_000))], task_id="t1")
        c.threads[scope] = tid


def _step(saver: Any, text: str) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """A checkpoint of one channel (its first version) for ``saver.put``."""
    from langgraph.checkpoint.base import empty_checkpoint

    version = saver.get_next_version(None, None)
    cp = empty_checkpoint()
    cp["channel_values"], cp["channel_versions"] = {"notes": text}, {"notes": version}
    return cp, {"source": "input", "step": -1}, {"notes": version}


def _checkpoint_reads(r: Weave, c: Corpus) -> Iterator[tuple[str, object]]:
    saver = BeeWeaveCheckpointer(r, record_messages=False)

    def shown(tuples: Iterable[Any]) -> list[tuple[str, str]]:
        return [(t.config["configurable"]["thread_id"],
                 f"{t.checkpoint['channel_values']} {t.pending_writes}") for t in tuples]  # fmt: skip

    yield "checkpoints.list(None)", shown(saver.list(None))
    yield "checkpoints.list(filter)", shown(saver.list(None, filter={"source": "loop"}))
    for tid in c.threads.values():
        cfg = {"configurable": {"thread_id": tid}}
        yield "checkpoints.list(thread)", shown(saver.list(cfg))
        yield "checkpoints.list(namespace)", shown(saver.list({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}))  # fmt: skip
        with contextlib.suppress(ScopeError):  # another scope's thread: refused (tested below)
            yield "checkpoints.get_tuple", shown([t for t in [saver.get_tuple(cfg)] if t])
    for sha in c.artifacts.values():
        with contextlib.suppress(ScopeError):
            yield "get_artifact", [(sha, r.store.get_artifact(sha) or "")]


# ------------------------------------------------------------- read paths
def _store_reads(r: Weave, c: Corpus) -> Iterator[tuple[str, object]]:
    st = r.store
    listed = [s.session_id for s in st.sessions(include_items=True)]
    yield "sessions", listed
    yield "sessions(user)", [s.session_id for s in st.sessions(user_id="u1")]
    yield "user_session_ids", st.user_session_ids("u1")
    for sid in listed:
        seen = st.timeline(sid, include_inactive=True)
        yield "timeline", seen
        yield "timeline(last)", st.timeline(sid, last=3)
        assert st.session_stats(sid).events == len(st.timeline(sid))  # counts hold no others
        yield "edges(session)", st.edges(session_id=sid, types=list(EdgeType))
        for e in seen:
            yield "get", st.get([e.id])
            yield "ancestors", [x for x, _ in st.ancestors(e.id, depth=6)]
            yield "descendants", [x for x, _ in st.descendants(e.id, depth=6)]
            yield "edges(event)", st.edges(event_id=e.id, direction="both")
        # a session that also holds another scope is refused whole (tested below)
        with contextlib.suppress(ScopeError):
            yield "export", st.export_session(sid)["events"]
    for q in QUERIES:
        yield "search_text", [e for e, _ in st.search_text(q, k=50)]
        yield "search_text(user)", [e for e, _ in st.search_text(q, k=50, user_id="u1")]
        for sid in c.sessions:
            yield "search_text(session)", [e for e, _ in st.search_text(q, k=50, session_id=sid)]


def _recall_reads(r: Weave, c: Corpus) -> Iterator[tuple[str, object]]:
    for q in QUERIES:
        for paths in (None, ["semantic"], ["lexical"], ["graph", "lexical"], ["temporal"]):
            yield f"retrieve{paths}", r.retrieve(q, k=30, paths=paths, now=NOW)
            yield f"retrieve{paths}(user)", r.retrieve(q, k=30, user_id="u1", paths=paths, now=NOW)
        yield "retrieve(metadata)", r.retrieve(q, k=30, paths=["metadata"],
                                               filters={"types": ["user_message"]}, now=NOW)  # fmt: skip
        for sid in c.sessions:
            yield "retrieve(session)", r.retrieve(q, k=30, session_id=sid, now=NOW)
            ctx = r.assemble(sid, q, budget_tokens=700, user_id="u1")
            yield "assemble", ctx.text()
            yield "assemble(provenance)", [i for p in ctx.provenance for i in p.event_ids]


def _framework_reads(r: Weave, c: Corpus) -> Iterator[tuple[str, object]]:
    from beeweave_langchain.memory import BeeWeaveMemory
    from beeweave_langchain.retriever import BeeWeaveRetriever as LCRetriever
    from beeweave_langchain.store import BeeWeaveStore
    from beeweave_llamaindex.memory import BeeWeaveChatMemory as LIMemory
    from beeweave_llamaindex.retriever import BeeWeaveRetriever as LIRetriever

    items = ItemStore(r)
    lg = BeeWeaveStore(r)
    for q in QUERIES:
        docs = LCRetriever(weave=r, k=30).invoke(q)
        yield "langchain retriever", [(d.id, d.page_content) for d in docs]
        nodes = LIRetriever(r, k=30).retrieve(q)
        yield "llamaindex retriever", [(n.node.id_, n.node.get_content()) for n in nodes]
        yield "items.search", [(f.row.event_id, str(f.row.value)) for f in items.search(("notes",), query=q, limit=50)]  # fmt: skip
        yield "store.search", [(i.key, str(i.value)) for i in lg.search(("notes",), query=q, limit=50)]  # fmt: skip
    yield "items.list_namespaces", [" ".join(ns) for ns in items.list_namespaces()]
    yield "items.scan", [str(f.row.value) for f in items.search(("notes",), limit=50)]
    for sid in c.sessions:
        mem = BeeWeaveMemory(weave=r, session_id=sid, max_token_limit=600)
        yield "langchain memory", str(mem.load_memory_variables({"input": QUERIES[0]}))
        li = LIMemory.from_defaults(weave=r, session_id=sid, token_limit=600)
        yield "llamaindex memory", str([m.content for m in li.get(QUERIES[1])])


def _flatten(value: object) -> Iterator[tuple[str | None, str]]:
    """(id, text) of everything a read returned: lists are collections, a tuple is one
    (id, text) pair, a string is both (a session id, a rendered context)."""
    if isinstance(value, Event):
        yield value.id, value.content
    elif hasattr(value, "event") and isinstance(value.event, Event):  # a recall hit
        yield value.event.id, value.event.content
    elif isinstance(value, dict):
        yield value.get("id"), value.get("content", "")
    elif isinstance(value, tuple):
        yield str(value[0]), " ".join(map(str, value))
    elif isinstance(value, list):
        for v in value:
            yield from _flatten(v)
    elif hasattr(value, "src") and hasattr(value, "dst"):  # an edge
        yield value.src, ""
        yield value.dst, ""
    else:
        yield str(value), str(value)


def _cross_hits(r: Weave, c: Corpus, readable: set[str]) -> tuple[int, list[str], int]:
    """(reads made, where another scope showed up, read paths seen)."""
    bad_ids, bad_marks = c.foreign(readable)
    reads, leaks, names = 0, [], set()
    for gen in (_store_reads, _recall_reads, _framework_reads, _checkpoint_reads):
        for name, value in gen(r, c):
            reads += 1
            names.add(name)
            for eid, text in _flatten(value):
                if eid in bad_ids or any(m in text for m in bad_marks):
                    leaks.append(f"{name}: {eid} {text[:60]!r}")
    return reads, leaks, len(names)


# ------------------------------------------------------------------- fixture
@pytest.fixture
def scoped(backend: str, weave_factory: Callable[..., Weave], request: pytest.FixtureRequest):
    """``scoped(seed)`` → (unrestricted writer, corpus, opener of readers on its data)."""

    def make(seed: int) -> tuple[Weave, Corpus, Callable[..., Weave]]:
        w = weave_factory(backend)
        if backend == "neo4j" and w.indexer is not None:
            request.addfinalizer(lambda: w.indexer.index.purge_tenant())
        corpus = _fill(w, seed)

        def reader(scopes: Any, **kw: Any) -> Weave:
            return weave_factory(backend, tenant=w.tenant, scopes=scopes, **kw)

        return w, corpus, reader

    return make


@pytest.mark.parametrize("seed", [7, 2026])
def test_no_read_path_returns_another_scope(scoped, seed):
    w, c, reader = scoped(seed)
    _, control, _ = _cross_hits(w, c, {"support"})
    assert control, "the unrestricted weave must see other scopes, or the check proves nothing"
    seen_by_control = {leak.split(":")[0] for leak in control}
    assert {"checkpoints.list(None)", "checkpoints.list(filter)", "checkpoints.list(thread)",
            "checkpoints.list(namespace)", "checkpoints.get_tuple",
            "get_artifact"} <= seen_by_control  # fmt: skip
    for readable in ({"support"}, {"billing", "legal"}):
        r = reader(readable)
        reads, leaks, paths = _cross_hits(r, c, readable)
        assert reads > 300 and paths >= 25, (reads, paths)
        assert leaks == [], leaks[:10]
        # what the reader may see, it does see: its own scopes and the unscoped events
        found = {h.event.id for q in QUERIES for h in r.retrieve(q, k=60, now=NOW)}
        assert found & c.ids[None] and all(found & c.ids[s] for s in readable)


def test_explicit_reads_and_writes_outside_are_refused(scoped):
    w, c, reader = scoped(11)
    r = reader({"support"})
    billing = sorted(c.ids["billing"])[0]
    saver = BeeWeaveCheckpointer(r, record_messages=False)
    billing_thread = {"configurable": {"thread_id": c.threads["billing"], "checkpoint_ns": ""}}
    latest = BeeWeaveCheckpointer(w, record_messages=False).get_tuple(billing_thread).config
    refused: list[Callable[[], object]] = [
        lambda: r.store.get([billing]),
        lambda: r.store.get([sorted(c.ids["support"])[0], billing]),
        lambda: r.store.ancestors(billing),
        lambda: r.store.descendants(billing),
        lambda: r.store.edges(event_id=billing),
        lambda: r.store.export_session("billing-0"),
        lambda: r.store.export_session("mixed"),  # an export is whole or nothing
        lambda: r.store.soft_delete([billing], "not yours"),
        lambda: r.store.invalidate([billing], "not yours"),
        lambda: r.store.purge(ids=[billing]),
        lambda: r.store.purge(session_id="mixed"),
        lambda: r.emit("user_message", "the wrong line", session_id="s", scope="billing"),
        lambda: r.retrieve("refund", scopes={"billing"}),
        lambda: r.assemble("support-0", "refund", scopes={"support", "legal"}),
        lambda: ItemStore(r).get(*c.items["billing"][0]),
        lambda: ItemStore(r).put(c.items["billing"][0][0], c.items["billing"][0][1], {"x": 1}),
        lambda: ItemStore(r).put(("notes",), "new", {"x": 1}, scope="legal"),
        lambda: ItemStore(r).delete(*c.items["billing"][0]),
        lambda: r.store.get_artifact(c.artifacts["billing"]),
        lambda: saver.get_tuple(billing_thread),
        lambda: saver.put(billing_thread, *_step(saver, "the wrong line")),
        lambda: saver.put_writes(latest, [("notes", "the wrong line")], task_id="t9"),
        lambda: saver.delete_thread(c.threads["billing"]),
        lambda: saver.copy_thread(c.threads["billing"], "my-copy"),
        lambda: saver.copy_thread(c.threads["support"], c.threads["billing"]),
        lambda: saver.prune([c.threads["billing"]], strategy="delete"),
        lambda: saver.fork(latest, "mine"),
        lambda: saver.list_branches(c.threads["billing"]),
        lambda: saver.checkpoint_tree(c.threads["billing"]),
    ]
    for i, call in enumerate(refused):
        with pytest.raises(ScopeError) as err:
            call()
        assert "\n" not in str(err.value) and "scope" in str(err.value), i
    assert len(w.store.timeline("billing-0")) == 6  # nothing refused was changed
    control = BeeWeaveCheckpointer(w, record_messages=False)
    assert [len(list(control.list(billing_thread))), control.list_branches(c.threads["billing"])[0].name] == [2, "main"]  # fmt: skip
    assert not list(control.list({"configurable": {"thread_id": "my-copy"}}))
    assert w.store.get_artifact(c.artifacts["billing"])  # the unrestricted weave reads it
    # a scoped saver's new thread takes its scope; its own and unscoped threads are readable
    mine = {"configurable": {"thread_id": "support-graph", "checkpoint_ns": ""}}
    saver.put(mine, *_step(saver, "Router reset done."))
    assert control.get_tuple(mine) and {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"support-graph", c.threads["support"], c.threads[None]}  # fmt: skip
    with pytest.raises(ScopeError):
        BeeWeaveCheckpointer(reader({"legal"}), record_messages=False).get_tuple(mine)
    assert saver.get_tuple({"configurable": {"thread_id": c.threads[None]}})
    assert r.store.get_artifact(c.artifacts["support"]) and r.store.get_artifact(c.artifacts[None])
    two_saver = BeeWeaveCheckpointer(reader({"support", "legal"}), record_messages=False)
    with pytest.raises(ScopeError, match="name one"):
        two_saver.put({"configurable": {"thread_id": "which", "checkpoint_ns": ""}},
                      *_step(two_saver, "which line?"))  # fmt: skip
    named = {"configurable": {"thread_id": "legal-graph", "checkpoint_ns": "", "scope": "legal"}}
    two_saver.put(named, *_step(two_saver, "Clause seven applies."))
    with pytest.raises(ScopeError):
        saver.get_tuple(named)
    assert w.store.get([billing])[0].status.value == "active"
    # a weave of several scopes must say which one it writes
    two = reader({"support", "legal"})
    with pytest.raises(ScopeError, match="name one"):
        two.emit("user_message", "which line?", session_id="s2")
    # a weave of one scope writes into it by default; unscoped events stay readable
    mine = r.emit("user_message", "Router reset done.", session_id="support-0")
    r.flush()
    assert r.store.get([mine])[0].scope == "support"
    assert ItemStore(r).put(("notes", "fresh"), "k", {"v": 1}).scope == "support"
    assert r.store.get([sorted(c.ids[None])[0]])  # unscoped: visible to every reader
    # memory tools: a memory is written into the weave's scope, or refused as one line
    from beeweave_core.memory_ops import MemoryOps

    said = MemoryOps(r, user_id="u1").call("remember", {"text": "Tray two needs size A4 only."})
    assert not said.startswith("error"), said
    kept = [
        m for m in r.store.timeline(MemoryOps(r, user_id="u1").readable()[0]) if "A4" in m.content
    ]
    assert kept and {m.scope for m in kept} == {"support"}
    refused_tool = MemoryOps(two, user_id="u1").call("remember", {"text": "Which line is this?"})
    assert refused_tool.startswith("error:") and "name one" in refused_tool
    # a narrower call is allowed
    narrowed = two.retrieve("contract clause warranty", scopes="legal", k=40, now=NOW)
    assert narrowed and all(h.event.scope in ("legal", None) for h in narrowed)


def test_derived_records_keep_their_sources_scope(scoped):
    w, c, reader = scoped(3)
    rng = random.Random(3)
    for block in range(8):  # a long session whose business line changes every few turns
        scope = (*SCOPES, None)[block % 4]
        for turn in range(6):
            role = "user" if turn % 2 == 0 else "assistant"
            w.emit(f"{role}_message", _sentence(rng, scope, 1000 + block * 10 + turn),
                   session_id="long", role=role, scope=scope)  # fmt: skip
    c.sessions["long"] = {*SCOPES, None}
    w.flush()
    for sid in c.sessions:
        w.context.compact(sid, window_tokens=150, force=True)
    w.flush()
    summaries = [e for sid in c.sessions for e in w.store.timeline(sid, types=[EventType.SUMMARY])]
    memories = [e for sid in c.sessions for e in w.store.timeline(sid, types=[EventType.MEMORY])]
    assert summaries and memories
    by_id = {e.id: e for sid in c.sessions for e in w.store.timeline(sid, include_inactive=True)}
    for derived in summaries + memories:
        links = derived.links.get(EdgeType.SUMMARIZES, ()) + derived.links.get(
            EdgeType.DERIVED_FROM, ()
        )
        sources = {by_id[i].scope for i in links if i in by_id}
        assert sources - {None} <= {derived.scope} if derived.scope else sources <= {None}, (
            derived.type, derived.scope, sources,
        )  # fmt: skip
    mixed = {s.scope for s in summaries if s.session_id == "long"}
    assert len(mixed - {None}) >= 2  # compaction per scope: one line per summary
    assert {m.scope for m in memories} - {None}  # memories of scoped events are scoped
    # a single-scope reader's own assembly record is of its scope
    r = reader({"legal"})
    r.assemble("legal-0", "contract clause", budget_tokens=500)
    r.flush()
    records = r.store.timeline("legal-0", types=[EventType.RETRIEVAL])
    assert records and {e.scope for e in records} == {"legal"}


# ------------------------------------------------------------------------ CLI
def test_cli_reads_only_its_scope_and_refuses_the_rest(tmp_path):
    from .test_cli import run

    with Weave.open(f"sqlite:///{tmp_path / 'beeweave.db'}", index=False) as w:
        paid = w.emit("user_message", "Voucher 4410 refunded to the florist on Dock Lane.",
                      session_id="till", scope="billing", meta={"user_id": "ana"})  # fmt: skip
        w.emit("user_message", "Modem 7 reboots when the kettle runs.", session_id="desk",
               scope="support", meta={"user_id": "ana"})  # fmt: skip
        w.emit("user_message", "Office opens at nine.", session_id="lobby")
        assert w.flush()
    rows = json.loads(run(tmp_path, "sessions", "--json", "--scope", "support").stdout)
    assert {r["session_id"] for r in rows} == {"desk", "lobby"}
    both = run(tmp_path, "sessions", "--json", "--scope", "support", "--scope", "billing")
    assert {r["session_id"] for r in json.loads(both.stdout)} == {"desk", "lobby", "till"}
    assert "Voucher 4410" in run(tmp_path, "show", "till", "--scope", "billing").stdout
    for args in (("trace", paid), ("export", "till"), ("forget", paid, "--yes")):
        proc = run(tmp_path, *args, "--scope", "support", check=False)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert proc.returncode == 1 and len(lines) == 1, (args, proc.stderr)
        assert "scope outside {support}" in lines[0] and "Voucher" not in proc.stdout
    # an empty timeline, as for another tenant's session: the session is not this scope's
    assert run(tmp_path, "show", "till", "--scope", "support", check=False).returncode == 1
    with Weave.open(f"sqlite:///{tmp_path / 'beeweave.db'}", index=False) as w:
        assert w.store.get([paid])[0].status.value == "active"  # the refused forget did nothing


# ------------------------------------------------------------------------- UI
def test_ui_serves_only_its_scope(tmp_path):
    from starlette.testclient import TestClient

    from beeweave_ui import build_app

    url = f"sqlite:///{tmp_path / 'ui.db'}"
    with Weave.open(url, index=False, spool_dir=tmp_path / "w") as w:
        paid = w.emit("user_message", "Voucher qzbil9 settled for the florist.",
                      session_id="till", scope="billing")  # fmt: skip
        w.emit("user_message", "Modem qzsup9 reboots at noon.", session_id="desk", scope="support")
        assert w.flush()
    with Weave.open(url, index=False, spool_dir=tmp_path / "r", scopes={"support"}) as r:
        client = TestClient(build_app(r), client=("127.0.0.1", 4000), base_url="http://127.0.0.1")
        with client as c:
            for path in ("/api/sessions", "/api/search?q=voucher+modem+florist",
                         "/api/sessions/till/graph", "/api/sessions/desk/graph"):  # fmt: skip
                got = c.get(path)  # another scope's session is not there, as another tenant's
                assert got.status_code in (200, 404) and "qzbil" not in got.text, path
            assert "qzsup9" in c.get("/api/sessions/desk/graph").text
            assert c.get("/api/sessions/till/graph").status_code == 404
            refused = c.get(f"/api/events/{paid}")
            assert refused.status_code == 403 and "scope" in refused.json()["error"]


def test_framework_capture_writes_into_the_weaves_scope(tmp_path):
    from langchain_core.messages import AIMessage, HumanMessage

    from beeweave_core.context import record_messages
    from beeweave_langchain.callbacks import BeeWeaveCallbackHandler
    from beeweave_langchain.history import BeeWeaveChatMessageHistory

    url = f"sqlite:///{tmp_path / 'f.db'}"
    with Weave.open(url, spool_dir=tmp_path / "a", scopes={"support"}) as one:
        BeeWeaveChatMessageHistory(one, "chat").add_messages(
            [HumanMessage("Modem lights blink amber."), AIMessage("Reseat the cable.")]
        )
        record_messages(one, "chat", [{"role": "user", "content": "Still amber."}])
        one.flush(wait_index=True)
        got = one.store.timeline("chat")
        assert len(got) == 3 and {e.scope for e in got} == {"support"}
        # their vectors carry the same scope: another line's semantic search finds none
    with Weave.open(url, spool_dir=tmp_path / "b", scopes={"billing"}) as other:
        other.flush(wait_index=True)
        assert other.retrieve("modem blinking amber light", k=10, paths=["semantic"]) == []
        assert other.store.timeline("chat") == []
    with Weave.open(url, spool_dir=tmp_path / "c", scopes={"billing", "support"}) as two:
        with pytest.raises(ScopeError):
            record_messages(two, "chat", [{"role": "user", "content": "Which line?"}])
        handler = BeeWeaveCallbackHandler(two, session_id="chat", scope="support")
        assert handler.weave is two  # a handler of a two-line weave names its line
        assert record_messages(two, "chat", [{"role": "user", "content": "Amber again."}],
                               scope="support")  # fmt: skip


def test_a_scoped_async_saver_reads_a_threads_scope_off_the_event_loop(
    backend: str, weave_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first put of a thread asks the store for its scope: blocking I/O, so on a
    worker thread, never on the loop (Neo4j's ``aput`` otherwise runs in the loop)."""
    import asyncio
    import threading

    from langgraph.checkpoint.base import empty_checkpoint

    from beeweave_langchain.checkpoint import AsyncBeeWeaveCheckpointer

    weave = weave_factory(backend, index=False, scopes={"support"})
    saver = AsyncBeeWeaveCheckpointer.from_weave(weave)
    lookups: list[int] = []
    ask = saver.store.thread_scope

    def thread_scope(thread_id: str) -> str | None:  # the store's own answer, and where
        lookups.append(threading.get_ident())
        return ask(thread_id)

    monkeypatch.setattr(saver.store, "thread_scope", thread_scope)

    async def run() -> tuple[int, str | None, bool]:
        for tid in ("t-new-1", "t-new-2"):
            cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
            done = await saver.aput(cfg, empty_checkpoint(), {"source": "input", "step": -1}, {})
            await saver.aput_writes(done, [("messages", "hi")], task_id="task-1")
        stored = await saver.aget_tuple(done)
        native = saver.async_store is not None
        await saver.aclose()
        return threading.get_ident(), stored.metadata.get("source") if stored else None, native

    loop_thread, source, native = asyncio.run(run())
    assert source == "input" and lookups  # the puts were stored, each thread looked up
    assert native == (backend == "neo4j")  # Neo4j's aput runs in the loop: the case at stake
    assert loop_thread not in lookups
