"""Context retention on long conversations: BeeWeave vs full history, ``trim_messages``
and LlamaIndex ``ChatMemoryBuffer``, same scenarios, same budget, one run.

Scenario format and scoring: the shared ``scenarios`` README (data not in the repo).
A probe is *retained* when every ``expect`` string occurs in the assembled text
(case-insensitive, whitespace folded) and *stale* when a ``forbid`` string occurs there
with no ``expect`` string after it: an old value the same prompt corrects further on is
not what the model will take as current (``stale_any`` counts any occurrence).  Stale
rate is over the probes that have a ``forbid`` list.  Tokens are exact cl100k_base
counts of the whole message list.  Probes carry a ``kind`` (``updated``, ``rejected``,
``distinct``, ``plain``, ``sibling``): one row per system, then one per kind.

BeeWeave sees the conversation as an agent run would, through the capture bus with the
product's defaults (semantic recall on): turn by turn, a model call's ``assemble``
after each user turn, and maintenance caught up by the time the late question comes.
Maintenance is waited for after each turn, as a worker that keeps up would be: the
memories it writes take store seqs (shown as ``#n`` labels) right after their turn, so
a run repeats its outcomes (a worker left to its own timing gives the same content,
with labels, and so token counts, that vary by a few; a compaction a read asks for can
still land between turns, so token counts may still differ by a few).
``beeweave (cold)`` captures everything and asks at once: the read never waits, so it
shows what a first call gets while maintenance is still behind.  The fit check: with a
budget above the whole history, the context must be every turn verbatim and in order.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from beeweave_bench.report import median
from beeweave_core.tokens import TokenCounter

ENCODING = "cl100k_base"
SYSTEMS = ("beeweave", "beeweave (cold)", "full history", "trim_messages", "ChatMemoryBuffer")


# ------------------------------------------------------------------ scenarios
def load_scenarios(directory: str | Path) -> list[dict[str, Any]]:
    """Every ``*.json`` scenario in ``directory`` (sorted), checked for the format."""
    d = Path(directory)
    if not d.is_dir():
        raise ValueError(f"scenario directory {d} does not exist")
    out = []
    for path in sorted(d.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not readable JSON ({exc})") from exc
        for key in ("id", "budget_tokens", "turns", "probes"):
            if key not in data:
                raise ValueError(f"{path}: missing {key!r}")
        if not isinstance(data["turns"], list) or not data["turns"]:
            raise ValueError(f"{path}: 'turns' must be a non-empty list")
        for p in data["probes"]:
            if not {"at", "query", "expect"} <= set(p):
                raise ValueError(f"{path}: a probe needs at, query and expect")
        out.append(data)
    if not out:
        raise ValueError(f"no *.json scenarios in {d}")
    return out


def openai_message(turn: dict[str, Any]) -> dict[str, Any]:
    """A scenario turn as an OpenAI chat message (what the baselines are given)."""
    m: dict[str, Any] = {"role": turn["role"], "content": turn.get("content") or ""}
    if turn.get("tool_calls"):
        m["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}))},
            }
            for c in turn["tool_calls"]
        ]
    if turn["role"] == "tool":
        m["tool_call_id"] = turn.get("tool_call_id", "")
    return m


def score(text: str, probe: dict[str, Any]) -> tuple[bool, bool | None]:
    """(retained, stale) of one probe against an assembled text (see the docstring:
    a forbidden wording followed later by an expected one is not stale)."""
    retained, stale, _any = score_all(text, probe)
    return retained, stale


def score_all(text: str, probe: dict[str, Any]) -> tuple[bool, bool | None, bool | None]:
    """(retained, stale in order, stale anywhere)."""
    from beeweave_core.text.language import fold

    t = fold(text)
    expect = [fold(e) for e in probe["expect"]]
    retained = all(e in t for e in expect)
    forbid = [fold(f) for f in probe.get("forbid") or []]
    if not forbid:
        return retained, None, None
    last_expect = max((t.rfind(e) for e in expect), default=-1)
    found = [i for f in forbid if (i := t.rfind(f)) >= 0]
    return retained, any(i > last_expect for i in found), bool(found)


# ------------------------------------------------------------------ baselines
def _full(
    messages: list[dict[str, Any]], budget: int, counter: TokenCounter, query: str
) -> list[dict[str, Any]]:
    return messages


def _trim(
    messages: list[dict[str, Any]], budget: int, counter: TokenCounter, query: str
) -> list[dict[str, Any]]:
    from langchain_core.messages import (
        convert_to_messages,
        convert_to_openai_messages,
        trim_messages,
    )

    def count(msgs: Sequence[Any]) -> int:
        return counter.count_messages(convert_to_openai_messages(list(msgs)))

    lc = convert_to_messages(messages)
    kept = trim_messages(
        lc,
        max_tokens=budget,
        token_counter=count,
        strategy="last",
        include_system=True,
        start_on="human",
        allow_partial=False,
    )
    return convert_to_openai_messages(kept)


def _buffer(
    messages: list[dict[str, Any]], budget: int, counter: TokenCounter, query: str
) -> list[dict[str, Any]]:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import ChatMemoryBuffer

    history = []
    for m in messages:
        extra: dict[str, Any] = {}
        if m.get("tool_calls"):
            extra["tool_calls"] = m["tool_calls"]
        if m.get("tool_call_id"):
            extra["tool_call_id"] = m["tool_call_id"]
        history.append(ChatMessage(role=m["role"], content=m["content"], additional_kwargs=extra))
    memory = ChatMemoryBuffer.from_defaults(
        chat_history=history, token_limit=budget, tokenizer_fn=counter.encode
    )
    out = []
    for cm in memory.get(input=query):
        m = {"role": cm.role.value, "content": cm.content or ""}
        m.update(
            {k: v for k, v in cm.additional_kwargs.items() if k in ("tool_calls", "tool_call_id")}
        )
        out.append(m)
    return out


BASELINES: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "full history": _full,
    "trim_messages": _trim,
    "ChatMemoryBuffer": _buffer,
}


# ------------------------------------------------------------------- beeweave
def _open(tmp: str, name: str) -> Any:
    from beeweave_core.weave import Weave

    return Weave.open(f"sqlite:///{tmp}/{name}.db", spool_dir=tmp, tenant=f"bench-{name}")


def _beeweave(
    scn: dict[str, Any], counter: TokenCounter, tmp: str, *, cold: bool
) -> list[dict[str, Any]]:
    from beeweave_core.context import record_messages

    sid = scn["id"]
    budget = int(scn["budget_tokens"])
    probes = sorted(enumerate(scn["probes"]), key=lambda p: p[1]["at"])
    weave = _open(tmp, f"{sid}-{'cold' if cold else 'live'}")
    rows: list[dict[str, Any]] = []
    try:
        turns = scn["turns"]
        nxt = 0
        for i in range(len(turns) + 1):
            if nxt < len(probes) and probes[nxt][1]["at"] == i:
                weave.flush(60, wait_index=True)  # (warm: maintenance kept up after each turn)
            while nxt < len(probes) and probes[nxt][1]["at"] == i:
                idx, probe = probes[nxt]
                t0 = time.perf_counter()
                ctx = weave.assemble(sid, probe["query"], budget_tokens=budget, counter=counter)
                ms = (time.perf_counter() - t0) * 1000
                retained, stale, stale_any = score_all(ctx.text(), probe)
                full = counter.count_messages([openai_message(t) for t in turns[:i]])
                rows.append(
                    {
                        "probe": idx,
                        "retained": retained,
                        "stale": stale,
                        "stale_any": stale_any,
                        "tokens": ctx.total_tokens,
                        "full_tokens": full,
                        "ms": ms,
                        "layers": ctx.tokens_by_layer,
                        "compaction": (ctx.compaction or {}).get("stats"),
                    }
                )
                nxt += 1
            if i == len(turns):
                break
            record_messages(weave, sid, [turns[i]], user_id=f"user-{sid}", key_prefix=f"t{i}")
            if not cold and turns[i]["role"] == "user":  # the model call this turn asks for
                weave.assemble(sid, budget_tokens=budget, counter=counter)
            if not cold:  # a worker that keeps up (as a late question gives it time to):
                weave.context.update(sid)  # memories are stored right after their turn
    finally:
        weave.close()
    return rows


def _verbatim(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(role, content, tool calls) of every non-system message; a call's arguments as
    their JSON value (the order of an object's keys is not part of what was said)."""

    def calls(m: dict[str, Any]) -> str:
        out = []
        for c in m.get("tool_calls") or ():
            fn = c.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = fn.get("arguments")
            out.append([fn.get("name"), args])
        return json.dumps(out, sort_keys=True)

    return [
        (m["role"], str(m.get("content") or ""), calls(m))
        for m in messages
        if m["role"] != "system"
    ]


