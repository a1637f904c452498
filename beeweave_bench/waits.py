"""Waiting for the store in a bench: a figure read before the store has everything is wrong."""

from __future__ import annotations

import time

from beeweave_core.weave import Weave


def flush_until(weave: Weave, timeout: float) -> bool:
    """flush() until it says everything is stored.

    ``Weave.flush`` returns early when a store call runs past the bus's ``stall_after``
    (5 s) or the store reported an outage: right for an agent, which must not wait on
    its memory, but a bench that counts stored events must wait for that call to end.
    """
    deadline = time.monotonic() + timeout
    while not weave.flush(1.0):
        if time.monotonic() > deadline:
            return False
    return True
