"""OpenTelemetry spans and metrics (in-memory SDK exporters), and nothing without the package."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from beeweave_core import telemetry
from beeweave_core.weave import Weave

from .context_helpers import chatter, say

SPANS = InMemorySpanExporter()
READER = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def providers():
    """The global providers can be set once per process: point them at in-memory sinks."""
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(SPANS))
    trace.set_tracer_provider(tp)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))
    telemetry.reset()
    yield


def points(name: str) -> list:
    data = READER.get_metrics_data()
    if data is None:  # nothing recorded yet
        return []
    return [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    ]


def test_spans_and_metrics_for_capture_retrieve_assemble_compact(tmp_path: Path):
    SPANS.clear()
    with Weave.open(f"sqlite:///{tmp_path}/t.db", index=False, spool_dir=tmp_path / "sp") as w:
        before = sum(p.value for p in points("beeweave.capture.events"))
        for i in range(7):
            w.emit("user_message", f"note {i} about the orchard", session_id="orchard")
        w.flush()
        say(w, "orchard", chatter(20), prefix="c")
        w.retrieve("orchard", session_id="orchard", paths=["lexical"])
        ctx = w.assemble("orchard", budget_tokens=500)
        w.context.compact("orchard", window_tokens=500, force=True)
    captured = sum(p.value for p in points("beeweave.capture.events")) - before
    assert captured >= 8  # 7 emits + the assembly's own audit record
    spans = {s.name: s for s in SPANS.get_finished_spans()}
    assert {
        "beeweave.capture",
        "beeweave.retrieve",
        "beeweave.assemble",
        "beeweave.compact",
    } <= set(spans)
    assert spans["beeweave.capture"].attributes["gen_ai.operation.name"] == "capture"
    asm = spans["beeweave.assemble"]
    assert asm.attributes["gen_ai.operation.name"] == "assemble"
    assert asm.attributes["gen_ai.conversation.id"] == "orchard"
    assert asm.attributes["beeweave.context.tokens"] == ctx.total_tokens
    compact = spans["beeweave.compact"]  # maintenance: never inside an assembly
    assert compact.parent is None or compact.parent.span_id != asm.context.span_id
    assert spans["beeweave.retrieve"].attributes["beeweave.retrieve.hits"] >= 1
    ops = {p.attributes["gen_ai.operation.name"] for p in points("beeweave.operation.duration")}
    assert {"capture", "retrieve", "assemble", "compact"} <= ops
    assert all(
        "gen_ai.conversation.id" not in p.attributes for p in points("beeweave.operation.duration")
    )
    assert [p.sum for p in points("beeweave.context.tokens")][-1] >= ctx.total_tokens


def test_failing_call_records_duration_and_raises(tmp_path: Path):
    w = Weave.open(f"sqlite:///{tmp_path}/t.db", index=False, spool_dir=tmp_path / "sp")
    with w, pytest.raises(ValueError, match="budget_tokens"):
        w.assemble("nowhere", budget_tokens=0)
    assert any(s.name == "beeweave.assemble" and s.status.status_code.name == "ERROR"
               for s in SPANS.get_finished_spans())  # fmt: skip


def test_without_opentelemetry_nothing_is_imported(tmp_path: Path):
    """A blocked ``opentelemetry`` (as if not installed): no import, methods unwrapped."""
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, Block())
        from beeweave_core.weave import Weave
        from beeweave_core.context.engine import ContextEngine
        from beeweave_core.retrieval import Retriever
        assert not hasattr(ContextEngine.assemble, "__wrapped__")
        assert not hasattr(Retriever.retrieve, "__wrapped__")
        with Weave.open("sqlite:///{tmp_path}/n.db", index=False, spool_dir="{tmp_path}/sp") as w:
            w.emit("user_message", "hello", session_id="s")
            w.flush()
            w.assemble("s", budget_tokens=200)
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], "imported"
        print("clean")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean"
