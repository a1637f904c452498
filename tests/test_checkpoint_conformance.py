"""LangGraph's own checkpointer conformance suite against BeeWeaveCheckpointer, both backends.

``langgraph-checkpoint-conformance`` detects which capabilities a saver overrides and
runs their spec tests through the async API.  BeeWeave must implement — and pass —
every one: the five base capabilities and the optional ``delete_for_runs``,
``copy_thread`` and ``prune``.  The report is printed into the test output (outside
pytest's capture) so CI logs show it.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport

from beeweave_core.weave import Weave
from beeweave_langchain.checkpoint import AsyncBeeWeaveCheckpointer, BeeWeaveCheckpointer

from .conftest import neo4j_auth

ALL = {c.value for c in ALL_CAPABILITIES}


def show(report: CapabilityReport, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        report.print_report()
        counts = {
            n: f"{r.tests_passed}/{r.tests_passed + r.tests_failed}"
            for n, r in report.results.items()
        }
        print(f"  {report.checkpointer_name} spec tests passed: {json.dumps(counts)}")


def check(report: CapabilityReport) -> None:
    detected = {name for name, r in report.results.items() if r.detected}
    assert detected == ALL, f"capabilities not implemented: {sorted(ALL - detected)}"
    failures = {n: r.failures for n, r in report.results.items() if r.passed is not True}
    assert not failures, failures
    assert report.passed_all_base() and report.passed_all()
    assert report.conformance_level() == "FULL"
    # every spec test ran: a capability with zero tests would pass vacuously
    assert all(r.tests_passed > 0 for r in report.results.values())


async def test_conformance(
    backend: str,
    weave_factory: Callable[..., Weave],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every base and optional capability, on the weave's own store (SQLite file / Neo4j)."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    savers: list[BeeWeaveCheckpointer] = []

    @checkpointer_test(name=f"BeeWeaveCheckpointer[{backend}]")
    async def factory() -> AsyncIterator[BeeWeaveCheckpointer]:
        saver = BeeWeaveCheckpointer.from_weave(weave_factory(backend, tenant=tenant, index=False))
        savers.append(saver)
        yield saver

    try:
        report = await validate(factory)
    finally:
        purge = getattr(savers[0].store, "purge_tenant", None) if savers else None
        if purge is not None:
            purge()
    show(report, capsys)
    check(report)


async def test_conformance_async_from_conn_string(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``AsyncSqliteSaver``-shaped factory: ``async with …from_conn_string(...)``; on
    Neo4j its writes await the async driver (no worker thread), on SQLite they don't."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    url = str(tmp_path / "agent.db") if backend == "sqlite" else os.environ["NEO4J_URI"]
    natives: list[bool] = []

    @checkpointer_test(name=f"AsyncBeeWeaveCheckpointer.from_conn_string[{backend}]")
    async def factory() -> AsyncIterator[Any]:
        async with AsyncBeeWeaveCheckpointer.from_conn_string(
            url, tenant=tenant, auth=neo4j_auth(),
            weave_options={"spool_dir": tmp_path / "spool", "index": False},
        ) as saver:  # fmt: skip
            await saver.setup()  # idempotent, as for AsyncSqliteSaver
            try:
                yield saver
            finally:
                natives.append(saver.async_store is not None)
                purge = getattr(saver.store, "purge_tenant", None)
                if purge is not None:  # Neo4j: this tenant's nodes go before the driver
                    await asyncio.to_thread(purge)

    report = await validate(factory)
    show(report, capsys)
    check(report)
    assert natives and set(natives) == {backend == "neo4j"}
