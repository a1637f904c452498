"""Redaction over every place BeeWeave writes, on SQLite and the real Neo4j.

One weave with the built-in redactor captures events (one refused into the dead
letters, one big enough to become an artifact), runs a LangGraph graph on the
BeeWeave checkpointer (channel values, a failed task's pending writes, run metadata),
stores LangGraph store items (values, index text, the store's own vectors), compacts,
exports and archives.  Then the raw values must be in no file under the home and in
no node or relationship of Neo4j, recall must still work through the placeholders,
and the values must never have been logged.
"""

from __future__ import annotations

import logging
import operator
import os
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from beeweave_core.embeddings import MiniLMEmbeddings
from beeweave_core.events import EventType
from beeweave_core.exports import export_thread
from beeweave_core.governance import default_redactor
from beeweave_core.governance.retention import DAY, RetentionRule, apply_retention
from beeweave_core.private import write_private_text
from beeweave_langchain.checkpoint import BeeWeaveCheckpointer
from beeweave_langchain.store import BeeWeaveStore

from .conftest import neo4j_auth
from .test_redaction import CARD, CN_ID, IBAN

EMAIL = "odile.marchetti@brackenfold.example"
MOBILE = "13912345678"
SPACED_CARD = f"{CARD[:4]} {CARD[4:8]} {CARD[8:12]} {CARD[12:]}"
#: Every raw form that must not survive anywhere (the card with and without spaces).
RAW = (EMAIL, CARD, SPACED_CARD, CN_ID, IBAN, MOBILE)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    contact: str
    notes: Annotated[list[str], operator.add]


def _graph(saver: BeeWeaveCheckpointer, flaky: dict[str, bool]) -> Any:
    """Two parallel nodes; ``billing`` fails once, so ``intake``'s writes are kept pending."""

    def intake(state: State) -> dict[str, Any]:
        reply = AIMessage(
            content=f"Noted: reach {EMAIL}, card {SPACED_CARD}.",
            tool_calls=[{"name": "bill", "args": {"iban": IBAN}, "id": "call-bill-1"}],
        )
        return {"messages": [reply], "contact": EMAIL}

    def billing(state: State) -> dict[str, Any]:
        if flaky["fail"]:
            flaky["fail"] = False
            raise ValueError(f"gateway refused card {CARD} for {EMAIL}")
        return {"notes": [f"resident id {CN_ID} checked"]}

    g = StateGraph(State)
    g.add_node("intake", intake)
    g.add_node("billing", billing)
    g.add_edge(START, "intake")
    g.add_edge(START, "billing")
    g.add_edge("intake", END)
    g.add_edge("billing", END)
    return g.compile(checkpointer=saver)


def _run_graph(w: Any) -> dict[str, Any]:
    saver = BeeWeaveCheckpointer.from_weave(w)
    flaky = {"fail": True}
    graph = _graph(saver, flaky)
    cfg = {"configurable": {"thread_id": "desk"}, "metadata": {"caller": MOBILE}}
    first = HumanMessage(content=f"I am {EMAIL}, mobile {MOBILE}, card {SPACED_CARD}", id="h1")
    with pytest.raises(ValueError, match="gateway refused"):
        graph.invoke({"messages": [first], "contact": "", "notes": []}, cfg)
    pending = saver.get_tuple(cfg)
    assert pending is not None and pending.pending_writes  # intake's writes + the error
    assert all(EMAIL not in repr(v) and CARD not in repr(v) for _t, _c, v in pending.pending_writes)
    graph.invoke(None, cfg)  # resume: intake is not run again, billing now succeeds
    state = graph.get_state(cfg).values
    assert "[EMAIL:" in state["contact"] and len(state["notes"]) == 1
    assert "[CN_ID:" in state["notes"][0]
    assert len(list(saver.list(cfg, filter={"caller": MOBILE}))) >= 1  # the filter is redacted too
    return state


