"""Files and folders BeeWeave creates are private to the user, whatever the umask.

Captured events hold prompts, tool outputs and personal data; a world-readable
spool or database under ``umask 022`` would leak them to every local account.  So
every file BeeWeave creates is made ``0600`` and every folder ``0700`` here, in one
place.  Folders that already exist (a user's own project folder) are left alone:
only what BeeWeave itself creates is tightened.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, Any

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and missing parents) as ``0700`` folders; return it."""
    p = Path(path)
    missing: list[Path] = []
    q = p
    while not q.exists() and q != q.parent:
        missing.append(q)
        q = q.parent
    p.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    for created in missing:  # mkdir's mode is filtered by the umask; chmod is not
        _chmod(created, DIR_MODE)
    return p


def touch_private(path: str | os.PathLike[str]) -> Path:
    """Make sure ``path`` exists; a file BeeWeave creates starts out ``0600``."""
    p = Path(path)
    private_dir(p.parent)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return p
    os.close(fd)
    _chmod(p, FILE_MODE)
    return p


def open_private(path: str | os.PathLike[str], mode: str = "a", buffering: int = -1) -> IO[Any]:
    """Open a file for writing (``"a"``, ``"w"``, ``"ab"``, ``"wb"``), ``0600`` if new."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        if "b" in mode:
            return os.fdopen(fd, mode, buffering)
        return os.fdopen(fd, mode, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def write_private_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` (an export, a rewritten spool), ``0600``."""
    with open_private(path, "w") as f:
        f.write(text)


def make_private(*paths: str | os.PathLike[str]) -> None:
    """Tighten files BeeWeave created through a library (SQLite's -wal/-shm, Chroma's)."""
    for p in paths:
        _chmod(Path(p), DIR_MODE if Path(p).is_dir() else FILE_MODE)


def make_tree_private(root: str | os.PathLike[str]) -> None:
    """``make_private`` for a folder a library filled (Chroma): folders 0700, files 0600."""
    base = Path(root)
    if not base.is_dir():
        return
    _chmod(base, DIR_MODE)
    for dirpath, dirnames, filenames in os.walk(base):
        for d in dirnames:
            _chmod(Path(dirpath) / d, DIR_MODE)
        for f in filenames:
            _chmod(Path(dirpath) / f, FILE_MODE)


def _chmod(path: Path, mode: int) -> None:
    with contextlib.suppress(OSError):  # not ours, vanished, or no modes on this filesystem
        os.chmod(path, mode)
