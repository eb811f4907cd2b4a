"""Reading sessions back: snapshots and decayed signal sums (SPEC §4.3, §4.4; issue 5).

Functions over an open SQLite connection (inside the caller's read or write transaction), used by
`recallql.sessions.lifecycle.Sessions`. Times are epoch seconds UTC.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from recallql.sessions.lineage import SessionRow
from recallql.sessions.models import SessionSnapshot
from recallql.sessions.signals import (
    SignalPolicy,
    SignalRecord,
    decayed,
    keywords_from,
    reference_time,
    signal_sum,
)

SESSION_COLUMNS = ("id, agent_id, status, parent_session_id, source, end_reason, branched_from, "
                   "delegate_from, started_at, ended_at, metadata, frozen_snapshot, title")
#: The `SessionRow` columns, in field order.
ROW_COLUMNS = ("id, parent_session_id, source, end_reason, branched_from, delegate_from, status, "
               "started_at, ended_at, markers_unreadable, agent_id")
#: The same for a store written before `markers_unreadable` existed (read-only opens of a
#: database an older version wrote: nothing can be migrated, every marker was readable).
LEGACY_ROW_COLUMNS = ROW_COLUMNS.replace("markers_unreadable", "0")
#: Entities per `IN (...)` list (SQLite's variable limit is at least 999).
IN_CHUNK = 500
#: The valid session times, epoch seconds UTC: 0001-01-01T00:00:00Z up to the last float before
#: 10000-01-01T00:00:00Z (9999-12-31T23:59:59.99997Z; floats this large step by ~30 µs).
MIN_TIME = -62135596800.0
MAX_TIME = math.nextafter(253402300800.0, 0.0)


def clamp_time(ts: float | None) -> float | None:
    """A stored time clamped into [`MIN_TIME`, `MAX_TIME`] (None and NaN give None).

    Writes reject out-of-range times; this keeps reads working on a value stored before they
    did (or written by another tool): it shows as the first or last representable instant.
    """
    if ts is None or ts != ts:
        return None
    return min(max(float(ts), MIN_TIME), MAX_TIME)


def to_datetime(ts: float | None) -> datetime | None:
    """Epoch seconds UTC as an aware UTC datetime (None and NaN give None; out-of-range values
    are clamped to years 1..9999 by `clamp_time`)."""
    ts = clamp_time(ts)
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


def _lookup(conn: Any, sql: str, id: object) -> tuple | None:
    """The first row of `sql` bound to session id `id`, or None; an id that cannot be stored
    (not a str, or not encodable as UTF-8: a lone surrogate) matches nothing."""
    if not isinstance(id, str):
        return None
    try:
        return conn.execute(sql, (id,)).fetchone()
    except UnicodeEncodeError:
        return None


def session_row(conn: Any, id: str, columns: str = ROW_COLUMNS) -> SessionRow | None:
    """The lineage fields of one session, or None (also for an id of the wrong type).

    Args:
        columns: `ROW_COLUMNS`, or `LEGACY_ROW_COLUMNS` on a store an older version wrote.
    """
    r = _lookup(conn, f"SELECT {columns} FROM sessions WHERE id = ?", id)
    return None if r is None else SessionRow._make(r)


def prefixed(columns: str, alias: str) -> str:
    """``"a, b"`` as ``"s.a, s.b"`` (literals such as ``0`` stay as they are)."""
    return ", ".join(c if c.isdigit() else f"{alias}.{c}"
                     for c in (c.strip() for c in columns.split(",")))


def _ancestors_sql(columns: str) -> str:
    names = ROW_COLUMNS  # the CTE's column names; `columns` may hold literals
    return (f"WITH RECURSIVE chain({names}, depth) AS ("
            f"SELECT {columns}, 0 FROM sessions WHERE id = ? UNION ALL "
            f"SELECT {prefixed(columns, 's')}, chain.depth + 1 "
            "FROM sessions s JOIN chain ON s.id = chain.parent_session_id WHERE chain.depth < ?) "
            f"SELECT {names} FROM chain")
#: Ancestors read ahead per lineage query (one recursive SQL statement instead of one per row).
READ_AHEAD = 256


def row_fetcher(conn: Any, columns: str = ROW_COLUMNS) -> Callable[[str], SessionRow | None]:
    """`session_row` bound to `conn`, tuned for lineage walks.

    A lookup reads one row. When the next lookup asks for the parent of the row just read (a
    walk going up a chain), it reads that parent and up to `READ_AHEAD` of its ancestors in one
    recursive query, and serves the following steps from that read-ahead: one SQL statement per
    256 sessions instead of one per session on deep chains, no extra cost on shallow ones. The
    caller (the lineage resolver) still sees one call per session, so its budget accounting is
    unchanged. `columns`: as for `session_row`.
    """
    ahead: dict[str, SessionRow] = {}
    last_parent: list[str | None] = [None]
    execute = conn.execute
    make = SessionRow._make
    one = f"SELECT {columns} FROM sessions WHERE id = ?"
    ancestors = _ancestors_sql(columns)

    def fetch(id: str) -> SessionRow | None:
        if not isinstance(id, str):
            return None
        row = ahead.pop(id, None)
        if row is None:
            walking = id == last_parent[0]
            try:
                rows = (execute(ancestors, (id, READ_AHEAD)).fetchall() if walking
                        else execute(one, (id,)).fetchall())
            except UnicodeEncodeError:
                return None
            if not rows:
                return None
            for r in rows[1:]:
                ahead.setdefault(r[0], make(r))
            row = make(rows[0])
        last_parent[0] = row.parent_session_id
        return row

    return fetch


def last_write(conn: Any, id: str) -> float | None:
    """When the session's latest signal or annotation was recorded, or None."""
    return conn.execute(
        "SELECT MAX(at) FROM (SELECT at FROM signals WHERE session_id = ?1 "
        "UNION ALL SELECT at FROM annotations WHERE session_id = ?1)", (id,)).fetchone()[0]


