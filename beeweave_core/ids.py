"""Rules for tenant and session ids, checked before an id is used anywhere.

Ids come from hosts and end users (a LangGraph ``thread_id``, a tenant from a
request header).  They are checked once, at the edge, with one clear error; file
names are derived from them by hashing, never by pasting the raw id into a path.

* tenant: 1-128 characters of ``A-Z a-z 0-9 . _ - : @ +``, not starting with ``.``
  or ``-`` (a tenant names a customer or a business line, not free text);
* session id: 1-512 printable characters (no control characters, line breaks,
  or lone surrogates); any language.
"""

from __future__ import annotations

import hashlib
import re

from beeweave_core.errors import shown

MAX_TENANT_LEN = 128
MAX_SESSION_LEN = 512
_TENANT = re.compile(r"[A-Za-z0-9_@+:][A-Za-z0-9._@+:-]*")


def _text_problem(kind: str, value: object, limit: int) -> str | None:
    if type(value) is not str:
        return f"{kind} must be a string, got {type(value).__name__}"
    if not value or len(value) > limit:
        return f"{kind} must be 1-{limit} characters, got {len(value)}"
    return None


def tenant_problem(tenant: object) -> str | None:
    """Why ``tenant`` is not a valid tenant id (None: it is)."""
    problem = _text_problem("tenant", tenant, MAX_TENANT_LEN)
    if problem is None and not _TENANT.fullmatch(tenant):  # type: ignore[arg-type]
        problem = f"tenant {shown(tenant)} may only use letters, digits and . _ - : @ +"
    return problem


def check_tenant(tenant: object) -> str:
    """``tenant`` if valid, else a ``ValueError`` that says which rule it breaks."""
    problem = tenant_problem(tenant)
    if problem:
        raise ValueError(problem)
    return tenant  # type: ignore[return-value]


def session_problem(session_id: object) -> str | None:
    """Why ``session_id`` is not a valid session id (None: it is).  Cheap: one C pass."""
    problem = _text_problem("session_id", session_id, MAX_SESSION_LEN)
    if problem is None and not session_id.isprintable():  # type: ignore[union-attr]
        problem = f"session_id {shown(session_id)} holds control or unpaired characters"
    return problem


def file_key(*parts: str) -> str:
    """A file-name-safe digest of ``parts`` (raw ids never reach a path)."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
