"""Where embedded data lives: one root, read by the backends, the bus spool and the weave.

Kept apart from ``weave.py`` so the backends (which place the default SQLite file and
Chroma directories under it) need not import the weave that opens them.
"""

from __future__ import annotations

import os
from pathlib import Path


def beeweave_home() -> Path:
    """Where embedded data lives: ``$BEEWEAVE_HOME`` or ``~/.beeweave``."""
    return Path(os.environ.get("BEEWEAVE_HOME") or Path.home() / ".beeweave").expanduser()


def default_url() -> str:
    """The embedded default store: one SQLite file under :func:`beeweave_home`."""
    return f"sqlite:///{beeweave_home() / 'beeweave.db'}"
