"""User text inside a Lucene query (Neo4j's full-text index), as text and never as syntax.

Lucene's classic query parser gives meaning to ``+ - ! ( ) { } [ ] ^ " ~ * ? : \\ /``,
to ``&&`` / ``||`` and to the upper-case words ``AND OR NOT TO``.  A question an
agent relays ("tenant:other", "a AND NOT b", "/regex/") must neither change the
query's structure nor name another field, so every syntax character is
backslash-escaped and the operator words are lower-cased (Lucene's analyzers
lower-case terms anyway, so matching is unchanged).
"""

from __future__ import annotations

import re

__all__ = ["escape", "phrase"]

_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')
_OPERATOR = re.compile(r"\b(AND|OR|NOT|TO)\b")


def escape(text: str) -> str:
    """``text`` as a plain list of words for Lucene's query parser."""
    return _OPERATOR.sub(lambda m: m.group(1).lower(), _SPECIAL.sub(r"\\\1", text))


def phrase(value: str) -> str:
    """``value`` as one quoted Lucene phrase (an exact field value: a tenant, a session id)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
