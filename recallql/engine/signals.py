"""Signal policy and decay (SPEC §2 Signal, §4.3, §4.4).

A signal `(session_id, name, value, at, entity)` is accepted only when the policy allows its name,
its value is finite and within the name's bounds, and its session is open. Its contribution at a
reference time `t` is `value · 0.5^(age/half_life)` with `age = t − at` in days; signals recorded
after `t` do not count (so `AS OF` reproduces the past). A live session's reference time is the
statement's `now`; a closed or archived session's is `min(now, ended_at)` — frozen at close.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from recallql.engine.scoring import SECONDS_PER_DAY
from recallql.index.errors import SignalRejected

DEFAULT_HALF_LIFE_DAYS = 7.0
_ID_RE = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")


def validate_id(value: object, what: str) -> str:
    """Check an agent id or session id: 1–128 characters of letters, digits, `_ . : -`.

    Raises:
        ValueError: naming `what` and the offending value.
    """
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise ValueError(
            f"invalid {what} {value!r}: use 1-128 characters of letters, digits, '_', '.', ':', '-'"
        )
    return value


@dataclass(frozen=True)
class SignalPolicy:
    """Which signals a database accepts.

    Attributes:
        bounds: allowed signal names and their inclusive value bounds (default `reward` in
            [-1, 1]).
        half_lives: half-life in days per signal name (default 7 days for every name).
    """

    bounds: Mapping[str, tuple[float, float]] = field(
        default_factory=lambda: {"reward": (-1.0, 1.0)}
    )
    half_lives: Mapping[str, float] = field(default_factory=dict)

    def half_life(self, name: str) -> float:
        """The half-life of signal `name` in days."""
        return float(self.half_lives.get(name, DEFAULT_HALF_LIFE_DAYS))

    def check(self, session_id: str, name: object, value: object, status: str | None) -> float:
        """Validate one signal write; returns the value as a float.

        Raises:
            SignalRejected: naming the rule that rejected it (`unknown_session`,
                `session_not_open`, `unknown_name`, `not_finite`, `out_of_bounds`).
        """
        if status is None:
            raise SignalRejected(
                f"signal rejected (rule unknown_session): no session {session_id!r}")
        if status != "open":
            raise SignalRejected(
                f"signal rejected (rule session_not_open): session {session_id!r} is {status}"
            )
        if not isinstance(name, str) or name not in self.bounds:
            allowed = ", ".join(sorted(self.bounds))
            raise SignalRejected(
                f"signal rejected (rule unknown_name): {name!r} is not an allowed signal name "
                f"(allowed: {allowed})"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SignalRejected(
                f"signal rejected (rule not_finite): value {value!r} is not a number")
        number = float(value)
        if not math.isfinite(number):
            raise SignalRejected(
                f"signal rejected (rule not_finite): value {number!r} is not finite")
        low, high = self.bounds[name]
        if not low <= number <= high:
            raise SignalRejected(
                f"signal rejected (rule out_of_bounds): {name} = {number!r} is outside "
                f"[{low:g}, {high:g}]"
            )
        return number


@dataclass(frozen=True, slots=True)
class SignalRecord:
    """One stored signal, with its session's status and end time for freezing."""

    name: str
    value: float
    at: float
    entity: str | None
    status: str = "open"
    ended_at: float | None = None


def reference_time(now_ts: float, status: str, ended_at: float | None) -> float:
    """The time a session's signals decay to: `now`, or `min(now, ended_at)` once it ended."""
    if status != "open" and ended_at is not None:
        return min(now_ts, ended_at)
    return now_ts


def decayed(records: Iterable[SignalRecord], now_ts: float, policy: SignalPolicy) -> np.ndarray:
    """float64[m]: each record's decayed contribution at its session's reference time (0 for
    records after it)."""
    out = []
    for rec in records:
        t = reference_time(now_ts, rec.status, rec.ended_at)
        if rec.at > t:
            out.append(0.0)
            continue
        age_days = (t - rec.at) / SECONDS_PER_DAY
        out.append(rec.value * math.pow(0.5, age_days / policy.half_life(rec.name)))
    return np.asarray(out, dtype=np.float64)


def keywords_from(annotations: Iterable[str]) -> tuple[str, ...]:
    """Session keywords: annotation text split on whitespace, lower-cased, de-duplicated (first
    occurrence order)."""
    seen: dict[str, None] = {}
    for text in annotations:
        for word in text.split():
            seen.setdefault(word.lower(), None)
    return tuple(seen)
