"""Redaction before anything is written: personal data never reaches a file or a server.

A value is replaced by a *stable placeholder* that names its kind and a keyed digest of
the value, e.g. ``[EMAIL:3f9a1c02]``: the same address gives the same placeholder in
every event, so "the customer's email" still recalls the turns that held it and the
model can still tell two customers apart, while the address itself is gone.  The
digest is an HMAC under a per-home secret, so a placeholder cannot be reversed by
hashing guesses without that secret.

Candidates are found by shape and then *verified* where the format has a checksum
(Luhn for cards, ISO 7064 mod 97 for IBANs, the GB 11643 check digit for Chinese
resident ids), so order numbers and timestamps that merely look like them stay.
What was redacted is counted per kind, never logged.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, is_dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class Redactor(Protocol):
    """Anything that turns a text into its redacted form and says how many of each kind."""

    def redact(self, text: str) -> tuple[str, Counter[str]]: ...


@dataclass(frozen=True)
class Detector:
    """One kind of personal data: a shape to find and, optionally, a check to pass."""

    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] = lambda _value: True


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def luhn_ok(number: str) -> bool:
    """The Luhn checksum every payment card number satisfies."""
    digits = _digits(number)
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_ok(text: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers, mod 97 = 1."""
    iban = re.sub(r"\s", "", text).upper()
    if not 15 <= len(iban) <= 34:
        return False
    moved = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in moved)
    return int(number) % 97 == 1


_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK = "10X98765432"


def cn_resident_id_ok(text: str) -> bool:
    """GB 11643-1999: the 18th character is a weighted mod-11 check of the first 17."""
    if len(text) != 18 or not text[:17].isdigit():
        return False
    total = sum(int(d) * w for d, w in zip(text[:17], _CN_ID_WEIGHTS, strict=True))
    return _CN_ID_CHECK[total % 11] == text[17].upper()


#: A date written with separators (2026-11-30, 2026.11.30 14) is not a phone number.
_DATE_LIKE = re.compile(r"^(?:19|20)\d{2}[-./ ](?:0?[1-9]|1[0-2])[-./ ](?:0?[1-9]|[12]\d|3[01])\b")

