"""Neo4j credentials from text, parsed one way for the CLI, the environment and the stores.

``user:password`` (the CLI's form) and ``user/password`` (Neo4j's own ``NEO4J_AUTH``
form) are both accepted.  The user name ends at the *first* ``:`` or ``/``, so a
password may contain either and means the same whichever form carried it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol, TypeAlias, runtime_checkable


@runtime_checkable
class DriverAuth(Protocol):
    """A driver auth token (``neo4j.basic_auth(…)``, ``neo4j.bearer_auth(…)`` …)."""

    scheme: str | None
    principal: str | None


#: A user name and password, as the driver takes them.
Credentials: TypeAlias = tuple[str, str]
#: What a store accepts: text (parsed here), credentials, a driver auth token, or None.
AuthSpec: TypeAlias = str | Credentials | DriverAuth | None

ENV_AUTH = "NEO4J_AUTH"
ENV_USER = "NEO4J_USER"
ENV_PASSWORD = "NEO4J_PASSWORD"


def parse_auth(text: str) -> Credentials | None:
    """``none`` → no auth; ``user:password`` or ``user/password`` → ``(user, password)``.

    A malformed value is a ``ValueError`` that does not echo it (it holds a secret).
    """
    if not isinstance(text, str):
        raise ValueError(f"Neo4j auth text must be a string, got {type(text).__name__}")
    if text.strip().lower() == "none":
        return None
    cuts = [i for i in (text.find(":"), text.find("/")) if i >= 0]
    cut = min(cuts, default=-1)
    if cut <= 0:
        raise ValueError(
            "bad Neo4j auth: expected 'user:password', 'user/password' or 'none' "
            f"(got {len(text)} characters with no user name before ':' or '/')"
        )
    return text[:cut], text[cut + 1 :]


def auth_from_env(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> Credentials | None:
    """``explicit`` (e.g. ``--auth``), else ``NEO4J_AUTH``, else ``NEO4J_USER``/``NEO4J_PASSWORD``."""
    env = os.environ if environ is None else environ
    raw = explicit or env.get(ENV_AUTH)
    if raw:
        return parse_auth(raw)
    user, password = env.get(ENV_USER), env.get(ENV_PASSWORD)
    return (user, password) if user and password else None


def driver_auth(auth: AuthSpec) -> Credentials | DriverAuth | None:
    """What the driver takes: text is parsed by :func:`parse_auth`, the rest passes through."""
    return parse_auth(auth) if isinstance(auth, str) else auth
