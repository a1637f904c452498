"""The UI's JSON API without a browser: who may call it, and that it only shows one tenant.

A real SQLite file holds two tenants that lived through the same conversation (so an
unscoped read would find the other tenant's copy); the app serves one of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
from starlette.routing import Route  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from beeweave_core.events import EventType  # noqa: E402
from beeweave_core.weave import Weave  # noqa: E402
from beeweave_ui import build_app  # noqa: E402

TURNS = [
    ("user", "We are moving the greenhouse sensors to a new gateway called HX-40."),
    ("assistant", "Got it. Which polling interval should the gateway use?"),
    (
        "user",
        "Poll every 90 seconds and keep readings for 14 days. Never reboot during irrigation.",
    ),
    ("assistant", "Understood: 90 s polling, 14-day retention, no reboots while irrigating."),
    ("user", "Actually poll every 120 seconds instead of 90, the radio link is saturated."),
    ("assistant", "Switched: polling is now every 120 seconds."),
    ("user", "What interval and retention are we using?"),
]


def _live(weave: Weave, session_id: str) -> None:
    """The conversation, then one recorded assembly (memories, summaries, audit record)."""
    meta = {"user_id": f"grower-{weave.tenant}", "agent_id": "greenbot"}
    weave.emit(EventType.SYSTEM_PROMPT, "You manage greenhouse telemetry.", session_id=session_id,
               role="system", meta=meta)  # fmt: skip
    for role, text in TURNS:
        kind = EventType.USER_MESSAGE if role == "user" else EventType.ASSISTANT_MESSAGE
        weave.emit(kind, text, session_id=session_id, role=role, meta=meta)
    weave.flush()
    weave.assemble(session_id, budget_tokens=160)
    weave.flush()
    weave.context.compact(session_id, window_tokens=160)  # maintenance done (it runs behind)


@pytest.fixture(scope="module")
def two_tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Weave, Weave]]:
    root: Path = tmp_path_factory.mktemp("ui-api")
    url = f"sqlite:///{root / 'shared.db'}"
    a = Weave.open(url, tenant="north", spool_dir=root / "spool-a", index=False)
    b = Weave.open(url, tenant="south", spool_dir=root / "spool-b", index=False)
    _live(a, "north-1")
    _live(b, "south-1")
    yield a, b
    a.close()
    b.close()


LOOPBACK = ("127.0.0.1", 40000)
REMOTE = ("203.0.113.9", 40000)


def test_non_local_clients_are_refused_without_the_token(two_tenants: tuple[Weave, Weave]) -> None:
    a, _ = two_tenants
    local_only = build_app(a, token=None)
    with TestClient(local_only, client=REMOTE, base_url="http://127.0.0.1:8765") as c:
        for path in ("/", "/api/sessions", "/static/app.js"):
            assert c.get(path).status_code == 403, path
    with TestClient(local_only, client=LOOPBACK, base_url="http://127.0.0.1:8765") as c:
        assert c.get("/api/sessions").status_code == 200
        assert c.get("/").status_code == 200
    # a loopback connection that asked for another host name (DNS rebinding) is refused
    with TestClient(local_only, client=LOOPBACK, base_url="http://attacker.example:8765") as c:
        assert c.get("/api/sessions").status_code == 403

    guarded = build_app(a, token="s3cret-token")
    with TestClient(guarded, client=REMOTE, base_url="http://10.1.2.3:8765") as c:
        assert c.get("/api/sessions").status_code == 403
        assert c.get("/api/sessions", headers={"authorization": "Bearer wrong"}).status_code == 403
        odd = {"authorization": "Bearer s3crét-töken".encode()}  # not ASCII: refused, no 500
        assert c.get("/api/sessions", headers=odd).status_code == 403
        ok = c.get("/api/sessions", headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200 and ok.json()[0]["session_id"] == "north-1"
        first = c.get("/?token=s3cret-token")  # the link printed at start
        assert first.status_code == 200 and "beeweave_ui_token" in first.headers["set-cookie"]
        assert c.get("/api/sessions").status_code == 200  # the cookie now carries it


def test_writes_need_the_action_header(two_tenants: tuple[Weave, Weave]) -> None:
    a, _ = two_tenants
    mem = a.store.timeline("north-1", types=(EventType.MEMORY,))[0]
    with TestClient(build_app(a), client=LOOPBACK, base_url="http://127.0.0.1:8765") as c:
        r = c.post(f"/api/memories/{mem.id}/confirm", json={})
        assert r.status_code == 403
        r = c.post(
            f"/api/memories/{mem.id}/invalidate", json={}, headers={"x-beeweave-action": "1"}
        )
        assert r.status_code == 400 and "reason" in r.json()["error"]
        r = c.post(f"/api/memories/{mem.id}/explode", json={}, headers={"x-beeweave-action": "1"})
        assert r.status_code == 400
    assert a.store.get([mem.id])[0].status.value == "active"


def test_bad_query_numbers_are_a_400_with_one_line(two_tenants: tuple[Weave, Weave]) -> None:
    a, _ = two_tenants
    with TestClient(build_app(a), client=LOOPBACK, base_url="http://127.0.0.1:8765") as c:
        for raw in ("9223372036854775808", "-9223372036854775809", "ten"):
            r = c.get("/api/sessions/north-1/graph", params={"seq_from": raw})
            assert r.status_code == 400 and "seq_from" in r.json()["error"], raw
            assert "\n" not in r.json()["error"]
        assert c.get("/api/sessions/north-1/graph", params={"seq_from": "0"}).status_code == 200


def _other_tenant_marks(weave: Weave, session_id: str) -> set[str]:
    """Every id and the session id of the other tenant: none may appear in an answer."""
    events = weave.store.timeline(session_id, include_inactive=True)
    return {session_id} | {e.id for e in events}


def test_every_route_is_scoped_by_tenant(two_tenants: tuple[Weave, Weave]) -> None:
    a, b = two_tenants
    app = build_app(a)
    mine = a.store.timeline("north-1")
    theirs = b.store.timeline("south-1")
    my_asm = next(e for e in mine if e.type == EventType.RETRIEVAL)
    their_asm = next(e for e in theirs if e.type == EventType.RETRIEVAL)
    their_mem = next(e for e in theirs if e.type == EventType.MEMORY)
    marks = _other_tenant_marks(b, "south-1")
    assert not marks & {e.id for e in mine}  # the two tenants really hold different rows
    own = {
        "/api/info": {}, "/api/sessions": {}, "/api/health": {},
        "/api/sessions/{sid}/graph": {"sid": "north-1"},
        "/api/sessions/{sid}/assemblies": {"sid": "north-1"},
        "/api/sessions/{sid}/memories": {"sid": "north-1"},
        "/api/sessions/{sid}/health": {"sid": "north-1"},
        "/api/events/{eid}": {"eid": mine[-2].id},
        "/api/assemblies/{eid}": {"eid": my_asm.id},
        "/api/search": {},
    }  # fmt: skip
    foreign = {
        "/api/sessions/{sid}/graph": {"sid": "south-1"},
        "/api/sessions/{sid}/assemblies": {"sid": "south-1"},
        "/api/sessions/{sid}/memories": {"sid": "south-1"},
        "/api/sessions/{sid}/health": {"sid": "south-1"},
        "/api/events/{eid}": {"eid": theirs[-2].id},
        "/api/assemblies/{eid}": {"eid": their_asm.id},
    }
    gets = {r.path for r in app.routes if isinstance(r, Route) and r.path.startswith("/api/")
            and "GET" in (r.methods or ())}  # fmt: skip
    assert gets == set(own), "a new API route needs a tenant-scoping case here"
    with TestClient(app, client=LOOPBACK, base_url="http://127.0.0.1:8765") as c:
        for path, params in own.items():
            query = {"q": "polling interval retention"} if path == "/api/search" else {}
            r = c.get(path.format(**params), params=query)
            assert r.status_code == 200, (path, r.text)
            body = r.text
            leaked = [m for m in marks if m in body]
            assert not leaked, f"{path} shows tenant south's rows: {leaked[:3]}"
            assert json.loads(body), f"{path} shows nothing: the check would prove nothing"
        for path, params in foreign.items():
            r = c.get(path.format(**params))
            asked = set(params.values())  # an error may name what was asked for
            leaked = [m for m in marks - asked if m in r.text]
            assert not leaked, f"{path} shows tenant south's rows: {leaked[:3]}"
            if r.status_code == 404:
                continue
            assert r.status_code == 200, (path, r.status_code)
            data = r.json()
            if isinstance(data, list):  # a session-keyed list: the other tenant's is empty here
                assert data == [], (path, data[:2])
            else:  # health of a session this tenant does not have: nothing counted
                assert all(h["assemblies"] == 0 and h["source_tokens"] == 0
                           for h in data["sessions"]), data  # fmt: skip
        r = c.post(
            f"/api/memories/{their_mem.id}/purge", json={}, headers={"x-beeweave-action": "1"}
        )
        assert r.status_code == 404
    assert b.store.get([their_mem.id])[0].status.value == "active"  # untouched


@pytest.fixture
def one_session(tmp_path: Path) -> Iterator[TestClient]:
    """A session with two user turns invalidated and one assembly made without a query."""
    with Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path / "sp", index=False) as w:
        _live(w, "s-1")
        said = [e.id for e in w.store.timeline("s-1", types=(EventType.USER_MESSAGE,))]
        w.store.invalidate(said[:2], "typed by mistake")
        with TestClient(build_app(w), client=LOOPBACK, base_url="http://127.0.0.1:8765") as c:
            yield c


def test_the_window_counts_hidden_events_apart_in_both_figures(one_session: TestClient) -> None:
    g = one_session.get("/api/sessions/s-1/graph").json()
    assert g["hidden"] == sum(n["status"] != "active" for n in g["nodes"]) >= 2
    assert g["shown"] + g["hidden"] == len(g["nodes"])
    assert g["shown"] == g["total"]  # the whole session is in the window: the figures agree


def test_an_assembly_without_a_query_shows_the_turn_it_recalled_for(one_session: TestClient):
    (made,) = one_session.get("/api/sessions/s-1/assemblies").json()
    one = one_session.get(f"/api/assemblies/{made['id']}").json()
    latest = [text for role, text in TURNS if role == "user"][-1]
    for row in (made, one):
        assert row["query"] == latest and row["asked"] is False
