"""Conversation roots for a statement, read from the stored columns (SPEC §6, issue 14).

`StoredRoots` is a drop-in for `recallql.sessions.lineage.LineageResolver` (the same `resolve`,
`row`, `ancestors` and `stats`), so the engine's conversation operators and `LiveContext` work
unchanged: a hit's root is one indexed lookup of its session row (`recallql.sessions.roots` keeps
it at write time), memoised per statement. No walk, no budget, no truncation. A session whose
root was never stored (a row written behind recallql's back) is resolved by the query-time walk,
under the statement's budget; that is the only place the budget still applies.

The live context's generic ancestors are the ancestors of the current conversation's root, read
with one recursive query (cycle-safe, no step limit): the sessions between the current session
and its root belong to the current conversation, which is live as a whole anyway.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Protocol

from recallql.sessions.edges import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_STEPS,
    Resolution,
    ResolutionStatus,
    SessionRow,
    UnresolvedReason,
)
from recallql.sessions.lineage import LineageResolver, LineageStats, record
from recallql.sessions.roots import STORED_COLUMNS, stored
from recallql.sessions.state import ROW_COLUMNS, row_fetcher

_N_ROW: Final = len(SessionRow._fields)
_LOOKUP_SQL: Final = f"SELECT {ROW_COLUMNS}, {STORED_COLUMNS} FROM sessions WHERE id = ?"
_MANY_SQL: Final = (f"SELECT {ROW_COLUMNS}, {STORED_COLUMNS} FROM sessions "
                    "WHERE id IN (SELECT value FROM json_each(?1))")
_ANCESTORS_SQL: Final = (
    "WITH RECURSIVE up(id) AS ("
    "SELECT parent_session_id FROM sessions WHERE id = ?1 AND parent_session_id IS NOT NULL "
    "UNION SELECT s.parent_session_id FROM sessions s JOIN up ON s.id = up.id "
    "WHERE s.parent_session_id IS NOT NULL) "
    "SELECT up.id FROM up JOIN sessions s ON s.id = up.id")
_MISSING: Final = Resolution(None, ResolutionStatus.UNRESOLVED, UnresolvedReason.MISSING_SESSION)


class RootResolver(Protocol):
    """What the engine asks of a statement's lineage (`LineageResolver` and `StoredRoots`)."""

    stats: LineageStats

    def resolve(self, session_id: str) -> Resolution:
        """The session's conversation root (or why it has none)."""

    def row(self, session_id: str) -> SessionRow | None:
        """The session's row if it has been read for this statement."""

    def ancestors(self, session_id: str, max_steps: int = DEFAULT_MAX_STEPS) -> frozenset[str]:
        """The session's generic ancestors (parent links of any kind)."""

    def prefetch(self, session_ids: Sequence[str]) -> None:
        """Read ahead the sessions a walk is about to resolve (a hint; may do nothing)."""


