"""Who may talk to the UI server: local clients, or others holding the start-up token.

The UI can delete memories, so a server reachable from the network must not be open to
it.  Bound to loopback (the default) it only answers loopback clients whose ``Host``
header names this machine (a web page elsewhere cannot reach it through DNS
rebinding).  Bound elsewhere it also answers clients that present the token printed at
start, once as ``?token=`` (then kept in a cookie) or as ``Authorization: Bearer``.
"""

from __future__ import annotations

from http.cookies import SimpleCookie

from starlette.types import ASGIApp, Receive, Scope, Send

from beeweave_core.access import is_loopback, token_matches

COOKIE = "beeweave_ui_token"
LOCAL_HOSTNAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def _presented_token(scope: Scope) -> tuple[str | None, bool]:
    """The token a request carries, and whether it came in the query string."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    for part in scope.get("query_string", b"").decode("latin-1").split("&"):
        key, _, value = part.partition("=")
        if key == "token" and value:
            return value, True
    cookie = SimpleCookie(headers.get("cookie", ""))
    if COOKIE in cookie:
        return cookie[COOKIE].value, False
    return None, False


class AccessGuard:
    """ASGI middleware: refuse (403) what is neither local nor holding the token."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        local = is_loopback(client[0] if client else None) and _local_host_header(scope)
        presented, in_query = _presented_token(scope)
        holds = token_matches(presented, self.token)
        if not (local or holds):
            await _refuse(send)
            return
        if holds and in_query:
            send = _with_cookie(send, self.token or "")
        await self.app(scope, receive, send)


def _local_host_header(scope: Scope) -> bool:
    """The ``Host`` the browser asked for names this machine (no DNS-rebinding name)."""
    for k, v in scope["headers"]:
        if k == b"host":
            host = v.decode("latin-1").lower()
            name = host.split("]")[0] + "]" if host.startswith("[") else host.partition(":")[0]
            return name in LOCAL_HOSTNAMES
    return False


async def _refuse(send: Send) -> None:
    body = b'{"error": "forbidden: not a local client and no valid token"}'
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _with_cookie(send: Send, token: str) -> Send:
    async def wrapped(message: dict) -> None:  # type: ignore[type-arg]
        if message["type"] == "http.response.start":
            cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/".encode()
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
        await send(message)

    return wrapped