class SeenEmbeddings(MiniLMEmbeddings):
    """The real offline embedder, keeping the texts it was given to embed as documents."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.seen += texts
        return super().embed_documents(texts)


def _store_items(w: Any) -> None:
    embed = SeenEmbeddings()
    store = BeeWeaveStore(w, index={"dims": embed.dimension, "embed": embed, "fields": ["note"]})
    store.put(("crm", "accounts"), "acct-7", {"note": f"primary contact {EMAIL}", "iban": IBAN})
    item = store.get(("crm", "accounts"), "acct-7")
    assert item is not None and "[EMAIL:" in item.value["note"] and "[IBAN:" in item.value["iban"]
    hits = store.search(("crm",), filter={"iban": IBAN})  # the raw value finds its placeholder
    assert [h.key for h in hits] == ["acct-7"]
    assert store.search(("crm",), query=f"contact {EMAIL}")[0].key == "acct-7"
    assert embed.seen and not [t for t in embed.seen for v in RAW if v in t]  # vectors too


def _scan_neo4j() -> list[str]:
    import neo4j

    found = []
    with neo4j.GraphDatabase.driver(os.environ["NEO4J_URI"], auth=neo4j_auth()) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (n) RETURN properties(n) AS p UNION ALL MATCH ()-[r]->() RETURN properties(r) AS p"
        )
        for rec in records:
            blob = repr(rec["p"]).encode() + b"".join(
                v for v in rec["p"].values() if isinstance(v, bytes | bytearray)
            )
            found += [v for v in RAW if v.encode() in blob]
    return found


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"], indirect=True)
def test_raw_values_reach_no_file_and_no_node(
    backend: str, weave_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    w = weave_factory(backend, redactor=default_redactor(tmp_path / "home"))
    sid = "desk"
    w.emit("user_message", f"Please email the receipt to {EMAIL}.", session_id=sid,
           meta={"user_id": "u-17", "reply_to": EMAIL}, source={"inbox": EMAIL})  # fmt: skip
    w.emit("tool_result", "refund queued", session_id=sid,
           payload={"iban": IBAN, "log": (f"{SPACED_CARD} ok " * 6000)})  # fmt: skip  # artifact
    w.emit("tool_result", "bad", session_id=sid, ts=float("inf"), payload={"cn": CN_ID})
    state = _run_graph(w)
    _store_items(w)
    w.flush()
    assert w.indexer is not None and w.indexer.sync(120)
    w.context.compact(sid, window_tokens=60, force=True)
    hit = w.retrieve("which address gets the receipt by email", session_id=sid, k=3)
    assert any("[EMAIL:" in h.event.content for h in hit)
    (big,) = [e for e in w.store.timeline(sid) if e.content == "refund queued"]
    ref = big.payload.get("$payload_artifact") or big.payload.get("$artifact")
    assert ref is not None and "[CARD:" in (w.store.get_artifact(ref["sha256"]) or "")
    counts = w.stats()["redacted"]
    assert {"EMAIL", "CARD", "IBAN", "CN_ID", "CN_MOBILE"} <= set(counts)
    exported = export_thread(w.store, w.backend.checkpoints(), sid)
    assert exported["checkpoints"] and state["messages"]
    write_private_text(tmp_path / "desk-export.json", repr(exported))
    if backend == "neo4j":  # before retention purges anything
        assert _scan_neo4j() == []
    apply_retention(w, tmp_path / "archive", [RetentionRule(frozenset({EventType.TOOL_RESULT}), 1)],
                    now=time.time() + 2 * DAY)  # fmt: skip
    assert list((tmp_path / "archive").glob("*.jsonl.gz"))
    w.flush()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    kinds = {
        "spool": "spool",
        "dead-letter": "dead-letter",
        "export": "desk-export",
        "archive": ".jsonl.gz",
    }
    if backend == "sqlite":
        kinds.update(store="weave.db", vectors=".chroma")
    assert {k for k, part in kinds.items() if any(part in str(p) for p in files)} == set(kinds)
    leaks = [(str(p), v) for p in files for v in RAW if v.encode() in _readable(p)]
    assert leaks == []
    if backend == "neo4j":
        assert _scan_neo4j() == []
    logged = "\n".join(r.getMessage() + str(r.args) for r in caplog.records)
    assert not [v for v in RAW if v in logged]


def _readable(path: Path) -> bytes:
    """A file's bytes, and its decompressed text when it is gzip (the archive)."""
    import gzip

    raw = path.read_bytes()
    return raw + gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def test_env_turns_redaction_on_for_weaves_opened_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BEEWEAVE_REDACT=on``: a store an integration opens from a path redacts too."""
    from beeweave_core.weave import Weave

    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "home"))
    db = tmp_path / "agent.db"
    for setting, redacted in (("off", False), ("on", True)):
        monkeypatch.setenv("BEEWEAVE_REDACT", setting)
        with BeeWeaveStore.from_conn_string(str(db), weave_options={"index": False}) as store:
            store.put(("crm",), setting, {"note": f"write to {EMAIL}"})
            assert (EMAIL in store.get(("crm",), setting).value["note"]) is not redacted
    assert (tmp_path / "home" / "redaction.key").is_file()
    with Weave.open(f"sqlite:///{db}", index=False, spool_dir=tmp_path / "sp") as w:
        assert w.redact(EMAIL).startswith("[EMAIL:")  # still "on"
    with Weave.open(f"sqlite:///{db}", index=False, spool_dir=tmp_path / "sp", redactor=None) as w:
        assert w.redact(EMAIL) == EMAIL  # an explicit redactor=None wins over the environment
