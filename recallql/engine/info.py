"""Catalog statements: SHOW COLLECTIONS, SHOW SESSIONS, SHOW SESSION, SHOW LINEAGE, DESCRIBE.

They return a `Result` whose `columns` and `records` hold a small table (no ranked rows).
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from recallql.engine.analyzer import BUILTIN_FIELDS
from recallql.engine.models import Result
from recallql.grammar import nodes as n
from recallql.grammar import statements as s
from recallql.grammar.errors import QuerySemanticError
from recallql.sessions.lineage import DEFAULT_MAX_STEPS, LineageResolver

SESSION_FIELDS = ("id", "agent_id", "status", "source", "parent_session_id", "end_reason",
                  "branched_from", "delegate_from", "started_at", "ended_at", "title")
_TIME_FIELDS = {"started_at", "ended_at"}


def run(db: Any, stmt: s.StatementBase, now_ts: float) -> Result:
    """Run a catalog statement against the database."""
    handler = _HANDLERS[type(stmt)]
    columns, records, snapshot = handler(db, stmt, now_ts)
    return Result(statement=stmt.to_text(), columns=columns, records=records,
                  session_snapshot=snapshot)


def _iso(ts: float | None) -> str | None:
    """Epoch seconds UTC as ISO-8601 with a `Z` (as `SHOW SESSION` and the JSON models print)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def _show_collections(db: Any, stmt: s.ShowCollections, now_ts: float) -> tuple:
    records = []
    for info in db.collections():
        snap = db.snapshot(info.name)
        records.append({"name": info.name, "items": int(snap.live.sum()),
                        "text_fields": list(info.text_fields),
                        "fields": {k: str(v.value) for k, v in info.fields.items()},
                        "dim": info.dim, "embedder": info.embedder_name})
    return ["name", "items", "text_fields", "fields", "dim", "embedder"], records, None


def _describe(db: Any, stmt: s.Describe, now_ts: float) -> tuple:
    catalog = {c.name: c for c in db.collections()}
    info = catalog.get(stmt.collection.name)
    if info is None:
        close = difflib.get_close_matches(stmt.collection.name, list(catalog), n=1)
        raise QuerySemanticError(f"unknown collection '{stmt.collection.name}'",
                                 text=stmt.source, span=stmt.collection.span,
                                 hint=f"did you mean '{close[0]}'?" if close else None)
    records = [{"field": t, "type": "text", "role": "BM25 text (concatenated)"}
               for t in info.text_fields]
    records += [{"field": k, "type": str(v.value), "role": "filterable"}
                for k, v in info.fields.items()]
    records += [{"field": k, "type": str(v.value), "role": "built-in"}
                for k, v in BUILTIN_FIELDS.items()]
    embed = info.embedder_name or "none (vectors from the caller)"
    records.append({"field": "vector", "type": f"float32[{info.dim}]", "role": f"embedder {embed}"})
    return ["field", "type", "role"], records, None


def _show_sessions(db: Any, stmt: s.ShowSessions, now_ts: float) -> tuple:
    test = _predicate(stmt, stmt.where) if stmt.where is not None else (lambda row: True)
    rows = [r for r in db.sessions.rows() if test(r) is True]
    offset = _whole(stmt.offset, 0)
    end = None if stmt.limit is None else offset + _whole(stmt.limit, 0)
    rows = rows[offset:end]
    cols = ["id", "agent_id", "status", "source", "parent_session_id", "end_reason",
            "started_at", "ended_at", "title"]
    records = [{c: (_iso(r[c]) if c in _TIME_FIELDS else r[c]) for c in cols} for r in rows]
    return cols, records, None


def _whole(node: Any, default: int) -> int:
    """A bound LIMIT / OFFSET value (`bind` replaced its parameter by an IntegerLiteral)."""
    return default if node is None else int(node.value)


def _session_id(stmt: Any) -> str:
    return stmt.session.value


def _show_session(db: Any, stmt: s.ShowSession, now_ts: float) -> tuple:
    from recallql.sessions.lifecycle import SessionNotFound

    try:
        snap = db.sessions.snapshot(_session_id(stmt), as_of=now_ts)
    except SessionNotFound:
        raise QuerySemanticError(f"no session '{_session_id(stmt)}'", text=stmt.source,
                                 span=stmt.session.span) from None
    record = snap.model_dump(mode="json")
    return list(record), [record], snap


def _show_lineage(db: Any, stmt: s.ShowLineage, now_ts: float) -> tuple:
    """The session's parent links upward, one record per session: its edge verdict to its parent
    (continuation / branch / delegate / tool / reset / not_compression / missing / cycle / root)
    and the conversation it belongs to (`conversation_root`, or `unresolved: <reason>`)."""
    with db.read_transaction() as conn:
        resolver = LineageResolver(db.sessions.fetcher(conn), budget=LINEAGE_SHOW_STEPS + 2)
        chain = resolver.chain(_session_id(stmt), max_steps=LINEAGE_SHOW_STEPS)
        if chain and chain[0][0] is None:
            raise QuerySemanticError(f"no session '{_session_id(stmt)}'", text=stmt.source,
                                     span=stmt.session.span)
        records = [_lineage_record(depth, row, verdict, resolver)
                   for depth, (row, verdict) in enumerate(chain)]
    cols = ["depth", "session_id", "parent_session_id", "source", "end_reason", "edge",
            "conversation_root"]
    return cols, records, None


