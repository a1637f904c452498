"""Recall follows codes: a turn naming an item by its code brings the turns naming the
same code, so two items introduced far apart both reach the prompt (both backends)."""

from __future__ import annotations

import pytest

from beeweave_core.context import code_links
from beeweave_core.context.code_links import codes

from .context_helpers import chatter, say

BACKENDS = ["sqlite", "neo4j"]


def _session(weave, sid: str) -> None:
    say(weave, sid, [
        {"role": "user", "content": "Two parcels are held at customs. The first is crate "
                                    "KX-2093, full of ceramic tiles."},
        {"role": "assistant", "content": "Noted KX-2093 as held. What is the other one?"},
        *chatter(40),
        {"role": "user", "content": "Found it: KX-2039, the glass panels. Same paperwork "
                                    "trouble as KX-2093, but another broker handles it."},
        {"role": "assistant", "content": "Okay."},
        *chatter(40),
    ], maintain=False)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_question_about_both_items_gets_the_turn_that_names_the_second(
    weave_factory, backend, monkeypatch
):
    weave = weave_factory(backend, index=False)
    _session(weave, "s1")
    ask = "Which parcels are held at customs?"
    assert "KX-2039" in weave.assemble("s1", ask, budget_tokens=500).text()
    monkeypatch.setattr(code_links, "SEEDS", 0)  # the same read without following codes
    assert "KX-2039" not in weave.assemble("s1", ask, budget_tokens=500).text()


def test_codes_are_identifiers_with_letters_and_digits():
    assert codes("crate KX-2093 and SKU ab12cd, release 5.8.0 on day 3, x86") == (
        "KX-2093", "ab12cd"
    )  # fmt: skip
    assert codes("商品 HM-T140 和 HM-T160 分开") == ("HM-T140", "HM-T160")


def test_a_linked_turn_ranked_low_moves_up_next_to_its_seed(weave_factory):
    """The retriever found the second item's turn, but far down: following the code
    puts it right after the turn that named the first, and not twice."""
    weave = weave_factory("sqlite", index=False)
    _session(weave, "s2")
    turns = weave.store.timeline("s2")
    first = next(e for e in turns if e.content.startswith("Two parcels"))
    second = next(e for e in turns if e.content.startswith("Found it"))
    filler = [e for e in turns if "KX-" not in e.content][:20]
    keep = [(first, 1.0), *[(e, 0.5) for e in filler], (second, 0.01)]
    out = code_links.with_code_links(weave.store, "s2", keep, lambda e: True)
    ids = [e.id for e, _s in out]
    at = ids.index(second.id)
    assert ids[0] == first.id and at <= code_links.PER_CODE  # among the seed's links
    assert ids.count(second.id) == 1 and out[at][1] == 1.0 * code_links.SHARE
