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

__all__ = ["format_timestamp"]


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
