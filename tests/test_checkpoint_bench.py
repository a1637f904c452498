"""`beeweave bench checkpoint`: the savers' order is balanced, and a run reports how far
its rounds strayed (figures themselves are read from the bench, not asserted)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from beeweave_bench.checkpoint import balanced_order
from beeweave_cli.app import app


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9])
def test_each_saver_runs_in_every_place_and_after_every_other_alike(n: int) -> None:
    rounds = [balanced_order(n, r) for r in range(n * (1 + n % 2))]
    assert all(sorted(row) == list(range(n)) for row in rounds)
    places = Counter((i, place) for row in rounds for place, i in enumerate(row))
    assert set(places.values()) == {1 + n % 2} and len(places) == n * n
    follows = Counter((row[k], row[k + 1]) for row in rounds for k in range(n - 1))
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1


def test_a_run_reports_each_targets_range_over_its_rounds(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("NEO4J_URI", raising=False)  # SQLite savers only: a quick run
    out = tmp_path / "checkpoint.json"
    res = CliRunner().invoke(
        app, ["bench", "checkpoint", "--steps", "6", "--rounds", "2", "--reads", "8",
              "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    params = json.loads(out.read_text())["params"]
    ranges = params["beeweave_sqlite_x_async_sqlite_round_range"]
    assert set(ranges) == set(params["beeweave_sqlite_x_async_sqlite"])
    assert all(0 < low <= high for low, high in ranges.values())
    assert "beeweave_neo4j_x_neo4jsaver_round_range" not in params