#: Order matters: more specific kinds first, so a card number is not taken for a phone.
DEFAULT_DETECTORS: tuple[Detector, ...] = (
    Detector(
        "EMAIL", re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
    ),
    Detector(
        "IBAN",
        re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b"),
        iban_ok,
    ),
    Detector("CN_ID", re.compile(r"(?<!\d)\d{17}[\dXx](?![\dA-Za-z])"), cn_resident_id_ok),
    Detector("CARD", re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"), luhn_ok),
    Detector("CN_MOBILE", re.compile(r"(?<!\d)(?:\+?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}(?!\d)")),
    Detector(
        "PHONE",
        re.compile(
            r"(?<![\w+:.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){2,4}(?![\w:.-])"
        ),
        lambda v: 8 <= len(_digits(v)) <= 15 and not _DATE_LIKE.match(v),
    ),
)

_PLACEHOLDER = re.compile(r"\[[A-Z_]+:[0-9a-f]{8}\]")


@dataclass
class PIIRedactor:
    """The built-in redactor: emails, phones, cards, IBANs, Chinese ids and mobiles.

    ``secret`` keys the placeholders (keep it to keep them stable across restarts);
    ``detectors`` may be extended with custom :class:`Detector` s.
    """

    secret: bytes
    detectors: tuple[Detector, ...] = DEFAULT_DETECTORS
    counts: Counter[str] = field(default_factory=Counter)

    def placeholder(self, kind: str, value: str) -> str:
        key = re.sub(r"[\s().-]", "", value).lower()
        digest = hmac.new(self.secret, f"{kind}\x1f{key}".encode(), hashlib.sha256)
        return f"[{kind}:{digest.hexdigest()[:8]}]"

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        found: Counter[str] = Counter()
        for det in self.detectors:
            text = det.pattern.sub(lambda m, d=det: self._swap(m, d, found), text)
        self.counts.update(found)
        return text, found

    def _swap(self, match: re.Match[str], det: Detector, found: Counter[str]) -> str:
        value = match.group(0)
        if _PLACEHOLDER.fullmatch(value) or not det.valid(value):
            return value
        found[det.kind] += 1
        return self.placeholder(det.kind, value)


def redact_value(value: T, redactor: Redactor, found: Counter[str]) -> T:
    """``value`` with every string inside redacted (dict keys too); other leaves kept.

    Walks what reaches storage: JSON-like values, and the Python objects a LangGraph
    checkpoint holds (pydantic models such as messages, dataclasses, tuples, sets).
    Types are kept, and a value with nothing to redact comes back as the same object.
    """
    return _walk(value, redactor, found)  # type: ignore[no-any-return]


#: Nesting beyond this is left as it is (a cycle in an object graph must not hang a write).
MAX_DEPTH = 64


def _walk(value: object, redactor: Redactor, found: Counter[str], depth: int = 0) -> object:
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, str):
        text, n = redactor.redact(value)
        found.update(n)
        return value if text == value else text
    if isinstance(value, Mapping):
        pairs = [
            (
                _walk(k, redactor, found, depth + 1) if isinstance(k, str) else k,
                _walk(v, redactor, found, depth + 1),
            )
            for k, v in value.items()
        ]
        same = all(
            k2 is k and v2 is v for (k2, v2), (k, v) in zip(pairs, value.items(), strict=True)
        )
        return value if same else dict(pairs)
    if isinstance(value, list | tuple | set | frozenset):
        items = [_walk(v, redactor, found, depth + 1) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else _rebuilt(value, items)
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        update = {
            n: new
            for n in fields
            if (new := _walk(old := getattr(value, n), redactor, found, depth + 1)) is not old
        }
        return value.model_copy(update=update) if update else value
    if isinstance(value, BaseException):  # a failed task's error, kept as a pending write
        args = _walk(value.args, redactor, found, depth + 1)
        if args is value.args:
            return value
        err = copy.copy(value)
        err.args = args  # type: ignore[assignment]
        return err
    names = _field_names(value)
    if names:
        changed = {
            name: new
            for name in names
            if (new := _walk(old := getattr(value, name), redactor, found, depth + 1)) is not old
        }
        if not changed:
            return value
        out = copy.copy(value)
        for name, new in changed.items():
            object.__setattr__(out, name, new)  # frozen dataclasses too
        return out
    return value


def _field_names(value: object) -> tuple[str, ...]:
    """The fields of a dataclass, or of a slotted object such as LangGraph's ``Send``."""
    if is_dataclass(value) and not isinstance(value, type):
        return tuple(f.name for f in dataclass_fields(value))
    slots = getattr(type(value), "__slots__", ())
    if type(value).__module__ == "builtins" or not isinstance(slots, tuple | list):
        return ()
    return tuple(n for n in slots if isinstance(n, str) and hasattr(value, n))


def _rebuilt(
    value: tuple[object, ...] | set[object] | frozenset[object], items: list[object]
) -> object:
    """A tuple (named ones too) or set of the same type holding ``items``."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*items)
    return type(value)(items)


@dataclass(frozen=True)
class RedactorChain:
    """Several redactors applied in order (the built-in one, then custom ones)."""

    parts: tuple[Redactor, ...]

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        total: Counter[str] = Counter()
        for r in self.parts:
            text, n = r.redact(text)
            total.update(n)
        return text, total


def load_secret(path: Path) -> bytes:
    """The placeholder key kept at ``path`` (created once, readable by its owner only).

    Losing it only changes future placeholders; it never unlocks stored values,
    because none are stored.
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        secret = os.urandom(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it a moment ago
            return path.read_bytes()
        with os.fdopen(fd, "wb") as fh:
            fh.write(secret)
        return secret


#: The fields of an event that hold what was said or done (ids, types and times are kept).
EVENT_FIELDS = ("content", "payload", "meta", "source")

#: ``BEEWEAVE_REDACT=on`` gives every weave opened without a ``redactor`` the built-in one
#: (the CLI, ``beeweave mcp``, the UI and ``from_conn_string`` integrations included).
ENV_REDACT = "BEEWEAVE_REDACT"


def env_redactor() -> PIIRedactor | None:
    """The built-in redactor when ``$BEEWEAVE_REDACT`` asks for it, else None."""
    value = os.environ.get(ENV_REDACT, "").strip().lower()
    return default_redactor() if value in ("1", "on", "true", "yes") else None


def default_redactor(home: Path | None = None) -> PIIRedactor:
    """The built-in redactor keyed by ``<home>/redaction.key`` (``$BEEWEAVE_HOME`` default):
    ``Weave.open(redactor=default_redactor())``."""
    from beeweave_core.paths import beeweave_home

    return PIIRedactor(load_secret((home or beeweave_home()) / "redaction.key"))
