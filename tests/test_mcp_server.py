"""``beeweave mcp`` driven by the official ``mcp`` SDK client: over stdio and over
streamable HTTP, each in a real subprocess on a real SQLite file.  A remote (non-loopback)
binding needs the bearer token the server prints; a request without it is refused."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from beeweave_core import Weave
from beeweave_core.access import is_loopback
from beeweave_core.events import EventType
from beeweave_core.memory_ops import namespace
from beeweave_mcp.http import TokenGuard

REPO = Path(__file__).resolve().parents[1]
PREF = "Tomás wants every invoice total shown in Chilean pesos."


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "BEEWEAVE_HOME": str(tmp_path / "home"),
            "BEEWEAVE_INDEX": "off"}  # fmt: skip


def _seed(db: Path) -> None:
    """A conversation of user tomas, for get_context to assemble."""
    with Weave.open(f"sqlite:///{db}", tenant="acme", spool_dir=db.parent / "sp", index=False) as w:
        w.emit("user_message", "Please draft the March invoice for the Santiago client.",
               session_id="chat-1", meta={"user_id": "tomas"})  # fmt: skip
        w.emit("assistant_message", "Drafting it now.", session_id="chat-1",
               role="assistant", meta={"user_id": "tomas"})  # fmt: skip
        assert w.flush()


def _args(db: Path, *extra: str) -> list[str]:
    return ["-m", "beeweave_cli", "mcp", "--url", f"sqlite:///{db}", "--tenant", "acme",
            "--user", "tomas", "--agent", "desk", *extra]  # fmt: skip


async def _exercise(client: Client) -> None:
    """List tools, remember, recall, get_context: the same checks on every transport."""
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"remember", "recall", "update_memory", "forget", "list_memories", "memory",
            "get_context"} <= names  # fmt: skip
    stored = await client.call_tool("remember", {"text": PREF, "kind": "preference"})
    text = stored.content[0].text
    assert text.startswith("remembered "), text
    mid = text.split()[1]
    recalled = (await client.call_tool("recall", {"query": "invoice pesos"})).content[0].text
    assert f"[{mid}]" in recalled and PREF in recalled
    bad = (await client.call_tool("recall", {"query": "  "})).content[0].text
    assert bad == "error: recall needs a non-empty query"
    raw = (await client.call_tool("get_context", {"session_id": "chat-1",
           "query": "which currency for the invoice?", "budget_tokens": 600})).content[0].text  # fmt: skip
    ctx = json.loads(raw)
    assert ctx["total_tokens"] <= 600
    seen = "\n".join(m["content"] for m in ctx["messages"])
    assert "March invoice for the Santiago client" in seen and PREF in seen
    memories = await client.read_resource("beeweave://memories")
    assert mid in memories.contents[0].text
    made = await client.call_tool("memory", {"command": "create", "path": "/memories/clients.md",
                                             "file_text": "Santiago client: net 30"})  # fmt: skip
    assert made.content[0].text == "File created successfully at: /memories/clients.md"
    refused = await client.call_tool("memory", {"command": "view", "path": "/memories/../x"})
    assert refused.content[0].text.startswith("Error:")


def _check_stored(db: Path) -> None:
    with Weave.open(f"sqlite:///{db}", tenant="acme", spool_dir=db.parent / "sp", index=False) as w:
        mems = w.store.timeline(namespace("tomas", "default"), types=(EventType.MEMORY,))
        assert [(m.content, m.agent_id, m.user_id) for m in mems] == [
            (PREF, "desk", "tomas"), ("Santiago client: net 30", "desk", "tomas")]  # fmt: skip


async def test_stdio(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    _seed(db)
    params = StdioServerParameters(command=sys.executable, args=_args(db), env=_env(tmp_path),
                                   cwd=str(tmp_path))  # fmt: skip
    async with Client(params, read_timeout_seconds=60) as client:
        await _exercise(client)
    _check_stored(db)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[Any]:
    """Start ``beeweave mcp --transport http`` on a host; yields (url, token or None)."""
    procs: list[subprocess.Popen[str]] = []

    def start(host: str) -> tuple[str, str | None]:
        port = _free_port(host)
        proc = subprocess.Popen(
            [sys.executable, *_args(tmp_path / "w.db", "--transport", "http", "--host", host,
                                    "--port", str(port))],
            env={**os.environ, **_env(tmp_path)}, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(proc)
        token = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        if not is_loopback(host):
            assert proc.stderr is not None
            lines = [proc.stderr.readline() for _ in range(2)]
            token = lines[1].rsplit(": ", 1)[1].strip()
        return f"http://{host}:{port}/mcp", token

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=20)
        p.stderr.close()  # type: ignore[union-attr]


async def test_http_on_localhost(tmp_path: Path, http_server: Any) -> None:
    _seed(tmp_path / "w.db")
    url, token = http_server("127.0.0.1")
    assert token is None
    async with Client(streamable_http_client(url), read_timeout_seconds=60) as client:
        await _exercise(client)
    _check_stored(tmp_path / "w.db")


async def test_remote_clients_need_the_token() -> None:
    """The guard on the HTTP app: a non-local client without the token is refused.

    Tested on the ASGI app with a non-loopback client address rather than over a real
    outward interface: tests send traffic to loopback only.
    """
    await _guard_refuses_remote_without_token()


async def _guard_refuses_remote_without_token() -> None:
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        sent.append({"type": "reached"})

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    remote = {"type": "http", "client": ("203.0.113.7", 51000), "headers": []}
    await TokenGuard(app, None)(remote, None, send)
    assert sent[0]["status"] == 403 and {"type": "reached"} not in sent
    sent.clear()
    await TokenGuard(app, "s3cret")(remote, None, send)
    assert sent[0]["status"] == 401
    sent.clear()
    # a token that is not ASCII is a wrong token (401), never an error in the guard
    odd = {**remote, "headers": [(b"authorization", "Bearer s3crét✓".encode())]}
    await TokenGuard(app, "s3cret")(odd, None, send)
    assert sent[0]["status"] == 401
    sent.clear()
    authed = {**remote, "headers": [(b"authorization", b"Bearer s3cret")]}
    await TokenGuard(app, "s3cret")(authed, None, send)
    assert sent == [{"type": "reached"}]
    sent.clear()
    await TokenGuard(app, None)({**remote, "client": ("127.0.0.1", 5)}, None, send)
    assert sent == [{"type": "reached"}]


async def test_token_guard_on_the_app() -> None:
    await _guard_refuses_remote_without_token()


async def test_a_client_cannot_pick_another_scope(tmp_path: Path) -> None:
    """The server's scope is fixed: a ``scope`` argument naming another one is refused in
    one line, and a memory of another scope cannot be updated or forgotten by id (a
    control: the same calls through unfixed ops do reach it)."""
    from beeweave_core.memory_ops import MemoryOps
    from beeweave_mcp.server import ServerOptions, build_server

    with Weave.open(f"sqlite:///{tmp_path / 'm.db'}", tenant="acme", index=False,
                    spool_dir=tmp_path / "sp") as w:  # fmt: skip
        hidden = MemoryOps(w, user_id="tomas", scope="vault")
        mid = hidden.remember("The locker combination is 5521.", kind="fact").ids[0]
        server = build_server(w, ServerOptions(user_id="tomas", scope="default"))

        async def text(tool: str, args: dict[str, object]) -> str:
            res = await server.call_tool(tool, args)
            return res.content[0].text  # type: ignore[union-attr]

        for tool, args in (("recall", {"query": "locker combination", "scope": "vault"}),
                           ("remember", {"text": "Use the side door.", "scope": "vault"}),
                           ("list_memories", {"scope": "vault"})):  # fmt: skip
            out = await text(tool, args)
            assert out.startswith(f"error: {tool}: the scope is fixed to 'default'"), out
            assert "\n" not in out
        assert "5521" not in await text("recall", {"query": "locker combination"})
        changed = await text("update_memory", {"memory_id": mid, "text": "It is 0000 now."})
        assert changed.startswith("error: no memory"), changed
        gone = await text("forget", {"memory_id": mid, "reason": "client asked"})
        assert gone.startswith("error: no memory"), gone
        assert [m.content for m in hidden.weave.store.timeline(namespace("tomas", "vault"),
                types=(EventType.MEMORY,))] == ["The locker combination is 5521."]  # fmt: skip
        assert "5521" in hidden.recall("locker combination").text  # the control reads it


@contextlib.asynccontextmanager
async def _in_process(tmp_path: Path) -> AsyncIterator[Client]:
    """The SDK's own client talking to the server in process, on a real SQLite file."""
    from beeweave_mcp.server import ServerOptions, build_server

    with Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path / "sp", index=False) as w:
        async with Client(build_server(w, ServerOptions(user_id="tomas"))) as client:
            yield client


