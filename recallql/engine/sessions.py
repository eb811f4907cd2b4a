"""Sessions: lifecycle, annotations, signals, snapshots (SPEC §2, §4.3, §4.4; issue 5).

Persisted in the metadata store's `sessions`, `annotations` and `signals` tables; every write is
one SQLite transaction, so a rejected write leaves nothing behind. Times are epoch seconds UTC in
storage and aware UTC datetimes in snapshots.

Lifecycle: `open` → `closed` (end_reason, ended_at) → `archived` (the snapshot at `ended_at` is
frozen and persisted; FOR SESSION on an archived session uses it, so it ranks exactly as it did when
it closed). `sweep(older_than)` removes sessions that ended (or, if still open, started) before the
retention; statements naming a swept session degrade with `SESSION_NOT_FOUND`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from recallql.engine.lineage import SessionRow
from recallql.engine.models import SessionSnapshot
from recallql.engine.operators.base import SessionState
from recallql.engine.signals import (
    SignalPolicy,
    SignalRecord,
    decayed,
    keywords_from,
    reference_time,
    validate_id,
)
from recallql.index.errors import SignalRejected

SESSION_COLUMNS = ("id, agent_id, status, parent_session_id, source, end_reason, branched_from, "
                   "delegate_from, started_at, ended_at, metadata, frozen_snapshot, title")


class SessionError(ValueError):
    """A session lifecycle mistake: duplicate id, wrong state, invalid id or time."""


class SessionNotFound(SessionError, LookupError):
    """No session with that id (never created, or swept)."""


class MetaStore(Protocol):
    """What sessions need of the metadata store."""

    def transaction(self) -> AbstractContextManager[Any]: ...

    def read_transaction(self) -> AbstractContextManager[Any]: ...


def to_epoch(value: datetime | float | int | None, default: float, what: str) -> float:
    """A time argument as epoch seconds UTC (naive datetimes are UTC).

    Raises:
        SessionError: not a datetime or a finite number.
    """
    if value is None:
        return default
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise SessionError(f"{what} must be a datetime or epoch seconds, got {value!r}")


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


class Sessions:
    """`db.sessions`: the session lifecycle and the per-statement session state.

    Args:
        meta: the metadata store (transactions on its SQLite connection).
        policy: the signal policy.
        clock: returns "now" in epoch seconds UTC (tests pin it).
    """

    def __init__(self, meta: MetaStore, policy: SignalPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._meta = meta
        self.policy = policy or SignalPolicy()
        self._clock = clock

    # -- lifecycle ---------------------------------------------------------------------------

    def create(self, id: str, agent_id: str, parent: str | None = None, source: str = "cli",
               started_at: datetime | float | None = None, branched_from: str | None = None,
               delegate_from: str | None = None, metadata: dict[str, Any] | None = None,
               title: str | None = None) -> SessionSnapshot:
        """Create an open session. Raises `SessionError` on a bad or duplicate id."""
        validate = self._validate
        validate(id, "session id")
        validate(agent_id, "agent id")
        for what, ref in (("parent", parent), ("branched_from", branched_from),
                          ("delegate_from", delegate_from)):
            if ref is not None:
                validate(ref, f"{what} session id")
        started = to_epoch(started_at, self._clock(), "started_at")
        meta_json = json.dumps(metadata or {}, default=str)
        with self._meta.transaction() as conn:
            if self._row(conn, id) is not None:
                raise SessionError(f"session {id!r} already exists")
            conn.execute(
                "INSERT INTO sessions (id, agent_id, status, parent_session_id, source, "
                "branched_from, delegate_from, started_at, metadata, title) "
                "VALUES (?, ?, 'open', ?, ?, ?, ?, ?, ?, ?)",
                (id, agent_id, parent, source, branched_from, delegate_from, started, meta_json,
                 title),
            )
        return self.snapshot(id, as_of=max(started, self._clock()))

    def annotate(self, id: str, text: str, at: datetime | float | None = None) -> None:
        """Add annotation text (its whitespace-separated words become session keywords)."""
        if not isinstance(text, str) or not text.strip():
            raise SessionError("annotation text must be a non-empty string")
        when = to_epoch(at, self._clock(), "at")
        with self._meta.transaction() as conn:
            self._require_open(conn, id, "annotate")
            conn.execute("INSERT INTO annotations (session_id, text, at) VALUES (?, ?, ?)",
                         (id, text, when))

    def signal(self, id: str, name: str, value: float, entity: str | None = None,
               at: datetime | float | None = None) -> None:
        """Record a signal, e.g. `reward 1.0` on entity `doc:42`.

        Raises:
            SignalRejected: naming the policy rule (unknown session, session not open, unknown
                name, non-finite or out-of-bounds value); nothing is written.
        """
        when = to_epoch(at, self._clock(), "at")
        if entity is not None and not isinstance(entity, str):
            raise SignalRejected(f"signal rejected (rule bad_entity): entity {entity!r} is not "
                                 "a string")
        with self._meta.transaction() as conn:
            row = self._row(conn, id)
            number = self.policy.check(id, name, value, row.status if row else None)
            if row is not None and when < (row.started_at or when):
                raise SignalRejected(f"signal rejected (rule before_start): at {when} is before "
                                     f"session {id!r} started")
            conn.execute("INSERT INTO signals (session_id, name, value, at, entity) "
                         "VALUES (?, ?, ?, ?, ?)", (id, name, number, when, entity))

    def close(self, id: str, end_reason: str = "user_exit",
              at: datetime | float | None = None) -> SessionSnapshot:
        """Close an open session with `end_reason` at `at` (default now)."""
        when = to_epoch(at, self._clock(), "at")
        if not isinstance(end_reason, str) or not end_reason:
            raise SessionError("end_reason must be a non-empty string")
        with self._meta.transaction() as conn:
            row = self._require_open(conn, id, "close")
            if when < (row.started_at or when):
                raise SessionError(f"cannot close session {id!r} before it started")
            conn.execute("UPDATE sessions SET status = 'closed', end_reason = ?, ended_at = ? "
                         "WHERE id = ?", (end_reason, when, id))
        return self.snapshot(id, as_of=when)

    def archive(self, id: str) -> SessionSnapshot:
        """Archive a session: closes it first if open (end_reason `archived`), then freezes and
        persists its snapshot at `ended_at`. Returns the frozen snapshot."""
        with self._meta.read_transaction() as conn:
            row = self._row(conn, id)
        if row is None:
            raise SessionNotFound(f"no session {id!r}")
        if row.status == "archived":
            return self.snapshot(id)
        if row.status == "open":
            self.close(id, end_reason="archived")
        frozen = self.snapshot(id)
        with self._meta.transaction() as conn:
            conn.execute("UPDATE sessions SET status = 'archived', frozen_snapshot = ? "
                         "WHERE id = ?", (frozen.model_dump_json(), id))
        return frozen.model_copy(update={"status": "archived"})

    def sweep(self, older_than: timedelta | float) -> int:
        """Remove sessions that ended (open ones: started) more than `older_than` ago, with their
        annotations and signals. `older_than` is a timedelta or a number of days. Returns the
        number of sessions removed."""
        days = older_than.total_seconds() / 86400 if isinstance(older_than, timedelta) \
            else float(older_than)
        if not math.isfinite(days) or days < 0:
            raise SessionError(f"older_than must be a non-negative duration, got {older_than!r}")
        cutoff = self._clock() - days * 86400
        with self._meta.transaction() as conn:
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM sessions WHERE COALESCE(ended_at, started_at) < ?", (cutoff,))]
            for chunk in _chunks(ids, 500):
                marks = ",".join("?" * len(chunk))
                for table, col in (("signals", "session_id"), ("annotations", "session_id"),
                                   ("sessions", "id")):
                    conn.execute(f"DELETE FROM {table} WHERE {col} IN ({marks})", chunk)
        return len(ids)

    # -- reads -------------------------------------------------------------------------------

    def snapshot(self, id: str, as_of: datetime | float | None = None) -> SessionSnapshot:
        """The session's state at `as_of` (default now). Raises `SessionNotFound`."""
        now = to_epoch(as_of, self._clock(), "as_of")
        with self._meta.read_transaction() as conn:
            found = self._snapshot(conn, id, now)
        if found is None:
            raise SessionNotFound(f"no session {id!r}")
        return found

    def state(self, id: str, now_ts: float) -> tuple[SessionState, SessionSnapshot] | None:
        """The session boost's inputs and the snapshot for a statement, or None if not found."""
        with self._meta.read_transaction() as conn:
            snap = self._snapshot(conn, id, now_ts)
        if snap is None:
            return None
        return SessionState(snap.id, tuple(snap.keywords), snap.velocity, dict(snap.entities)), snap

    def get(self, id: str) -> SessionRow | None:
        """The session's lineage row, or None."""
        with self._meta.read_transaction() as conn:
            return self._row(conn, id)

    def fetcher(self, conn: Any) -> Callable[[str], SessionRow | None]:
        """A `fetch(session_id)` for the lineage resolver, reading through `conn`."""
        return lambda sid: self._row(conn, sid)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every session as a dict (for SHOW SESSIONS), ordered by started_at then id."""
        with self._meta.read_transaction() as conn:
            cur = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY started_at, id")
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        yield from rows

    def entity_sums(self, entities: list[str], names: list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        """Cross-session decayed sums `{name: {entity: sum}}` (SPEC §4.4), each session's signals
        decayed to its reference time (frozen at `ended_at` once closed)."""
        if not entities or not names:
            return {}
        wanted = set(entities)
        records: list[tuple[str, SignalRecord]] = []
        name_marks = ",".join("?" * len(names))
        with self._meta.read_transaction() as conn:
            sql = ("SELECT g.entity, g.name, g.value, g.at, s.status, s.ended_at FROM signals g "
                   f"JOIN sessions s ON s.id = g.session_id WHERE g.name IN ({name_marks})")
            if len(wanted) <= 500:
                sql += f" AND g.entity IN ({','.join('?' * len(wanted))})"
                params = [*names, *sorted(wanted)]
            else:
                params = list(names)
            for ent, name, value, at, status, ended in conn.execute(sql, params):
                if ent in wanted:
                    records.append((ent, SignalRecord(name, value, at, ent, status, ended)))
        values = decayed([r for _, r in records], now_ts, self.policy)
        out: dict[str, dict[str, float]] = {}
        for (ent, rec), v in zip(records, values, strict=True):
            by_entity = out.setdefault(rec.name, {})
            by_entity[ent] = by_entity.get(ent, 0.0) + float(v)
        return out

    # -- internals ---------------------------------------------------------------------------

    def _validate(self, value: object, what: str) -> str:
        try:
            return validate_id(value, what)
        except ValueError as exc:
            raise SessionError(str(exc)) from None

    @staticmethod
    def _row(conn: Any, id: str) -> SessionRow | None:
        r = conn.execute("SELECT id, parent_session_id, source, end_reason, branched_from, "
                         "delegate_from, status, started_at, ended_at FROM sessions WHERE id = ?",
                         (id,)).fetchone()
        return None if r is None else SessionRow(*r)

    def _require_open(self, conn: Any, id: str, action: str) -> SessionRow:
        row = self._row(conn, id)
        if row is None:
            raise SessionNotFound(f"cannot {action}: no session {id!r}")
        if row.status != "open":
            raise SessionError(f"cannot {action} session {id!r}: it is {row.status}")
        return row

    def _snapshot(self, conn: Any, id: str, now: float) -> SessionSnapshot | None:
        r = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (id,)).fetchone()
        if r is None:
            return None
        (sid, agent, status, parent, source, end_reason, branched, delegate, started, ended,
         meta_json, frozen, _title) = r
        if status == "archived" and frozen:
            return SessionSnapshot.model_validate_json(frozen).model_copy(
                update={"status": "archived"})
        ref = reference_time(now, status, ended)
        notes = [t for (t,) in conn.execute(
            "SELECT text FROM annotations WHERE session_id = ? AND at <= ? ORDER BY at, id",
            (sid, ref))]
        recs = [SignalRecord(name, value, at, ent, status, ended) for name, value, at, ent in
                conn.execute("SELECT name, value, at, entity FROM signals WHERE session_id = ? "
                             "ORDER BY at, id", (sid,))]
        values = decayed(recs, now, self.policy)
        scores: dict[str, float] = {}
        entities: dict[str, float] = {}
        for rec, v in zip(recs, values, strict=True):
            scores[rec.name] = scores.get(rec.name, 0.0) + float(v)
            if rec.entity is not None:
                entities[rec.entity] = entities.get(rec.entity, 0.0) + float(v)
        return SessionSnapshot(
            id=sid, agent_id=agent, status=status, source=source, parent_session_id=parent,
            end_reason=end_reason, branched_from=branched, delegate_from=delegate,
            started_at=_dt(started), ended_at=_dt(ended), as_of=_dt(ref),
            keywords=list(keywords_from(notes)), signal_scores=scores,
            velocity=scores.get("reward", 0.0), entities=entities,
            metadata=json.loads(meta_json or "{}"),
        )


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


__all__ = ["Sessions", "SessionError", "SessionNotFound", "to_epoch"]
