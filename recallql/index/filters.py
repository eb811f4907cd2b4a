"""Filter expressions over a collection snapshot, evaluated to boolean masks.

The engine translates a WHERE predicate into these frozen dataclasses; values are plain Python
values and are never turned into query text. Evaluation follows SQL's three-valued logic: a
comparison on a missing value is *unknown*, ``NOT unknown`` is unknown, and only rows that are
definitely true pass — so rows whose field is missing fail closed, also under NOT.

Fields: the collection's declared fields plus ``id``, ``doc_id``, ``entity`` (str), ``position``
(int) and ``created_at`` (timestamp). Timestamps compare as epoch seconds UTC to the
microsecond they are shown as (`timestamps.shown_as`: a time copied from output equals the
stored one, also one stored with a finer fraction) and accept datetimes, ISO-8601 strings or
epoch seconds. On a ``list[str]`` field, `Contains` tests
membership and `In` / `Cmp('=')` / `Like` hold when any element matches. `Like` is SQL LIKE
(``%`` any run, ``_`` one character, ``\\`` escapes), case-sensitive. Equality and ``IN`` on
a declared str field resolve by dictionary lookup and the field's per-value postings, and on
``id`` / ``doc_id`` / ``entity`` by the ids' hash postings (`recallql.index.postings`), not by
a test per row or per distinct value.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np

from recallql.index.columns import ListColumn, NumberColumn, StrArray, StrColumn, make_column
from recallql.index.errors import FilterError
from recallql.index.schema import FieldType
from recallql.index.timestamps import shown_as, to_epoch

if TYPE_CHECKING:
    from recallql.index.columns import Column

OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "==": operator.eq, "!=": operator.ne, "<>": operator.ne,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


@dataclass(frozen=True)
class Cmp:
    """``field op value`` with op one of ``= != < <= > >=``."""

    field: str
    op: str
    value: object


@dataclass(frozen=True)
class In:
    """``field IN (values...)``; a None value is SQL's NULL (it never matches, and a row that
    matches no other value is unknown, so ``NOT IN (..., NULL)`` is never true)."""

    field: str
    values: tuple


@dataclass(frozen=True)
class Between:
    """``field BETWEEN lo AND hi`` (inclusive)."""

    field: str
    lo: object
    hi: object


@dataclass(frozen=True)
class Like:
    """``field LIKE pattern`` (SQL wildcards, case-sensitive)."""

    field: str
    pattern: str


@dataclass(frozen=True)
class Contains:
    """``field CONTAINS value``: list membership, or substring of a str field."""

    field: str
    value: str


@dataclass(frozen=True)
class IsNull:
    """``field IS NULL`` (``negated``: ``IS NOT NULL``)."""

    field: str
    negated: bool = False


@dataclass(frozen=True)
class And:
    items: tuple


@dataclass(frozen=True)
class Or:
    items: tuple


@dataclass(frozen=True)
class Not:
    item: object


FilterExpr = Cmp | In | Between | Like | Contains | IsNull | And | Or | Not

ColumnLookup = Callable[[str], "Column"]


def like_matcher(pattern: str) -> Callable[[str], bool]:
    """Compile a SQL LIKE pattern (`%` any run, `_` one character, `\\` escapes) to a test.

    The pattern is split at `%` into fixed-length segments: the first must match at the start,
    the last at the end, the others leftmost-first in order. That is exact for LIKE and costs
    O(len(text) · len(pattern)) at worst — never the exponential backtracking a `.*`-per-`%`
    regex can hit (`'%a%a%a%a%a%a%b'` against a long run of `a`).
    """
    segments: list[list[str | None]] = [[]]
    escaped = False
    for ch in pattern:
        if escaped:
            segments[-1].append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            segments.append([])
        else:
            segments[-1].append(None if ch == "_" else ch)
    if escaped:
        segments[-1].append("\\")
    regexes = [re.compile("".join("." if a is None else re.escape(a) for a in seg), re.DOTALL)
               for seg in segments]
    if len(segments) == 1:
        return lambda text: regexes[0].fullmatch(text) is not None
    head, tail = regexes[0], regexes[-1]
    head_len, tail_len = len(segments[0]), len(segments[-1])
    middle = [(regexes[i], len(segments[i])) for i in range(1, len(segments) - 1)]

    def test(text: str) -> bool:
        end = len(text) - tail_len
        if end < head_len or not head.match(text, 0, head_len):
            return False
        if not tail.fullmatch(text, end):
            return False
        pos = head_len
        for regex, width in middle:
            found = regex.search(text, pos, end)
            if found is None:
                return False
            pos = found.start() + width
        return True

    return test


def _coerce(column: Column, value: object, name: str) -> object:
    kind = column.kind
    if kind in (FieldType.STR, FieldType.LIST_STR):
        ok = isinstance(value, str)
    elif kind is FieldType.BOOL:
        ok = isinstance(value, bool | np.bool_)
    elif kind is FieldType.TIMESTAMP:
        try:
            return to_epoch(value)
        except ValueError as exc:
            raise FilterError(f"field {name!r}: {exc}") from None
    else:
        ok = isinstance(value, Real) and not isinstance(value, bool | np.bool_)
    if not ok:
        raise FilterError(f"field {name!r} is {kind.value}; cannot compare with {value!r}")
    return value


def _predicate(column: Column, test: Callable[[str], bool], size: int) -> np.ndarray:
    """Rows whose value satisfies `test` (for str columns: any element for lists)."""
    if isinstance(column, StrColumn | StrArray):
        return column.where(test, size)
    if isinstance(column, ListColumn):
        return column.any(test, size)
    raise AssertionError("numeric columns are vectorised")


def _rows_mask(rows: np.ndarray, size: int) -> np.ndarray:
    mask = np.zeros(size, bool)
    mask[rows] = True
    return mask


#: A timestamp comparison as a test of the stored float against the ends ``[lo, hi)`` of the
#: value's microsecond (`shown_as`): (operator, which end).
_INSTANT_OPS: dict[str, tuple[Callable[[Any, Any], Any], int]] = {
    "<": (operator.lt, 0), "<=": (operator.lt, 1), ">": (operator.ge, 1), ">=": (operator.ge, 0)}


def _cmp(column: Column, op: str, value: object, size: int) -> np.ndarray:
    if isinstance(column, StrColumn | StrArray) and op in ("=", "=="):  # postings: no test per row
        return _rows_mask(column.equal_rows([value], size), size)  # type: ignore[list-item]
    fn = OPS[op]
    if isinstance(column, NumberColumn) and column.kind is FieldType.TIMESTAMP:
        return _instant_cmp(column.values(size), op, float(value))  # type: ignore[arg-type]
    if isinstance(column, NumberColumn):
        return np.asarray(fn(column.values(size), value), bool)
    if isinstance(column, ListColumn) and op not in ("=", "=="):
        raise FilterError(f"operator {op} is not defined on a list field; use CONTAINS or IN")
    return _predicate(column, lambda s: bool(fn(s, value)), size)


def _instant_cmp(values: np.ndarray, op: str, epoch: float) -> np.ndarray:
    """bool[n]: stored times `values` against the microsecond `epoch` is shown as."""
    ends = shown_as(epoch)
    if op in _INSTANT_OPS:
        fn, end = _INSTANT_OPS[op]
        return np.asarray(fn(values, ends[end]), bool)
    inside = (values >= ends[0]) & (values < ends[1])
    return ~inside if op in ("!=", "<>") else inside


def _instants_in(values: np.ndarray, epochs: Sequence[float]) -> np.ndarray:
    """bool[n]: stored times `values` shown as the microsecond of any of `epochs` — one binary
    search per row in the sorted, disjoint ``[lo, hi)`` ends (O(n log m), not n·m)."""
    ends = sorted({shown_as(float(e)) for e in epochs})
    if not ends:
        return np.zeros(len(values), bool)
    los = np.array([lo for lo, _ in ends])
    his = np.array([hi for _, hi in ends])
    at = np.searchsorted(los, values, side="right") - 1
    inside = at >= 0
    inside[inside] = values[inside] < his[at[inside]]
    return inside


def _leaf(expr: FilterExpr, column: Column, size: int) -> np.ndarray:
    name = expr.field  # type: ignore[union-attr]
    if isinstance(expr, Cmp):
        if expr.op not in OPS:
            raise FilterError(f"unknown comparison operator {expr.op!r}")
        if expr.value is None:
            return np.zeros(size, bool)
        return _cmp(column, expr.op, _coerce(column, expr.value, name), size)
    if isinstance(expr, Between):
        lo, hi = _coerce(column, expr.lo, name), _coerce(column, expr.hi, name)
        return _cmp(column, ">=", lo, size) & _cmp(column, "<=", hi, size)
    if isinstance(expr, In):
        values: list[Any] = [_coerce(column, v, name) for v in expr.values if v is not None]
        if isinstance(column, NumberColumn) and column.kind is FieldType.TIMESTAMP:
            return _instants_in(column.values(size), values)
        if isinstance(column, NumberColumn):
            return np.isin(column.values(size), values)
        if isinstance(column, StrColumn | StrArray):  # postings: no test per row
            return _rows_mask(column.equal_rows(values, size), size)
        wanted = set(values)
        return _predicate(column, wanted.__contains__, size)
    if isinstance(expr, Like | Contains):
        if column.kind not in (FieldType.STR, FieldType.LIST_STR):
            raise FilterError(f"field {name!r} is {column.kind.value}; LIKE/CONTAINS need text")
        if isinstance(expr, Like):
            matches = like_matcher(str(_coerce(column, expr.pattern, name)))
            return _predicate(column, matches, size)
        value = str(_coerce(column, expr.value, name))  # a str: _coerce checked it
        if isinstance(column, ListColumn):
            return _predicate(column, value.__eq__, size)
        return _predicate(column, lambda s: value in s, size)
    raise FilterError(f"not a filter expression: {expr!r}")


def evaluate(expr: object, lookup: ColumnLookup, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Three-valued evaluation: (true bool[size], known bool[size]).

    Raises:
        FilterError: unknown field, operator or expression; a value of the wrong type.
    """
    if isinstance(expr, And | Or):
        parts = [evaluate(item, lookup, size) for item in expr.items]
        true = [t for t, _ in parts]
        false = [k & ~t for t, k in parts]
        if isinstance(expr, And):
            t = np.logical_and.reduce(true) if true else np.ones(size, bool)
            f = np.logical_or.reduce(false) if false else np.zeros(size, bool)
        else:
            t = np.logical_or.reduce(true) if true else np.zeros(size, bool)
            f = np.logical_and.reduce(false) if false else np.ones(size, bool)
        return t, t | f
    if isinstance(expr, Not):
        t, known = evaluate(expr.item, lookup, size)
        return known & ~t, known
    if isinstance(expr, IsNull):
        present = lookup(expr.field).present(size)
        return (present if expr.negated else ~present), np.ones(size, bool)
    if not isinstance(expr, Cmp | In | Between | Like | Contains):
        raise FilterError(f"not a filter expression: {expr!r}")
    column = lookup(expr.field)
    present = column.present(size)
    true = _leaf(expr, column, size) & present
    if isinstance(expr, In) and any(v is None for v in expr.values):
        return true, true  # no match against a list holding NULL is unknown, not false
    return true, present


