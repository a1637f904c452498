"""Who may reach a server BeeWeave starts on this machine (the UI, the MCP server over
HTTP): a client on the loopback interface, or one that presents the server's token.

One home for both servers, so they refuse alike: a token is compared in constant time
as bytes, so any text a client sends (a non-ASCII header included) is refused with the
server's status, never raised as an error.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets


def is_loopback(host: str | None) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1; anything unparsable is not."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token(nbytes: int = 32) -> str:
    """A fresh URL-safe token of ``nbytes`` random bytes."""
    return secrets.token_urlsafe(nbytes)


def token_matches(given: str | None, token: str | None) -> bool:
    """Whether ``given`` is ``token`` (constant time; never raises)."""
    if not given or not token:
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass")
    )


__all__ = ["is_loopback", "new_token", "token_matches"]