def _fit(scn: dict[str, Any], counter: TokenCounter, tmp: str) -> dict[str, Any]:
    """The whole history under a budget above it: every turn verbatim, in order."""
    from beeweave_core.context import record_messages

    msgs = [openai_message(t) for t in scn["turns"]]
    full = counter.count_messages(msgs)
    sid = f"{scn['id']}-fit"
    weave = _open(tmp, sid)
    try:
        record_messages(weave, sid, msgs, user_id=f"user-{sid}", key_prefix="t")
        ctx = weave.assemble(sid, budget_tokens=full + 1_000, counter=counter)
    finally:
        weave.close()
    want = _verbatim(msgs)
    return {
        "scenario": scn["id"],
        "turns": len(msgs),
        "tokens": ctx.total_tokens,
        "full_tokens": full,
        "verbatim": _verbatim(ctx.messages) == want,
    }


def _short_session(scn: dict[str, Any], counter: TokenCounter, tmp: str) -> dict[str, Any] | None:
    """The scenario's opening turns while they fit half its budget: the whole history
    fits, so BeeWeave must send no more than the history itself (a plain buffer)."""
    from beeweave_core.context import record_messages

    budget = int(scn["budget_tokens"])
    msgs: list[dict[str, Any]] = []
    for t in scn["turns"]:
        m = openai_message(t)
        if counter.count_messages([*msgs, m]) > budget // 2:
            break
        msgs.append(m)
    # end on a finished exchange: an answer, not a tool call still waiting for its result
    while msgs and (msgs[-1]["role"] != "assistant" or msgs[-1].get("tool_calls")):
        msgs.pop()
    if not msgs:
        return None
    sid = f"{scn['id']}-short"
    weave = _open(tmp, sid)
    try:
        record_messages(weave.store, sid, msgs, user_id=f"user-{sid}", key_prefix="t")
        ctx = weave.context.assemble(sid, budget_tokens=budget, counter=counter)
    finally:
        weave.close()
    return {
        "scenario": scn["id"],
        "turns": len(msgs),
        "tokens": ctx.total_tokens,
        "full_tokens": counter.count_messages(msgs),
        "verbatim": _verbatim(ctx.messages) == _verbatim(msgs),
    }


