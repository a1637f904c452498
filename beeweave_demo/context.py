"""The end of ``beeweave demo``: the context BeeWeave assembles for a late question."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from beeweave_core.context import AssembledContext
from beeweave_core.weave import Weave

#: A question whose answer depends on early turns and on the change of plan.
LATE_QUESTION = "Remind me: what batch size, timeout and schedule does the nightly job use now?"
DEMO_BUDGET = 600


def _short(text: str, n: int = 90) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _late_context(weave: Weave, session_id: str) -> AssembledContext:
    """Between an agent's turns maintenance catches up in the background; the demo's
    turns are scripted back to back, so it waits for that once, then reads."""
    weave.context.update(session_id)  # (flushes the bus first)
    ctx = weave.assemble(session_id, LATE_QUESTION, budget_tokens=DEMO_BUDGET, model="gpt-4o-mini")
    weave.flush()
    return ctx


def show_assembled_context(weave: Weave, session_id: str, console: Console) -> None:
    """Assemble the context for :data:`LATE_QUESTION` and show how it was built."""
    ctx = _late_context(weave, session_id)
    console.rule("[bold]Assembled context for a late question")
    console.print(
        f"Question: [italic]{LATE_QUESTION}[/]  (phase: {ctx.phase}, tokenizer: {ctx.encoding})"
    )
    table = Table(title=f"Layers (budget {ctx.budget_tokens} tokens, exact count)")
    for col in ("layer", "budget", "tokens", "pieces", "left out"):
        table.add_column(col, justify="left" if col == "layer" else "right")
    for name, rep in ctx.layers.items():
        table.add_row(
            name, str(rep.budget), str(rep.tokens), str(len(rep.pieces)), str(len(rep.left_out))
        )
    table.add_row("overhead", "", str(ctx.overhead_tokens), "", "")
    table.add_row("[bold]total", str(ctx.budget_tokens), f"[bold]{ctx.total_tokens}", "", "")
    console.print(table)
    share = ctx.share_of_history or 0.0
    console.print(
        f"Full history: {ctx.full_history_tokens:,} tokens → assembled: {ctx.total_tokens:,} "
        f"({share:.0%} of the history)."
    )
    working = next(
        (m["content"] for m in ctx.messages if m["content"].startswith("Working state")), ""
    )
    console.print(
        "\n[bold]Working layer[/] (rebuilt from events; the overturned batch size is gone):"
    )
    console.print(working or "(empty)", markup=False, highlight=False)
    recalled = ctx.layers["recalled"].pieces
    if recalled:
        rt = Table(title="Recalled pieces and where they came from")
        for col in ("kind", "session", "turns", "score", "text"):
            rt.add_column(col)
        for p in recalled:
            turns = f"#{p.seq_range[0]}-#{p.seq_range[1]}" if p.seq_range else "-"
            rt.add_row(
                p.kind,
                p.session_id or "-",
                turns,
                f"{p.score:.2f}" if p.score is not None else "-",
                escape(_short(p.text)),
            )
        console.print(rt)
    imm = ctx.layers["immediate"].pieces
    if imm:
        console.print(
            f"Immediate layer: {len(imm)} latest turn group(s) verbatim, "
            f"#{imm[0].seq_range[0]}-#{imm[-1].seq_range[1]}; tool calls kept with their results."
        )
    comp = (ctx.compaction or {}).get("stats") or {}
    if comp.get("segments"):
        ratio = comp.get("ratio")
        console.print(
            f"Compaction: {comp['segments']} segment summaries"
            + (f", {ratio:.0%} of their source tokens" if ratio else "")
            + f", {comp.get('rolled_back', 0)} rolled back by the retention check."
        )
    if ctx.retrieval_event_id:
        console.print(f"Recorded for audit as retrieval event {ctx.retrieval_event_id}.")