def filter_mask(expr: object, lookup: ColumnLookup, size: int) -> np.ndarray:
    """bool[size]: rows for which `expr` is definitely true."""
    if isinstance(expr, Cmp | In) and (expr.op in ("=", "==") if isinstance(expr, Cmp)
                                       else None not in expr.values):
        column = lookup(expr.field)
        if isinstance(column, StrColumn | StrArray):  # postings hold present rows only
            return _leaf(expr, column, size)
    return evaluate(expr, lookup, size)[0]


def posting_rows(expr: object, lookup: ColumnLookup, size: int) -> np.ndarray | None:
    """int64[m] ascending rowids for which `expr` is definitely true, when it resolves through
    per-value postings alone: ``=`` / ``IN`` with str values on a str field, and AND /
    OR of those (O(rows matched), no pass over every row). None for any other expression
    (`filter_mask` evaluates it).

    Raises:
        FilterError: unknown field.
    """
    if isinstance(expr, And | Or) and expr.items:
        found_parts = [posting_rows(item, lookup, size) for item in expr.items]
        parts = [p for p in found_parts if p is not None]
        if len(parts) < len(found_parts):
            return None
        found = parts[0]
        for part in parts[1:]:
            found = (np.intersect1d(found, part, assume_unique=True) if isinstance(expr, And)
                     else np.union1d(found, part))
        return found.astype(np.int64)
    if isinstance(expr, Cmp) and expr.op in ("=", "=="):
        values: tuple = (expr.value,)
    elif isinstance(expr, In):
        values = tuple(v for v in expr.values if v is not None)
    else:
        return None
    if not all(isinstance(v, str) for v in values):
        return None
    column = lookup(expr.field)
    if not isinstance(column, StrColumn | StrArray):
        return None
    return column.equal_rows(values, size)


def rows_mask(expr: object, rows: Sequence[Mapping[str, object]],
              fields: Mapping[str, FieldType]) -> np.ndarray:
    """bool[len(rows)]: `expr` over plain rows (e.g. the session table), with the semantics it
    has over a snapshot: each of `fields` becomes a column (a missing key or None is NULL).

    Raises:
        FilterError: as `evaluate` (a field not in `fields`, a value of the wrong type).
    """
    columns: dict[str, Column] = {}
    for name, kind in fields.items():
        columns[name] = make_column(kind)
        columns[name].extend([row.get(name) for row in rows])

    def lookup(name: str) -> Column:
        if name not in columns:
            raise FilterError(f"unknown field {name!r}; fields: {', '.join(columns)}")
        return columns[name]

    return filter_mask(expr, lookup, len(rows))
