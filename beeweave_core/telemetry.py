"""OpenTelemetry spans and metrics for capture, retrieve, assemble and compact.

Only when the ``opentelemetry`` package is installed (``pip install beeweave[otel]``):
without it nothing is imported and :func:`traced` hands the function back unchanged,
so the agent's path costs exactly what it did.  With it, spans and metrics go to
whatever providers the host configured (LangSmith, Langfuse, Phoenix and the OTel
collector all read these); with none configured the API's no-op providers make the
calls nearly free.

Naming follows the GenAI semantic conventions where they have a name:
``gen_ai.operation.name`` on every span and sample, ``gen_ai.conversation.id`` (the
session) on spans only, never on metrics (session ids are unbounded); spans are
named ``beeweave.<operation>``.  Where the conventions have nothing (capture, context assembly) the
instruments live under ``beeweave.*``:

* ``beeweave.operation.duration`` (histogram, s) — attribute ``gen_ai.operation.name``
* ``beeweave.capture.events`` (counter, {event}) — events handed to ``emit``
* ``beeweave.context.tokens`` (histogram, {token}) — tokens of each assembled context
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

from beeweave_core.extras import missing_modules

F = TypeVar("F", bound=Callable[..., Any])

SCOPE = "beeweave"
OPERATION = "gen_ai.operation.name"
CONVERSATION = "gen_ai.conversation.id"
_AVAILABLE: bool | None = None


def available() -> bool:
    """Whether the OpenTelemetry API is installed (looked up once; the API is not imported)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = not missing_modules(["otel"])
    return _AVAILABLE


class _Instruments:
    """The tracer and instruments, created on first use from the global providers."""

    def __init__(self) -> None:
        from opentelemetry import metrics, trace

        self.tracer = trace.get_tracer(SCOPE)
        meter = metrics.get_meter(SCOPE)
        self.meter = meter
        self.duration = meter.create_histogram(
            "beeweave.operation.duration", unit="s", description="Duration of BeeWeave operations"
        )
        self.tokens = meter.create_histogram(
            "beeweave.context.tokens", unit="{token}", description="Tokens of assembled contexts"
        )


_instruments: _Instruments | None = None


def instruments() -> _Instruments:
    global _instruments
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


def reset() -> None:
    """Forget the cached tracer and instruments (after the host swaps the global providers)."""
    global _instruments, CAPTURE
    _instruments = None
    if CAPTURE is not None:
        CAPTURE = None
        enable_capture()


def traced(operation: str, *, session_pos: int | None = None) -> Callable[[F], F]:
    """A span and a duration sample around each call of the decorated method.

    ``session_pos``: the positional index of the session id (``session_id=`` keyword
    is always looked at).  Without OpenTelemetry the method is returned as it is.
    """

    def wrap(fn: F) -> F:
        if not available():
            return fn

        @functools.wraps(fn)
        def run(*args: Any, **kw: Any) -> Any:
            ins = instruments()
            attrs: dict[str, str] = {OPERATION: operation}
            sid = kw.get("session_id")
            if sid is None and session_pos is not None and len(args) > session_pos:
                sid = args[session_pos]
            span_attrs = {**attrs, CONVERSATION: sid} if isinstance(sid, str) else attrs
            start = time.perf_counter()
            with ins.tracer.start_as_current_span(f"beeweave.{operation}", attributes=span_attrs):
                try:
                    result = fn(*args, **kw)
                finally:
                    ins.duration.record(time.perf_counter() - start, attrs)
                _annotate(ins, operation, result)
                return result

        return run  # type: ignore[return-value]

    return wrap


def _annotate(ins: _Instruments, operation: str, result: Any) -> None:
    """Result sizes on the current span (and assembled tokens as a metric)."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if operation == "retrieve" and isinstance(result, list):
        span.set_attribute("beeweave.retrieve.hits", len(result))
    total = getattr(result, "total_tokens", None)
    if operation == "assemble" and isinstance(total, int):
        span.set_attribute("beeweave.context.tokens", total)
        ins.tokens.record(total, {OPERATION: operation})
    summaries = getattr(result, "summaries", None)
    if operation == "compact" and isinstance(summaries, list):
        span.set_attribute("beeweave.compact.summaries", len(summaries))


#: ``beeweave.capture.events`` once :func:`enable_capture` ran with OpenTelemetry present;
#: the bus adds to it per ``emit`` (``None`` otherwise: one comparison, nothing else).
CAPTURE: Any = None


def enable_capture() -> None:
    """Create the capture counter (idempotent; a no-op without OpenTelemetry)."""
    global CAPTURE
    if CAPTURE is None and available():
        CAPTURE = instruments().meter.create_counter(
            "beeweave.capture.events", unit="{event}", description="Events handed to capture"
        )
