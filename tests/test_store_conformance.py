"""The EventStore conformance suite: written once, run unchanged against every backend."""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel

from beeweave_core.events import Edge, EdgeType, Event, EventType, Status
from beeweave_core.payloads import decode_payload
from beeweave_core.store import NotFound

from .conftest import make_store

T0 = 1_700_000_000.0


def ev(
    eid: str,
    sid: str = "s1",
    etype: EventType = EventType.USER_MESSAGE,
    content: str | None = None,
    ts: float | None = None,
    **kw: object,
) -> Event:
    text = f"text of {eid}" if content is None else content
    return Event(id=eid, session_id=sid, type=etype, content=text,
                 ts=T0 if ts is None else ts, **kw)  # type: ignore[arg-type]  # fmt: skip


def chain(sid: str = "s1") -> list[Event]:
    """user → call → assistant → tool_invocation → tool_result → answer (REFERS_TO result)."""
    return [
        ev(f"{sid}-u", sid, EventType.USER_MESSAGE, "find flights under 500", ts=T0),
        ev(f"{sid}-c", sid, EventType.MODEL_CALL, "call", ts=T0 + 1, parents=(f"{sid}-u",)),
        ev(f"{sid}-a", sid, EventType.ASSISTANT_MESSAGE, "searching", ts=T0 + 2,
           parents=(f"{sid}-c",)),
        ev(f"{sid}-ti", sid, EventType.TOOL_INVOCATION, '{"max": 500}', ts=T0 + 3,
           parents=(f"{sid}-a",)),
        ev(f"{sid}-tr", sid, EventType.TOOL_RESULT, "AF123 costs 420", ts=T0 + 4,
           parents=(f"{sid}-ti",)),
        ev(f"{sid}-ans", sid, EventType.ASSISTANT_MESSAGE, "AF123 at 420", ts=T0 + 5,
           parents=(f"{sid}-tr",), links={EdgeType.REFERS_TO: (f"{sid}-tr",)}),
    ]  # fmt: skip


def test_append_and_get_round_trip(store):
    events = chain()
    res = store.append(events)
    assert res.inserted == 6 and res.duplicates == 0
    got = store.get([e.id for e in events])
    assert [g.id for g in got] == [e.id for e in events]
    assert [g.seq for g in got] == list(range(6))
    for orig, g in zip(events, got, strict=True):
        assert (g.type, g.content, g.ts, g.parents, g.session_id) == (
            orig.type, orig.content, orig.ts, orig.parents, orig.session_id,
        )  # fmt: skip
        assert g.tenant == store.tenant and g.status == Status.ACTIVE
    assert got[-1].links == {EdgeType.REFERS_TO: ("s1-tr",)}
    assert store.get(["nope"]) == []


def test_append_is_idempotent_and_keeps_order(store):
    events = chain()
    store.append(events[:3])
    res = store.append(events)  # redelivery of the first three + three new
    assert (res.inserted, res.duplicates) == (3, 3)
    res = store.append(events + events)
    assert (res.inserted, res.duplicates) == (0, 12)
    assert [e.seq for e in store.timeline("s1")] == list(range(6))


def test_same_text_twice_is_two_events(store):
    store.append([ev("a", content="ok"), ev("b", content="ok")])
    assert [e.content for e in store.timeline("s1")] == ["ok", "ok"]


def test_metadata_and_payload_are_kept(store):
    e = ev("m", meta={"user_id": "u1", "agent_id": "ag", "tags": ["x", "y"]},
           source={"framework": "langchain", "run_id": "r1"},
           payload={"args": {"n": 3, "nested": [1, 2.5, None, True]}})  # fmt: skip
    store.append([e])
    (g,) = store.get(["m"])
    assert g.user_id == "u1" and g.agent_id == "ag" and g.tags == ["x", "y"]
    assert g.source == {"framework": "langchain", "run_id": "r1"}
    assert g.payload == {"args": {"n": 3, "nested": [1, 2.5, None, True]}}


