"""Write-time lineage: every session row keeps its conversation root (SPEC §6, issue 14).

recallql owns its store, so it does not have to walk compression chains at query time: each row
of ``sessions`` holds the outcome of the walk (`recallql.sessions.lineage`), kept up to date by
every write that can change it. Columns (added to stores written by earlier versions when a
writer opens them, `ensure_schema`):

| column | meaning |
|---|---|
| ``conversation_root`` | the root's session id; NULL unless resolved |
| ``lineage_status`` | ``resolved``, ``cycle`` or ``missing_parent``; NULL: not maintained yet |
| ``lineage_depth`` | continuation edges from the session to its root; NULL unless resolved |
| ``markers_unreadable`` | 1 when the session's markers could not be read (no proven edge) |

A session's outcome depends only on its own row and its ancestors' rows. So after a write that
changes the lineage fields of some sessions (create, close with an end reason, archive, an
import, the links a sweep clears), `refresh` recomputes those sessions and **all their
descendants** (parent links of any kind, found with one recursive query), reading every other
ancestor's stored outcome instead of walking past it, and writes the rows whose outcome changed
in one ``executemany`` — inside the caller's write transaction, so a committed batch never holds
a stale root. Appending a session to a chain costs one lookup of its parent; changing the root of
a 10,000-deep chain rewrites 10,000 rows in one batch (see ``benchmarks/bench_lineage.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from recallql.sessions.edges import (
    EdgeVerdict,
    Resolution,
    ResolutionStatus,
    SessionRow,
    UnresolvedReason,
    edge_verdict,
)
from recallql.sessions.state import prefixed

#: The columns this module maintains, with their declarations (added in this order).
COLUMNS: Final = (("conversation_root", "TEXT"), ("lineage_status", "TEXT"),
                  ("lineage_depth", "INTEGER"),
                  ("markers_unreadable", "INTEGER NOT NULL DEFAULT 0"))
STORED_COLUMNS: Final = "conversation_root, lineage_status, lineage_depth"
_UNRESOLVED: Final = {r.value: r for r in (UnresolvedReason.CYCLE,
                                            UnresolvedReason.MISSING_PARENT)}
#: What the edge rule reads of a session (`edge_verdict`), in `SessionRow` field order up to
#: ``delegate_from``, then ``markers_unreadable``: narrower than `ROW_COLUMNS` (chain updates read
#: thousands of rows).
EDGE_COLUMNS: Final = ("id, parent_session_id, source, end_reason, branched_from, delegate_from, "
                       "markers_unreadable")
_N_EDGE: Final = 7
#: The seeds and all their descendants. UNION ALL (no duplicate check) is exact here: every
#: session has one parent, so a non-seed is listed once per listing of its parent; the recursion
#: never steps onto a seed, so each seed is listed once; and a cycle can only be reached from one
#: of its own members (its sessions' parents are in the cycle), a seed, where the recursion stops.
_AFFECTED_SQL: Final = (
    "WITH RECURSIVE d(id) AS (SELECT value FROM json_each(?1) UNION ALL "
    "SELECT s.id FROM sessions s JOIN d ON s.parent_session_id = d.id "
    "WHERE s.id NOT IN (SELECT value FROM json_each(?1))) "
    f"SELECT {prefixed(EDGE_COLUMNS, 's')}, {prefixed(STORED_COLUMNS, 's')} "
    "FROM d JOIN sessions s ON s.id = d.id")
_ROWS_SQL: Final = (f"SELECT {EDGE_COLUMNS}, {STORED_COLUMNS} FROM sessions "
                    "WHERE id IN (SELECT value FROM json_each(?1))")
#: Writes ``[[root, status, depth, id], ...]`` (one JSON array) in one statement.
_UPDATE_SQL: Final = ("UPDATE sessions SET conversation_root = c.value ->> 0, "
                      "lineage_status = c.value ->> 1, lineage_depth = c.value ->> 2 "
                      "FROM json_each(?1) AS c WHERE sessions.id = c.value ->> 3")


@dataclass(frozen=True, slots=True)
class RootUpdate:
    """What one `refresh` did.

    Attributes:
        affected: Sessions recomputed (the changed sessions and all their descendants).
        changed: Rows whose stored outcome changed (rewritten).
    """

    affected: int = 0
    changed: int = 0


def has_columns(conn: Any) -> bool:
    """Whether the store's ``sessions`` table has the write-time lineage columns."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
    return all(name in present for name, _ in COLUMNS)


