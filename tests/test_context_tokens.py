"""Assembled contexts are counted exactly, tool calls included, against real tiktoken.

The reference is ``tiktoken.get_encoding`` itself reading the rank files llama-index-core
ships (no data path shared with ``beeweave_core.tokens``), with OpenAI's published
per-message recipe written out here; the tool-call framing constants are the ones
``beeweave_core.tokens`` documents as its estimate.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
import tiktoken

from beeweave_core.tokens import TOKENS_PER_TOOL_CALL, TOKENS_PER_TOOL_CALL_ID, TokenCounter

from .context_helpers import call, chatter, say

URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@pytest.fixture(scope="module")
def real_tiktoken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tiktoken.Encoding]:
    spec = importlib.util.find_spec("llama_index.core")
    assert spec and spec.submodule_search_locations, "llama-index-core (reference data) missing"
    src = Path(next(iter(spec.submodule_search_locations))) / "_static" / "tiktoken_cache"
    dst = tmp_path_factory.mktemp("tiktoken_cache")
    for name in ("cl100k_base", "o200k_base"):
        key = hashlib.sha1(URL.format(name).encode()).hexdigest()
        shutil.copyfile(src / key, dst / key)
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(dst)
    try:
        return {n: tiktoken.get_encoding(n) for n in ("cl100k_base", "o200k_base")}
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


def reference_count(enc: tiktoken.Encoding, messages: list[dict]) -> int:
    """OpenAI cookbook: 3 per message + role + content (+ tool framing), 3 to prime."""
    total = 3
    for m in messages:
        total += 3 + len(enc.encode(m["role"])) + len(enc.encode(m.get("content") or ""))
        for c in m.get("tool_calls") or ():
            fn = c["function"]
            total += (
                TOKENS_PER_TOOL_CALL
                + len(enc.encode(fn["name"]))
                + len(enc.encode(fn["arguments"]))
            )
        if m.get("tool_call_id"):
            total += TOKENS_PER_TOOL_CALL_ID
    return total


@pytest.mark.parametrize(
    "model,encoding", [("gpt-4", "cl100k_base"), ("gpt-4o-mini", "o200k_base")]
)
def test_assembled_total_matches_tiktoken_with_tool_calls(
    weave_factory, real_tiktoken, model, encoding
):
    weave = weave_factory(index=False)
    rows = [{"sku": f"SKU-{i}", "qty": i * 3, "note": "库存 ok"} for i in range(200)]
    say(weave, "s", [
        {"role": "system", "content": "You are a stock assistant. 回答要简洁。"},
        {"role": "user", "content": "Check stock for warehouse WH-7 and keep the reorder level at 40 units."},
        {"role": "assistant", "content": "Checking.", "tool_calls": [call("c1", "stock", {"wh": "WH-7"}),
                                                                     call("c2", "prices", {"wh": "WH-7"})]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"rows": rows, "total": 600})},
        {"role": "tool", "tool_call_id": "c2", "content": '{"currency": "EUR", "avg": 12.5}'},
        {"role": "assistant", "content": "WH-7 holds 600 units; average price 12.5 EUR."},
        *chatter(3),
        {"role": "user", "content": "What reorder level did I ask for?"},
    ])  # fmt: skip
    ctx = weave.assemble("s", "reorder level", budget_tokens=700, model=model)
    assert ctx.encoding == encoding
    assert any(m.get("tool_calls") for m in ctx.messages), "the tool group should fit and be shown"
    expected = reference_count(real_tiktoken[encoding], ctx.messages)
    assert ctx.total_tokens == expected
    assert TokenCounter(model).count_messages(ctx.messages) == expected
    # the per-layer accounts add up to the same exact total
    assert sum(ctx.tokens_by_layer.values()) + ctx.overhead_tokens == ctx.total_tokens
    assert ctx.total_tokens <= 700


def test_full_history_tokens_count_every_tool_call(weave_factory, real_tiktoken):
    weave = weave_factory(index=False)
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "run both"},
        {"role": "assistant", "content": "", "tool_calls": [call("a", "t1", {"x": 1}), call("b", "t2", {"y": "二"})]},
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "two"},
    ]  # fmt: skip
    say(weave, "s", msgs)
    ctx = weave.assemble("s", budget_tokens=10_000, model="gpt-4")
    enc = real_tiktoken["cl100k_base"]
    # stored args are re-serialised with ensure_ascii=False: count what is actually sent
    sent = [m for m in ctx.messages if m["role"] != "system" or m["content"] == "sys"]
    assert ctx.full_history_tokens == reference_count(enc, sent)
    assert [c["function"]["name"] for c in ctx.messages[-3]["tool_calls"]] == ["t1", "t2"]
