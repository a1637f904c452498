"""Where embedded data lives by default.

A module of its own so that the parts a weave is built from (the vector index, the
spool) can find the data directory without importing ``weave.py``, which imports them.
"""

from __future__ import annotations

import os
from pathlib import Path


def beeweave_home() -> Path:
    """Where embedded data lives, so every part finds the same folder.

    Returns:
        ``$BEEWEAVE_HOME`` when set, else ``~/.beeweave`` (``~`` expanded; not created).
    """
    return Path(os.environ.get("BEEWEAVE_HOME") or Path.home() / ".beeweave").expanduser()


def default_url() -> str:
    """The store ``Weave.open()`` uses when given no URL: one SQLite file in the home.

    Returns:
        A ``sqlite:///`` URL of ``beeweave.db`` in :func:`beeweave_home`.
    """
    return f"sqlite:///{beeweave_home() / 'beeweave.db'}"


__all__ = ["beeweave_home", "default_url"]
