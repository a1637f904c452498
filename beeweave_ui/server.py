"""``beeweave ui``: open the store, build the app, serve it with uvicorn."""

from __future__ import annotations

import threading
import webbrowser
from collections.abc import Callable

from beeweave_core.access import is_loopback, new_token
from beeweave_core.weave import Weave
from beeweave_ui.app import build_app


def serve(
    weave: Weave,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    open_browser: bool = False,
    say: Callable[[str], None] = print,
) -> None:
    """Serve until interrupted.  Bound beyond loopback, a fresh token guards the UI."""
    import uvicorn

    local = is_loopback(host)
    token = None if local else new_token()
    app = build_app(weave, token=token)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{'127.0.0.1' if local else shown}:{port}/"
    say(f"BeeWeave UI for tenant {weave.tenant!r}: {url}")
    if token:
        say(f"Bound to {host}: clients other than this machine need the token.")
        say(f"Open {url}?token={token}")
    if open_browser:
        threading.Timer(
            1.0, webbrowser.open, args=(url + (f"?token={token}" if token else ""),)
        ).start()
    uvicorn.run(app, host=host, port=port, log_level="warning")
