"""``WeaveConfig`` and explicit wiring: settings reach the parts, mistakes fail at open,
parts hang on the weave through ``on_close`` and ``bus.subscribe``.

Real SQLite files and the real capture bus; no model (``index=False`` where vectors
would only slow the test down).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from beeweave_core import ContextConfig, IndexConfig, RetrievalConfig, Weave, WeaveConfig
from beeweave_core.context import ContextEngine
from beeweave_core.context.assembler import LayerShares
from beeweave_core.events import Event

DAY = 86_400.0


def _open(tmp_path: Path, **kw: object) -> Weave:
    return Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path / "spool", **kw)  # type: ignore[arg-type]


def test_the_retrieval_section_is_what_the_retriever_ranks_with(tmp_path: Path) -> None:
    now = time.time()
    scores = {}
    for name, cfg in (("decayed", RetrievalConfig()), ("flat", RetrievalConfig(half_life=None))):
        with _open(tmp_path / name, index=False, config=WeaveConfig(retrieval=cfg)) as w:
            w.emit("user_message", "The greenhouse sensor reads 41 percent humidity",
                   session_id="g", ts=now - 400 * DAY)  # fmt: skip
            w.flush()
            assert w.retriever.config is cfg
            (hit,) = w.retrieve("greenhouse humidity", session_id="g", k=1, now=now)
            scores[name] = hit.score
    assert scores["decayed"] < scores["flat"]


def test_open_keywords_fill_the_index_section_and_win_over_config(tmp_path: Path) -> None:
    base = WeaveConfig(index=IndexConfig(kind="chroma", batch_size=8, backfill=True))
    with _open(tmp_path, config=base, index=False, index_options={"backfill": False}) as w:
        assert w.config.index == IndexConfig(kind="off", batch_size=8, backfill=False)
        assert w.indexer is None
        assert w.config.retrieval == RetrievalConfig()  # untouched sections stay
    assert base.index.kind == "chroma"  # the caller's config is not changed


def test_the_env_switch_turns_only_an_unset_index_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEEWEAVE_INDEX", "off")
    assert not IndexConfig().enabled
    assert IndexConfig(kind="chroma").enabled
    monkeypatch.delenv("BEEWEAVE_INDEX")
    assert IndexConfig().enabled and not IndexConfig(kind="OFF").enabled


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"index_options": {"batch_sise": 3}}, ValueError, "unknown index option.*batch_sise"),
        ({"index": "faiss"}, ValueError, "unknown index 'faiss'"),
        ({"index": 42}, TypeError, "VectorIndex"),
        ({"index_options": {"batch_size": 0}}, ValueError, "batch_size must be a positive int"),
        ({"config": {"index": None}}, TypeError, "config must be a WeaveConfig"),
    ],
)
def test_bad_settings_fail_when_the_weave_opens(
    tmp_path: Path, kw: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _open(tmp_path, **kw)


def test_sections_are_checked_and_frozen() -> None:
    with pytest.raises(TypeError, match="WeaveConfig.retrieval must be a RetrievalConfig"):
        WeaveConfig(retrieval=IndexConfig())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_interval"):
        IndexConfig(retry_interval=0)
    cfg = WeaveConfig()
    with pytest.raises(AttributeError):
        cfg.index = IndexConfig()  # type: ignore[misc]


def test_the_context_section_reaches_the_engine(tmp_path: Path) -> None:
    mine = LayerShares(working=0.1, recalled=0.1, immediate=0.8)
    config = WeaveConfig(context=ContextConfig(presets={"debugging": mine}))
    with _open(tmp_path / "a", index=False, config=config) as w:
        w.emit("user_message", "Why does the parser choke on tabs?", session_id="p")
        ctx = w.assemble("p", budget_tokens=200, phase="debugging")
        assert ctx.phase == "debugging" and w.context.presets["debugging"] is mine
    with _open(tmp_path / "b", index=False) as w, pytest.raises(ValueError, match="debugging"):
        w.assemble("p", budget_tokens=200, phase="debugging")
    with pytest.raises(ValueError, match="past_floor must be in"):
        LayerShares(working=0.1, recalled=0.1, immediate=0.8, past_floor=1.5)
    assert mine.shrink_immediate(0.5).past_hits == mine.past_hits  # the guard keeps them


def test_an_engine_over_a_bare_store_assembles_without_recording(tmp_path: Path) -> None:
    with _open(tmp_path, index=False) as w:
        w.emit("user_message", "Plan a trip to the lighthouse on Saturday", session_id="t")
        w.flush()
        engine = ContextEngine(w.store)  # no emit, retrieve or flush handed in
        ctx = engine.assemble("t", budget_tokens=200)
        assert "lighthouse" in ctx.text() and ctx.retrieval_event_id is None
        with_emit = w.assemble("t", budget_tokens=200)  # the weave's engine records
        assert with_emit.retrieval_event_id is not None


def test_subscribers_get_stored_batches_until_they_unsubscribe(tmp_path: Path) -> None:
    seen: list[str] = []

    def listener(events: list[Event]) -> None:
        seen.extend(e.content for e in events)

    with _open(tmp_path, index=False) as w:
        w.bus.subscribe(listener)
        w.bus.subscribe(listener)  # once is enough
        w.emit("user_message", "first note", session_id="s")
        w.flush()
        w.bus.unsubscribe(listener)
        w.bus.unsubscribe(listener)  # safe to repeat
        w.emit("user_message", "second note", session_id="s")
        w.flush()
        assert len(w.store.timeline("s")) == 2
    assert seen == ["first note"]


def test_on_close_runs_newest_first_after_capture_and_before_the_store_closes(
    tmp_path: Path,
) -> None:
    calls: list[tuple[str, int]] = []
    w = _open(tmp_path, index=False)
    w.on_close(lambda: calls.append(("older", len(w.store.timeline("s")))))
    w.on_close(lambda: 1 / 0)  # a failing part does not stop the others
    w.on_close(lambda: calls.append(("newer", len(w.store.timeline("s")))))
    w.emit("user_message", "written before close", session_id="s")
    w.close()
    assert calls == [("newer", 1), ("older", 1)]
    w.close()  # closing twice runs nothing twice
    assert len(calls) == 2
