"""`beeweave bench capture --framework langchain` runs and reports every case (figures
themselves are checked by reading the bench, not by timed assertions)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from beeweave_cli.app import app


def test_capture_bench_runs_all_cases(tmp_path):
    out = tmp_path / "capture-langchain.json"
    res = CliRunner().invoke(app, ["bench", "capture", "--framework", "langchain", "--n", "1600",
                                   "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    cases = [(r["case"], r["view"]) for r in doc["rows"]]
    assert cases == [
        ("no callbacks", "end to end, per turn"),
        ("RunCollector tracer", "end to end, per turn"),
        ("BeeWeave handler", "end to end, per turn"),
        ("RunCollector tracer", "methods called directly"),
        ("BeeWeave handler", "methods called directly"),
    ]
    assert all(r["median_us"] > 0 for r in doc["rows"])
    p = doc["params"]
    assert p["framework"] == "langchain"
    assert p["events_written"] > 1600 // 8 * 4, p["capture_stats"]
    assert isinstance(p["handler_vs_tracer_overhead"], float) and "meets_target" in p