def test_timeline_windows(store):
    store.append([ev(f"e{i}", ts=T0 + i, etype=EventType.USER_MESSAGE if i % 2 else
                     EventType.ASSISTANT_MESSAGE) for i in range(10)])  # fmt: skip
    store.append([ev("other", sid="s2")])
    assert [e.id for e in store.timeline("s1", last=3)] == ["e7", "e8", "e9"]
    assert [e.seq for e in store.timeline("s1", seq_from=2, seq_to=4)] == [2, 3, 4]
    assert [e.id for e in store.timeline("s1", since=T0 + 8)] == ["e8", "e9"]
    assert [e.id for e in store.timeline("s1", until=T0 + 1)] == ["e0", "e1"]
    users = store.timeline("s1", types=[EventType.USER_MESSAGE])
    assert [e.id for e in users] == ["e1", "e3", "e5", "e7", "e9"]
    assert store.timeline("missing") == []


def test_ancestors_and_descendants_with_depth_cap(store):
    store.append(chain())
    anc = store.ancestors("s1-tr", depth=10)
    assert [(e.id, d) for e, d in anc] == [("s1-ti", 1), ("s1-a", 2), ("s1-c", 3), ("s1-u", 4)]
    assert [e.id for e, _ in store.ancestors("s1-tr", depth=2)] == ["s1-ti", "s1-a"]
    assert store.ancestors("s1-tr", depth=0) == []
    desc = store.descendants("s1-u", depth=10)
    assert [e.id for e, _ in desc][:4] == ["s1-c", "s1-a", "s1-ti", "s1-tr"]
    assert {e.id for e, _ in desc} == {"s1-c", "s1-a", "s1-ti", "s1-tr", "s1-ans"}
    # REFERS_TO only: the answer refers to the tool result and nothing else
    refs = store.ancestors("s1-ans", depth=5, edge_types=[EdgeType.REFERS_TO])
    assert [e.id for e, _ in refs] == ["s1-tr"]
    with pytest.raises(ValueError):
        store.ancestors("s1-tr", edge_types=[EdgeType.NEXT])


def _one_by_one(store, e: Event, depth: int, neighbours: int) -> list[tuple[str, int, bool]]:
    out = [(a.id, d, False) for a, d in store.ancestors(e.id, depth=depth)] if depth else []
    out += [(a.id, d, False) for a, d in store.descendants(e.id, depth=depth)] if depth else []
    if neighbours:
        near = store.timeline(e.session_id, seq_from=max(0, e.seq - neighbours),
                              seq_to=e.seq + neighbours)  # fmt: skip
        out += [(a.id, abs(a.seq - e.seq), True) for a in near]
    return out


def test_around_reads_several_events_as_their_walks_and_neighbours_do(store):
    store.append(chain("s1") + chain("s2"))
    store.soft_delete(["s1-a"], "forgotten")  # walked through, never returned
    seeds = store.get(["s1-ti", "s1-u", "s2-ans", "s2-c"])
    for depth, neighbours in ((2, 1), (0, 2), (3, 0), (0, 0)):
        got = store.around(seeds, depth=depth, neighbours=neighbours)
        assert set(got) == {e.id for e in seeds}
        for e in seeds:
            want = _one_by_one(store, e, depth, neighbours)
            assert [(a.id, d, b) for a, d, b in got[e.id]] == want, (e.id, depth, neighbours)
    # hidden events are walked through: the tool call's ancestors skip the deleted answer
    walked = [a.id for a, _d, b in store.around(seeds[:1], depth=3, neighbours=0)["s1-ti"]]
    assert "s1-a" not in walked and "s1-c" in walked
    assert store.around([], depth=2, neighbours=2) == {}


