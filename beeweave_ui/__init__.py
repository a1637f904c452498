"""``beeweave ui``: a local web UI over a store — sessions, the causal graph, what the
model saw in each assembly, memories and their history, search, and context health.

Install with ``pip install "beeweave[ui]"``; start with ``beeweave ui``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beeweave_ui.app import build_app

__all__ = ["build_app"]


def __getattr__(name: str) -> object:
    """``build_app`` on first use: the ``beeweave ui`` command imports this package without
    starlette, to name the extra that installs it."""
    if name == "build_app":
        from beeweave_ui.app import build_app

        return build_app
    raise AttributeError(f"module 'beeweave_ui' has no attribute {name!r}")
