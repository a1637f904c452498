"""Speech acts and supersession: the learned parts of the memory writer, on sentences
written for this test (no benchmark wording), with the shipped weights."""

from __future__ import annotations

import numpy as np
import pytest

from beeweave_core.memory import acts as A
from beeweave_core.memory.extract import Turn, statements
from beeweave_core.memory.supersession import (
    FEATURES,
    Index,
    Scorer,
    features,
    mask,
    prepare,
    scorer,
    values,
)


def test_the_shipped_classifier_tells_statements_from_the_rest():
    said = [
        "The quarterly board meeting is always held in the Geneva office.",
        "We settled on the teal logo for the relaunch.",
        "Invoices over 900 francs need two signatures.",
        "I'd rather get these summaries as a short list.",
        "仓库里还有三百个托盘。",
        "新版官网统一用深蓝色。",
    ]
    not_said = [
        "Could you draft the agenda for Thursday?",
        "Where did we put the signed contract?",
        "ok thanks",
        "haha, what a morning",
        "明天的会几点开始？",
        "好的",
    ]
    got = A.classify(said + not_said)
    assert sum(a in A.STATEMENTS for a in got[: len(said)]) >= len(said) - 1
    assert sum(a not in A.STATEMENTS for a in got[len(said) :]) >= len(not_said) - 1


def test_shape_features_need_no_vocabulary():
    q, s = A.shape("Is the ferry late again?"), A.shape("The ferry leaves at 7.")
    assert q[0] == 1.0 and s[0] == 0.0  # ends with a question mark
    assert s[2] == 1.0 and q[2] == 0.0  # carries a digit
    assert A.shape("港口几点关门？")[0] == 1.0 and A.shape("港口几点关门？")[5] > 0.5


def test_a_bare_yes_takes_up_the_proposal_and_a_refusal_records_it_as_turned_down():
    offer = Turn(
        "a1", 4, "assistant", "I could move the standup to 10:30 so the Lisbon team joins. Shall I?"
    )
    yes = statements(Turn("u1", 5, "user", "yes please"), offer)
    assert [(s.text, s.sources, s.rejected) for s in yes] == [
        ("I could move the standup to 10:30 so the Lisbon team joins.", ("a1", "u1"), False)
    ]
    no = statements(Turn("u2", 5, "user", "no, keep it where it is"), offer)
    assert no and all(s.rejected for s in no if s.sources == ("a1", "u2"))
    assert statements(Turn("u3", 5, "user", "nope"), None) == []  # nothing proposed


def test_values_and_masking_keep_what_names_an_item():
    found = {v.text: v.kind for v in values("Ticket ZX-1204 moves to sprint 14, budget $3,000.")}
    assert found["ZX-1204"].startswith("id:") and "$3,000" in found
    assert "14" in {k.split()[0] for k in found}


def test_a_measure_word_after_a_space_names_the_kind_and_stays_in_the_text():
    """Typed Chinese often spaces a number from its measure word ("3 箱"): the measure
    still tells two kinds of value apart (boxes are not a day of the month)."""
    boxes = values("仓库每周补 3 箱矿泉水。")
    day = values("对账放到每月 18 号。")
    assert [(v.text, v.kind) for v in boxes] == [("3", "num:箱")]
    assert [(v.text, v.kind) for v in day] == [("18", "num:号")]
    assert "箱" in mask("仓库每周补 3 箱矿泉水。", boxes)
    (a, b, c) = prepare([("a", "仓库每周补 3 箱矿泉水。", 1, True),
                         ("b", "矿泉水卖得快，每周补 5 箱吧。", 30, True),
                         ("c", "对账放到每月 18 号。", 31, True)])  # fmt: skip
    assert features(a, b)[FEATURES.index("kind_changed")] == 1.0
    assert features(a, c)[FEATURES.index("kind_changed")] == 0.0


def test_a_new_value_for_the_same_setting_replaces_the_old_one_and_look_alikes_stay():
    said = prepare([
        ("a", "The nightly backup runs at 01:00.", 1, True),
        ("b", "Ticket ZX-1204 is blocking the release.", 2, True),
        ("c", "Move the nightly backup to 03:30, the old slot clashes with the reindex.", 9, True),
        ("d", "Ticket ZX-1240 is blocking the release too, a separate bug.", 10, True),
    ])  # fmt: skip
    index = Index()
    index.add(said[0])
    index.add(said[1])
    assert index.replaced_by(said[2]) == ["a"]
    assert index.replaced_by(said[3]) == []  # another ticket: both live


def test_an_amount_with_a_unit_letter_is_a_quantity_not_two_items():
    """ "$40k-$55k" matches the identifier pattern, but it is an amount: changing it is a
    new value for the setting, not a second item (the identifier rule vetoed it)."""
    old, new = prepare([("a", "The contractor budget is $40k-$55k.", 3, True),
                        ("b", "Let's cap the contractor budget at $60k-$70k instead.", 40, True)])  # fmt: skip
    assert [v.kind for v in old.found] == ["num:$k$k"]
    f = features(old, new)
    assert f[FEATURES.index("id_conflict")] == 0.0 and f[FEATURES.index("kind_changed")] == 1.0
    index = Index(Scorer(np.zeros(len(f)), 50.0, 0.5))  # a judge that would take any pair
    index.add(old)
    assert index.replaced_by(new) == ["a"]


def test_one_new_statement_replaces_one_setting_even_if_two_share_its_unit():
    """Two live settings in percent; a new one changes one of them.  A judge that would
    take every candidate must still leave the other setting live."""
    said = prepare([
        ("cpu", "Cap the nightly export at 30% of the CPU.", 2, True),
        ("disk", "Page me when the disk is more than 80% full.", 5, True),
        ("new", "The export may use 45% of the CPU from now on.", 60, True),
    ])  # fmt: skip
    shipped = scorer()
    index = Index(Scorer(shipped.w, shipped.b, 0.0))  # the shipped weights, any pair passes
    index.add(said[0])
    index.add(said[1])
    assert index.replaced_by(said[2]) == ["cpu"]  # the likelier of the two


def test_the_scorer_threshold_decides_and_features_are_finite():
    a, b = prepare([("a", "Keep the thermostat at 19 degrees.", 1, True),
                    ("b", "Set the thermostat to 21 degrees from now on.", 5, True)])  # fmt: skip
    f = features(a, b)
    assert all(np.isfinite(f))
    never = Scorer(np.zeros(len(f)), -50.0, 0.5)
    always = Scorer(np.zeros(len(f)), 50.0, 0.5)
    assert not never.replaces(a, b) and always.replaces(a, b)


@pytest.mark.parametrize("text", ["", "   ", "?"])
def test_odd_sentences_do_not_break_the_classifier(text: str):
    assert A.classify([text])[0] in A.ACTS
