"""Errors every layer may raise; kept import-free so any module can use them."""


class StoreError(RuntimeError):
    """The store could not do what was asked (bad input is a ``ValueError``)."""


class StoreClosed(StoreError):
    """The store was closed: work still running for it (a background catch-up) stops
    instead of reporting every remaining event as a failure."""


class NotFound(StoreError, KeyError):
    """The session or event does not exist for this tenant."""


#: How much of a bad input an error message echoes: enough to recognise it, never a
#: 100 KB id spread over hundreds of terminal lines.
ECHO_CHARS = 60


def invalid_line(exc: Exception) -> str:
    """The first problem a pydantic ``ValidationError`` names, in one short line
    (``field: message``; never the rejected value, which is the caller's data)."""
    errors = getattr(exc, "errors", None)
    found = errors() if callable(errors) else None
    if found:
        where = ".".join(str(p) for p in found[0].get("loc", ())) or "value"
        return f"{where}: {found[0].get('msg', 'invalid')}"
    return " ".join(str(exc).split())[:120]


def shown(value: object, limit: int = ECHO_CHARS) -> str:
    """A one-line, bounded ``repr`` of ``value`` for an error message."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not turn a clear error into another one
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} chars)"
