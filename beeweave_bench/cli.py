"""``beeweave bench …``: the benchmark commands.  Each prints a table, writes JSON, and
measures its baselines in the same run; the benchmark modules are imported by the command
that runs them, so a command needing a missing extra names it before any import fails."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from beeweave_bench.report import report
from beeweave_cli.common import AuthOpt, OutOpt, console, credentials, fail, require_extras
from beeweave_core.memory.supersession import WEIGHTS

bench_app = typer.Typer(
    help="Benchmarks: each prints a table and writes JSON.", no_args_is_help=True
)


# -------------------------------------------------------------------- benchmarks
@bench_app.command("capture")
def bench_capture(
    n: Annotated[int, typer.Option(help="Calls per case.")] = 100_000,
    framework: Annotated[
        str | None, typer.Option(help="Also measure a framework handler: langchain, llamaindex.")
    ] = None,
    out: OutOpt = None,
) -> None:
    """emit() cost on the caller's thread vs a no-op call and queue.put_nowait."""
    from beeweave_bench import capture

    if framework is not None:
        runner = _framework_capture.get(framework)
        if runner is None:
            fail(
                f"unknown framework {framework!r}; known: {', '.join(_framework_capture) or 'none'}"
            )
        require_extras(f"bench capture --framework {framework}", framework)
        rows, summary = runner(n)
    else:
        rows, summary = capture.run(n)
    report(
        "capture" if framework is None else f"capture {framework}",
        rows,
        out=out,
        params={"n": n, "framework": framework, **summary},
        notes=[f"{k}: {v}" for k, v in summary.items()],
    )


#: Framework capture benchmarks, by the name of the extra that installs the framework.
_framework_capture: dict[str, Callable[[int], tuple[list[dict[str, Any]], dict[str, Any]]]] = {}


