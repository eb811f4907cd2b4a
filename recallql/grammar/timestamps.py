"""The one timestamp formatter: ISO-8601 UTC with microseconds and ``Z``, for machines.

``2025-01-31T08:00:00.000000Z`` everywhere a program reads a time back: JSON output (rows,
records, session snapshots, EXPLAIN), the canonical text of a bound ``TIMESTAMP '...'`` and the
times in error messages. Fixed width, so the text sorts as the instant does. People see it cut
short in tables (to the second, or the date in a results table's ``date`` column: `recallql.ui`).

It lives in `recallql.grammar`, the lowest layer every user may import (`bind` renders bound
datetimes with it; `recallql.index` never formats a time). The one parser is
`recallql.index.timestamps.parse_timestamp` (the grammar keeps a literal's text; the engine
parses it).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import numpy as np

__all__ = ["datetime64_to_datetime", "format_timestamp"]


def format_timestamp(value: datetime | float) -> str:
    """A time as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC).

    Args:
        value: an aware datetime, a naive one (UTC), or epoch seconds UTC.

    Raises:
        OverflowError, ValueError: the instant is outside years 1..9999 UTC (or NaN).
    """
    if isinstance(value, datetime):
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    else:
        moment = datetime.fromtimestamp(value, tz=UTC)
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def datetime64_to_datetime(value: np.datetime64) -> datetime:
    """A numpy ``datetime64`` as an aware UTC `datetime` (numpy's datetimes carry no time zone
    and count from 1970-01-01T00:00:00 UTC, so they are read as UTC, as naive datetimes are),
    to the microsecond: finer units (``ns``) are cut toward the past.

    Raises:
        ValueError: ``NaT``, or an instant outside years 1..9999 UTC.
    """
    if np.isnat(value):
        raise ValueError("NaT (not a time) is not a timestamp")
    year = int(value.astype("datetime64[Y]").astype(np.int64)) + 1970
    if not 1 <= year <= 9999:
        raise ValueError(f"numpy.datetime64({str(value)!r}) is out of range (years 1..9999)")
    return cast(datetime, value.astype("datetime64[us]").item()).replace(tzinfo=UTC)