def test_every_edge_type(store):
    store.append(chain())
    store.append([
        ev("sum", etype=EventType.SUMMARY, content="user wants flights < 500",
           links={EdgeType.SUMMARIZES: ("s1-u", "s1-c")}),
        ev("mem1", etype=EventType.MEMORY, content="budget 500",
           links={EdgeType.DERIVED_FROM: ("s1-u",)}),
    ])  # fmt: skip
    store.append([ev("mem2", etype=EventType.MEMORY, content="budget 450")])
    assert store.link([Edge(src="mem2", dst="mem1", type=EdgeType.SUPERSEDES)]) == 1
    assert store.link([Edge(src="mem2", dst="mem1", type=EdgeType.SUPERSEDES)]) == 0
    edges = store.edges(session_id="s1")
    kinds = {(e.src, e.type, e.dst) for e in edges}
    assert ("s1-tr", EdgeType.CAUSED_BY, "s1-ti") in kinds
    assert ("s1-ans", EdgeType.REFERS_TO, "s1-tr") in kinds
    assert ("sum", EdgeType.SUMMARIZES, "s1-c") in kinds
    assert ("mem1", EdgeType.DERIVED_FROM, "s1-u") in kinds
    assert ("mem2", EdgeType.SUPERSEDES, "mem1") in kinds
    nxt = sorted((e.src, e.dst) for e in edges if e.type == EdgeType.NEXT)
    order = [e.id for e in store.timeline("s1")]
    assert nxt == sorted(zip(order, order[1:], strict=False))
    out = store.edges(event_id="s1-tr", types=[EdgeType.CAUSED_BY])
    assert [(e.src, e.dst) for e in out] == [("s1-tr", "s1-ti")]
    inc = store.edges(event_id="s1-tr", direction="in", types=[EdgeType.REFERS_TO, EdgeType.NEXT])
    assert {(e.src, e.type) for e in inc} == {
        ("s1-ans", EdgeType.REFERS_TO),
        ("s1-ti", EdgeType.NEXT),
    }
    with pytest.raises(ValueError):
        store.link([Edge(src="a", dst="b", type=EdgeType.NEXT)])


def test_session_stats(store):
    store.append(chain("s1"))
    store.append([ev("x1", "s2", meta={"user_id": "alice"}, ts=T0 + 100),
                  ev("x2", "s2", EventType.ASSISTANT_MESSAGE, ts=T0 + 200)])  # fmt: skip
    stats = {s.session_id: s for s in store.sessions()}
    assert set(stats) == {"s1", "s2"}
    s1 = stats["s1"]
    assert s1.events == 6 and s1.last_seq == 5
    assert s1.counts == {"user_message": 1, "model_call": 1, "assistant_message": 2,
                         "tool_invocation": 1, "tool_result": 1}  # fmt: skip
    assert (s1.first_ts, s1.last_ts) == (T0, T0 + 5)
    assert s1.tokens > 0
    assert stats["s2"].user_ids == ["alice"]
    assert [s.session_id for s in store.sessions(user_id="alice")] == ["s2"]
    assert store.session_stats("s2").events == 2
    with pytest.raises(NotFound):
        store.session_stats("missing")


def test_soft_delete_and_invalidate_hide_from_reads(store):
    store.append(chain())
    assert store.soft_delete(["s1-a"], "user asked to forget") == 1
    assert store.invalidate(["s1-tr"], "price changed", by="s1-ans") == 1
    assert store.get(["s1-a", "s1-tr"]) == []
    assert "s1-a" not in [e.id for e in store.timeline("s1")]
    ids = [e.id for e, _ in store.ancestors("s1-ti", depth=5)]
    assert "s1-a" not in ids and "s1-c" in ids  # hidden node, path still walked
    hidden = {e.id: e for e in store.get(["s1-a", "s1-tr"], include_inactive=True)}
    assert hidden["s1-a"].status == Status.DELETED
    assert hidden["s1-a"].status_reason == "user asked to forget"
    assert hidden["s1-tr"].status == Status.INVALIDATED
    sup = store.edges(event_id="s1-ans", types=[EdgeType.SUPERSEDES])
    assert [(e.src, e.dst) for e in sup] == [("s1-ans", "s1-tr")]
    assert len(store.timeline("s1", include_inactive=True)) == 6
    assert store.session_stats("s1").events == 4
    assert store.soft_delete(["s1-a"], "again") == 0  # already inactive


def test_purge(store):
    store.append(chain("s1") + chain("s2"))
    assert store.purge(ids=["s1-u", "never-stored"]) == ["s1-u"]
    assert store.get(["s1-u"], include_inactive=True) == []
    assert all(e.dst != "s1-u" for e in store.edges(session_id="s1"))
    assert sorted(store.purge(session_id="s1")) == sorted(e.id for e in chain("s1")[1:])
    assert store.timeline("s1", include_inactive=True) == []
    assert len(store.timeline("s2")) == 6
    with pytest.raises(ValueError):
        store.purge()