def _langchain_capture(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from beeweave_bench.langchain_capture import run

    return run(n)


_framework_capture["langchain"] = _langchain_capture


def _llamaindex_capture(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from beeweave_bench.llamaindex_capture import run

    return run(n)


_framework_capture["llamaindex"] = _llamaindex_capture


@bench_app.command("ingest")
def bench_ingest(
    backend: Annotated[str, typer.Option(help="Comma-separated: sqlite,neo4j.")] = "sqlite",
    events: Annotated[int, typer.Option(help="Events to write (batched).")] = 100_000,
    single: Annotated[int, typer.Option(help="Events written one by one.")] = 2_000,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """Events/s batched vs one-by-one and ancestry p50/p95, every backend in one run."""
    from beeweave_bench import ingest

    backends = [b.strip() for b in backend.split(",") if b.strip()]
    if "neo4j" in backends:
        require_extras("bench ingest --backend neo4j", "neo4j")
    try:
        rows = ingest.run(backends, n=events, single=single, auth=credentials(auth))
    except ValueError as exc:
        fail(str(exc))
    notes = ["targets: SQLite batched >= 20,000 ev/s; Neo4j batched >= 5,000 ev/s"]
    report("ingest", rows, out=out, params={"events": events, "single": single}, notes=notes)


@bench_app.command("scale")
def bench_scale(
    backend: Annotated[str, typer.Option(help="sqlite or neo4j.")] = "sqlite",
    max_events: Annotated[int, typer.Option(help="Largest step (10k, 30k, 100k, ...).")] = 300_000,
    vector_share: Annotated[float, typer.Option(help="Share of events embedded.")] = 0.005,
    queries: Annotated[int, typer.Option(help="Retrieve calls per scope and step.")] = 30,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """Retrieve/assemble latency, size and memory as one store grows step by step."""
    from beeweave_bench import scale

    cfg = scale.ScaleRun(backend, max_events, vector_share, queries, auth=credentials(auth))
    try:
        rows = scale.run(cfg, on_row=scale.print_row)
    except ValueError as exc:
        fail(str(exc))
    report("scale", rows, out=out, params=vars(cfg) | {"auth": None}, notes=[scale.TARGETS])


@bench_app.command("checkpoint")
def bench_checkpoint(
    steps: Annotated[
        int, typer.Option(help="Checkpoints per thread (messages grow by one).")
    ] = 200,
    rounds: Annotated[
        int | None,
        typer.Option(
            help="Rounds, each in another order of the savers (default: one per saver, "
            "two if their number is odd: each runs in every place, after every other)."
        ),
    ] = None,
    reads: Annotated[int, typer.Option(help="get_tuple calls per round (list: a quarter).")] = 200,
    neo4j: Annotated[
        str | None, typer.Option("--neo4j", help="Neo4j URI to add (default: $NEO4J_URI).")
    ] = None,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """put/get_tuple/list latency of BeeWeaveCheckpointer vs InMemorySaver and AsyncSqliteSaver."""

    uri = neo4j or os.environ.get("NEO4J_URI")
    require_extras("bench checkpoint", "langgraph", "bench", *(["neo4j"] if uri else []))
    from beeweave_bench import checkpoint

    rows, summary = checkpoint.run(
        steps=steps, rounds=rounds, reads=reads, neo4j_uri=uri, auth=credentials(auth)
    )
    notes = [
        f"target: BeeWeave sqlite <= {checkpoint.TARGET_RATIO}x AsyncSqliteSaver "
        "(median; put, get_tuple, list)",
        *(
            ["target: BeeWeave neo4j <= 1.0x Neo4jSaver (median; list, both put_writes)"]
            if uri
            else []
        ),
        *(f"{k}: {v}" for k, v in summary.items()),
    ]
    report(
        "checkpoint",
        rows,
        out=out,
        params={"steps": steps, "rounds": rounds, "reads": reads, "neo4j": bool(uri), **summary},
        notes=notes,
    )


@bench_app.command("durability")
def bench_durability(
    neo4j_script: Annotated[
        Path | None,
        typer.Option(help="scripts/neo4j-test-server: adds the Neo4j stop/start scenario."),
    ] = None,
    neo4j_port: Annotated[
        int, typer.Option(help="Port for that scenario's own Neo4j (never a shared one).")
    ] = 7795,
    burst: Annotated[int, typer.Option(help="Events in the burst scenarios.")] = 20_000,
    seed: Annotated[int, typer.Option(help="Seed for the kill times.")] = 7,
    out: OutOpt = None,
) -> None:
    """Events lost per failure (SIGKILL, SIGTERM, store outage, lock, poison, purge)."""
    from beeweave_bench import durability

    if neo4j_script is not None and not neo4j_script.is_file():
        fail(f"no such script: {neo4j_script}")
    rows = durability.run(
        neo4j_script=neo4j_script.resolve() if neo4j_script else None,
        neo4j_port=neo4j_port,
        seed=seed,
        burst=burst,
    )
    notes = [
        f"contract: an event is on disk {durability.CONTRACT_WINDOW * 1000:.0f} ms after emit() "
        "while the writer keeps up, and at most max_high (1,000) events are only in memory; "
        "SIGTERM and exit lose nothing",
        "'lost beyond window': lost events emitted more than that window before the kill",
    ]
    report(
        "durability",
        [durability.table_row(r) for r in rows],
        out=out,
        params={"burst": burst, "seed": seed, "details": rows},
        notes=notes,
    )


@bench_app.command("context")
def bench_context(
    scenarios: Annotated[
        Path, typer.Option(help="Directory of scenario JSON files (see its README).")
    ],
    out: OutOpt = None,
) -> None:
    """Retention, stale rate and token share: BeeWeave vs full history, trim_messages, ChatMemoryBuffer."""
    require_extras("bench context", "langchain", "llamaindex")
    from beeweave_bench import context

    try:
        rows, details, extra = context.run(scenarios)
    except ValueError as exc:
        fail(str(exc))
    mine = [r for r in rows if r["system"] == "beeweave"]
    bee = mine[0]
    kinds = [r for r in mine[1:]] or [bee]
    ok = (
        all(r["retention"] >= 0.97 for r in kinds)
        and bee["stale_rate"] <= 0.02
        and bee["within_budget"] == 1.0
        and extra["fit_verbatim"] == 1.0
    )
    notes = [
        "target: beeweave retention >= 0.97 on every kind, stale <= 0.02 (in order), within "
        f"budget, every turn verbatim when the history fits: {'MET' if ok else 'NOT MET'}",
        "stale_rate: a forbidden wording with no expected one after it (stale_any: anywhere), "
        "over probes with a forbid list; tokens are exact cl100k_base counts",
        f"summary compression ratio (summary/source tokens): {extra['summary_compression_ratio']}",
        "short sessions (history fits): BeeWeave tokens <= full history in "
        f"{extra['short_session_le_full_history']:.0%} of cases (target 100%)",
        f"fit check (budget above the history): every turn verbatim in "
        f"{extra['fit_verbatim']:.0%} of scenarios (target 100%)",
    ]
    report(
        "context",
        rows,
        out=out,
        params={"scenarios": str(scenarios), **extra, "details": details},
        notes=notes,
    )


@bench_app.command("assemble")
def bench_assemble(
    sizes: Annotated[
        str, typer.Option(help="Comma-separated session sizes (events) on SQLite.")
    ] = "1000,10000,100000",
    calls: Annotated[int, typer.Option(help="Timed agent-loop turns per size and workload.")] = 30,
    neo4j: Annotated[
        str | None, typer.Option("--neo4j", help="Neo4j URI for one row (default: $NEO4J_URI).")
    ] = None,
    neo4j_size: Annotated[int, typer.Option(help="Session size of the Neo4j row.")] = 10_000,
    langgraph: Annotated[
        bool, typer.Option(help="Also time the LangGraph hook against InMemorySaver.")
    ] = True,
    auth: AuthOpt = None,
    out: OutOpt = None,
) -> None:
    """Every assemble call of an agent loop (p50, p95, worst) as a session grows."""
    from beeweave_bench import assemble

    if langgraph:
        require_extras("bench assemble", "langgraph", "langchain")
    try:
        ns = tuple(int(x) for x in sizes.split(",") if x.strip())
    except ValueError:
        fail(f"--sizes must be comma-separated integers, got {sizes!r}")
    uri = neo4j or os.environ.get("NEO4J_URI")
    rows, verdict = assemble.run(
        sizes=ns,
        calls=calls,
        neo4j_uri=uri,
        auth=credentials(auth),
        neo4j_size=neo4j_size,
        langgraph=langgraph,
        progress=lambda m: console.print(f"[dim]{m}[/]"),
    )
    notes = [
        "targets: worst <= 3x p50 at 10k; p50 at 10k and 100k <= 2x p50 at 1k (both "
        "workloads); LangGraph hook's added time <= 2x InMemorySaver's turn + 5 ms",
        "gc_paused_calls: calls a full garbage collection (the interpreter's, every "
        "thread stopped for gc_pause_max_ms) fell in; worst_no_gc_over_p50 leaves them out",
        *(f"{k}: {v}" for k, v in verdict.items()),
    ]
    report(
        "assemble",
        rows,
        out=out,
        params={"sizes": ns, "calls": calls, **verdict},
        notes=notes,
        console=Console(width=max(console.width, 160)),
    )


@bench_app.command("supersession")
def bench_supersession(
    write: Annotated[
        bool, typer.Option(help="Save the scorer fitted on every conversation (the shipped one).")
    ] = False,
    scenarios: Annotated[
        list[Path] | None,
        typer.Option(help="Directories of scenario JSON files (repeat the option)."),
    ] = None,
    out: OutOpt = None,
) -> None:
    """Supersession alone: its scorer fitted and its threshold chosen by leave-one-conversation-out."""
    from beeweave_bench import supersession

    if not scenarios:
        fail("--scenarios DIR is needed (one or more directories of scenario files)")
    try:
        rows, summary = supersession.run(scenarios, write=WEIGHTS if write else None)
    except ValueError as exc:
        fail(str(exc))
    notes = [f"{k}: {v}" for k, v in summary.items()]
    report("supersession", rows, out=out, params=summary, notes=notes)


@bench_app.command("acts")
def bench_acts(
    write: Annotated[
        bool, typer.Option(help="Save the classifier fitted on the whole corpus (the shipped one).")
    ] = False,
    per_act: Annotated[
        int, typer.Option(help="Generated training sentences per act (the shipped fit: 320).")
    ] = 320,
    out: OutOpt = None,
) -> None:
    """The speech-act classifier: cross-validated on generated sentences, judged on others."""
    from beeweave_bench import acts

    if per_act < 10:
        fail(f"--per-act must be at least 10, got {per_act}")
    rows, summary = acts.run(write=acts.WEIGHTS if write else None, per_act=per_act)
    report("acts", rows, out=out, params=summary, notes=[f"{k}: {v}" for k, v in summary.items()])


@bench_app.command("locomo")
def bench_locomo(
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="LoCoMo data: the public locomo10.json, or a directory of conversation files.",
        ),
    ],
    limit: Annotated[
        int | None, typer.Option(help="Only the first N questions per conversation.")
    ] = None,
    backend: Annotated[
        str, typer.Option(help="sqlite, or neo4j ($NEO4J_URI, a tenant of its own, removed after).")
    ] = "sqlite",
    context_budget: Annotated[
        int,
        typer.Option(help="Also score the assembled context at this budget (0: recall only)."),
    ] = 0,
    context_modes: Annotated[
        str, typer.Option(help="Context layouts: 'one session', 'settled', 'per session'.")
    ] = "one session,per session",
    out: OutOpt = None,
) -> None:
    """Evidence recall@k / hit@k on LoCoMo: BM25, dense, naive RRF and BeeWeave, one run.

    BeeWeave's fusion settings are also chosen by leave-one-conversation-out
    cross-validation (``bw-cv``: held-out figures; ``bw-cv-dev``: on the rest).  With
    ``--context-budget N``, also what reaches the model: ``assemble`` at N tokens beside
    retrieve-and-pack, the newest turns and the whole history, in the same run (table
    ``locomo-context``: evidence turns whole in the context, gold answer in it, tokens).
    """
    require_extras("bench locomo", "chroma", "bench")
    from beeweave_bench import locomo

    if not data.exists():
        fail(f"--data {data} does not exist (get locomo10.json from the LoCoMo repository)")
    if backend not in ("sqlite", "neo4j"):
        fail(f"--backend must be sqlite or neo4j, got {backend!r}")
    url = os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687") if backend == "neo4j" else None
    try:
        rows, summary = locomo.run(
            data, limit=limit, progress=lambda m: console.print(f"[dim]{m}[/]"), store_url=url
        )
    except ValueError as exc:
        fail(str(exc))
    notes = locomo.verdict(rows) + locomo.cv_notes(summary)
    notes += [f"{k}: {v}" for k, v in summary.items() if k not in ("conversations", "cv")]
    report(
        "locomo",
        rows,
        out=out,
        params={"data": str(data), "limit": limit, **summary},
        notes=notes,
        console=Console(width=max(console.width, 150)),
    )
    if context_budget > 0:
        _bench_locomo_context(data, context_budget, context_modes, limit, out)


def _bench_locomo_context(
    data: Path, budget: int, modes: str, limit: int | None, out: Path | None
) -> None:
    from beeweave_bench import locomo_context

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(locomo_context.MODES))
    if unknown or not chosen:
        fail(f"--context-modes takes {', '.join(locomo_context.MODES)}; got {modes!r}")
    rows = locomo_context.run(
        data,
        budget=budget,
        modes=chosen,
        limit=limit,
        progress=lambda m: console.print(f"[dim]{m}[/]"),
    )
    path = out.with_name(out.stem + "-context" + out.suffix) if out else None
    report(
        "locomo-context",
        rows,
        out=path,
        params={"data": str(data), "budget": budget, "modes": chosen, "limit": limit},
        console=Console(width=max(console.width, 150)),
    )


@bench_app.command("locomo-floor")
def bench_locomo_floor(
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="LoCoMo data: the public locomo10.json, or a directory of conversation files.",
        ),
    ],
    budget: Annotated[int, typer.Option(help="Token budget of each assembly.")] = 2_000,
    limit: Annotated[
        int | None, typer.Option(help="Only the first N questions per conversation.")
    ] = None,
    out: OutOpt = None,
) -> None:
    """The past-question floor (``LayerShares.past_floor`` / ``past_hits``) chosen by
    leave-one-conversation-out cross-validation on the assembled context's evidence."""
    require_extras("bench locomo-floor", "chroma", "bench")
    from beeweave_bench import locomo_context

    if not data.exists():
        fail(f"--data {data} does not exist (get locomo10.json from the LoCoMo repository)")
    if budget <= 0:
        fail(f"--budget must be a positive number of tokens, got {budget}")
    rows, summary = locomo_context.floor_cv(
        data, budget=budget, limit=limit, progress=lambda m: console.print(f"[dim]{m}[/]")
    )
    notes = [f"held out {c}: picked {p}" for c, p in summary["picks"].items()]
    report("locomo-floor", rows, out=out, params={"data": str(data), **summary}, notes=notes)


@bench_app.command("recall-zh")
def bench_recall_zh(
    en: Annotated[
        Path | None,
        typer.Option("--en", help="LoCoMo data to score in the same run, beside the Chinese set."),
    ] = None,
    out: OutOpt = None,
) -> None:
    """Evidence recall@k on the packaged Chinese conversations: lexical, dense, fused."""
    require_extras("bench recall-zh", "chroma", "bench")
    from beeweave_bench import recall_zh

    if en is not None and not en.exists():
        fail(f"--en {en} does not exist")
    try:
        rows, summary = recall_zh.run(en=en, progress=lambda m: console.print(f"[dim]{m}[/]"))
    except ValueError as exc:
        fail(str(exc))
    notes = [
        f"{name}: {info['turns']} turns, {info['questions']} questions, "
        f"{info.get('index_turns_per_s')} turns/s indexed"
        for name, info in summary.items()
    ]
    report(
        "recall-zh",
        rows,
        out=out,
        params={"en": str(en) if en else None, **summary},
        notes=notes,
        console=Console(width=max(console.width, 150)),
    )
