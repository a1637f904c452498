"""Errors every layer may raise; kept import-free so any module can use them."""


class StoreError(RuntimeError):
    """The store could not do what was asked (bad input is a ``ValueError``)."""


class NotFound(StoreError, KeyError):
    """The session or event does not exist for this tenant."""