def snapshot(conn: Any, id: str, now: float, policy: SignalPolicy) -> SessionSnapshot | None:
    """The session's snapshot at `now`, or None when it does not exist (or `id` is not a str).

    An archived session answers with its frozen snapshot for any `now` at or after its end; an
    earlier `now` (`AS OF` the past) is computed from the stored detail like a closed session.
    """
    r = _lookup(conn, "SELECT status, ended_at, frozen_snapshot FROM sessions WHERE id = ?", id)
    if r is None:
        return None
    status, ended, frozen = r
    if status == "archived" and frozen and (ended is None or now >= ended):
        return SessionSnapshot.model_validate_json(frozen)
    return live_snapshot(conn, id, now, policy)


def live_snapshot(conn: Any, id: str, now: float, policy: SignalPolicy) -> SessionSnapshot:
    """The snapshot computed from the stored annotations and signals at `now` (the session must
    exist): annotations and signals recorded up to the reference time, signals decayed to it.
    A session that ended after `now` is shown as it was then: open, with no end."""
    (sid, agent, status, parent, source, end_reason, branched, delegate, started, ended,
     meta_json, _frozen, _title) = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (id,)).fetchone()
    if ended is not None and ended > now:  # `now` in the past (AS OF): it was still open
        status, end_reason, ended = "open", None, None
    ref = reference_time(now, status, ended)
    notes = [t for (t,) in conn.execute(
        "SELECT text FROM annotations WHERE session_id = ? AND at <= ? ORDER BY at, id",
        (sid, ref))]
    recs = [SignalRecord(name, value, at, ent, status, ended) for name, value, at, ent in
            conn.execute("SELECT name, value, at, entity FROM signals WHERE session_id = ? "
                         "AND at <= ? ORDER BY at, id", (sid, ref))]
    by_name: dict[str, list[float]] = {}
    by_entity: dict[str, list[float]] = {}
    for rec, v in zip(recs, decayed(recs, now, policy), strict=True):
        by_name.setdefault(rec.name, []).append(float(v))
        if rec.entity is not None:
            by_entity.setdefault(rec.entity, []).append(float(v))
    scores = {name: signal_sum(vs) for name, vs in by_name.items()}
    entities = {entity: signal_sum(vs) for entity, vs in by_entity.items()}
    return SessionSnapshot(
        id=sid, agent_id=agent, status=status, source=source, parent_session_id=parent,
        end_reason=end_reason, branched_from=branched, delegate_from=delegate,
        started_at=cast(datetime, to_datetime(started)), ended_at=to_datetime(ended),
        as_of=cast(datetime, to_datetime(ref)),  # both are finite: writes check them
        keywords=list(keywords_from(notes)), signal_scores=scores,
        velocity=scores.get("reward", 0.0), entities=entities,
        metadata=json.loads(meta_json or "{}"),
    )


def entity_sums(conn: Any, entities: list[str], names: list[str], now: float,
                policy: SignalPolicy) -> dict[str, dict[str, float]]:
    """Cross-session decayed sums `{name: {entity: sum}}` at `now` (SPEC §4.4): every stored
    signal of `names` on `entities`, each decayed to its own session's reference time."""
    if not entities or not names:
        return {}
    records: list[SignalRecord] = []
    name_marks = ",".join("?" * len(names))
    for start in range(0, len(entities), IN_CHUNK):
        chunk = entities[start:start + IN_CHUNK]
        sql = ("SELECT g.name, g.value, g.at, g.entity, s.status, s.ended_at "
               "FROM signals g JOIN sessions s ON s.id = g.session_id "
               f"WHERE g.entity IN ({','.join('?' * len(chunk))}) "
               f"AND g.name IN ({name_marks}) ORDER BY g.id")
        records.extend(SignalRecord(*r) for r in conn.execute(sql, [*chunk, *names]))
    parts: dict[str, dict[str, list[float]]] = {}
    for rec, v in zip(records, decayed(records, now, policy), strict=True):
        entity: str = rec.entity  # type: ignore[assignment]  # the IN list excludes NULL
        parts.setdefault(rec.name, {}).setdefault(entity, []).append(float(v))
    return {name: {entity: signal_sum(vs) for entity, vs in by_entity.items()}
            for name, by_entity in parts.items()}


def session_dicts(conn: Any) -> list[dict[str, Any]]:
    """Every session as a dict of its columns, ordered by started_at then id (times clamped
    into the valid range by `clamp_time`)."""
    cur = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY started_at, id")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    for row in rows:
        row["started_at"] = clamp_time(row["started_at"])
        row["ended_at"] = clamp_time(row["ended_at"])
    return rows
