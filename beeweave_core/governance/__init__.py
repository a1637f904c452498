"""Governance: what may be stored and read, for how long, and whether context stays healthy."""

from beeweave_core.governance.redaction import (
    DEFAULT_DETECTORS,
    Detector,
    PIIRedactor,
    Redactor,
    RedactorChain,
    default_redactor,
    load_secret,
    redact_value,
)

__all__ = [
    "DEFAULT_DETECTORS",
    "Detector",
    "PIIRedactor",
    "Redactor",
    "RedactorChain",
    "default_redactor",
    "load_secret",
    "redact_value",
]