def ensure_schema(conn: Any) -> bool:
    """Add the lineage columns where missing (inside a write transaction). No index on the
    root: statements look roots up by session id, and an index would cost every chain update
    one index entry per session moved.

    Returns:
        True when columns were added (a store written by an earlier version).
    """
    present = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
    added = False
    for name, declaration in COLUMNS:
        if name not in present:
            conn.execute(f"ALTER TABLE sessions ADD COLUMN {name} {declaration}")
            added = True
    return added


def up_to_date(conn: Any) -> bool:
    """Whether the columns exist and every session has its outcome (then opening writes
    nothing, and takes no writer lock)."""
    return has_columns(conn) and conn.execute(
        "SELECT 1 FROM sessions WHERE lineage_status IS NULL LIMIT 1").fetchone() is None


def heal(conn: Any) -> RootUpdate:
    """Compute the outcome of every session that has none (rows written before the columns
    existed, or by a tool that bypassed recallql), with their descendants."""
    ids = [sid for (sid,) in conn.execute(
        "SELECT id FROM sessions WHERE lineage_status IS NULL")]
    return refresh(conn, ids)


def stored(values: tuple) -> Resolution | None:
    """The stored outcome from ``(conversation_root, lineage_status, lineage_depth)``; None when
    it was never computed."""
    root, status, depth = values
    if status is None:
        return None
    if status == ResolutionStatus.RESOLVED.value:
        return Resolution(root, ResolutionStatus.RESOLVED, None, int(depth or 0))
    return Resolution(None, ResolutionStatus.UNRESOLVED, _UNRESOLVED.get(status))


def read_stored(conn: Any, ids: list[str]) -> dict[str, Resolution | None]:
    """The stored outcome of each session of `ids` that exists (None: never computed)."""
    return _read(conn, _ROWS_SQL, ids)[1]


def refresh(conn: Any, seeds: Iterable[str]) -> RootUpdate:
    """Recompute the stored outcome of `seeds` and all their descendants (see the module
    docstring) and write the rows that changed, through `conn` (the caller's write transaction).

    Outcomes are handled as the stored column values ``(conversation_root, lineage_status,
    lineage_depth)`` throughout (no objects per session), and written with one ``UPDATE ...
    FROM json_each(?)`` statement.

    Args:
        seeds: Ids of sessions whose own lineage fields were written (ids with no row are
            ignored).

    Returns:
        The `RootUpdate`.
    """
    ids = list(dict.fromkeys(seeds))
    if not ids:
        return RootUpdate()
    rows, old = _read_raw(conn, _AFFECTED_SQL, ids)
    outside = _Outside(conn, rows)
    new = _resolve_all(rows, outside)
    changes = [[*values, sid] for sid, values in new.items() if values != old.get(sid)]
    if changes:
        conn.execute(_UPDATE_SQL, (json.dumps(changes),))
    return RootUpdate(affected=len(new), changed=len(changes))


def _read_raw(conn: Any, sql: str, ids: list[str]
              ) -> tuple[dict[str, SessionRow], dict[str, tuple]]:
    """Rows and their stored columns as read (compared as they are: no objects built)."""
    rows: dict[str, SessionRow] = {}
    old: dict[str, tuple] = {}
    for values in conn.execute(sql, (json.dumps(ids),)):
        sid, parent, source, reason, branched, delegate, unreadable = values[:_N_EDGE]
        rows[sid] = SessionRow(sid, parent, source, reason, branched, delegate,
                               markers_unreadable=unreadable)
        old[sid] = values[_N_EDGE:]
    return rows, old


