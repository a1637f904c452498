"""A newcomer's first calls: each works, or fails with one line that names the fix.

Bad arguments raise one ``TypeError``/``ValueError`` line; a closed or unreachable store
never crashes the agent through a hook or a memory read (one warning, the agent goes on),
while the checkpointer raises one ``CheckpointStoreError`` line naming the store.  The
outage tests cut a real TCP relay in front of the test Neo4j (``tests/relay.py``); the
credential tests run a second test Neo4j of their own with authentication on.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from beeweave_core import Weave
from beeweave_core.checkpoints import CheckpointStoreError
from beeweave_core.errors import StoreError
from beeweave_langchain import (
    BeeWeaveCallbackHandler,
    BeeWeaveChatMessageHistory,
    BeeWeaveCheckpointer,
    BeeWeaveMemory,
    BeeWeaveRetriever,
    beeweave_context_hook,
)
from beeweave_langchain.testing import FakeToolCallingChatModel
from tests.conftest import neo4j_auth
from tests.relay import Relay


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


def test_a_path_given_to_the_checkpointer_points_at_from_conn_string(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError) as err:
        BeeWeaveCheckpointer("x.db")  # type: ignore[arg-type]
    assert "from_conn_string('x.db')" in one_line(err.value)
    assert list(tmp_path.iterdir()) == []  # refused before anything was opened


def test_a_handler_with_no_weave_asks_for_an_open_one():
    with pytest.raises(TypeError) as err:
        BeeWeaveCallbackHandler(None)  # type: ignore[arg-type]
    message = one_line(err.value)
    assert "BeeWeaveCallbackHandler" in message and "Weave.open" in message


def test_retrieve_names_a_k_or_an_id_of_the_wrong_type(weave_factory):
    weave = weave_factory(index=False)
    with pytest.raises(TypeError, match="k must be an int"):
        weave.retrieve("q", k="a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_id must be a string"):
        weave.retrieve("q", session_id=3)  # type: ignore[arg-type]
    assert weave.retrieve("q", k=0) == []


def test_an_answer_of_none_is_refused_and_nothing_is_stored(weave_factory):
    memory = BeeWeaveMemory(weave=weave_factory(index=False), session_id="s-none")
    with pytest.raises(ValueError) as err:
        memory.save_context({"input": "hello"}, {"output": None})
    assert "outputs['output'] is None" in one_line(err.value)
    assert memory.buffer == ""


def _closed_weave_parts(weave: Weave) -> dict[str, object]:
    return {
        "hook": beeweave_context_hook(weave, budget_tokens=500),
        "memory": BeeWeaveMemory(weave=weave, session_id="s-closed"),
        "history": BeeWeaveChatMessageHistory(weave, "s-closed"),
        "retriever": BeeWeaveRetriever(weave=weave, k=3, session_id="s-closed"),
    }


def test_hooks_and_memory_reads_on_a_closed_weave_warn_once_and_go_on(weave_factory, caplog):
    weave = weave_factory(index=False)
    parts = _closed_weave_parts(weave)
    weave.close()
    said = [HumanMessage("what did we agree?")]
    config = {"configurable": {"thread_id": "s-closed"}}
    with caplog.at_level(logging.WARNING, logger="beeweave"):
        for _ in range(2):
            out = parts["hook"].invoke({"messages": said}, config)  # type: ignore[attr-defined]
            assert out["llm_input_messages"] == said  # the agent's own messages, unchanged
            assert parts["memory"].load_memory_variables({"input": "x"}) == {"history": ""}  # type: ignore[attr-defined]
            parts["memory"].save_context({"input": "x"}, {"output": "y"})  # type: ignore[attr-defined]
            assert parts["history"].messages == []  # type: ignore[attr-defined]
            assert parts["retriever"].invoke("agree") == []  # type: ignore[attr-defined]
    warnings = [r.getMessage() for r in caplog.records if "without memory" in r.getMessage()]
    assert len(warnings) == 4, warnings  # one per component, not one per call


def test_the_checkpointer_on_a_closed_weave_raises_one_line_naming_the_store(weave_factory):
    weave = weave_factory(index=False)
    saver = BeeWeaveCheckpointer(weave)
    weave.close()
    with pytest.raises(CheckpointStoreError) as err:
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert weave.url in one_line(err.value) and "closed" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def _agent(weave: Weave, *, checkpointer: bool):
    from langgraph.prebuilt import create_react_agent

    model = FakeToolCallingChatModel(messages=iter([AIMessage("noted")] * 4))
    saver = BeeWeaveCheckpointer(weave) if checkpointer else None
    hook = beeweave_context_hook(weave, budget_tokens=500)
    return create_react_agent(model, [], pre_model_hook=hook, checkpointer=saver)


@pytest.mark.neo4j
def test_a_graph_run_while_neo4j_is_down_fails_fast_in_one_line(weave_factory, neo4j_uri, tmp_path):
    tenant = weave_factory("neo4j").tenant  # direct: purges the tenant after the test
    host, port = neo4j_uri.rsplit("//", 1)[1].split(":")
    relay = Relay(host, int(port))
    weave = Weave.open(f"bolt://127.0.0.1:{relay.port}", tenant=tenant, auth=neo4j_auth(),
                       index=False, spool_dir=tmp_path / "relay-spool")  # fmt: skip
    try:
        with_saver, hook_only = _agent(weave, checkpointer=True), _agent(weave, checkpointer=False)
        first = {"configurable": {"thread_id": "down-1"}}
        with_saver.invoke({"messages": [("user", "hello")]}, first)
        relay.cut()
        started = time.monotonic()
        with pytest.raises(CheckpointStoreError) as err:
            with_saver.invoke({"messages": [("user", "again")]}, first)
        assert time.monotonic() - started < 2.0
        assert f"127.0.0.1:{relay.port}" in one_line(err.value)
        assert err.value.__cause__ is None and err.value.__suppress_context__
        answer = hook_only.invoke({"messages": [("user", "still there?")]},
                                  {"configurable": {"thread_id": "down-2"}})  # fmt: skip
        assert answer["messages"][-1].content == "noted"  # no checkpointer: the agent went on
    finally:
        relay.cut()
        weave.close()


@pytest.mark.neo4j
def test_closing_while_neo4j_is_down_returns_soon_and_the_next_weave_stores_the_rest(
    weave_factory, neo4j_uri, tmp_path
):
    tenant = weave_factory("neo4j").tenant  # direct: purges the tenant after the test
    host, port = neo4j_uri.rsplit("//", 1)[1].split(":")
    relay = Relay(host, int(port))
    spool = tmp_path / "relay-spool"

    def open_weave() -> Weave:
        return Weave.open(f"bolt://127.0.0.1:{relay.port}", tenant=tenant, auth=neo4j_auth(),
                          index=False, spool_dir=spool)  # fmt: skip

    weave = open_weave()
    weave.emit("user_message", "the harbour crane is booked for Tuesday", session_id="s-exit")
    assert weave.flush(10)
    relay.cut()
    weave.emit("user_message", "move the crane to Thursday instead", session_id="s-exit")
    started = time.monotonic()
    weave.close()  # the store is gone: what it has not taken stays spooled
    assert time.monotonic() - started < 8.0  # one store call in flight at most, not 30 s
    relay = Relay(host, int(port), listen_on=relay.port)  # the server is back, same address
    try:
        with open_weave() as again:
            assert again.flush(30)
            texts = [e.content for e in again.store.timeline("s-exit")]
        assert texts == ["the harbour crane is booked for Tuesday",
                         "move the crane to Thursday instead"]  # fmt: skip
    finally:
        relay.cut()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BEEWEAVE_HOME": str(home), "PYTHONPATH": str(Path.cwd())}
    return subprocess.run([sys.executable, "-m", "beeweave_cli", *args],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip


def test_an_unreachable_routing_url_is_reported_in_one_line(tmp_path):
    done = _cli(tmp_path, "sessions", "--url", f"neo4j://127.0.0.1:{_free_port()}")
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "not reachable" in done.stderr


def test_a_plain_path_opens_the_same_file_as_from_conn_string(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "home"))
    with Weave.open("a.db", index=False) as weave:
        weave.emit("user_message", "plain path", session_id="s-path")
        assert weave.flush()
    assert (tmp_path / "a.db").exists()
    with BeeWeaveCheckpointer.from_conn_string("a.db") as saver:
        assert saver.weave.store.timeline("s-path")[0].content == "plain path"


SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "neo4j-test-server"
GOOD_PASSWORD = "hive-keeper-7"


@pytest.fixture(scope="module")
def _locked_boot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[str]]:
    """``neo4j-test-server start`` for a Neo4j that wants ``neo4j``/GOOD_PASSWORD, on a port
    and state dir of its own (the shared test server runs with authentication off)."""
    env = {**os.environ, "NEO4J_PORT": str(_free_port()), "NEO4J_TEST_AUTH": GOOD_PASSWORD,
           "BEEWEAVE_NEO4J_STATE": str(tmp_path_factory.mktemp("neo4j-locked"))}  # fmt: skip
    boot = subprocess.Popen([SERVER_SCRIPT, "start"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        yield boot
    finally:
        boot.wait(600)
        subprocess.run([SERVER_SCRIPT, "stop"], env=env, check=False, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module", autouse=True)
def _boot_locked_early(request: pytest.FixtureRequest) -> None:
    """When a selected test needs the locked server, it starts with this module's first
    test and boots (about 20 s) while the others run."""
    if any(item.path == request.path and "locked_neo4j" in item.fixturenames
           for item in request.session.items):  # fmt: skip
        request.getfixturevalue("_locked_boot")


@pytest.fixture(scope="module")
def locked_neo4j(_locked_boot: subprocess.Popen[str]) -> str:
    """The locked server's URI, once it answers; checks the credentials the script printed."""
    out, _ = _locked_boot.communicate(timeout=600)
    assert _locked_boot.returncode == 0, "the auth-enabled test Neo4j did not start"
    printed = dict(line.split("=", 1) for line in out.splitlines())
    assert printed["NEO4J_AUTH"] == f"neo4j:{GOOD_PASSWORD}"
    return printed["NEO4J_URI"]


