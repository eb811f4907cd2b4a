"""The lineage side of `db.sessions` (`Sessions` inherits it): stored conversation roots, the
statement's resolver, and the lineage check (SPEC §6, issue 14).

- `prepare` runs when the database opens: a writer adds the write-time lineage columns to a store
  an earlier version wrote and computes every root not stored yet (`recallql.sessions.roots`);
- `resolver` gives a statement its roots: `StoredRoots` (no walk, no budget), or the query-time
  walk (`LineageResolver`, budget B) on a store whose roots are not stored (an older version's
  database opened read-only);
- `verify_lineage` walks every session's edges and compares them with the stored roots.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from recallql.sessions import roots, state
from recallql.sessions.lineage import (
    DEFAULT_BUDGET,
    LineageReport,
    LineageResolver,
    Resolution,
    SessionRow,
    verify,
)
from recallql.sessions.stored import AsOfRoots, StoredRoots


def _as_at(fetch: Callable[[str], SessionRow | None], at: float
           ) -> Callable[[str], SessionRow | None]:
    """`fetch` returning each row as it was at `at` (epoch seconds UTC): a session that ended
    after `at` was still open then."""
    def fetch_at(session_id: str) -> SessionRow | None:
        row = fetch(session_id)
        if row is not None and row.ended_at is not None and row.ended_at > at:
            return row._replace(status="open", end_reason=None, ended_at=None)
        return row
    return fetch_at


class LineageAccess:
    """Mixed into `Sessions`; uses its `_meta` (the `MetaStore`) and `_write`."""

    _meta: Any
    _stored_roots: bool | None = None  # known after `prepare` (or the first read)

    def _write(self, action: str) -> AbstractContextManager[Any]:
        raise NotImplementedError  # `Sessions._write`

    def prepare(self, writable: bool) -> None:
        """Bring the sessions table up to date when the database opens: on a writer whose store
        needs it (nothing is written otherwise), add the write-time lineage columns to a store
        an earlier version wrote and compute every root that is not stored yet (one
        transaction); on a reader, note whether roots are stored (if not, statements walk
        lineage at query time, as earlier versions did).

        Raises:
            StoreError: the store cannot be written.
        """
        with self._meta.read_transaction() as conn:
            current = roots.up_to_date(conn)
        if writable and not current:  # only then a write (and the writer lock)
            with self._write("store conversation roots") as conn:
                roots.ensure_schema(conn)
                roots.heal(conn)
        with self._meta.read_transaction() as conn:
            self._stored_roots = roots.has_columns(conn)

    def _has_roots(self, conn: Any) -> bool:
        if self._stored_roots is None:
            self._stored_roots = roots.has_columns(conn)
        return self._stored_roots

    def _columns(self, conn: Any) -> str:
        return state.ROW_COLUMNS if self._has_roots(conn) else state.LEGACY_ROW_COLUMNS

    def fetcher(self, conn: Any) -> Callable[[str], SessionRow | None]:
        """A `fetch(session_id)` for the lineage resolver, reading through `conn` (one prepared
        statement; this is the per-session cost of every lineage walk)."""
        return state.row_fetcher(conn, self._columns(conn))

    def resolver(self, conn: Any, budget: int = DEFAULT_BUDGET, as_of: float | None = None
                 ) -> StoredRoots | LineageResolver:
        """A statement's conversation roots, reading through `conn` (its read transaction): the
        stored roots (`StoredRoots`: no walk, no budget), or the query-time walk with budget B
        on a store whose roots are not stored (an older version's database opened read-only).

        `as_of` (epoch seconds UTC, a statement's ``AS OF``): lineage as it was then. The
        stored roots are today's; when a session ended after `as_of` (it was open then, so an
        edge to it was no continuation and its hits were live), `AsOfRoots` walks the rows as
        they were at `as_of` (such a session's end undone; budget B) where the stored roots
        no longer hold, and reads them where they do.
        """
        if as_of is not None and conn.execute(
                "SELECT 1 FROM sessions WHERE ended_at > ? LIMIT 1", (as_of,)).fetchone():
            if self._has_roots(conn):
                return AsOfRoots(conn, as_of, budget)
            return LineageResolver(_as_at(self.fetcher(conn), as_of), budget)
        if self._has_roots(conn):
            return StoredRoots(conn, budget)
        return LineageResolver(self.fetcher(conn), budget)

    def stored_roots(self, conn: Any, ids: list[str]) -> dict[str, Resolution | None]:
        """The stored root of each session of `ids` that exists (None: not stored)."""
        if not self._has_roots(conn):
            return dict.fromkeys(ids)
        return roots.read_stored(conn, ids)

    def verify_lineage(self) -> LineageReport:
        """Walk every session's edges and compare them with the stored roots, in one read
        transaction (`recallql.sessions.lineage.verify`; the lineage section of a store check).
        """
        with self._meta.read_transaction() as conn:
            rows = [SessionRow._make(r) for r in conn.execute(
                f"SELECT {self._columns(conn)} FROM sessions")]
            stored = self.stored_roots(conn, [r.id for r in rows])
        return verify(rows, stored)