#: SHOW LINEAGE lists at most this many sessions: a chain of `DEFAULT_MAX_STEPS` links in full.
LINEAGE_SHOW_STEPS = DEFAULT_MAX_STEPS + 1


def _lineage_record(depth: int, row: Any, verdict: Any, resolver: LineageResolver
                    ) -> dict[str, Any]:
    res = resolver.resolve(row.id)  # rows are cached by the chain walk: no further reads
    root = res.root if res.resolved else f"unresolved: {res.reason or res.status}"
    return {"depth": depth, "session_id": row.id, "parent_session_id": row.parent_session_id,
            "source": row.source, "end_reason": row.end_reason, "edge": str(verdict),
            "conversation_root": root}


_HANDLERS: dict[type, Callable[..., tuple]] = {
    s.ShowCollections: _show_collections,
    s.Describe: _describe,
    s.ShowSessions: _show_sessions,
    s.ShowSession: _show_session,
    s.ShowLineage: _show_lineage,
}

# -- SHOW SESSIONS WHERE: a small evaluator with SQL's three-valued logic (None = unknown) -------

_OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


def _predicate(stmt: s.StatementBase, pred: n.Predicate) -> Callable[[dict], bool | None]:
    if isinstance(pred, n.And):
        parts = [_predicate(stmt, p) for p in pred.items]
        return lambda r: _and([p(r) for p in parts])
    if isinstance(pred, n.Or):
        parts = [_predicate(stmt, p) for p in pred.items]
        return lambda r: _or([p(r) for p in parts])
    if isinstance(pred, n.Not):
        inner = _predicate(stmt, pred.item)
        return lambda r: None if (v := inner(r)) is None else not v
    name = pred.field.name  # type: ignore[attr-defined]
    if name not in SESSION_FIELDS:
        close = difflib.get_close_matches(name, SESSION_FIELDS, n=1)
        raise QuerySemanticError(f"unknown session field '{name}'", text=stmt.source,
                                 span=pred.field.span,  # type: ignore[attr-defined]
                                 hint=f"did you mean '{close[0]}'?" if close
                                 else f"known: {', '.join(SESSION_FIELDS)}")
    _check_types(stmt, pred, name)
    return _leaf(pred, name)


def _check_types(stmt: s.StatementBase, pred: n.Predicate, name: str) -> None:
    """Session fields are text, except `started_at` / `ended_at` (timestamps): a value of the
    other kind is a mistake, not an empty result."""
    is_time = name in _TIME_FIELDS
    if is_time and isinstance(pred, n.Like | n.Contains):
        raise QuerySemanticError(f"session field '{name}' is a timestamp; LIKE and CONTAINS "
                                 "apply to text fields", text=stmt.source,
                                 span=pred.field.span)  # type: ignore[attr-defined]
    values = [getattr(pred, a) for a in ("value", "low", "high", "pattern") if hasattr(pred, a)]
    values += list(getattr(pred, "values", ()))
    want = n.TimestampLiteral if is_time else n.StringLiteral
    for node in values:
        if not isinstance(node, want | n.NullLiteral):
            kind = "a timestamp" if is_time else "text"
            example = "TIMESTAMP '2025-01-31T00:00:00Z'" if is_time else "'open'"
            raise QuerySemanticError(f"session field '{name}' is {kind}; compare it with {kind}",
                                     text=stmt.source, span=node.span,
                                     hint=f"e.g. {name} = {example}")


def _value(node: Any, name: str) -> Any:
    value = node.value
    if name in _TIME_FIELDS and isinstance(value, datetime):
        return value.timestamp()
    return value


def _leaf(pred: n.Predicate, name: str) -> Callable[[dict], bool | None]:
    def guard(fn: Callable[[Any], bool]) -> Callable[[dict], bool | None]:
        def test(row: dict) -> bool | None:
            value = row.get(name)
            if value is None:
                return None
            try:
                return bool(fn(value))
            except TypeError:
                return None
        return test

    if isinstance(pred, n.IsNull):
        return lambda r: (r.get(name) is None) != pred.negated
    if isinstance(pred, n.Comparison):
        op, want = _OPS[pred.op], _value(pred.value, name)
        return guard(lambda v: op(v, want))
    if isinstance(pred, n.InList):
        return _in_list(pred, name)
    if isinstance(pred, n.Between):
        lo, hi = _value(pred.low, name), _value(pred.high, name)
        return guard(lambda v: (lo <= v <= hi) != pred.negated)
    if isinstance(pred, n.Like):
        from recallql.index.filters import like_matcher

        matches = like_matcher(str(getattr(pred.pattern, "value")))  # noqa: B009
        return guard(lambda v: matches(str(v)) != pred.negated)
    if isinstance(pred, n.Contains):
        needle = str(getattr(pred.value, "value"))  # noqa: B009
        return guard(lambda v: needle in str(v))
    raise TypeError(type(pred).__name__)  # pragma: no cover


def _in_list(pred: n.InList, name: str) -> Callable[[dict], bool | None]:
    """`x [NOT] IN (...)` with SQL's rules: no match against a list holding NULL is unknown."""
    values = [_value(v, name) for v in pred.values]
    has_null = any(v is None for v in values)
    wanted = {v for v in values if v is not None}

    def test(row: dict) -> bool | None:
        value = row.get(name)
        if value is None:
            return None
        if value in wanted:
            return not pred.negated
        return None if has_null else pred.negated

    return test


def _and(values: list[bool | None]) -> bool | None:
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def _or(values: list[bool | None]) -> bool | None:
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False
