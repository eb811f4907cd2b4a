"""Analyzer: resolve a bound SEARCH/RETRIEVE statement against the catalog (SPEC §3, §4).

Checks collection and field names (unknown names raise `QuerySemanticError` with a caret and a
did-you-mean), literal types against field types, and option values; applies the defaults; and
translates WHERE into the index's filter expressions. The output, `QuerySpec`, is plain data the
planner turns into operators.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn

import numpy as np

from recallql.engine.fusion_options import (
    context_window,
    fail,
    fusion_options,
    number,
    whole,
)
from recallql.engine.scoring import DecayShape
from recallql.grammar import nodes as n
from recallql.grammar import statements as s
from recallql.grammar.errors import (
    ParameterError,
    QuerySemanticError,
    QuerySyntaxError,
)
from recallql.grammar.render import string_literal
from recallql.grammar.suggest import did_you_mean
from recallql.index import filters as f
from recallql.index.schema import CollectionInfo, FieldType
from recallql.index.timestamps import parse_timestamp

DEFAULT_LIMIT = 10
DEFAULT_RECENCY = (0.005, 365.0)
DEFAULT_SESSION_BOOST = (0.3, 0.2, 0.2)
DEFAULT_SIGNAL_BOOST = (("reward", 0.1),)
DEFAULT_BUDGET = 2000
#: The smallest normal float32: a NEAR vector of a smaller norm cannot be normalised.
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)
#: Timestamps are valid from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z.
MIN_EPOCH, MAX_EPOCH = -62135596800.0, 253402300799.999999

#: Fields every collection has besides its declared ones.
BUILTIN_FIELDS: dict[str, FieldType] = {
    "id": FieldType.STR,
    "doc_id": FieldType.STR,
    "entity": FieldType.STR,
    "position": FieldType.INT,
    "created_at": FieldType.TIMESTAMP,
}


@dataclass(frozen=True)
class RecencySpec:
    """Recency boost settings: `weight · f(age)`; half-life in days."""

    weight: float
    half_life_days: float
    field: str = "created_at"
    shape: DecayShape = DecayShape.EXP


@dataclass(frozen=True, eq=False)
class QuerySpec:
    """A SEARCH or RETRIEVE statement with names resolved and defaults applied."""

    kind: Literal["search", "retrieve"]
    collection: CollectionInfo
    text: str | None
    vector: np.ndarray | None
    using: str
    filter: Any
    session_id: str | None
    session_boost: tuple[float, float, float] | None
    signal_weights: tuple[tuple[str, float], ...] | None
    recency: RecencySpec | None
    fusion: Literal["rrf", "convex"]
    k: float
    window: int
    normalization: Literal["minmax", "tmm"]
    weights: tuple[tuple[str, float], ...]
    context_weight: float
    context: tuple[int, int] | None
    group_by: Literal["document", "conversation"] | None
    budget: int
    as_of: datetime | None
    limit: int
    offset: int
    #: How the semantic leg searches: ``auto`` (by eligible rows), ``exact`` or ``ann``
    #: (``USING SEMANTIC (exact)``).
    semantic_method: str = "auto"
    #: The HNSW search breadth of ``USING SEMANTIC (ann, ef = N)``; None: the graphs' default.
    semantic_ef: int | None = None


_fail = fail
_number = number


def _whole(stmt: s.StatementBase, node: Any, what: str, default: int) -> int:
    return whole(stmt, node, what, default)


def _weight(stmt: s.StatementBase, node: Any, what: str) -> float | None:
    """A boost weight: a finite number (the sum of all weights is checked in `_check_total`)."""
    return _number(stmt, node, what)


def _check_total(stmt: s.Search | s.Retrieve, spec: QuerySpec) -> None:
    """Every contribution is at most its weight in size and relevance at most 1, so a score is
    finite whenever `1 + Σ|weights|` is (SPEC §4.6); refuse weights whose sum overflows."""
    weights = [1.0, spec.context_weight, *(spec.session_boost or ()),
               *(w for _, w in spec.signal_weights or ())]
    if spec.recency is not None:
        weights.append(spec.recency.weight)
    total = 0.0
    for w in weights:  # left to right, as scores are summed; overflow shows as inf
        total += abs(w)
    if not total <= sys.float_info.max:
        clause = stmt.boosts[-1] if stmt.boosts else stmt.collection
        _fail(stmt, clause, "the boost weights add up to more than the largest float; scores "
              "would overflow", "use weights of a sensible size, e.g. weight = 0.005")


def analyze(stmt: s.Search | s.Retrieve, catalog: Mapping[str, CollectionInfo],
            signal_names: Collection[str] | None = None) -> QuerySpec:
    """Resolve `stmt` (bound: no parameters left) against `catalog`.

    Args:
        stmt: a bound SEARCH or RETRIEVE.
        catalog: collections by name.
        signal_names: the signal names the database's policy accepts (checked against
            `WITH SIGNAL BOOST (name = w)`); None skips the check.

    Raises:
        QuerySemanticError: unknown collection or field, a value of the wrong type, a clause
            that does not apply to the collection.
        ParameterError: a bound vector of the wrong dimension.
    """
    info = catalog.get(stmt.collection.name)
    if info is None:
        _fail(stmt, stmt.collection, f"unknown collection '{stmt.collection.name}'",
              did_you_mean(stmt.collection.name, list(catalog)))
    fields = {**BUILTIN_FIELDS, **dict(info.fields)}
    vector = _vector(stmt, info)
    group_by: Literal["document", "conversation"] | None = None
    if stmt.group_by is not None:
        group_by = "conversation" if stmt.group_by.kind == "conversation" else "document"
        if group_by == "conversation" and info.name != "messages":
            _fail(stmt, stmt.group_by, "GROUP BY CONVERSATION needs a collection of messages",
                  "use it on the built-in 'messages' collection")
    limit = stmt.limit_value
    fusion = fusion_options(stmt)
    spec = QuerySpec(
        kind=stmt.kind, collection=info, text=stmt.matching_text, vector=vector,
        using=stmt.using.mode if stmt.using else "hybrid",
        filter=_where(stmt, stmt.where, fields, info.text_fields)
        if stmt.where is not None else None,
        session_id=stmt.session_id,
        session_boost=_session_boost(stmt),
        signal_weights=_signal_weights(stmt, signal_names),
        recency=_recency(stmt, fields, info.text_fields),
        fusion=fusion.method, k=fusion.k, window=fusion.window,
        normalization=fusion.normalization, weights=fusion.weights,
        context_weight=fusion.context_weight, context=context_window(stmt),
        group_by=group_by,
        budget=_whole(stmt, stmt.group_by.budget if stmt.group_by else None, "budget",
                      DEFAULT_BUDGET),
        as_of=instant(stmt, stmt.as_of, utc=True) if stmt.as_of is not None else None,
        limit=DEFAULT_LIMIT if limit is None else limit,
        offset=stmt.offset_value,
        semantic_method=(stmt.using.method or "auto") if stmt.using else "auto",
        semantic_ef=stmt.using.ef if stmt.using else None,
    )
    if stmt.using is not None and spec.semantic_ef is not None \
            and spec.semantic_ef < spec.window:
        raise QuerySemanticError(
            f"ef = {spec.semantic_ef} is below the semantic leg's window of {spec.window} rows",
            text=stmt.source, span=stmt.using.ef_span or stmt.using.span,
            hint=f"use ef ≥ {spec.window} (a graph search returns at most ef rows; the leg "
            "raises ef to the candidates it asks for anyway)")
    _check_total(stmt, spec)
    return spec


def _vector(stmt: s.Search | s.Retrieve, info: CollectionInfo) -> np.ndarray | None:
    near = stmt.near
    if near is None:
        return None
    if stmt.using is not None and stmt.using.mode == "lexical" and stmt.matching is None:
        _fail(stmt, stmt.using, "USING LEXICAL needs MATCHING text: NEAR gives only the "
              "semantic leg its vector", "add MATCHING 'text', or write USING SEMANTIC")
    if not isinstance(near, n.VectorLiteral):
        _fail(stmt, near, "NEAR takes a vector parameter", cls=ParameterError)
    if near.value.shape[0] != info.dim:
        _fail(stmt, near, f"NEAR vector has dimension {near.value.shape[0]}, collection "
              f"'{info.name}' expects {info.dim}", cls=ParameterError)
    wide = near.value.astype(np.float64)
    norm = math.sqrt(float(wide.dot(wide)))  # what np.linalg.norm computes for a 1-d vector
    if norm == 0.0:
        _fail(stmt, near, "NEAR vector is all zeros; cosine similarity is undefined",
              cls=ParameterError)
    if norm < _FLOAT32_TINY:
        _fail(stmt, near, f"NEAR vector's norm {norm:.3g} is too small to normalise in float32",
              cls=ParameterError)
    return near.value


def _session_boost(stmt: s.Search | s.Retrieve) -> tuple[float, float, float] | None:
    clause = stmt.session_boost
    if stmt.session is None:
        if clause is not None:
            _fail(stmt, clause, "WITH SESSION BOOST needs FOR SESSION",
                  "add FOR SESSION <id> before the boosts, e.g. FOR SESSION 's-42'")
        return None
    weights = list(DEFAULT_SESSION_BOOST)
    if clause is not None:
        for i, name in enumerate(("keywords", "velocity", "entities")):
            value = _weight(stmt, clause.option(name), name)
            if value is not None:
                weights[i] = value
    return (weights[0], weights[1], weights[2])


def _signal_weights(stmt: s.Search | s.Retrieve, names: Collection[str] | None
                    ) -> tuple[tuple[str, float], ...] | None:
    clause = stmt.signal_boost
    if isinstance(clause, s.NoSignalBoost):
        return None
    if clause is None:
        return DEFAULT_SIGNAL_BOOST if stmt.kind == "retrieve" else None
    for option in clause.options:
        if names is not None and option.name.name not in names:
            _fail(stmt, option.name, f"'{option.name.name}' is not a signal name this database "
                  "accepts", did_you_mean(option.name.name, sorted(names)))
    written = tuple((name, _weight(stmt, value, name) or 0.0) for name, value in clause.weights)
    return written or DEFAULT_SIGNAL_BOOST


def _recency(stmt: s.Search | s.Retrieve, fields: Mapping[str, FieldType],
             text_fields: tuple[str, ...] = ()) -> RecencySpec | None:
    clause = stmt.recency
    if isinstance(clause, s.NoRecency):
        return None
    weight, half_life = DEFAULT_RECENCY
    if clause is None:
        return RecencySpec(weight, half_life)
    written = _weight(stmt, clause.weight, "weight")
    weight = weight if written is None else written
    if clause.half_life is not None:
        half_life = clause.half_life.days  # type: ignore[union-attr]
        if not (math.isfinite(half_life) and half_life > 0.0):
            _fail(stmt, clause.half_life, "half_life is out of range",
                  "use a duration such as 30 DAYS or 12 HOURS")
    field = "created_at"
    if clause.field is not None:
        ident = clause.field
        field = ident.name if isinstance(ident, n.Identifier) else str(ident.value)  # type: ignore[union-attr]
        kind = fields.get(field)
        if kind is None and field in text_fields:
            _fail(stmt, ident, f"recency field '{field}' is a text field, not a timestamp",
                  "use created_at or a declared timestamp field")
        if kind is None:
            _fail(stmt, ident, f"unknown field '{field}'", did_you_mean(field, list(fields)))
        if kind is not FieldType.TIMESTAMP:
            _fail(stmt, ident, f"recency field '{field}' is {kind.value}, not a timestamp")
    shape = DecayShape.EXP
    if clause.shape is not None:
        shape = DecayShape(str(getattr(clause.shape, "name", clause.shape)).lower())
    return RecencySpec(weight, half_life, field, shape)


# -- WHERE -> index filter expressions ---------------------------------------------------------


def where_filter(stmt: s.StatementBase, pred: n.Predicate, fields: Mapping[str, FieldType],
                 text_fields: tuple[str, ...] = ()) -> Any:
    """A WHERE predicate as a `recallql.index.filters` expression, after checking every field
    name (unknown: a did-you-mean hint) and value type against `fields`. The one translation
    for SEARCH / RETRIEVE (a collection's fields) and SHOW SESSIONS (the session fields).

    Raises:
        QuerySemanticError: unknown field, a value or operator that does not fit its type.
    """
    return _where(stmt, pred, fields, text_fields)


def _where(stmt: s.StatementBase, pred: n.Predicate, fields: Mapping[str, FieldType],
           text_fields: tuple[str, ...] = ()) -> Any:
    if isinstance(pred, n.And):
        return f.And(tuple(_where(stmt, p, fields, text_fields) for p in pred.items))
    if isinstance(pred, n.Or):
        return f.Or(tuple(_where(stmt, p, fields, text_fields) for p in pred.items))
    if isinstance(pred, n.Not):
        return f.Not(_where(stmt, pred.item, fields, text_fields))
    name, kind = _field(stmt, pred.field, fields, text_fields)  # type: ignore[attr-defined]
    if isinstance(pred, n.IsNull):
        return f.IsNull(name, pred.negated)
    if isinstance(pred, n.Comparison):
        return _comparison(stmt, pred, name, kind)
    if isinstance(pred, n.InList):
        within = f.In(name, tuple(None if isinstance(v, n.NullLiteral) else
                                  _value(stmt, v, kind, name) for v in pred.values))
        return f.Not(within) if pred.negated else within
    if isinstance(pred, n.Between):
        if kind in (FieldType.BOOL, FieldType.LIST_STR):
            _fail(stmt, pred.field, f"BETWEEN does not apply to {kind.value} field '{name}'")
        between = f.Between(name, _value(stmt, pred.low, kind, name),
                            _value(stmt, pred.high, kind, name))
        return f.Not(between) if pred.negated else between
    if isinstance(pred, n.Like):
        if kind not in (FieldType.STR, FieldType.LIST_STR):
            _fail(stmt, pred.field, f"LIKE needs a string field; '{name}' is {kind.value}")
        pattern = _value(stmt, pred.pattern, FieldType.STR, name)
        if (len(pattern) - len(pattern.rstrip("\\"))) % 2:  # as PostgreSQL refuses it
            _fail(stmt, pred.pattern, "LIKE pattern must not end with the escape character \\",
                  "write \\\\ for a literal backslash")
        expr = f.Like(name, pattern)
        return f.Not(expr) if pred.negated else expr
    if isinstance(pred, n.Contains):
        if kind not in (FieldType.STR, FieldType.LIST_STR):
            _fail(stmt, pred.field, f"CONTAINS needs a string or list field; '{name}' is "
                  f"{kind.value}")
        return f.Contains(name, _value(stmt, pred.value, kind, name))
    _fail(stmt, pred, f"unsupported predicate {type(pred).__name__}")  # pragma: no cover


def _field(stmt: s.StatementBase, ident: n.Identifier, fields: Mapping[str, FieldType],
           text_fields: tuple[str, ...]) -> tuple[str, FieldType]:
    kind = fields.get(ident.name)
    if kind is None:
        if ident.name in text_fields:
            _fail(stmt, ident, f"'{ident.name}' is a BM25 text field, not a filterable field",
                  "search text with MATCHING; WHERE filters on metadata fields")
        _fail(stmt, ident, f"unknown field '{ident.name}'",
              did_you_mean(ident.name, [*fields, *text_fields]))
    return ident.name, kind


def _comparison(stmt: s.StatementBase, pred: n.Comparison, name: str, kind: FieldType) -> Any:
    if isinstance(pred.value, n.NullLiteral):
        _fail(stmt, pred.value, f"'{name} {pred.op} NULL' is never true",
              f"use '{name} IS NULL' or '{name} IS NOT NULL'")
    if pred.op not in ("=", "!=") and kind in (FieldType.BOOL, FieldType.LIST_STR):
        _fail(stmt, pred.field, f"'{pred.op}' does not apply to {kind.value} field '{name}'")
    if pred.op == "!=" and kind is FieldType.LIST_STR:  # '=' is membership, as CONTAINS
        _fail(stmt, pred.field, f"'!=' does not apply to list[str] field '{name}'",
              f"write NOT {name} CONTAINS ... (true when no element is the value)")
    return f.Cmp(name, pred.op, _value(stmt, pred.value, kind, name))


def instant(stmt: s.StatementBase, node: Any, utc: bool = False) -> datetime:
    """The aware datetime of a ``TIMESTAMP '...'`` literal or of ISO-8601 text compared with a
    timestamp field (`recallql.index.timestamps.parse_timestamp`: naive means UTC).

    Args:
        utc: convert to UTC (AS OF), which fails outside years 1..9999 in UTC; filter values
            keep their offset (the filter layer compares instants).

    Raises:
        QuerySyntaxError: an invalid TIMESTAMP literal (caret under its string).
        QuerySemanticError: ISO text that is not a timestamp.
    """
    text = node.value
    try:
        moment = parse_timestamp(text)
        return moment.astimezone(UTC) if utc else moment
    except (ValueError, OverflowError) as exc:
        outside = isinstance(exc, OverflowError)
        if not isinstance(node, n.TimestampLiteral):
            _fail(stmt, node, f"'{text}' is " + ("outside years 1..9999 in UTC" if outside
                                                 else "not an ISO-8601 timestamp"),
                  "write TIMESTAMP '2025-01-31T00:00:00Z'")
        quoted = string_literal(text)
        start, end = node.span
        raise QuerySyntaxError(
            f"invalid TIMESTAMP {quoted}" + (" (outside years 1..9999 in UTC)" if outside else ""),
            text=stmt.source, span=(max(start, end - len(quoted)), end),
            expected=["an ISO-8601 date-time"],
            hint="write TIMESTAMP '2025-01-31T00:00:00Z' (Z or an offset such as +02:00; "
            "without one, UTC)") from None


_ACCEPTS: dict[FieldType, tuple[type, ...]] = {
    FieldType.STR: (n.StringLiteral,),
    FieldType.LIST_STR: (n.StringLiteral,),
    FieldType.INT: (n.IntegerLiteral, n.FloatLiteral),
    FieldType.FLOAT: (n.IntegerLiteral, n.FloatLiteral),
    FieldType.BOOL: (n.BooleanLiteral,),
    FieldType.TIMESTAMP: (n.TimestampLiteral, n.StringLiteral, n.IntegerLiteral, n.FloatLiteral),
}

_TYPE_WORDS = {
    FieldType.STR: "a string", FieldType.LIST_STR: "a string", FieldType.INT: "a number",
    FieldType.FLOAT: "a number", FieldType.BOOL: "TRUE or FALSE",
    FieldType.TIMESTAMP: "a TIMESTAMP '...' literal",
}


def _mistyped(stmt: s.StatementBase, node: n.Node, kind: FieldType, name: str) -> NoReturn:
    """A value of the wrong type for field `name`: a `ParameterError` when it came from a
    parameter (its text in the statement is ``:name`` or ``?``), else a semantic error; both
    say what the value is."""
    start, end = node.span
    written = stmt.source[start:end]
    value = getattr(node, "value", None)
    if written.startswith((":", "?")):
        _fail(stmt, node, f"value for {name} (parameter {written}) must be "
              f"{_TYPE_WORDS[kind]} ({name} is {kind.value}), got {type(value).__name__} "
              f"{value!r}", cls=ParameterError)
    _fail(stmt, node, f"field '{name}' is {kind.value}; expected {_TYPE_WORDS[kind]}, got "
          f"{written}")


def _value(stmt: s.StatementBase, node: n.Node, kind: FieldType, name: str) -> Any:
    if isinstance(node, n.Parameter):  # pragma: no cover - bind() runs first
        _fail(stmt, node, f"parameter {node.label} is not bound", cls=ParameterError)
    if not isinstance(node, _ACCEPTS[kind]):
        _mistyped(stmt, node, kind, name)
    value = getattr(node, "value")  # noqa: B009 - every accepted literal has a value
    if kind is FieldType.TIMESTAMP and isinstance(value, str):
        value = instant(stmt, node)
    elif kind is FieldType.TIMESTAMP and isinstance(value, int | float):
        if not MIN_EPOCH <= value <= MAX_EPOCH:
            _fail(stmt, node, f"{value!r} epoch seconds is outside years 1..9999",
                  "write TIMESTAMP '2025-01-31T00:00:00Z'")
    elif kind is FieldType.INT and isinstance(value, int) and not -2**63 <= value < 2**63:
        _fail(stmt, node, f"{value} does not fit the 64-bit int field '{name}'")
    return value
