"""Serving the MCP server over streamable HTTP, guarded by a bearer token.

On a loopback address no token is needed, but a request from any other address is
refused (a proxy or port forward must not open the memory to the network by accident).
Bound beyond localhost, a token is required: given, or generated and printed at start;
every request without it gets 401 before it reaches the MCP app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from beeweave_core.access import is_loopback, new_token, token_matches

Scope = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]
]


class TokenGuard:
    """ASGI middleware: a valid ``Authorization: Bearer <token>`` (when a token is set),
    and a loopback client (when none is)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = self.check(scope)
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, text = problem
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": text.encode()})

    def check(self, scope: Scope) -> tuple[int, str] | None:
        """``None`` when the request may pass, else (status, reason)."""
        if self.token is None:
            client = (scope.get("client") or ("", 0))[0]
            if not is_loopback(str(client)):
                return 403, "beeweave mcp: remote clients need a server started with a token\n"
            return None
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, given = raw.partition(" ")
        if scheme.lower() != "bearer" or not token_matches(given.strip(), self.token):
            return 401, "beeweave mcp: missing or wrong bearer token\n"
        return None


def http_app(server: Any, *, host: str, token: str | None, path: str = "/mcp") -> ASGIApp:
    """The server's streamable HTTP app behind :class:`TokenGuard`."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if not is_loopback(host):  # the Host header is the public name; the token guards it
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path=path, host=host, transport_security=security
    )
    return TokenGuard(app, token)


def serve_http(
    server: Any, *, host: str, port: int, token: str | None, announce: Callable[[str], None]
) -> None:
    """Run until interrupted; a non-loopback ``host`` without ``token`` gets a new one."""
    import uvicorn

    if token is None and not is_loopback(host):
        token = new_token()
    announce(f"beeweave mcp: streamable HTTP on http://{host}:{port}/mcp")
    if token is not None:
        announce(f"beeweave mcp: bearer token (send 'Authorization: Bearer <token>'): {token}")
    uvicorn.run(http_app(server, host=host, token=token), host=host, port=port, log_level="warning")