def test_a_purge_leaves_a_tombstone_that_refuses_old_copies_only(store):
    """Copies made before a purge (a spool, an archive) are refused wherever they come
    from; what is said afterwards in the same session, or by the same user, is new."""
    store.append([ev("keep-a", "other"), ev("m1", "notes", ts=T0), ev("m2", "notes", ts=T0 + 1)])
    exported = store.export_session("notes")
    assert sorted(store.purge(session_id="notes")) == ["m1", "m2"]
    late = time.time() + 1
    res = store.append([ev("m1", "notes"), ev("m3", "notes", ts=T0 + 2),
                        ev("m4", "notes", ts=late), ev("keep-b", "other")])  # fmt: skip
    assert sorted(res.purged) == ["m1", "m3"] and res.inserted == 2, res
    assert [e.id for e in store.timeline("notes")] == ["m4"]
    assert store.import_session(exported).inserted == 0  # the archive of it, refused too
    # an id purged is refused for good, whatever its date
    assert store.purge(ids=["keep-a"]) == ["keep-a"]
    assert store.append([ev("keep-a", "other", ts=late)]).purged == ["keep-a"]
    # a user: every session, dated before the purge
    store.append([ev("u1", "x", meta={"user_id": "dana"}), ev("u2", "y", meta={"user_id": "dana"}),
                  ev("u3", "y", meta={"user_id": "eli"})])  # fmt: skip
    assert sorted(store.purge(user_id="dana")) == ["u1", "u2"]
    res = store.append([ev("u1", "x", meta={"user_id": "dana"}), ev("u9", "z", meta={"user_id": "dana"}),
                        ev("u8", "z", meta={"user_id": "dana"}, ts=late)])  # fmt: skip
    assert sorted(res.purged) == ["u1", "u9"] and res.ids == ["u8"], res
    assert [e.id for e in store.timeline("y")] == ["u3"]
    # a purge without a tombstone (an import rolled back, retention) lets them in again
    store.purge(session_id="other", tombstone=False)
    assert store.append([ev("keep-b", "other")]).inserted == 1
    with pytest.raises(ValueError):
        store.purge(session_id="x", user_id="dana")


def test_export_import_round_trip(store, tmp_path):
    big = "row,value\n" + "".join(f"{i},{i * 3}\n" for i in range(20_000))
    events = chain() + [ev("big", etype=EventType.TOOL_RESULT, content=big)]
    store.append(events)
    store.link([Edge(src="big", dst="s1-u", type=EdgeType.REFERS_TO, meta={"value": "500"})])
    store.soft_delete(["s1-c"], "noise")
    store.invalidate(["s1-a"], "superseded", by="s1-ans")
    exported = store.export_session("s1")
    assert exported["artifacts"] and len(exported["events"]) == 7
    store.purge(session_id="s1", tombstone=False)  # a move, not an erasure
    assert store.get_artifact(next(iter(exported["artifacts"]))) is None
    res = store.import_session(exported)
    assert res.inserted == 7
    again = store.export_session("s1")
    assert again == exported
    (b,) = store.get(["big"])
    assert store.get_artifact(b.payload["$artifact"]["sha256"]) == big
    # importing twice is harmless
    assert store.import_session(exported).inserted == 0
    with pytest.raises(ValueError):
        store.import_session({"format": "something else"})
    with pytest.raises(NotFound):
        store.export_session("missing")


def test_tenant_isolation(backend, tmp_path):
    a = make_store(backend, tmp_path, tenant=f"ta-{uuid.uuid4().hex[:8]}")
    b = make_store(backend, tmp_path, tenant=f"tb-{uuid.uuid4().hex[:8]}")
    try:
        a.append(chain("shared"))
        b.append([ev("shared-u", "shared", content="tenant b's own text")])
        assert [e.content for e in b.timeline("shared")] == ["tenant b's own text"]
        assert b.get(["shared-tr"]) == []
        assert b.ancestors("shared-tr") == [] and b.descendants("shared-u") == []
        assert [s.events for s in b.sessions()] == [1]
        assert b.edges(session_id="shared", types=[EdgeType.CAUSED_BY]) == []
        assert len(b.export_session("shared")["events"]) == 1
        b.purge(session_id="shared")
        assert len(a.timeline("shared")) == 6
        assert a.soft_delete(["shared-u"], "x") == 1 and b.soft_delete(["shared-u"], "x") == 0
        view = a.for_tenant(b.tenant)
        assert view.tenant == b.tenant and view.timeline("shared") == []
    finally:
        for s in (a, b):
            for st in s.sessions():
                s.purge(session_id=st.session_id)
            s.close()


