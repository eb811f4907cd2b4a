"""Timestamps: the one parser of timestamp text, and every form a value may take → epoch seconds.

`parse_timestamp` reads ISO-8601 text wherever it comes from (item fields at ingest, filter
values, ``TIMESTAMP '...'`` literals and ISO strings in statements — the engine parses those —
and the CLI's ``--param``). Value forms: an aware or naive `datetime` (naive = UTC), a `date`
(midnight UTC), an ISO-8601 string (``"2025-01-31"``, ``"2025-01-31T10:00:00Z"``, offsets
allowed), epoch seconds (int or float), or a numpy ``datetime64`` (UTC, as numpy counts it; a
pandas ``Timestamp`` is a `datetime`). The one formatter is
`recallql.grammar.timestamps.format_timestamp` (see docs/architecture.md, "Timestamps").
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from numbers import Real
from typing import SupportsFloat, cast

import numpy as np

from recallql.index.errors import show

SECONDS_PER_DAY = 86_400.0

#: The valid range of timestamps, in epoch seconds UTC, whatever form a value comes in:
#: 0001-01-01T00:00:00Z … 9999-12-31T23:59:59.999999Z. Floats are ~30 µs apart near the end, so
#: `MAX_EPOCH` is the last float before 10000-01-01T00:00:00Z and the last microseconds of 9999
#: are stored as it (a float that reads back as year 10000 would break every date formatter).
MIN_EPOCH = -62135596800.0
MAX_EPOCH = math.nextafter(253402300800.0, 0.0)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_FIRST = dt.timedelta(seconds=MIN_EPOCH)  # 0001-01-01T00:00:00Z − epoch
_END = dt.timedelta(seconds=253402300800)  # 10000-01-01T00:00:00Z − epoch (excluded)
_SECOND = dt.timedelta(seconds=1)


def shown_micros(epoch: float) -> int:
    """The whole microseconds since the epoch that `epoch` is shown as
    (`recallql.grammar.timestamps.format_timestamp`, i.e. CPython's ``datetime.fromtimestamp``:
    the fraction's microseconds rounded half to even)."""
    fraction, whole = math.modf(epoch)
    return int(whole) * 1_000_000 + round(fraction * 1e6)


def to_microsecond(epoch: float) -> float:
    """`epoch` at the microsecond it is shown as: what recallql stores (timestamps have
    microsecond resolution, as PostgreSQL's ``timestamptz``), the same float a `datetime` of
    that microsecond converts to. ``to_microsecond(1700000000.1234567) == 1700000000.123457``."""
    return min(shown_micros(epoch) / 1_000_000, MAX_EPOCH)


def shown_as(epoch: float) -> tuple[float, float]:
    """``[lo, hi)``: exactly the floats (epoch seconds) shown as the microsecond `epoch` is shown
    as, so that a time copied from output compares equal to what is stored, also for times
    written before they were stored to the microsecond (near today a float holds about four
    values per microsecond, so a plain ``epoch ± 0.5 µs`` misses or takes a boundary value).
    Each end starts at the correctly rounded half-microsecond and is stepped to the float where
    the shown microsecond changes (a few steps at most)."""
    shown = shown_micros(epoch)
    lo = (2 * shown - 1) / 2_000_000
    while shown_micros(lo) >= shown:
        lo = math.nextafter(lo, -math.inf)
    while shown_micros(lo) < shown:
        lo = math.nextafter(lo, math.inf)
    hi = (2 * shown + 1) / 2_000_000
    while shown_micros(hi) > shown:
        hi = math.nextafter(hi, -math.inf)
    while shown_micros(hi) <= shown:
        hi = math.nextafter(hi, math.inf)
    return lo, hi


def microsecond_clock(clock: Callable[[], float]) -> Callable[[], float]:
    """`clock` (epoch seconds UTC) read to the microsecond (`to_microsecond`), so that times
    the database takes from its clock are stored as they are shown."""
    return lambda: to_microsecond(clock())


def parse_timestamp(text: str) -> dt.datetime:
    """Read ISO-8601 text as an aware datetime.

    Accepts a date (``2025-01-31``: midnight), a date-time with ``T`` or a space, optional
    fractional seconds, and ``Z`` or an offset (``+02:00``); without one the time is UTC.
    Surrounding blanks are ignored. The offset is kept (convert with ``.astimezone(UTC)``).

    Raises:
        ValueError: the text is not an ISO-8601 date or date-time.
    """
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except (ValueError, TypeError):
        raise ValueError(f"cannot parse {show(text)} as an ISO-8601 timestamp") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def to_epoch(value: object) -> float:
    """Convert a timestamp to epoch seconds UTC (filter values; items use `item_epoch`).

    Args:
        value: an aware or naive `datetime` (naive = UTC), a `date` (midnight UTC), an ISO-8601
            string (``"2025-01-31"``, ``"2025-01-31T10:00:00Z"``, offsets allowed), or epoch
            seconds (int or float).

    Returns:
        Seconds since 1970-01-01T00:00:00Z, as a float: for an instant of years 1..9999 UTC
        the float `item_epoch` stores for it (the last microseconds of 9999 as `MAX_EPOCH`), so
        a filter on an item's own instant matches it.

    Raises:
        ValueError: unparseable string, non-finite or out-of-range number, or another type.
    """
    moment = _moment(value)
    if moment is None:
        return _number_epoch(value)
    offset = moment - _EPOCH
    if _FIRST <= offset < _END:
        return min(offset / _SECOND, MAX_EPOCH)
    return _datetime_epoch(moment)


def item_epoch(value: object) -> float:
    """Convert an item's timestamp to epoch seconds UTC, checking the valid range
    (`MIN_EPOCH` … `MAX_EPOCH`) after conversion, so the same instant gets the same verdict
    whatever its form (a datetime or ISO string with an offset may fall outside it in UTC).

    Args:
        value: as `to_epoch`.

    Returns:
        Seconds since 1970-01-01T00:00:00Z, in the valid range, to the microsecond
        (`to_microsecond`: epoch seconds given with a finer fraction are rounded as shown).

    Raises:
        ValueError: as `to_epoch`, or an instant outside years 1..9999 UTC.
    """
    moment = _moment(value)
    if moment is None:
        return to_microsecond(_number_epoch(value))
    offset = moment - _EPOCH  # exact (timedelta), even where the float would round
    if not _FIRST <= offset < _END:
        raise ValueError(f"timestamp {show(value)} is {_utc_text(offset)} in UTC, out of range "
                         "(years 1..9999)")
    return min(offset / _SECOND, MAX_EPOCH)


def _moment(value: object) -> dt.datetime | None:
    """`value` as an aware datetime; ``None`` for epoch seconds."""
    if isinstance(value, dt.datetime) and value != value:
        raise ValueError("NaT (not a time) is not a timestamp")  # pandas.NaT is a datetime
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value
    if isinstance(value, bool):
        raise ValueError(f"expected a timestamp, got a bool ({value!r})")
    if isinstance(value, Real):
        return None
    if isinstance(value, str):
        return parse_timestamp(value)
    if isinstance(value, np.datetime64):
        return datetime64_to_datetime(value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    raise ValueError(f"expected a datetime, ISO-8601 string or epoch seconds, got {show(value)}")


def _number_epoch(value: object) -> float:
    """Epoch seconds `value` (a real number: `_moment` returned None for it), range-checked."""
    try:
        seconds = float(cast(SupportsFloat, value))
    except OverflowError:  # an int beyond float64
        seconds = math.inf
    if not math.isfinite(seconds) or not MIN_EPOCH <= seconds <= MAX_EPOCH:
        raise ValueError(f"epoch seconds {show(value)} out of range (years 1..9999)")
    return seconds


def _datetime_epoch(value: dt.datetime) -> float:
    try:
        return value.timestamp()
    except (OverflowError, ValueError) as exc:
        raise ValueError(f"timestamp {value!r} out of range: {exc}") from None


def _utc_text(offset: dt.timedelta) -> str:
    """An offset from the epoch as UTC text, also just outside years 1..9999."""
    if offset < _FIRST:
        return f"{(_FIRST - offset) / _SECOND:g} s before 0001-01-01T00:00:00Z"
    return f"10000-01-01T00:00:00Z + {(offset - _END) / _SECOND:g} s"


def datetime64_to_datetime(value: np.datetime64) -> dt.datetime:
    """A numpy ``datetime64`` as an aware UTC `datetime` (numpy's datetimes carry no time zone
    and count from 1970-01-01T00:00:00 UTC, so they are read as UTC, as naive datetimes are),
    to the microsecond: finer units (``ns``) are cut toward the past. The twin of
    `recallql.grammar.timestamps.datetime64_to_datetime` (the two layers import nothing of each
    other).

    Raises:
        ValueError: ``NaT``, or an instant outside years 1..9999 UTC.
    """
    if np.isnat(value):
        raise ValueError("NaT (not a time) is not a timestamp")
    year = int(value.astype("datetime64[Y]").astype(np.int64)) + 1970
    if not 1 <= year <= 9999:
        raise ValueError(f"numpy.datetime64({str(value)!r}) is out of range (years 1..9999)")
    return cast(dt.datetime, value.astype("datetime64[us]").item()).replace(tzinfo=dt.UTC)
