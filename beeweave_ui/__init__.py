"""``beeweave ui``: a local web UI over a store — sessions, the causal graph, what the
model saw in each assembly, memories and their history, search, and context health.

Install with ``pip install "beeweave[ui]"``; start with ``beeweave ui``.
"""

from beeweave_ui.app import build_app

__all__ = ["build_app"]
