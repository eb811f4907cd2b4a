"""Signal policy and decay (SPEC §2 Signal, §4.3, §4.4).

A signal `(session_id, name, value, at, entity)` is accepted only when its session exists and is
open, the policy allows its name, and its value is a finite number within the name's bounds.
Its contribution at a reference time `t` is `value · 0.5^(age/half_life)` with `age = t − at` in
days; signals recorded after `t` do not count (so `AS OF` reproduces the past). A live session's
reference time is the statement's `now`; a closed or archived session's is `min(now, ended_at)`:
frozen at close.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import cast

import numpy as np

from recallql.grammar.suggest import closest
from recallql.index.analysis import normalize
from recallql.index.errors import SignalRejected
from recallql.index.timestamps import SECONDS_PER_DAY

DEFAULT_HALF_LIFE_DAYS = 7.0
_ID_RE = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")


def short_repr(value: object, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters (a huge int has no repr beyond 4300 digits)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # a huge int; a deeply nested container
        return f"<int of {value.bit_length()} bits>" if isinstance(value, int) \
            else f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def validate_id(value: object, what: str) -> str:
    """Check an agent id or session id: 1–128 characters of letters, digits, `_ . : -`.

    Raises:
        ValueError: naming `what` and the offending value.
    """
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise ValueError(
            f"invalid {what} {short_repr(value)}: use 1-128 characters of letters, digits, '_', "
            "'.', ':', '-'"
        )
    return value


def no_session(session_id: object) -> str:
    """`no session <id>` for a not-found error, saying why when the id is not even a string."""
    if isinstance(session_id, str):
        return f"no session {session_id!r}"
    return (f"no session {session_id!r} (a session id is a string, got "
            f"{type(session_id).__name__})")


def _finite(value: object) -> float | None:
    """`value` as a float when it is a finite real number (not a bool), else None."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond float's range
        return None
    return number if math.isfinite(number) else None


def _kind(value: object) -> str:
    """`` (a str)`` after a value that is not a number at all (a bool counts as none), so
    ``'1'`` does not read as the number 1; nothing after a number or None."""
    boolean = isinstance(value, bool | np.bool_)
    if value is None or (isinstance(value, numbers.Real) and not boolean):
        return ""
    kind = type(value).__name__
    return f" ({'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind})"


def _pair(value: object) -> tuple[float | None, float | None]:
    try:
        low, high = cast("tuple[object, object]", value)  # any pair; TypeError otherwise
    except (TypeError, ValueError):
        return None, None
    return _finite(low), _finite(high)


@dataclass(frozen=True)
class SignalPolicy:
    """Which signals a database accepts, and how fast they decay.

    Attributes:
        bounds: allowed signal names and their inclusive value bounds (default: `reward` in
            [-1, 1]). Names follow the id rule (1–128 letters, digits, `_ . : -`).
        half_lives: half-life in days per signal name; names not listed decay with
            `DEFAULT_HALF_LIFE_DAYS` (7 days).

    Raises:
        ValueError: a bad name, non-finite or inverted bounds, a half-life that is not a positive
            finite number of days, or a half-life for a name that has no bounds.
    """

    bounds: Mapping[str, tuple[float, float]] = field(
        default_factory=lambda: {"reward": (-1.0, 1.0)}
    )
    half_lives: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bounds: dict[str, tuple[float, float]] = {}
        for name, pair in dict(self.bounds).items():
            validate_id(name, "signal name")
            low, high = _pair(pair)
            if low is None or high is None or low > high:
                raise ValueError(f"signal {name!r}: bounds must be finite numbers with "
                                 f"low <= high, got {pair!r}")
            bounds[name] = (low, high)
        half_lives: dict[str, float] = {}
        for name, days in dict(self.half_lives).items():
            if name not in bounds:
                raise ValueError(f"half-life given for {name!r}, which is not an allowed signal "
                                 f"name (allowed: {', '.join(sorted(bounds))})")
            value = _finite(days)
            if value is None or value <= 0:
                raise ValueError(f"signal {name!r}: half-life must be a positive number of days, "
                                 f"got {days!r}")
            half_lives[name] = value
        object.__setattr__(self, "bounds", MappingProxyType(bounds))
        object.__setattr__(self, "half_lives", MappingProxyType(half_lives))

    def half_life(self, name: str) -> float:
        """The half-life of signal `name` in days."""
        return float(self.half_lives.get(name, DEFAULT_HALF_LIFE_DAYS))

    @staticmethod
    def check_session(session_id: object, status: str | None, what: str = "signal") -> None:
        """Check that a session accepts writes (signals and annotations).

        Raises:
            SignalRejected: rule `unknown_session` (no such session) or `session_not_open`
                (closed or archived).
        """
        if status is None:
            raise SignalRejected(
                f"{what} rejected (rule unknown_session): {no_session(session_id)}")
        if status != "open":
            raise SignalRejected(
                f"{what} rejected (rule session_not_open): session {session_id!r} is {status}; "
                "closed and archived sessions accept no writes")

    def check(self, session_id: object, name: object, value: object, status: str | None) -> float:
        """Validate one signal write; returns the value as a float.

        Raises:
            SignalRejected: naming the rule that rejected it (`unknown_session`,
                `session_not_open`, `unknown_name`, `not_finite`, `out_of_bounds`).
        """
        self.check_session(session_id, status)
        if not isinstance(name, str) or name not in self.bounds:
            allowed = ", ".join(sorted(self.bounds))
            match = closest(name, self.bounds) if isinstance(name, str) else None
            guess = f"; did you mean {match!r}?" if match is not None else ""
            raise SignalRejected(
                f"signal rejected (rule unknown_name): {short_repr(name)} is not an allowed "
                f"signal name (allowed: {allowed}){guess}"
            )
        number = _finite(value)
        if number is None:
            raise SignalRejected(
                f"signal rejected (rule not_finite): value {short_repr(value)}{_kind(value)} is "
                "not a finite number")
        low, high = self.bounds[name]
        if not low <= number <= high:
            raise SignalRejected(
                f"signal rejected (rule out_of_bounds): {name} = {number!r} is outside "
                f"[{low:g}, {high:g}]"
            )
        return number


