"""SIGTERM (a container stop) saves what the capture buses hold, then does what it did before.

Python runs ``atexit`` hooks on a normal exit and on Ctrl-C (``KeyboardInterrupt``)
but not when SIGTERM's default action kills the process.  So the first bus created
on the main thread installs a SIGTERM handler, once per process, and only where it
can be chained: if the host has a Python handler already, ours wraps it (saves, then
calls the host's); if the host ignores SIGTERM we leave that alone; with the
default action we save and then end the process exactly as the default would
(signal re-raised with ``SIG_DFL``).  A host that installs its own handler after
us replaces ours; its ``sys.exit()`` then runs ``atexit``, which saves as well.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

log = logging.getLogger("beeweave.bus")

#: Seconds a SIGTERM gives the store to take what is queued; the rest stays spooled.
TERM_STORE_SECONDS = 2.0


class Closable(Protocol):
    def close(self, timeout: float = ...) -> None: ...


_live: weakref.WeakSet[Any] = weakref.WeakSet()
_state: dict[str, Any] = {"installed": False, "previous": None}
_lock = threading.Lock()


def register(bus: Closable) -> None:
    """Save ``bus`` on SIGTERM (installs the handler on first use from the main thread)."""
    _live.add(bus)
    with _lock:
        if _state["installed"] or threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_IGN or previous is None:  # ignored, or a C-level handler
            _state["installed"] = True
            return
        try:
            signal.signal(signal.SIGTERM, _on_term)
        except ValueError:  # not the main interpreter
            return
        _state.update(installed=True, previous=previous)


def unregister(bus: Closable) -> None:
    _live.discard(bus)


def _on_term(signum: int, frame: FrameType | None) -> None:
    for bus in list(_live):
        try:
            bus.close(timeout=TERM_STORE_SECONDS)
        except Exception:  # saving one bus must not stop the others or the exit
            log.exception("beeweave: saving a capture bus on SIGTERM failed")
    previous: Callable[[int, FrameType | None], Any] | int | None = _state["previous"]
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
