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
from recallql.sessions.state import ROW_COLUMNS, prefixed

#: The columns this module maintains, with their declarations (added in this order).
COLUMNS: Final = (("conversation_root", "TEXT"), ("lineage_status", "TEXT"),
                  ("lineage_depth", "INTEGER"),
                  ("markers_unreadable", "INTEGER NOT NULL DEFAULT 0"))
STORED_COLUMNS: Final = "conversation_root, lineage_status, lineage_depth"
_UNRESOLVED: Final = {r.value: r for r in (UnresolvedReason.CYCLE,
                                            UnresolvedReason.MISSING_PARENT)}
#: The seeds and all their descendants. UNION ALL (no duplicate check) is exact here: every
#: session has one parent, so a non-seed is listed once per listing of its parent; the recursion
#: never steps onto a seed, so each seed is listed once; and a cycle can only be reached from one
#: of its own members (its sessions' parents are in the cycle), a seed, where the recursion stops.
_AFFECTED_SQL: Final = (
    "WITH RECURSIVE d(id) AS (SELECT value FROM json_each(?1) UNION ALL "
    "SELECT s.id FROM sessions s JOIN d ON s.parent_session_id = d.id "
    "WHERE s.id NOT IN (SELECT value FROM json_each(?1))) "
    f"SELECT {prefixed(ROW_COLUMNS, 's')}, {prefixed(STORED_COLUMNS, 's')} "
    "FROM d JOIN sessions s ON s.id = d.id")
_ROWS_SQL: Final = (f"SELECT {ROW_COLUMNS}, {STORED_COLUMNS} FROM sessions "
                    "WHERE id IN (SELECT value FROM json_each(?1))")
_UPDATE_SQL: Final = ("UPDATE sessions SET conversation_root = ?, lineage_status = ?, "
                      "lineage_depth = ? WHERE id = ?")
_N_ROW: Final = len(SessionRow._fields)


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
    """Add the lineage columns and their index where missing (inside a write transaction).

    Returns:
        True when columns were added (a store written by an earlier version).
    """
    present = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
    added = False
    for name, declaration in COLUMNS:
        if name not in present:
            conn.execute(f"ALTER TABLE sessions ADD COLUMN {name} {declaration}")
            added = True
    conn.execute("CREATE INDEX IF NOT EXISTS sessions_root ON sessions(conversation_root)")
    return added


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


def _columns(res: Resolution) -> tuple[str | None, str, int | None]:
    if res.resolved:
        return res.root, ResolutionStatus.RESOLVED.value, res.depth
    return None, str(res.reason), None


def refresh(conn: Any, seeds: Iterable[str]) -> RootUpdate:
    """Recompute the stored outcome of `seeds` and all their descendants (see the module
    docstring) and write the rows that changed, through `conn` (the caller's write transaction).

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
    changes = []
    for sid, res in new.items():
        values = _columns(res)
        if values != old.get(sid):
            changes.append((*values, sid))
    if changes:
        conn.executemany(_UPDATE_SQL, changes)
    return RootUpdate(affected=len(new), changed=len(changes))


def _read_raw(conn: Any, sql: str, ids: list[str]
              ) -> tuple[dict[str, SessionRow], dict[str, tuple]]:
    """Rows and their stored columns as read (compared as they are: no objects built)."""
    rows: dict[str, SessionRow] = {}
    old: dict[str, tuple] = {}
    make = SessionRow._make
    for values in conn.execute(sql, (json.dumps(ids),)):
        sid = values[0]
        rows[sid] = make(values[:_N_ROW])
        old[sid] = values[_N_ROW:]
    return rows, old


def _read(conn: Any, sql: str, ids: list[str]
          ) -> tuple[dict[str, SessionRow], dict[str, Resolution | None]]:
    rows, raw = _read_raw(conn, sql, ids)
    return rows, {sid: stored(values) for sid, values in raw.items()}


class _Outside:
    """Rows and stored outcomes of the parents of recomputed sessions that are not recomputed
    themselves, read in one query up front (and one per parent found later)."""

    def __init__(self, conn: Any, rows: dict[str, SessionRow]) -> None:
        self._conn = conn
        wanted = {r.parent_session_id for r in rows.values()} - set(rows) - {None}
        self.rows, self.old = _read(conn, _ROWS_SQL, sorted(wanted))  # type: ignore[arg-type]
        self._asked = set(wanted)

    def get(self, sid: str) -> tuple[SessionRow | None, Resolution | None]:
        if sid not in self._asked:
            self._asked.add(sid)
            rows, old = _read(self._conn, _ROWS_SQL, [sid])
            self.rows.update(rows)
            self.old.update(old)
        return self.rows.get(sid), self.old.get(sid)


def _resolve_all(rows: dict[str, SessionRow], outside: _Outside) -> dict[str, Resolution]:
    """The outcome of every session in `rows` (iterative walks, shared memo)."""
    done: dict[str, Resolution] = {}
    for start in list(rows):
        if start not in done:
            _walk(start, rows, outside, done)
    return done


def _walk(start: str, rows: dict[str, SessionRow], outside: _Outside,
          done: dict[str, Resolution]) -> None:
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
            return _settle(path, Resolution(sid, ResolutionStatus.RESOLVED), done, extend=False)
        in_rows = pid in rows
        parent, parent_old = (rows[pid], None) if in_rows else outside.get(pid)
        verdict = edge_verdict(row, parent)
        if verdict is not EdgeVerdict.CONTINUATION:
            return _settle(path, _stop(sid, verdict), done, extend=False)
        if pid in on_path:
            return _settle(path, _cycle(), done, extend=False)
        known = done.get(pid) if in_rows else parent_old
        if known is not None:
            return _settle(path, known, done, extend=True)
        if not in_rows:  # an unmaintained ancestor: compute (and write) it as well
            rows[pid] = parent  # type: ignore[assignment]  # the edge is a continuation
        sid = pid


def _stop(sid: str, verdict: EdgeVerdict) -> Resolution:
    """The outcome of a session whose parent link is not a continuation."""
    if verdict is EdgeVerdict.MISSING:
        return Resolution(None, ResolutionStatus.UNRESOLVED, UnresolvedReason.MISSING_PARENT)
    if verdict is EdgeVerdict.CYCLE:
        return _cycle()
    return Resolution(sid, ResolutionStatus.RESOLVED)


def _cycle() -> Resolution:
    return Resolution(None, ResolutionStatus.UNRESOLVED, UnresolvedReason.CYCLE)


def _settle(path: list[str], top: Resolution, done: dict[str, Resolution], *,
            extend: bool) -> None:
    """Give every session on `path` its outcome: `top` is the outcome of the session above
    ``path[-1]`` (`extend`) or of ``path[-1]`` itself; depth grows by one per step down."""
    depth = top.depth + 1 if extend else top.depth
    for sid in reversed(path):
        done[sid] = Resolution(top.root, top.status, top.reason, depth if top.resolved else 0)
        depth += 1