class Reading(BaseModel):
    sensor: str
    at: dt.datetime


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


def test_non_json_payloads_have_a_canonical_form(store):
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    payload = {
        "nan": math.nan, "inf": -math.inf, "bytes": b"\x00\xffbin", "when": when,
        "model": Reading(sensor="t1", at=when), "obj": Opaque(), "set": {3, 1, 2},
        "tuple": (1, "a"), 7: "int key", "$dollar": "user key",
    }  # fmt: skip
    store.append([ev("p", payload=payload)])
    (g,) = store.get(["p"])
    p = g.payload
    assert p["nan"] == {"$float": "nan"} and p["inf"] == {"$float": "-inf"}
    assert p["model"] == {"$model": f"{__name__}.Reading",
                          "data": {"sensor": "t1", "at": "2026-01-02T03:04:05Z"}}  # fmt: skip
    assert p["obj"] == {"$repr": "<Opaque thing>", "$type": f"{__name__}.Opaque"}
    assert p["set"] == [1, 2, 3] and p["tuple"] == [1, "a"] and p["7"] == "int key"
    assert p["$dollar"] == "user key"
    back = decode_payload(p)
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf
    assert back["bytes"] == b"\x00\xffbin" and back["when"] == when
    assert back["$dollar"] == "user key"


def test_huge_content_becomes_one_artifact_with_a_preview(store):
    huge = ("0123456789abcdef" * 65_536) + "TAIL-MARKER"  # ~1 MiB + marker, kept whole
    ten_mb = "x" * (10 * 1024 * 1024)
    store.append([ev("h1", etype=EventType.TOOL_RESULT, content=huge),
                  ev("h2", etype=EventType.TOOL_RESULT, content=ten_mb),
                  ev("h3", etype=EventType.TOOL_RESULT, content=ten_mb)])  # fmt: skip
    h1, h2, h3 = store.get(["h1", "h2", "h3"])
    art = h1.payload["$artifact"]
    assert art["chars"] == len(huge) and len(h1.content) < 5_000
    assert "preview" in h1.content and "TAIL-MARKER" not in h1.content
    assert store.get_artifact(art["sha256"]) == huge
    assert h2.payload["$artifact"]["sha256"] == h3.payload["$artifact"]["sha256"]
    assert store.get_artifact(h2.payload["$artifact"]["sha256"]) == ten_mb
    big_payload = {"rows": [{"i": i, "v": "y" * 50} for i in range(5_000)]}
    store.append([ev("h4", etype=EventType.TOOL_RESULT, payload=big_payload)])
    (h4,) = store.get(["h4"])
    pa = h4.payload["$payload_artifact"]
    assert "$preview" in h4.payload
    import json

    assert json.loads(store.get_artifact(pa["sha256"])) == big_payload


def test_hostile_text_is_stored_verbatim(store):
    nasty_ids = ["'; DROP TABLE events; --", 'x" OR 1=1 --', "}) MATCH (n) DETACH DELETE n //",
                 "$param {tenant: 'other'}", "a\\b\nc"]  # fmt: skip
    contents = ["MATCH (n) RETURN n; DROP TABLE events;", "\x00nul\x00inside", "",
                "emoji 🐝 and 中文 and \u200b", "`backticks` 'quotes' \"dq\" $p {x}"]  # fmt: skip
    events = [
        ev(i, sid="sid'); DELETE", content=c) for i, c in zip(nasty_ids, contents, strict=True)
    ]
    store.append(events)
    got = store.timeline("sid'); DELETE")
    assert [g.id for g in got] == nasty_ids
    assert [g.content for g in got] == contents
    assert store.get([nasty_ids[0]])[0].content == contents[0]


def test_lone_surrogates_are_escaped_not_lost(store):
    store.append([ev("sur", content="bad \ud800 text", payload={"k": "\udfff"})])
    (g,) = store.get(["sur"])
    assert g.content == "bad \\ud800 text" and g.payload == {"k": "\\udfff"}