@pytest.mark.neo4j
@pytest.mark.parametrize("scheme", ["bolt", "neo4j"])
def test_a_wrong_password_is_named_as_such_in_a_second(locked_neo4j, tmp_path, scheme):
    url = locked_neo4j.replace("bolt://", f"{scheme}://")
    started = time.monotonic()
    with pytest.raises(StoreError) as err:
        Weave.open(url, auth=("neo4j", "wrong-password"), index=False, spool_dir=tmp_path)
    assert time.monotonic() - started < 2.0
    message = one_line(err.value)
    assert "refused the credentials" in message and "NEO4J_AUTH" in message, message
    assert "not reachable" not in message and "wrong-password" not in message
    assert err.value.__cause__ is None


@pytest.mark.neo4j
def test_the_cli_says_the_credentials_were_refused_in_one_line(locked_neo4j, tmp_path):
    done = _cli(tmp_path, "sessions", "--url", locked_neo4j, "--auth", "neo4j:wrong")
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "refused the credentials" in done.stderr and "not reachable" not in done.stderr
    assert done.stdout == ""


@pytest.mark.neo4j
def test_the_right_password_opens_the_locked_server(locked_neo4j, tmp_path):
    """The control: the same server, reached the same way, lets the right password in."""
    done = _cli(tmp_path, "sessions", "--json", "--url", locked_neo4j,
                "--auth", f"neo4j:{GOOD_PASSWORD}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