class StoredRoots:
    """A statement's conversation roots from the stored columns (see the module docstring).

    Args:
        conn: The statement's read connection (inside its read transaction).
        budget: The statement's lineage budget B; spent only by walks for sessions without a
            stored root.
    """

    def __init__(self, conn: Any, budget: int = DEFAULT_BUDGET) -> None:
        self._conn = conn
        self._walker = LineageResolver(row_fetcher(conn), budget)
        self.stats = self._walker.stats  # one set of counters for stored reads and walks
        self._rows: dict[str, SessionRow | None] = {}
        self._memo: dict[str, Resolution] = {}
        self._walked: set[str] = set()
        self._read: dict[str, Resolution | None] = {}
        self._ahead: dict[str, tuple | None] = {}  # prefetched values, turned into rows on use

    def resolve(self, session_id: str) -> Resolution:
        """The session's stored root; the walk (budgeted) when none is stored; a session with
        no row is unresolved (``missing_session``)."""
        hit = self._memo.get(session_id)
        if hit is not None:
            self.stats.memo_hits += 1
            return record(self.stats, hit)
        res = self._stored(session_id)
        if res is None:  # never maintained: the query-time walk decides (and may run out)
            res = self._walker.resolve(session_id)  # counted by the walker
            if res.status is not ResolutionStatus.BUDGET_EXHAUSTED:
                self._memo[session_id] = res
                self._walked.add(session_id)
            return res
        self._memo[session_id] = res
        if res is not _MISSING:
            self.stats.stored += 1
        return record(self.stats, res)

    def row(self, session_id: str) -> SessionRow | None:
        """The session's row if `resolve` or `prefetch` has read it (no read of its own)."""
        if session_id in self._ahead:
            self._stored(session_id)
        found = self._rows.get(session_id)
        return found if found is not None else self._walker.row(session_id)

    def ancestors(self, session_id: str, max_steps: int = DEFAULT_MAX_STEPS) -> frozenset[str]:
        """The generic ancestors that matter to the live context: those of the session's
        conversation root (every session between the session and its root shares that root).
        Empty when the session is not resolved. Counts no resolution (the caller resolves the
        session itself). `max_steps` bounds only a walk, for a session whose root is not
        stored; the recursive query over stored roots has no step limit."""
        res = self._memo.get(session_id) or self._stored(session_id)
        if res is None or session_id in self._walked:
            return self._walker.ancestors(session_id, max_steps)  # no stored root: the walk
        if not res.resolved:
            return frozenset()
        return frozenset(sid for (sid,) in self._conn.execute(_ANCESTORS_SQL, (res.root,)))

    def prefetch(self, session_ids: Sequence[str]) -> None:
        """Read the rows and stored roots of `session_ids` not read yet, in one query (the
        conversation operators call it with each head of hits they are about to walk); the
        values become rows only when a session is resolved."""
        ahead, read = self._ahead, self._read
        wanted = [sid for sid in dict.fromkeys(session_ids)
                  if isinstance(sid, str) and sid not in read and sid not in ahead]
        if not wanted:
            return
        try:
            found = self._conn.execute(_MANY_SQL, (json.dumps(wanted),)).fetchall()
        except UnicodeEncodeError:  # an id SQLite cannot hold: read one by one instead
            return
        ahead.update(dict.fromkeys(wanted))
        ahead.update((values[0], values) for values in found)

    def _stored(self, session_id: str) -> Resolution | None:
        """The session's stored outcome (``missing_session`` without a row; None when it has
        no stored root), reading its row once per statement."""
        if session_id not in self._read:
            if session_id in self._ahead:
                values = self._ahead.pop(session_id)
            else:
                values = self._lookup(session_id)
            if values is None:
                self._rows[session_id] = None
                self._read[session_id] = _MISSING
            else:
                self._rows[session_id] = SessionRow._make(values[:_N_ROW])
                self._read[session_id] = stored(values[_N_ROW:])
        return self._read[session_id]

    def _lookup(self, session_id: str) -> tuple | None:
        if not isinstance(session_id, str):
            return None
        try:
            return self._conn.execute(_LOOKUP_SQL, (session_id,)).fetchone()
        except UnicodeEncodeError:
            return None


#: Per conversation root, the smallest depth of its sessions that ended after a time.
_ENDED_AFTER_SQL: Final = ("SELECT conversation_root, min(lineage_depth) FROM sessions "
                           "WHERE ended_at > ?1 AND lineage_status = 'resolved' "
                           "GROUP BY conversation_root")


class AsOfRoots(LineageResolver):
    """A statement's conversation roots as they were at `at` (``AS OF``): the walk over the
    session rows as they were then (a session that ended after `at` was open, so an edge to it
    was no continuation and its hits were live), shortened by the stored roots that still hold.

    A stored root r holds at `at` for a session whose path to r passes no session that ended
    after `at`: every session of a conversation none of whose sessions ended later, and in a
    conversation where some did, every session no deeper than the shallowest of them (its
    ancestors are shallower still). Those sessions are answered from their stored root (no
    budget); the walk (budget B) covers the rest and stops at them.

    Args:
        conn: The statement's read connection (inside its read transaction).
        at: The statement's ``AS OF`` time, epoch seconds UTC.
        budget: The lineage budget B of the walk.
    """

    def __init__(self, conn: Any, at: float, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(self._fetch_at, budget)
        self._conn = conn
        self._at = at
        self._floor = dict(conn.execute(_ENDED_AFTER_SQL, (at,)).fetchall())

    def resolve(self, session_id: str) -> Resolution:
        """The session's root at `at` (see the class docstring)."""
        if session_id not in self._memo and session_id not in self._rows:
            row = self._fetch_at(session_id)  # read outside the budget, as a stored lookup
            self._rows[session_id] = row
            hit = self._memo.get(session_id)
            if hit is not None:
                self.stats.stored += 1
                return record(self.stats, hit)
        return super().resolve(session_id)

    def _fetch_at(self, session_id: str) -> SessionRow | None:
        """The row as it was at `at`; memoises its stored root when that still holds."""
        if not isinstance(session_id, str):
            return None
        try:
            values = self._conn.execute(_LOOKUP_SQL, (session_id,)).fetchone()
        except UnicodeEncodeError:
            return None
        if values is None:
            return None
        row = SessionRow._make(values[:_N_ROW])
        res = stored(values[_N_ROW:])
        if res is not None and res.resolved and res.root is not None \
                and res.depth <= self._floor.get(res.root, res.depth):
            self._memo.setdefault(session_id, res)
        if row.ended_at is not None and row.ended_at > self._at:
            return row._replace(status="open", end_reason=None, ended_at=None)
        return row
