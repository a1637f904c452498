"""Several processes on one embedded home with vectors on.

An embedded Chroma directory is not safe for two writers, so one process at a time
holds it; the others store events in the graph and leave vectors to the holder or to
the next process that gets the directory.  These tests run real processes at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from beeweave_core.events import EventType
from beeweave_core.weave import Weave

PROCESSES = 4
#: Events per process: past 1,000 vectors Chroma persists its HNSW segment, which is where
#: two writer processes used to break each other ("Error creating hnsw segment reader").
PER_PROCESS = 1200

WRITER = textwrap.dedent(
    """
    import sys
    from beeweave_core.weave import Weave

    url, worker, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Weave.open(url, index_options={"retry_interval": 0.5}) as weave:
        for i in range(n):
            weave.emit("user_message", f"greenhouse {worker} reading {i}: humidity {i % 97}%",
                       session_id=f"bed-{worker}", key=f"{worker}-{i}")
        assert weave.flush(480), "flush timed out"  # completeness, not speed: a loaded box is slow
        hits = weave.retrieve(f"greenhouse {worker} reading 7", session_id=f"bed-{worker}", k=3)
        assert hits, "lexical recall works in every process, holder of the vectors or not"
        print("ok", worker, flush=True)
    """
)

STATUS = textwrap.dedent(
    """
    import sys
    from beeweave_core.weave import Weave

    with Weave.open(sys.argv[1]) as weave:
        s = weave.indexer.status()
        print(s["busy"], "|", s["chunks"])
    """
)


def test_four_processes_graph_and_vectors_complete(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    env = {**os.environ, "BEEWEAVE_HOME": str(tmp_path)}
    env.pop("BEEWEAVE_INDEX", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, str(w), str(PER_PROCESS)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for w in range(PROCESSES)
    ]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.startswith("ok"), err[-3000:]
        assert "hnsw" not in err and "Traceback" not in err, err[-3000:]

    with Weave.open(url, index_options={"retry_interval": 0.5}) as weave:
        assert weave.indexer is not None
        assert weave.indexer.sync(timeout=600)  # the gap check on open fills what is left
        for w in range(PROCESSES):
            events = weave.store.timeline(f"bed-{w}")
            seqs = [e.seq for e in events]
            assert seqs == list(range(seqs[0], seqs[0] + PER_PROCESS))  # complete, gapless
            assert all(e.type == EventType.USER_MESSAGE for e in events)
        wanted = {
            e.id
            for w in range(PROCESSES)
            for e in weave.store.timeline(f"bed-{w}")
            if weave.indexer.policy.wants(e)
        }
        assert len(wanted) == PROCESSES * PER_PROCESS
        assert weave.indexer.index.ids(list(wanted)) == wanted


def test_second_process_recalls_without_the_vectors(tmp_path: Path) -> None:
    """While one process holds the directory, another still captures and recalls by words."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    env = {**os.environ, "BEEWEAVE_HOME": str(tmp_path)}
    env.pop("BEEWEAVE_INDEX", None)
    with Weave.open(url) as holder:
        assert holder.indexer is not None and holder.indexer.sync(60)
        proc = subprocess.run(
            [sys.executable, "-c", WRITER, url, "late", "20"],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr
        assert len(holder.store.timeline("bed-late")) == 20
        status = subprocess.run([sys.executable, "-c", STATUS, url], env=env,
                                capture_output=True, text=True, timeout=300)  # fmt: skip
        assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr[-3000:]
        busy, chunks = status.stdout.split("|")
        assert "another process holds" in busy and chunks.strip() == "None"
        assert holder.indexer.status()["busy"] == ""  # the holder: its own figures
