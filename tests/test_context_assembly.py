"""Layered assembly end to end: layers in order, provenance of every piece, recalled
pieces tagged with session and turn range, the audit ``retrieval`` event, phases, the
``beeweave demo`` section and the ``bench context`` runner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from beeweave_core.context import PRESETS, infer_phase
from beeweave_core.events import EventType

from .context_helpers import call, chatter, say


def _long_session(weave, sid="s"):
    say(weave, sid, [
        {"role": "system", "content": "You are a crawler assistant."},
        {"role": "user", "content": "Crawl as HarvestBot/7.4 in the user agent header."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "The HTML of category pages differs from product pages."},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "fetch_sitemap", {"url": "https://shop.example/sitemap.xml"})]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"summary": {"urls_found": 8821},
                                                                      "rows": [{"id": i} for i in range(300)]})},
        {"role": "assistant", "content": "The sitemap listing came back, see above."},
        *chatter(12),
        {"role": "user", "content": "How many URLs did the sitemap have?"},
    ])  # fmt: skip


def test_layers_provenance_and_audit_event(weave_factory):
    weave = weave_factory(index=False)
    _long_session(weave)
    ctx = weave.assemble(
        "s", "What URL count did the sitemap listing give?", budget_tokens=300, model="gpt-4"
    )
    msgs = ctx.messages
    assert msgs[0] == {"role": "system", "content": "You are a crawler assistant."}
    # layers in reading order: system, working (when an item fits its small cap), recalled
    at = 2 if msgs[1]["content"].startswith("Working state") else 1
    assert msgs[at]["content"].startswith("Recalled by BeeWeave")
    assert msgs[-1] == {"role": "user", "content": "How many URLs did the sitemap have?"}
    assert "8821" in ctx.text() and "HarvestBot/7.4" in ctx.text()
    assert ctx.total_tokens <= 300 < ctx.full_history_tokens
    # every piece says where it came from
    stored = {e.id: e for e in weave.store.timeline("s", include_inactive=True)}
    for piece in ctx.provenance:
        assert piece.event_ids and all(i in stored for i in piece.event_ids), piece
    for piece in ctx.layers["recalled"].pieces:
        assert piece.session_id == "s" and piece.seq_range is not None and piece.score is not None
        a, b = piece.seq_range
        assert f"#{a}" in piece.text  # tagged with its turn range
    notes = {p.note for p in ctx.layers["immediate"].left_out}
    assert notes == {"older than the window"}  # nothing edited out: turns are never hidden
    # the assembly is on record
    weave.flush()
    (rec,) = weave.store.timeline("s", types=(EventType.RETRIEVAL,))
    assert rec.id == ctx.retrieval_event_id and rec.content == ctx.query
    p = rec.payload
    assert p["total_tokens"] == ctx.total_tokens and p["budget_tokens"] == 300
    assert p["tokens_by_layer"] == ctx.tokens_by_layer
    assert {"system", "recalled", "immediate"} <= {x["layer"] for x in p["included"]}
    assert p["left_out"] and all("score" in x and "event_ids" in x for x in p["included"])


def test_phase_presets_and_options(weave_factory):
    weave = weave_factory(index=False)
    say(
        weave,
        "s",
        [{"role": "system", "content": "sys"}, {"role": "user", "content": "I need a report."}],
    )
    ctx = weave.assemble("s", budget_tokens=300)
    assert ctx.phase == "requirement"
    _long_session(weave, "t")
    assert weave.assemble("t", budget_tokens=300).phase == "execution"
    say(
        weave,
        "t",
        [{"role": "user", "content": "Thanks, that's all — wrap up please."}],
        prefix="end",
    )
    assert weave.assemble("t", budget_tokens=300).phase == "closing"
    for name, shares in PRESETS.items():
        assert abs(shares.working + shares.recalled + shares.immediate - 1) < 1e-9, name
    # the same history gives the newest turns a higher floor while gathering requirements:
    # a query about the newest turns (its best hits are among them) keeps more of them
    # verbatim (one about the past gives the floor up to recall: tests/test_context_recall.py)
    assert PRESETS["requirement"].immediate > PRESETS["closing"].immediate
    say(weave, "t", [m for i in range(40) for m in (
        {"role": "user", "content": f"Step {i}: compare page template T{100 + i} in detail."},
        {"role": "assistant", "content": f"Template T{100 + i} checked; nothing unusual found there."})],
        prefix="more")  # fmt: skip
    q = "what did the detailed check of page template T139 find?"  # the newest step
    req = weave.assemble("t", q, budget_tokens=600, phase="requirement")
    clo = weave.assemble("t", q, budget_tokens=600, phase="closing")
    assert req.layers["immediate"].tokens > clo.layers["immediate"].tokens
    assert req.layers["recalled"].tokens < clo.layers["recalled"].tokens
    one = weave.assemble("t", "q?", budget_tokens=600, single_system=True, include_query=True)
    assert [m["role"] for m in one.messages].count("system") == 1
    assert one.messages[-1] == {"role": "user", "content": "q?"}
    assert infer_phase([]) == "requirement"


async def test_aassemble_matches_assemble(weave_factory):
    weave = weave_factory(index=False)
    _long_session(weave)
    # maintenance settled first: a call tells it the window, and it may compact after
    weave.context.compact("s", window_tokens=400)
    a = weave.assemble("s", "urls?", budget_tokens=400, record=False)
    b = await weave.aassemble("s", "urls?", budget_tokens=400, record=False)
    assert a.messages == b.messages and a.total_tokens == b.total_tokens


def test_demo_ends_with_the_assembled_context(tmp_path, monkeypatch):
    from beeweave_cli.app import app

    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(app, ["demo", "--url", f"sqlite:///{tmp_path}/demo.db"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Assembled context for a late question" in out
    assert "Layers (budget 600 tokens" in out and "Full history:" in out
    assert "Recalled pieces and where they came from" in out
    assert "2,000" in out  # the batch size after the change of plan
    assert "Recorded for audit as retrieval event" in out


def test_bench_context_runs_all_systems_on_a_tiny_scenario(tmp_path):
    from beeweave_bench import context

    turns = [{"role": "system", "content": "You help."},
             {"role": "user", "content": "The deploy window is Sunday 02:00-04:00 UTC."}]  # fmt: skip
    for i in range(30):
        turns += [{"role": "user", "content": f"Chatter about topic number {'abcdefghij'[i % 10]} here."},
                  {"role": "assistant", "content": "Understood, carrying on with the plan as discussed."}]  # fmt: skip
    turns += [{"role": "user", "content": "Use Postgres for state."},
              {"role": "user", "content": "Actually, drop Postgres: keep the state in Redis."}]  # fmt: skip
    scn = {"id": "tiny", "lang": "en", "budget_tokens": 300, "turns": turns,
           "probes": [{"at": len(turns), "query": "When is the deploy window?", "expect": ["02:00-04:00"], "forbid": []},
                      {"at": len(turns), "query": "Where is state kept?", "expect": ["Redis"],
                       "forbid": ["Use Postgres for state"]}]}  # fmt: skip
    (tmp_path / "tiny.json").write_text(json.dumps(scn))
    rows, details, extra = context.run(tmp_path)
    by = {r["system"]: r for r in rows}
    assert set(by) == {*context.SYSTEMS, "beeweave (short session)", "beeweave (fit check)"}
    assert by["beeweave (fit check)"]["verbatim"] == 1.0  # a budget above it: every turn as is
    short = by["beeweave (short session)"]  # the opening turns fit: never above the history
    assert short["probes"] == 1 and short["within_budget"] == 1.0
    assert extra["short_sessions"][0]["tokens"] <= extra["short_sessions"][0]["full_tokens"]
    assert by["beeweave"]["retention"] == 1.0 and by["beeweave"]["stale_rate"] == 0.0
    assert by["beeweave"]["within_budget"] == 1.0
    assert by["full history"]["retention"] == 1.0 and by["full history"]["tokens_share"] == 1.0
    assert by["trim_messages"]["retention"] < 1.0  # the window lost the early fact
    assert extra["probes"] == 2 and len(details) == 2 * len(context.SYSTEMS)


def test_the_locomo_context_bench_asks_a_settled_session_too(tmp_path):
    """``settled``: the conversation as a returning user finds it (maintenance caught up,
    compacted for the window) is asked beside the other systems, in one run."""
    from beeweave_bench import locomo_context

    from .test_readme import tiny_locomo

    tiny_locomo(tmp_path / "locomo10.json")
    rows = locomo_context.run(tmp_path / "locomo10.json", budget=300, modes=("settled",))
    got = {r["system"]: r for r in rows if r["category"] == "all"}
    assert set(got) == set(locomo_context.SYSTEMS)
    assert all(r["mode"] == "settled" and r["n"] == 2 for r in got.values())
    assert got["whole history"]["evidence"] == 1.0
    assert got["beeweave"]["evidence"] == 1.0  # a three-turn chat fits: shown verbatim


def test_the_phase_of_a_session_longer_than_its_read_does_not_follow_the_read(weave_factory):
    """The requirement phase is the session's first turns: a read that starts later (a
    session longer than the budget) cannot see them, whatever size its pages were."""
    weave = weave_factory(index=False)
    brief = [{"role": "user", "content": "Plan the seed order for the north beds."}]
    say(weave, "short", brief + [{"role": "assistant", "content": "Which crops first?"}])
    assert weave.assemble("short", "crops?", budget_tokens=2000).phase == "requirement"
    steps = [
        {"role": "assistant", "content": f"Bed {b} row {r}: soil checked, labels printed."}
        for b in range(3)
        for r in range(30)
    ]
    say(weave, "long", brief + steps)
    phases = {weave.assemble("long", "which bed is done?", budget_tokens=300).phase
              for _ in range(3)}  # fmt: skip
    assert phases == {"execution"}
