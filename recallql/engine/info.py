"""Catalog statements: SHOW COLLECTIONS, SHOW SESSIONS, SHOW SESSION, SHOW LINEAGE, DESCRIBE.

They return a `Result` whose `columns` and `records` hold a small table (no ranked rows).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallql.engine.analyzer import BUILTIN_FIELDS, where_filter
from recallql.engine.models import Notice, Result
from recallql.engine.reasons import Reason
from recallql.grammar import statements as s
from recallql.grammar.errors import QuerySemanticError
from recallql.grammar.suggest import did_you_mean
from recallql.grammar.timestamps import format_timestamp
from recallql.index.filters import rows_mask
from recallql.index.schema import FieldType
from recallql.sessions.lineage import (
    DEFAULT_MAX_STEPS,
    LineageResolver,
    ResolutionStatus,
    agrees,
    describe_resolution,
)

#: What SHOW SESSIONS WHERE can name: text fields, and the two times (epoch seconds UTC).
SESSION_FIELDS: dict[str, FieldType] = {
    **dict.fromkeys(("id", "agent_id", "status", "source", "parent_session_id", "end_reason",
                     "branched_from", "delegate_from"), FieldType.STR),
    "started_at": FieldType.TIMESTAMP, "ended_at": FieldType.TIMESTAMP, "title": FieldType.STR,
}
_TIME_FIELDS = {"started_at", "ended_at"}


def run(db: Any, stmt: s.StatementBase, now_ts: float) -> Result:
    """Run a catalog statement against the database."""
    handler = _HANDLERS[type(stmt)]
    columns, records, snapshot, *warnings = handler(db, stmt, now_ts)
    return Result(statement=stmt.to_text(), columns=columns, records=records,
                  session_snapshot=snapshot, warnings=warnings[0] if warnings else [])


def _iso(ts: float | None) -> str | None:
    """Epoch seconds UTC as the machine text of a time (`format_timestamp`), None when missing."""
    return None if ts is None else format_timestamp(ts)


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
        raise QuerySemanticError(f"unknown collection '{stmt.collection.name}'",
                                 text=stmt.source, span=stmt.collection.span,
                                 hint=did_you_mean(stmt.collection.name, sorted(catalog)))
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
    rows = list(db.sessions.rows())
    if stmt.where is not None:  # the WHERE semantics of SEARCH, over the session table
        expr = where_filter(stmt, stmt.where, SESSION_FIELDS)
        rows = [r for r, keep in zip(rows, rows_mask(expr, rows, SESSION_FIELDS), strict=True)
                if keep]
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


def _no_session(db: Any, stmt: s.ShowSession | s.ShowLineage) -> QuerySemanticError:
    """The error for SHOW SESSION / SHOW LINEAGE of an id no session has (a read of every
    session, on this error path only)."""
    return no_session_error(stmt, [row["id"] for row in db.sessions.rows()])


def no_session_error(stmt: s.ShowSession | s.ShowLineage,
                     ids: list[str]) -> QuerySemanticError:
    """``no session 'x'`` under the id, with a did-you-mean among `ids` (the sessions there
    are), or where to find them; one database's and a cluster's error alike."""
    wanted = _session_id(stmt)
    hint = did_you_mean(wanted, ids, listing=False)
    return QuerySemanticError(f"no session '{wanted}'", text=stmt.source,
                              span=stmt.session.span,
                              hint=hint or "SHOW SESSIONS lists the sessions there are")


def _show_session(db: Any, stmt: s.ShowSession, now_ts: float) -> tuple:
    from recallql.sessions.lifecycle import SessionNotFound

    try:
        # now, as the database's clock reads it (`now_ts`): no AS OF, so a session dated up to
        # the allowed 300 s ahead of the clock is shown, not "did not exist yet"
        snap = db.sessions.snapshot(_session_id(stmt))
    except SessionNotFound:
        raise _no_session(db, stmt) from None
    record = snap.model_dump(mode="json")
    return list(record), [record], snap


def _show_lineage(db: Any, stmt: s.ShowLineage, now_ts: float) -> tuple:
    """The session's parent links upward, one record per session: its edge verdict to its parent
    (continuation / branch / delegate / tool / markers_unreadable / reset / not_compression /
    missing / cycle / root), the conversation the walk gives (`conversation_root`, or
    `unresolved: <reason>`) and the one stored at write time (`stored_root`; `not stored` when
    there is none). A disagreement is a `LINEAGE_ROOT_MISMATCH` warning."""
    with db.read_transaction() as conn:
        resolver = LineageResolver(db.sessions.fetcher(conn), budget=LINEAGE_SHOW_STEPS + 2)
        chain = resolver.chain(_session_id(stmt), max_steps=LINEAGE_SHOW_STEPS)
        if chain and chain[0][0] is None:
            raise _no_session(db, stmt)
        stored = db.sessions.stored_roots(conn, [row.id for row, _ in chain if row is not None])
        records = [_lineage_record(depth, row, verdict, resolver, stored.get(row.id))
                   for depth, (row, verdict) in enumerate(chain) if row is not None]
    cols = ["depth", "session_id", "parent_session_id", "source", "end_reason", "edge",
            "conversation_root", "stored_root"]
    return cols, records, None, _mismatches(records)


def _mismatches(records: list[dict[str, Any]]) -> list[Notice]:
    bad = [r for r in records if r.pop("_disagrees")]
    if not bad:
        return []
    listed = ", ".join(f"{r['session_id']} (stored {r['stored_root']}, walk "
                       f"{r['conversation_root']})" for r in bad[:5])
    return [Notice(code=Reason.LINEAGE_ROOT_MISMATCH,
                   message=f"{len(bad)} stored conversation root(s) disagree with the walk: "
                           f"{listed}; statements read the stored roots")]


#: SHOW LINEAGE lists at most this many sessions: a chain of `DEFAULT_MAX_STEPS` links in full.
LINEAGE_SHOW_STEPS = DEFAULT_MAX_STEPS + 1


def _lineage_record(depth: int, row: Any, verdict: Any, resolver: LineageResolver,
                    stored: Any) -> dict[str, Any]:
    res = resolver.resolve(row.id)  # rows are cached by the chain walk: no further reads
    disagrees = stored is not None and res.status is not ResolutionStatus.BUDGET_EXHAUSTED \
        and not agrees(stored, res)
    return {"depth": depth, "session_id": row.id, "parent_session_id": row.parent_session_id,
            "source": row.source, "end_reason": row.end_reason, "edge": str(verdict),
            "conversation_root": describe_resolution(res),
            "stored_root": describe_resolution(stored), "_disagrees": disagrees}


_HANDLERS: dict[type, Callable[..., tuple]] = {
    s.ShowCollections: _show_collections,
    s.Describe: _describe,
    s.ShowSessions: _show_sessions,
    s.ShowSession: _show_session,
    s.ShowLineage: _show_lineage,
}
