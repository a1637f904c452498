"""``beeweave stats``: context health per session and pooled, from a real store, in a real process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beeweave_core.events import Event, EventType, new_event_id
from beeweave_core.weave import Weave

from .context_helpers import chatter, say
from .test_cli import run

#: Facts of the "lost" session, oldest first: more than the recall window holds.
LOST = [
    f"Bin {i} of the cold store keeps lot Q{i * 41 + 203} at {i % 9 + 2} degrees" for i in range(60)
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sessions: one healthy, one whose 60 notes outgrew what recall carries, so its
    earliest facts are no longer in the assembled context."""
    home = tmp_path_factory.mktemp("stats")
    with Weave.open(f"sqlite:///{home}/beeweave.db", index=False, spool_dir=home / "sp") as w:
        fact = "My locker code is LK-5820 and I cycle to work."
        say(w, "calm", [{"role": "user", "content": fact}, {"role": "assistant", "content": "Ok."}])
        say(w, "calm", chatter(30))
        w.assemble("calm", budget_tokens=400)
        w.context.settle(["calm"])  # the compaction it asked for (a close drops what is due)
        say(w, "lost", chatter(4), prefix="lost")
        w.assemble("lost", budget_tokens=3000)
        w.store.append([Event(id=new_event_id(), session_id="lost", type=EventType.MEMORY,
                              content=fact, payload={"kind": "fact", "source_seq": i})
                        for i, fact in enumerate(LOST)])  # fmt: skip
    return home


def stats(home: Path, *args: str, check: bool = True):
    return run(home, "stats", "--url", f"sqlite:///{home}/beeweave.db", *args, check=check)


def test_stats_json_per_session_and_pooled(home):
    out = json.loads(stats(home, "--json").stdout)
    by = {h["scope"]: h for h in out["sessions"]}
    assert set(by) == {"calm", "lost"}
    calm, lost, pooled = by["calm"], by["lost"], out["pooled"]
    assert calm["amnesia"] == {"sampled": 1, "carried": 1, "missing": []}
    assert calm["source_tokens"] > calm["summary_tokens"] > 0  # 30 turns were compacted
    missing = lost["amnesia"]["missing"]
    assert lost["amnesia"]["sampled"] == 5 and missing and set(missing) <= set(LOST[:20])
    assert any(w.startswith(f"amnesia: {len(missing)} of 5") for w in lost["warnings"])
    assert pooled["scope"] == "pooled"
    assert pooled["assemblies"] == calm["assemblies"] + lost["assemblies"] == 2
    assert pooled["source_tokens"] == calm["source_tokens"] + lost["source_tokens"]
    assert pooled["amnesia"]["sampled"] == 6 and pooled["amnesia"]["missing"] == missing


def test_stats_one_session_table_and_unknown_session(home):
    table = stats(home, "lost").stdout
    assert "lost" in table and "amnesia" in table and "calm" not in table
    bad = stats(home, "nobody-here", check=False)
    assert bad.returncode == 1 and "no session" in bad.stderr and "Traceback" not in bad.stderr
    assert stats(home, "--budget", "0", check=False).returncode == 1