@dataclass(frozen=True, slots=True)
class SignalRecord:
    """One stored signal, with its session's status and end time for freezing.

    Attributes:
        name: the signal name.
        value: the accepted value.
        at: when it was recorded, epoch seconds UTC.
        entity: the entity it is about, or None.
        status: its session's status.
        ended_at: its session's end, epoch seconds UTC, or None while open.
    """

    name: str
    value: float
    at: float
    entity: str | None
    status: str = "open"
    ended_at: float | None = None


def reference_time(now_ts: float, status: str, ended_at: float | None) -> float:
    """The time a session's signals decay to (epoch seconds UTC): `now` while the session is
    open, `min(now, ended_at)` once it ended."""
    if status != "open" and ended_at is not None:
        return min(now_ts, ended_at)
    return now_ts


def decayed(records: Iterable[SignalRecord], now_ts: float, policy: SignalPolicy) -> np.ndarray:
    """float64[m]: each record's `value · 0.5^(age/half_life)` at its session's reference time
    (age in days; 0 for records after the reference time)."""
    out = []
    for rec in records:
        t = reference_time(now_ts, rec.status, rec.ended_at)
        if rec.at > t:
            out.append(0.0)
            continue
        age_days = (t - rec.at) / SECONDS_PER_DAY
        out.append(rec.value * math.pow(0.5, age_days / policy.half_life(rec.name)))
    return np.asarray(out, dtype=np.float64)


def signal_sum(values: Iterable[float]) -> float:
    """The sum of decayed signal values, added in recording order; when that overflows (a
    policy may allow values near the largest float), the exact sum instead, so signals that
    cancel (`+1e308, +1e308, -1e308, -1e308`) sum to 0, not inf, and only a sum whose true
    value is beyond the largest float is inf (which saturates to 1)."""
    values = list(values)
    total = 0.0
    for v in values:
        total += v
    if math.isfinite(total):
        return total
    try:
        return math.fsum(values)
    except OverflowError:  # a partial sum overflowed: sum the values scaled by 2^-k, exactly
        k = len(values).bit_length() + 1
        return math.fsum(math.ldexp(v, -k) for v in values) * 2.0 ** k


def keywords_from(annotations: Iterable[str]) -> tuple[str, ...]:
    """Session keywords: annotation text split on whitespace, NFKC case folded
    (`recallql.index.analysis.normalize`: lower-cased, and NFC/NFD or full-width spellings made
    one), de-duplicated (first occurrence order). A zero width space splits words too (a word
    break, as in text analyser 4): ``foo\\u200bbar`` gives ``foo`` and ``bar``."""
    seen: dict[str, None] = {}
    for text in annotations:
        for word in text.replace("\u200b", " ").split():
            key = normalize(word)
            if key:  # a word of default-ignorable characters only normalises to nothing
                seen.setdefault(key, None)
    return tuple(seen)
