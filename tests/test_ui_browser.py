"""`beeweave ui` in a real headless Chromium (Debian's package, driven by Playwright).

The real server runs in a subprocess over a home written by `beeweave demo`, plus one
10,000-event session.  Screenshots go to test-artifacts/ui/ (their paths are printed,
so CI's log lists them).  Without /usr/bin/chromium the tests skip locally and fail on
CI (`scripts/test` installs it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core.events import Event, EventType
from beeweave_core.weave import open_store

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "ui"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
DEMO = "demo-ui"
BULK = "bulk-10k"
BULK_EVENTS = 10_000
TURNS = "turns-400"
TURN_KINDS = [(EventType.USER_MESSAGE, "user"), (EventType.MODEL_CALL, None),
              (EventType.TOOL_INVOCATION, "assistant"), (EventType.TOOL_RESULT, "tool"),
              (EventType.ASSISTANT_MESSAGE, "assistant")]  # fmt: skip

if not Path(CHROMIUM).exists():  # a broken setup, not a reason to skip: scripts/test installs it
    pytest.fail(f"{CHROMIUM} is missing: run scripts/test or apt-get install chromium",
                pytrace=False)  # fmt: skip
from playwright import sync_api  # noqa: E402  (the dev extra brings it)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bulk_session(db: Path) -> None:
    """A long run: a user turn every 10 events, each later event caused by the one before."""
    store = open_store(f"sqlite:///{db}")
    try:
        prev: str | None = None
        batch: list[Event] = []
        for i in range(BULK_EVENTS):
            kind = EventType.USER_MESSAGE if i % 10 == 0 else EventType.TOOL_RESULT
            ev = Event(id=f"bulk-{i:05d}", session_id=BULK, type=kind,
                       role="user" if i % 10 == 0 else "tool",
                       content=f"probe {i}: kiln zone {i % 17} reads {400 + i % 90} degrees",
                       parents=(prev,) if prev and i % 10 else ())  # fmt: skip
            batch.append(ev)
            prev = ev.id
            if len(batch) == 1000:
                store.append(batch)
                batch = []
    finally:
        store.close()


def _turns_session(db: Path) -> None:
    """An agent run of 80 turns (user, model call, tool call, result, answer: 400 events),
    the first three user turns invalidated afterwards (shown dashed, counted apart)."""
    store = open_store(f"sqlite:///{db}")
    try:
        events, prev = [], None
        for i in range(400):
            kind, role = TURN_KINDS[i % 5]
            events.append(Event(id=f"turn-{i:03d}", session_id=TURNS, type=kind, role=role,
                                content=f"step {i}: crate {i // 5} of plum jam, shelf B{i % 7}",
                                parents=(prev,) if prev and i % 5 else ()))  # fmt: skip
            prev = events[-1].id
        store.append(events)
        store.invalidate(["turn-000", "turn-005", "turn-010"], "asked twice")
    finally:
        store.close()


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("ui-home")
    env = {**os.environ, "BEEWEAVE_HOME": str(home),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    cli = [sys.executable, "-m", "beeweave_cli"]
    subprocess.run([*cli, "demo", "--session", DEMO], env=env, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    _bulk_session(home / "beeweave.db")
    _turns_session(home / "beeweave.db")
    port = _free_port()
    proc = subprocess.Popen([*cli, "ui", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get(base, "/api/info")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"ui server did not start: {proc.stdout.read()!r}") from None  # type: ignore[union-attr]
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        proc.stdout.close()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def page(server: str) -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        yield pg
        browser.close()
    assert not errors, f"JavaScript errors: {errors}"


def _open(page: Any, server: str, hash_: str) -> None:
    page.goto(f"{server}/{hash_}")
    page.wait_for_function("h => document.body.dataset.loaded === h", arg=hash_)
    assert page.locator("[data-testid=error]").count() == 0, page.inner_text("main")


def _shot(page: Any, name: str, *, full: bool = False) -> Path:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    print(f"screenshot: {path}")
    return path


def _click_node(page: Any, event_id: str) -> None:
    """A real mouse click where cytoscape drew the node."""
    page.wait_for_function("() => window.beeweave.ready")
    box = page.locator("#graph").bounding_box()
    pos = page.evaluate(
        "id => { const n = window.beeweave.cy.getElementById(id); window.beeweave.cy.center(n);"
        " return n.renderedPosition(); }",
        event_id,
    )
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])


def test_sessions_page_lists_and_filters(page: Any, server: str) -> None:
    _open(page, server, "#/sessions")
    rows = page.locator("[data-testid=sessions] tbody tr")
    assert rows.count() == 3
    assert "demo-user" in page.inner_text("[data-testid=sessions]")
    _open(page, server, f"#/sessions?q={DEMO}")
    assert page.locator("[data-testid=sessions] tbody tr").count() == 1
    assert "dataops" in page.inner_text("[data-testid=sessions]")
    _shot(page, "sessions")


def test_graph_event_ancestry_and_the_assembly_that_used_it(page: Any, server: str) -> None:
    graph = _get(server, f"/api/sessions/{DEMO}/graph")
    result = next(n for n in graph["nodes"]
                  if n["type"] == "tool_result" and "JOB-7731" in n["preview"])  # fmt: skip
    invocation = next(n for n in graph["nodes"] if n["seq"] == result["seq"] - 1)
    _open(page, server, f"#/session/{DEMO}")
    assert page.locator("[data-testid=timeline] tbody tr").count() == len(graph["nodes"])
    _click_node(page, result["id"])
    page.wait_for_selector(f"[data-testid=detail-title]:has-text('#{result['seq']} tool_result')")
    ancestry = page.inner_text("[data-testid=ancestry]")
    assert f"#{invocation['seq']} tool_invocation" in ancestry and "user_message" in ancestry
    classes = page.evaluate(
        "ids => ids.map(id => window.beeweave.cy.getElementById(id).classes())",
        [result["id"], invocation["id"]],
    )
    assert "chosen" in classes[0] and "ancestor" in classes[1]
    page.evaluate("() => { window.beeweave.cy.fit(window.beeweave.cy.elements(), 20); }")
    _shot(page, "graph")
    used = page.locator("[data-testid=used-by-link]")
    assert used.count() >= 1
    used.first.click()
    page.wait_for_function("() => document.body.dataset.loaded.startsWith('#/assembly/')")
    highlighted = page.locator("tr.hl")
    assert highlighted.count() >= 1 and "JOB-7731" in highlighted.first.inner_text()
    rows = page.locator("[data-testid=layers] tbody tr")
    layer_rows = [rows.nth(i).locator("td").all_inner_texts()[:3] for i in range(rows.count())]
    assert [r[0] for r in layer_rows] == ["system", "working", "recalled", "immediate"]
    assert all(int(tokens) <= int(budget) for _, tokens, budget in layer_rows)
    total = page.inner_text("[data-testid=total-tokens]")
    used_tokens, budget = (int(x) for x in total.split("/"))
    assert 0 < used_tokens <= budget
    assert page.locator("[data-testid=left-out] tbody tr").count() >= 1
    _shot(page, "assembly", full=True)
    # provenance clicks through to the source event, selected in its session's graph
    page.locator("tr.hl [data-testid=source-link]").first.click()
    page.wait_for_selector("[data-testid=detail-title]")
    assert page.locator("[data-testid=ancestry]").count() == 1


def test_search_shows_per_path_ranks(page: Any, server: str) -> None:
    _open(page, server, "#/search")
    page.fill("[data-testid=search-input]", "how many rows per batch")
    page.click("[data-testid=search-go]")
    page.wait_for_selector("[data-testid=hit]")
    head = page.inner_text("[data-testid=hits] thead")
    assert "lexical" in head and "fused" in head
    assert "#" in page.inner_text("[data-testid=hit] >> nth=0")
    _shot(page, "search")


def _recalled_ids(server: str, query: str) -> list[str]:
    return [h["id"] for h in _get(server, f"/api/search?q={urllib.request.quote(query)}&k=20")]


def test_memory_actions_delete_invalidate_confirm(page: Any, server: str) -> None:
    query = "monthly budget limit in dollars"
    mems = _get(server, f"/api/sessions/{DEMO}/memories")
    budget = next(m for m in mems if m["status"] == "active" and "$200 per month" in m["content"])
    assert budget["id"] in _recalled_ids(server, query)  # recalled before the delete
    _open(page, server, f"#/memories/{DEMO}")
    row = page.locator(f"[data-testid=memory][data-id='{budget['id']}']")
    page.once("dialog", lambda d: d.accept())
    row.locator("[data-testid=purge]").click()
    row.wait_for(state="detached")
    assert budget["id"] not in _recalled_ids(server, query)  # gone from recall
    _open(page, server, f"#/search?q={urllib.request.quote(query)}&session=")
    page.wait_for_selector("[data-testid=hit]")
    assert page.locator(f"[data-testid=hit] a[href*='{budget['id']}']").count() == 0

    others = [m for m in mems if m["status"] == "active" and m["id"] != budget["id"]]
    kept, wrong = others[0], others[1]
    _open(page, server, f"#/memories/{DEMO}")
    page.once("dialog", lambda d: d.accept())
    page.locator(f"[data-testid=memory][data-id='{kept['id']}'] [data-testid=confirm]").click()
    page.wait_for_selector(f"[data-testid=memory][data-id='{kept['id']}'] :text('confirmed')")
    page.once("dialog", lambda d: d.accept("the user says this was never agreed"))
    page.locator(f"[data-testid=memory][data-id='{wrong['id']}'] [data-testid=invalidate]").click()
    cell = f"[data-testid=memory][data-id='{wrong['id']}'] .status-invalidated"
    page.wait_for_selector(cell)
    assert "never agreed" in page.inner_text(cell)
    text = page.inner_text("[data-testid=memories]")
    assert "[object" not in text
    chains = [m for m in mems if m["supersedes"]]
    assert chains, "the demo overturns a batch size: some memory supersedes another"
    for m in chains:
        row = page.inner_text(f"[data-testid=memory][data-id='{m['id']}']")
        assert f"supersedes #{next(x['seq'] for x in mems if x['id'] == m['supersedes'][0])}" in row
    _shot(page, "memories", full=True)
    audit = [
        n for n in _get(server, f"/api/sessions/{DEMO}/graph")["nodes"] if n["type"] == "warning"
    ]
    assert len(audit) == 3  # each action is recorded as an event
    assert wrong["id"] not in _recalled_ids(server, wrong["content"])


def test_health_page(page: Any, server: str) -> None:
    _open(page, server, "#/health")
    assert page.locator("[data-testid=health] tbody tr").count() == 3  # one per session
    assert "%" in page.inner_text("[data-testid=pooled]")
    _shot(page, "health")


def test_ten_thousand_events_render_in_a_window(page: Any, server: str) -> None:
    t0 = time.perf_counter()
    _open(page, server, f"#/session/{BULK}")
    page.wait_for_function("() => window.beeweave.ready")
    seconds = time.perf_counter() - t0
    print(f"10k-event session: first window drawn in {seconds:.2f} s")
    assert seconds < 5.0
    info = page.inner_text("[data-testid=window]")
    assert f"of {BULK_EVENTS}" in info
    assert page.evaluate("() => window.beeweave.cy.nodes().length") == 400
    _click_node(page, f"bulk-{BULK_EVENTS - 2:05d}")
    page.wait_for_selector(f"[data-testid=detail-title]:has-text('#{BULK_EVENTS - 2}')")
    assert page.locator("[data-testid=ancestry] li").count() == 8  # back to the turn's user message
    assert "null" not in page.inner_text("[data-testid=detail]").splitlines()  # no empty part shown
    _shot(page, "bulk")
    page.click("text=◀ earlier")
    page.wait_for_function("() => document.body.dataset.loaded.includes('from=')")
    assert f"#{BULK_EVENTS - 800}–#{BULK_EVENTS - 401}" in page.inner_text("[data-testid=window]")


def test_a_400_event_session_opens_legible(page: Any, server: str) -> None:
    _open(page, server, f"#/session/{TURNS}")
    page.wait_for_function("() => window.beeweave.ready")
    info = page.inner_text("[data-testid=window]")
    assert "of 397 active (397 shown, and 3 hidden, dashed)" in info  # both figures alike
    cy = "window.beeweave.cy"
    assert page.evaluate(f"() => {cy}.zoom()") >= 1.0  # labels at full size, not dots
    on_screen = page.evaluate(
        f"() => {cy}.nodes().filter(n => {{ const p = n.renderedPosition();"
        f" return p.x >= 0 && p.x <= {cy}.width() && p.y >= 0 && p.y <= {cy}.height(); }}).length"
    )
    assert 40 <= on_screen <= 200  # the latest turns, whole, not all 400 squeezed
    latest = page.evaluate(f"() => {cy}.getElementById('turn-399').renderedPosition()")
    assert 0 <= latest["x"] <= page.evaluate(f"() => {cy}.width()")
    box = page.locator("#graph").bounding_box()
    page.mouse.move(box["x"] + latest["x"], box["y"] + latest["y"])
    page.wait_for_function(f"() => {cy}.getElementById('turn-399').hasClass('hover')")
    shot = _shot(page, "graph-400")
    assert shot.stat().st_size > 20_000
