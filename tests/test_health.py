"""Context-health metrics from recorded events, each warning driven on a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.events import Event, EventType, new_event_id
from beeweave_core.governance.health import amnesia_check, key_tokens, pooled, session_health


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteEventStore(tmp_path / "health.db", tenant="t")
    yield s
    s.close()


def add(store, sid: str, etype: EventType, content: str = "", **payload) -> Event:
    ev = Event(id=new_event_id(), session_id=sid, type=etype, content=content, payload=payload)
    store.append([ev])
    return ev


def piece(layer: str) -> dict:
    return {"layer": layer, "kind": "memory", "tokens": 12, "event_ids": ["x"]}


@pytest.mark.parametrize(
    ("source", "summary", "warning"),
    [(1000, 620, "not compressing"), (1000, 30, "may be losing information"), (1000, 200, None)],
)
def test_compression_ratio_warnings(store, source, summary, warning):
    add(
        store,
        "s",
        EventType.SUMMARY,
        "- #1 user: ...",
        source_tokens=source,
        summary_tokens=summary,
    )
    h = session_health(store, "s")
    assert h.compression_ratio == pytest.approx(summary / source)
    assert [w for w in h.warnings if warning and w.startswith(warning)] or (
        warning is None and h.warnings == []
    )


def test_retrieval_hit_rate_and_noisy_warning(store):
    add(store, "s", EventType.RETRIEVAL, "q1",
        included=[piece("recalled"), piece("immediate")],
        left_out=[piece("recalled"), piece("recalled"), piece("recalled")])  # fmt: skip
    add(store, "s", EventType.RETRIEVAL, "q2", included=[piece("recalled")], left_out=[])
    h = session_health(store, "s")
    assert (h.recalled_injected, h.recalled_total, h.assemblies) == (2, 5, 2)
    assert h.retrieval_hit_rate == pytest.approx(0.4)
    assert any(w.startswith("noisy retrieval") for w in h.warnings)


def test_amnesia_finds_a_lost_early_fact(store):
    facts = [
        "The kiln runs at 1240 degrees for stoneware",
        "Glaze batch G-17 uses 30% feldspar",
        "Firing starts at 06:00 on Tuesdays",
        "Deliveries go to the back door",
        "Use cone 6 witness cones",
        "Invoices in euros",
    ]
    for i, text in enumerate(facts):
        add(store, "kiln", EventType.MEMORY, text, kind="fact", source_seq=i)
    memories = store.timeline("kiln", types=(EventType.MEMORY,))
    carried = "working state: kiln 1240 degrees; glaze G-17 30% feldspar; 06:00 Tuesdays"
    assert amnesia_check(memories, carried).ok
    report = amnesia_check(memories, "working state: glaze G-17 30% feldspar")
    assert report.missing == ["The kiln runs at 1240 degrees for stoneware"]
    h = session_health(store, "kiln", assemble_text=lambda _sid: "nothing relevant")
    assert any(w.startswith("amnesia") for w in h.warnings)


def test_key_tokens_prefer_numbers_and_codes():
    assert key_tokens("Glaze batch G-17 uses 30% feldspar") == ["G-17", "30"]
    assert key_tokens("Deliveries go to the back door") == ["Deliveries"]
    assert key_tokens("发票用欧元") == ["发票用欧元"]


def test_pooled_sums_tokens_not_ratios(store):
    add(store, "a", EventType.SUMMARY, "x", source_tokens=100, summary_tokens=90)
    add(store, "b", EventType.SUMMARY, "y", source_tokens=900, summary_tokens=90)
    both = pooled([session_health(store, "a"), session_health(store, "b")])
    assert both.compression_ratio == pytest.approx(180 / 1000)
    assert both.warnings == []