async def test_the_server_reports_the_package_version(tmp_path: Path) -> None:
    import beeweave_core

    async with _in_process(tmp_path) as client:
        assert client.server_info.version == beeweave_core.__version__


async def test_a_rejected_argument_is_one_error_line(tmp_path: Path) -> None:
    async with _in_process(tmp_path) as client:
        for name, args in [("get_context", {"session_id": "chat-1", "budget_tokens": "lots"}),
                           ("remember", {}), ("recall", {"query": 7})]:  # fmt: skip
            text = (await client.call_tool(name, args)).content[0].text
            assert text.startswith(f"error: {name}: ") and "\n" not in text, text
            assert "pydantic" not in text and "lots" not in text


async def test_the_memory_tool_creates_no_file_under_a_file(tmp_path: Path) -> None:
    create = {"command": "create", "file_text": "net 30"}
    async with _in_process(tmp_path) as client:
        await client.call_tool("memory", {**create, "path": "/memories/clients.md"})
        nested = await client.call_tool("memory", {**create, "path": "/memories/clients.md/x.md"})
        assert nested.content[0].text == "Error: /memories/clients.md is a file, not a directory"
        listing = await client.call_tool("memory", {"command": "view", "path": "/memories"})
        assert "x.md" not in listing.content[0].text