def _short_row(cases: list[dict[str, Any]], name: str, kind: str) -> dict[str, Any]:
    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else float("nan")

    return {
        "system": name,
        "kind": kind,
        "probes": len(cases),
        "tokens_share": mean([c["tokens"] / c["full_tokens"] for c in cases]),
        "within_budget": mean([c["tokens"] <= c["full_tokens"] for c in cases]),
        "verbatim": mean([c["verbatim"] for c in cases]),
        "mean_tokens": mean([c["tokens"] for c in cases]),
    }


def run(directory: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(table rows per system, per-probe details, extra facts) over every scenario."""
    scenarios = load_scenarios(directory)
    counter = TokenCounter(encoding=ENCODING)
    details: list[dict[str, Any]] = []
    short: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for scn in scenarios:
            if (case := _short_session(scn, counter, tmp)) is not None:
                short.append(case)
            fits.append(_fit(scn, counter, tmp))
            budget = int(scn["budget_tokens"])
            base = {"scenario": scn["id"], "lang": scn.get("lang", "?"), "budget": budget}
            kinds = [p.get("kind", "plain") for p in scn["probes"]]
            for system, cold in (("beeweave", False), ("beeweave (cold)", True)):
                for r in _beeweave(scn, counter, tmp, cold=cold):
                    details.append({**base, "system": system, "kind": kinds[r["probe"]], **r})
            for idx, probe in enumerate(scn["probes"]):
                msgs = [openai_message(t) for t in scn["turns"][: probe["at"]]]
                full = counter.count_messages(msgs)
                for system, fn in BASELINES.items():
                    t0 = time.perf_counter()
                    out = fn(msgs, budget, counter, probe["query"])
                    ms = (time.perf_counter() - t0) * 1000
                    from beeweave_core.context.messages import message_text

                    retained, stale, stale_any = score_all(message_text(out), probe)
                    details.append(
                        {
                            **base,
                            "system": system,
                            "probe": idx,
                            "kind": kinds[idx],
                            "retained": retained,
                            "stale": stale,
                            "stale_any": stale_any,
                            "tokens": counter.count_messages(out),
                            "full_tokens": full,
                            "ms": ms,
                        }
                    )
    rows = by_kind(details)
    rows.append(_short_row(short, "beeweave (short session)", "history fits"))
    rows.append(_short_row(fits, "beeweave (fit check)", "budget above history"))
    comp = [d["compaction"] for d in details if d["system"] == "beeweave" and d.get("compaction")]
    src = sum(c.get("source_tokens") or 0 for c in comp)
    dst = sum(c.get("summary_tokens") or 0 for c in comp)
    extra = {
        "scenarios": [s["id"] for s in scenarios],
        "probes": sum(len(s["probes"]) for s in scenarios),
        "summary_compression_ratio": round(dst / src, 4) if src else None,
        "summaries_rolled_back": sum(c.get("rolled_back") or 0 for c in comp),
        # short sessions: the history fits, so BeeWeave's prompt must not exceed it
        # ("within_budget" of that row = share of cases with tokens <= full history)
        "short_session_le_full_history": _short_row(short, "", "")["within_budget"],
        "fit_verbatim": _short_row(fits, "", "")["verbatim"],
        "short_sessions": short,
    }
    return rows, details, extra


def by_kind(details: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per system over all probes, then (when the probes say) one per kind:
    ``updated`` (the value was changed), ``sibling`` (a look-alike that was not),
    ``plain``."""
    kinds = sorted({d.get("kind", "plain") for d in details})
    rows = []
    for system in SYSTEMS:
        mine = [d for d in details if d["system"] == system]
        rows.append(_aggregate(system, "all", mine))
        if len(kinds) > 1:
            rows += [
                _aggregate(system, k, [d for d in mine if d.get("kind", "plain") == k])
                for k in kinds
            ]
    return rows


def _aggregate(system: str, kind: str, ds: list[dict[str, Any]]) -> dict[str, Any]:
    forb = [d for d in ds if d["stale"] is not None]
    return {
        "system": system,
        "kind": kind,
        "probes": len(ds),
        "retention": sum(d["retained"] for d in ds) / len(ds) if ds else float("nan"),
        "stale_rate": sum(bool(d["stale"]) for d in forb) / len(forb) if forb else 0.0,
        "stale_any": sum(bool(d.get("stale_any")) for d in forb) / len(forb) if forb else 0.0,
        "tokens_share": sum(d["tokens"] / d["full_tokens"] for d in ds) / len(ds)
        if ds
        else float("nan"),
        "within_budget": sum(d["tokens"] <= d["budget"] for d in ds) / len(ds)
        if ds
        else float("nan"),
        "mean_tokens": sum(d["tokens"] for d in ds) / len(ds) if ds else float("nan"),
        "p50_ms": median([d["ms"] for d in ds]),
    }