def _read(conn: Any, sql: str, ids: list[str]
          ) -> tuple[dict[str, SessionRow], dict[str, Resolution | None]]:
    rows, raw = _read_raw(conn, sql, ids)
    return rows, {sid: stored(values) for sid, values in raw.items()}


#: Outcomes as stored: ``(conversation_root, lineage_status, lineage_depth)``.
Stored = tuple[str | None, str, int | None]
_RESOLVED: Final = ResolutionStatus.RESOLVED.value
_CYCLE: Final = (None, UnresolvedReason.CYCLE.value, None)
_MISSING_PARENT: Final = (None, UnresolvedReason.MISSING_PARENT.value, None)


class _Outside:
    """Rows and stored outcomes of the parents of recomputed sessions that are not recomputed
    themselves, read in one query up front (and one per parent found later)."""

    def __init__(self, conn: Any, rows: dict[str, SessionRow]) -> None:
        self._conn = conn
        wanted = {r.parent_session_id for r in rows.values()} - set(rows) - {None}
        self.rows, self.old = _read_raw(conn, _ROWS_SQL, sorted(wanted))  # type: ignore[arg-type]
        self._asked = set(wanted)

    def get(self, sid: str) -> tuple[SessionRow | None, tuple | None]:
        if sid not in self._asked:
            self._asked.add(sid)
            rows, old = _read_raw(self._conn, _ROWS_SQL, [sid])
            self.rows.update(rows)
            self.old.update(old)
        found = self.old.get(sid)
        return self.rows.get(sid), None if found is None or found[1] is None else found


def _resolve_all(rows: dict[str, SessionRow], outside: _Outside) -> dict[str, Stored]:
    """The outcome of every session in `rows` (iterative walks, shared memo)."""
    done: dict[str, Stored] = {}
    for start in list(rows):
        if start not in done:
            _walk(start, rows, outside, done)
    return done


def _walk(start: str, rows: dict[str, SessionRow], outside: _Outside,
          done: dict[str, Stored]) -> None:
    """Walk up from `start` until an outcome is known, then settle the whole path.

    An ancestor that is not being recomputed contributes its stored outcome; one that has none
    (never maintained) is pulled into `rows` and walked, so it is written too.
    """
    path: list[str] = []
    on_path: set[str] = set()
    sid = start
    while True:
        path.append(sid)
        on_path.add(sid)
        row = rows[sid]
        pid = row.parent_session_id
        if pid is None:
            return _settle(path, (sid, _RESOLVED, 0), done, extend=False)
        in_rows = pid in rows
        parent, parent_old = (rows[pid], None) if in_rows else outside.get(pid)
        verdict = edge_verdict(row, parent)
        if verdict is not EdgeVerdict.CONTINUATION:
            return _settle(path, _stop(sid, verdict), done, extend=False)
        if pid in on_path:
            return _settle(path, _CYCLE, done, extend=False)
        known = done.get(pid) if in_rows else parent_old
        if known is not None:
            return _settle(path, known, done, extend=True)
        if not in_rows:  # an unmaintained ancestor: compute (and write) it as well
            rows[pid] = parent  # type: ignore[assignment]  # the edge is a continuation
        sid = pid


def _stop(sid: str, verdict: EdgeVerdict) -> Stored:
    """The outcome of a session whose parent link is not a continuation."""
    if verdict is EdgeVerdict.MISSING:
        return _MISSING_PARENT
    if verdict is EdgeVerdict.CYCLE:
        return _CYCLE
    return (sid, _RESOLVED, 0)


def _settle(path: list[str], top: tuple, done: dict[str, Stored], *, extend: bool) -> None:
    """Give every session on `path` its outcome: `top` is the outcome of the session above
    ``path[-1]`` (`extend`) or of ``path[-1]`` itself; depth grows by one per step down."""
    root, status, depth = top
    if status != _RESOLVED:
        for sid in path:
            done[sid] = (None, status, None)
        return
    depth = int(depth) + 1 if extend else int(depth)
    for sid in reversed(path):
        done[sid] = (root, _RESOLVED, depth)
        depth += 1
