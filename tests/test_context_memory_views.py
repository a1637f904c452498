"""The memory writer's indexes give exactly what a full scan of the memories gives."""

from __future__ import annotations

import itertools
import random

from beeweave_core.context.memory_views import MemoryView, ViewSet
from beeweave_core.events import Event, EventType
from beeweave_core.text import language as L

WORDS = ["kettle", "ferry", "lantern", "quota", "harbour", "glacier", "violin", "mortgage",
         "orchard", "satchel", "tundra", "pigment", "bishop", "walrus", "cobalt"]  # fmt: skip


def _view(i: int, text: str, kind: str = "fact", **payload: object) -> MemoryView:
    ev = Event(id=f"m{i}", session_id="s", type=EventType.MEMORY, content=text,
               payload={"kind": kind, **payload})  # fmt: skip
    return MemoryView.of(ev)


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, rng.randint(2, 7))) + f" is {rng.randint(1, 9)}."
            for _ in range(n)]  # fmt: skip


def _best(views: list[MemoryView], terms: set[str], t: float) -> tuple[float, str] | None:
    scored = [(L.jaccard(terms, v.terms), v.id) for v in views]
    hits = [p for p in scored if p[0] >= t]
    return max(hits, key=lambda p: p[0]) if hits else None


def test_near_terms_and_slots_match_a_full_scan() -> None:
    views = [_view(i, t) for i, t in enumerate(_texts(300, 7))]
    vs = ViewSet(views)
    for q in _texts(200, 11):
        new = _view(-1, q)
        for t in (0.6, 0.8):
            got = vs.near_terms(new.terms, False, t)
            assert _best(got, new.terms, t) == _best(views, new.terms, t)
            full = {v.id for v in views if L.jaccard(new.slot, v.slot) >= t}
            assert full <= {v.id for v in vs.near_slot(new.slot, False, t)}


def test_removed_views_are_not_found_and_order_is_kept() -> None:
    views = [_view(i, "the walrus quota for the harbour is 4.") for i in range(3)]
    vs = ViewSet(views)
    assert vs.same_wording(False, views[0].fold) is views[0]
    vs.remove("m0")
    assert vs.same_wording(False, views[0].fold) is views[1]
    assert [v.id for v in vs.near_terms(views[0].terms, False, 0.8)] == ["m1", "m2"]
    assert vs.near_terms(views[0].terms, True, 0.8) == []  # artifacts are another group
    assert len(vs) == 2


def test_last_call_is_the_newest_artifact_of_the_same_call() -> None:
    calls = itertools.cycle([("weigh", {"crate": 1}), ("weigh", {"crate": 2})])
    views = [_view(i, f"weigh result {i}", "artifact", tool=t, args=a)
             for i, (t, a) in zip(range(5), calls, strict=False)]  # fmt: skip
    vs = ViewSet(views)
    assert vs.last_call("weigh", {"crate": 1}).id == "m4"  # type: ignore[union-attr]
    assert vs.last_call("weigh", {"crate": 2}).id == "m3"  # type: ignore[union-attr]
    assert vs.last_call("weigh", {"crate": 3}) is None
    vs.remove("m4")
    assert vs.last_call("weigh", {"crate": 1}).id == "m2"  # type: ignore[union-attr]
