"""Canonical storage form for whatever an agent hands us.

Tool outputs are arbitrary Python objects.  Stores keep JSON only, so every value is
turned into JSON by one documented rule set, and the rule is reversible for the
types a user is likely to care about:

=====================  ==================================================
value                  stored as
=====================  ==================================================
str / int / bool/None  itself (text with lone surrogates: see ``clean_text``)
float NaN / ±inf       ``{"$float": "nan" | "inf" | "-inf"}``
bytes / bytearray      ``{"$bytes": "<base64>"}``
datetime / date / time ``{"$datetime" | "$date" | "$time": "<ISO 8601>"}``
Decimal                ``{"$decimal": "<str>"}``
UUID                   ``{"$uuid": "<str>"}``
Enum                   its ``value`` (recursively)
tuple / set / frozenset a list (sets sorted by repr for a stable form)
pydantic model         ``{"$model": "module.Class", "data": {...}}``
dataclass              ``{"$dataclass": "module.Class", "data": {...}}``
dict with non-str keys keys turned to ``str(key)``
anything else          ``{"$repr": repr(obj)[:4096], "$type": "module.Class"}``
=====================  ==================================================

The form is a fixed point: ``to_jsonable(to_jsonable(x)) == to_jsonable(x)``, so a
value can pass through the bus, the spool and an export/import without drifting.
``decode_payload`` reverses the tags that carry the full value (floats, bytes,
times, decimals, uuids); it recognises a tag only as a dict with exactly that one
key, so user data shaped exactly like ``{"$bytes": "..."}`` is the one ambiguity.

Size policy: content or a payload larger than ``inline_limit`` characters is
stored once, in full, as an *artifact* (content-addressed by SHA-256, per
tenant); the event keeps a bounded preview and a pointer
(``payload["$artifact"]``).  Nothing is silently cut: the full value is always one
``store.get_artifact(sha)`` away.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import hashlib
import json
import math
import uuid
from enum import Enum
from typing import Any

#: Characters of content kept inline; larger content becomes an artifact.
DEFAULT_INLINE_LIMIT = 64_000
#: Characters of preview an event keeps when its content went to an artifact.
DEFAULT_PREVIEW_CHARS = 2_000
_MAX_DEPTH = 64


class PayloadError(ValueError):
    """A value cannot be stored even in its canonical form."""


class CanonicalList(list):  # type: ignore[type-arg]
    """A list BeeWeave built in canonical form itself (its strings UTF-8-safe, its floats
    finite, its dicts keyed by str): ``to_jsonable`` returns it as it is.  An assembly's
    audit record lists a hundred pieces or more; walking them again on each write cost more
    than building them."""


def _qualname(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _key(k: Any) -> str:
    return clean_text(k if isinstance(k, str) else str(k))


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Turn ``value`` into plain JSON following the table in the module docstring."""
    if _depth > _MAX_DEPTH:
        return {"$repr": "<nested too deep>", "$type": _qualname(value)}
    kind = type(value)  # exact-type fast paths: most values are plain JSON already
    if kind is str:
        return clean_text(value)
    if kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return _plain_dict(value, _depth) if value else {}
    if kind is CanonicalList:
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, Enum):
        return to_jsonable(value.value, _depth + 1)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return {"$float": "nan"}
        if math.isinf(value):
            return {"$float": "inf" if value > 0 else "-inf"}
        return value
    if isinstance(value, str):
        return clean_text(value)
    tagged = _tagged_scalar(value)
    if tagged is not None:
        return tagged
    if isinstance(value, dict):
        return _plain_dict(value, _depth) if value else {}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, _depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return [to_jsonable(v, _depth + 1) for v in sorted(value, key=repr)]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            data = dump(mode="json")
        except Exception:  # a model whose fields cannot be dumped as JSON
            data = dump()
        return {"$model": _qualname(value), "data": to_jsonable(data, _depth + 1)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "$dataclass": _qualname(value),
            "data": to_jsonable(dataclasses.asdict(value), _depth + 1),
        }
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not break capture
        text = f"<unreprable: {type(exc).__name__}>"
    return {"$repr": clean_text(text[:4096]), "$type": _qualname(value)}


_PLAIN = frozenset({int, bool, type(None)})


def _plain_dict(value: dict[Any, Any], depth: int) -> dict[str, Any]:
    """A dict's canonical form; an ASCII str key or value and an int, bool or None are
    already canonical and are kept without a call (the records the capture bus writes are
    mostly these, and the journal converts every one of them while the agent waits on the GIL)."""
    out: dict[str, Any] = {}
    for k, v in value.items():
        if type(k) is not str or not k.isascii():
            k = _key(k)
        kind = type(v)
        out[k] = v if (kind is str and v.isascii()) or kind in _PLAIN else to_jsonable(v, depth + 1)
    return out


def _tagged_scalar(value: Any) -> dict[str, str] | None:
    """The tagged form of a value-carrying scalar (bytes, times, decimals, UUIDs), else None."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"$time": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    return None


_DECODERS = {
    "$float": float,
    "$bytes": lambda s: base64.b64decode(s),
    "$datetime": dt.datetime.fromisoformat,
    "$date": dt.date.fromisoformat,
    "$time": dt.time.fromisoformat,
    "$decimal": decimal.Decimal,
    "$uuid": uuid.UUID,
}


def decode_payload(value: Any) -> Any:
    """Reverse ``to_jsonable`` for the tags that carry a full value."""
    if isinstance(value, list):
        return [decode_payload(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            ((tag, raw),) = value.items()
            if tag in _DECODERS:
                return _DECODERS[tag](raw)
        return {(k[1:] if k.startswith("$$") else k): decode_payload(v) for k, v in value.items()}
    return value


def clean_text(text: str) -> str:
    """Make ``text`` encodable as UTF-8 without losing information.

    Lone surrogates (from broken JSON or Windows paths) cannot be stored in UTF-8;
    they are written as the literal escape ``\\udXXX`` so the original code point is
    still readable.  NUL and every other character are kept as they are.
    """
    if text.isascii():  # the common case, without encoding a copy
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def dumps(value: Any) -> str:
    """Compact, deterministic JSON of an already canonical value."""
    if not value and isinstance(value, dict):
        return "{}"
    return _ENCODER.encode(value)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def preview(text: str, limit: int = DEFAULT_PREVIEW_CHARS) -> str:
    """A bounded preview that says plainly that it is one."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [preview: {limit} of {len(text)} chars; full text in artifact]"
