"""Where embedded data lives by default.

A module of its own so that the parts a weave is built from (the vector index, the
spool) can find the data directory without importing ``weave.py``, which imports them.
"""

from __future__ import annotations

import hashlib
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


def models_cache() -> Path:
    """Where files derived from packaged models are kept, shared by every home on the
    machine (a test's fresh ``BEEWEAVE_HOME`` does not derive them again).

    Returns:
        ``$BEEWEAVE_CACHE`` when set, else ``beeweave/models`` under ``$XDG_CACHE_HOME``
        (default ``~/.cache``); not created.
    """
    explicit = os.environ.get("BEEWEAVE_CACHE")
    if explicit:
        return Path(explicit).expanduser() / "models"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "beeweave" / "models"


def sha256_of(path: Path) -> str:
    """A file's sha256 (hex), read in 1 MB pieces: model files are tens of MB."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


__all__ = ["beeweave_home", "default_url", "models_cache", "sha256_of"]