def test_bad_input_is_refused_clearly(store):
    with pytest.raises(ValueError, match="event id"):
        store.append([Event(id=" ", session_id="s", type=EventType.USER_MESSAGE)])
    with pytest.raises(ValueError, match="session_id"):
        store.append([Event(id="ok", session_id="", type=EventType.USER_MESSAGE)])
    with pytest.raises(ValueError, match="limit"):
        store.append([Event(id="i" * 600, session_id="s", type=EventType.USER_MESSAGE)])
    with pytest.raises(TypeError):
        store.append([{"id": "dict"}])  # type: ignore[list-item]
    assert store.timeline("s") == []  # nothing half-written


def test_concurrent_appends_keep_one_gapless_order(backend, tmp_path):
    tenant = f"tc-{uuid.uuid4().hex[:8]}"
    stores = [make_store(backend, tmp_path, tenant=tenant) for _ in range(4)]
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for j in range(25):
                stores[w % 4].append(
                    [ev(f"w{w}-{j}-{k}", content=f"{w}/{j}/{k}") for k in range(4)]
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors
        tl = stores[0].timeline("s1")
        assert [e.seq for e in tl] == list(range(8 * 25 * 4))
        for w in range(8):  # each writer's batches stay in its own order
            mine = [e.seq for e in tl if e.id.startswith(f"w{w}-")]
            assert mine == sorted(mine)
        nxt = stores[0].edges(session_id="s1", types=[EdgeType.NEXT])
        assert len(nxt) == len(tl) - 1
        assert len({e.src for e in nxt}) == len(nxt) and len({e.dst for e in nxt}) == len(nxt)
    finally:
        stores[0].purge(session_id="s1")
        for s in stores:
            s.close()


def test_setup_is_idempotent(backend, tmp_path):
    s = make_store(backend, tmp_path)
    try:
        s.setup()
        s.setup()
        s.append([ev("after-setup")])
        assert len(s.timeline("s1")) == 1
    finally:
        s.purge(session_id="s1")
        s.close()


def test_async_twins(store):
    import asyncio

    async def go() -> None:
        await store.aappend(chain())
        assert len(await store.atimeline("s1")) == 6
        assert [e.id for e in await store.aget(["s1-u"])] == ["s1-u"]
        assert len(await store.aancestors("s1-tr", depth=2)) == 2
        assert len(await store.adescendants("s1-u", depth=1)) == 1

    asyncio.run(go())


def test_reads_are_fast_enough_to_be_usable(store):
    """Not a timing test: a sanity bound that catches a missing index (100× slower)."""
    store.append([ev(f"n{i}", ts=T0 + i, parents=(f"n{i - 1}",) if i else ()) for i in range(2000)])
    t = time.perf_counter()
    assert len(store.ancestors("n1999", depth=20)) == 20
    assert time.perf_counter() - t < 10


def test_sqlite_schema_version_and_file(tmp_path: Path):
    from beeweave_core.backends.sqlite import events_sql as sqlite_sql
    from beeweave_core.backends.sqlite.events import SQLiteEventStore

    with SQLiteEventStore.from_conn_string(str(tmp_path / "f.db")) as s:
        assert s.schema_version == sqlite_sql.SCHEMA_VERSION
        mode = s._read("PRAGMA journal_mode", ())[0][0]
        assert mode == "wal"
    import sqlite3

    con = sqlite3.connect(tmp_path / "f.db")
    con.execute("UPDATE beeweave_meta SET value = '999' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    from beeweave_core.store import StoreError

    with pytest.raises(StoreError, match="newer"):
        SQLiteEventStore(tmp_path / "f.db")


def test_user_session_ids_name_the_sessions_a_user_took_part_in(store):
    """The scope of a user-wide query: the same sessions as ``sessions(user_id=…)``."""
    store.append([
        Event(id="us-1", type=EventType.USER_MESSAGE, session_id="trip", content="pack the tent", meta={"user_id": "mo"}),
        Event(id="us-2", type=EventType.USER_MESSAGE, session_id="trip", content="and the stove"),
        Event(id="us-3", type=EventType.USER_MESSAGE, session_id="bills", content="rent is due", meta={"user_id": "mo"}),
        Event(id="us-4", type=EventType.USER_MESSAGE, session_id="other", content="not mo's", meta={"user_id": "kit"}),
    ])  # fmt: skip
    assert sorted(store.user_session_ids("mo")) == ["bills", "trip"]
    assert sorted(store.user_session_ids("mo")) == sorted(
        s.session_id for s in store.sessions(user_id="mo")
    )
    assert store.user_session_ids("nobody") == []
