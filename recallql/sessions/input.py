"""Checking what callers pass to `db.sessions` and `db.messages`: times, text, retention and
metadata; and the lifecycle errors (re-exported by `recallql.sessions.lifecycle`, where callers
import them from).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np

from recallql.grammar.timestamps import datetime64_to_datetime, format_timestamp
from recallql.index.timestamps import to_microsecond
from recallql.sessions import state
from recallql.sessions.signals import short_repr


class SessionError(ValueError):
    """A session lifecycle mistake: invalid or duplicate id, wrong state, invalid time."""


class SessionNotFound(SessionError, LookupError):
    """No session with that id (never created, or swept)."""


#: How far past the clock a session's start, a signal, an annotation or a message may be
#: dated, in seconds: an allowance for skew between the writer's clock and the database's. A
#: later time would count only in the future (a signal decays from `at`) and would keep the
#: session from closing now (`close` refuses an end before its start or last write; every write
#: refuses a time before the start), so it is refused at write time.
CLOCK_SKEW_SECONDS = 300.0


def future_problem(when: float, now: float, what: str, argument: str = "at") -> str | None:
    """Why `when` (epoch seconds UTC) is too far in the future for `what`, or None when it is
    at most `CLOCK_SKEW_SECONDS` after `now` (the database's clock); `argument` is the
    caller's argument that gave it (the hint says to omit it)."""
    if when <= now + CLOCK_SKEW_SECONDS:
        return None
    return (f"{what} at {format_timestamp(when)} is after the clock "
            f"({format_timestamp(now)}) by more than {CLOCK_SKEW_SECONDS:.0f} s; "
            f"record it when it happens, or omit {argument}= for now")


def many(values: Any, what: str, error: type[ValueError]) -> Iterable[Any]:
    """A batch argument (`ingest`'s items, `extend`'s messages, `signal_many`'s signals), as
    given, refusing what would iterate into nonsense: one mapping (its keys), a string (its
    characters), or no iterable at all.

    Raises:
        error: naming `what` and the value's type.
    """
    if isinstance(values, Mapping):
        raise error(f"{what} must be a list of mappings, one per {what[:-1]}; got one mapping "
                    f"(wrap it in a list: [{{...}}])")
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise error(f"{what} must be a list of mappings, one per {what[:-1]}; got "
                    f"{type(values).__name__} {short_repr(values)}")
    return values


def to_epoch(value: datetime | float | int | None, default: float, what: str,
             error: type[ValueError] = SessionError) -> float:
    """A time argument as epoch seconds UTC (naive datetimes are UTC; None gives `default`; a
    numpy ``datetime64`` is UTC; a pandas ``Timestamp`` is a datetime).

    Every session time (start, end, signal, annotation, message, `as_of`) must lie in years
    1..9999 UTC, the range a `datetime` can hold: 0001-01-01T00:00:00Z to
    9999-12-31T23:59:59.999999Z (stored as at most `session_state.MAX_TIME`). Times are kept
    to the microsecond they are shown as (`recallql.index.timestamps.to_microsecond`).

    Raises:
        error (`SessionError` by default): not a datetime or a number of seconds, not finite,
            or outside that range (checked before any float conversion, so a huge int is
            rejected rather than overflowing).
    """
    if value is None:
        value = default
    if isinstance(value, datetime) and value != value:  # pandas.NaT is a datetime
        raise error(f"{what} must be a time in years 1..9999 UTC, got NaT (not a time)")
    if isinstance(value, np.datetime64):  # UTC, as numpy counts it
        try:
            value = datetime64_to_datetime(value)
        except ValueError as exc:
            raise error(f"{what} must be a time in years 1..9999 UTC: {exc}") from None
    if isinstance(value, datetime):
        try:
            seconds = (value if value.tzinfo else value.replace(tzinfo=UTC)) \
                .astimezone(UTC).timestamp()
        except (OverflowError, ValueError):
            raise error(f"{what} must be a time in years 1..9999 UTC, got {short_repr(value)} "
                        "(out of range)") from None
        return min(max(seconds, state.MIN_TIME), state.MAX_TIME)  # float rounding at the ends
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise error(f"{what} must be a datetime or epoch seconds (UTC), got {short_repr(value)}")
    if not (state.MIN_TIME <= value <= state.MAX_TIME):  # exact for ints; False for NaN
        raise error(f"{what} must be a finite time in years 1..9999 UTC, got {short_repr(value)} "
                    "(out of range)")
    return to_microsecond(float(value))  # stored as shown (a datetime is to the µs already)


def check_text(value: str, what: str, error: type[ValueError] = SessionError,
               prefix: str = "") -> None:
    """Check that a string can be stored: valid Unicode, i.e. encodable as UTF-8 (a Python str
    may hold a lone surrogate such as `"\\ud800"`, which SQLite and JSON cannot).

    Raises:
        error (`SessionError` by default): naming `what` and where the bad character is, after
            `prefix` (e.g. `"signal rejected (rule bad_entity)"`) when given.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        lead = f"{prefix}: " if prefix else ""
        raise error(f"{lead}{what} is not valid Unicode: lone surrogate "
                    f"{value[exc.start]!r} at index {exc.start}") from None


def retention_days(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SessionError("older_than must be a timedelta or a number of days, got "
                           f"{short_repr(value)}")
    try:
        return float(value)
    except OverflowError:  # an int beyond float: refused as non-finite by the caller
        return math.inf


#: How deep session metadata may nest (the top-level mapping is level 1).
MAX_METADATA_DEPTH = 64


def metadata_json(metadata: Mapping[str, Any] | None) -> str:
    """Session metadata as JSON text.

    Raises:
        SessionError: not a mapping with string keys, nested more than `MAX_METADATA_DEPTH`
            levels, text that is not valid Unicode, or not JSON-serialisable with finite
            numbers.
    """
    if metadata is None:
        return "{}"
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise SessionError("metadata must be a mapping with string keys, got "
                           f"{short_repr(metadata)}")
    _check_metadata(metadata)
    try:
        return json.dumps(dict(metadata), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"metadata must be JSON-serialisable with finite numbers: {exc}") \
            from None


def _check_metadata(metadata: Mapping[str, Any]) -> None:
    """Refuse metadata nested deeper than `MAX_METADATA_DEPTH` (json.dumps would recurse until
    RecursionError; a circular structure is refused the same way), or holding a key or string
    that is not valid Unicode (json.dumps would escape it, and reading it back would fail).
    Iterative: it never recurses itself."""
    stack: list[tuple[object, int]] = [(metadata, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            check_text(value, "a metadata string")
            continue
        if depth > MAX_METADATA_DEPTH:
            raise SessionError(f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep "
                               "(or is circular)")
        if isinstance(value, Mapping):
            for key in value:
                if isinstance(key, str):
                    check_text(key, "a metadata key")
            children: Any = value.values()
        else:
            children = value if isinstance(value, list | tuple) else ()
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, str | Mapping | list | tuple))
