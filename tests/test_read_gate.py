"""Background workers give way to reads: maintenance waits at its next step while a read
runs, and goes on when it ends (or after the gate's limit, so back-to-back reads never
starve it)."""

from __future__ import annotations

import threading

from beeweave_core.read_gate import ReadGate


def _worker(gate: ReadGate, done: threading.Event) -> threading.Thread:
    t = threading.Thread(target=lambda: (gate.give_way(), done.set()), daemon=True)
    t.start()
    return t


def test_a_worker_waits_for_the_read_in_flight():
    gate, done = ReadGate(at_most=30.0), threading.Event()
    with gate.reading():
        _worker(gate, done)
        assert not done.wait(0.3)  # the read goes first
    assert done.wait(10)


def test_reads_that_never_end_do_not_starve_the_worker():
    gate, done = ReadGate(at_most=0.05), threading.Event()
    with gate.reading():
        _worker(gate, done)
        assert done.wait(10)


def test_no_read_no_wait():
    gate, done = ReadGate(at_most=30.0), threading.Event()
    _worker(gate, done)
    assert done.wait(10)
