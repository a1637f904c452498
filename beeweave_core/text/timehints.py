"""Calendar dates named in a question ("in October 2023", "on 13 May", "in 2022").

A question that names a date is usually about what was said around then.  The
retriever turns such a date into a soft time window (a sub-search, never a hard
filter: "what did I paint in 2022?" may be answered by a message from 2023).
Only explicit calendar expressions are read; words like "recently" are not.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTHS["sept"] = 9
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))

_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MON})\.?,?\s+((?:19|20)\d\d)\b", re.I
)
_MONTH_DAY_YEAR = re.compile(
    rf"\b({_MON})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+((?:19|20)\d\d)\b", re.I
)
_ISO = re.compile(r"\b((?:19|20)\d\d)-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MON})\.?,?\s+(?:of\s+)?((?:19|20)\d\d)\b", re.I)
_MONTH_ONLY = re.compile(rf"\b(?:in|during|since|until|of|by)\s+({_MON})\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d\d)\b", re.I)


@dataclass(frozen=True)
class TimeWindow:
    """A span of time a question points at (epoch seconds, UTC)."""

    start: float
    end: float
    text: str

    def widened(self, before: float, after: float) -> TimeWindow:
        return TimeWindow(self.start - before, self.end + after, self.text)


def _utc(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


def _month_span(y: int, m: int) -> tuple[datetime, datetime]:
    last = calendar.monthrange(y, m)[1]
    return _utc(y, m, 1), _utc(y, m, last) + timedelta(days=1)


def find_windows(text: str, *, now: float | None = None) -> list[TimeWindow]:
    """Every explicit date in ``text`` as a window (a day, a month or a year).

    A month without a year means its latest occurrence at or before ``now``.
    """
    out: list[TimeWindow] = []
    taken: list[tuple[int, int]] = []

    def free(m: re.Match[str]) -> bool:
        return all(m.end() <= a or m.start() >= b for a, b in taken)

    def add(m: re.Match[str], start: datetime, end: datetime) -> None:
        taken.append((m.start(), m.end()))
        out.append(TimeWindow(start.timestamp(), end.timestamp(), m.group()))

    for m in _DAY_MONTH_YEAR.finditer(text):
        try:
            day = _utc(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))
        except ValueError:
            continue
        add(m, day, day + timedelta(days=1))
    for m in _MONTH_DAY_YEAR.finditer(text):
        if not free(m):
            continue
        try:
            day = _utc(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)))
        except ValueError:
            continue
        add(m, day, day + timedelta(days=1))
    for m in _ISO.finditer(text):
        try:
            day = _utc(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            continue
        add(m, day, day + timedelta(days=1))
    for m in _MONTH_YEAR.finditer(text):
        if free(m):
            add(m, *_month_span(int(m.group(2)), _MONTHS[m.group(1).lower()]))
    ref = datetime.fromtimestamp(now, tz=timezone.utc) if now is not None else None
    for m in _MONTH_ONLY.finditer(text):
        if not free(m) or ref is None:
            continue
        month = _MONTHS[m.group(1).lower()]
        year = ref.year if month <= ref.month else ref.year - 1
        add(m, *_month_span(year, month))
    for m in _YEAR.finditer(text):
        if free(m):
            y = int(m.group(1))
            add(m, _utc(y, 1, 1), _utc(y + 1, 1, 1))
    return out
