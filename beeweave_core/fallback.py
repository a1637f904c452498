"""When the memory cannot answer, the host agent goes on without it.

A capture hook, a context hook or a memory read that meets a closed weave or a store that
does not answer must not crash the agent it serves: it logs one warning per component and
returns what the agent would have had without BeeWeave (its own messages, no recalled
context).  Bad input (``ValueError``/``TypeError``) and refusals (``ScopeError``) are not
outages and still raise.  The checkpointer does not fall back: LangGraph's state is its
writes, so it raises :class:`~beeweave_core.checkpoints.CheckpointStoreError` instead.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

from beeweave_core.errors import StoreError, shown

log = logging.getLogger("beeweave")
T = TypeVar("T")


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the store is closed or unreachable (not bad input, not a refusal)."""
    if isinstance(exc, PermissionError):  # ScopeError: a refusal, never an outage
        return False
    if isinstance(exc, (StoreError, ConnectionError, TimeoutError, sqlite3.Error)):
        return True
    return type(exc).__module__.split(".", 1)[0] == "neo4j"  # the driver's errors


def cause(exc: BaseException) -> str:
    """``exc`` on one line, bounded: what a one-line report says after the colon."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return shown(text, 200).strip("'\"")


class Fallback:
    """One component's way of going on without memory: warns once, then quietly."""

    def __init__(self, component: str) -> None:
        self.component = component
        self.warned = False
        self._lock = threading.Lock()

    def run(self, call: Callable[[], T], default: Callable[[], T]) -> T:
        """``call()``; when the store is unavailable, ``default()`` (and one warning)."""
        try:
            return call()
        except Exception as exc:
            if not unavailable(exc):
                raise
            self.warn(exc)
            return default()

    def warn(self, exc: BaseException) -> None:
        with self._lock:
            if self.warned:
                return
            self.warned = True
        log.warning(
            "beeweave: %s goes on without memory (%s: %s); further failures are not logged",
            self.component,
            type(exc).__name__,
            cause(exc),
        )
