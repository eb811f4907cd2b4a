"""Sessions: lifecycle, annotations, signals, snapshots (SPEC §2, §4.3, §4.4, §8; issue 5).

Persisted in the metadata store's `sessions`, `annotations` and `signals` tables. Every write is
one SQLite transaction, so a rejected or failed write leaves nothing behind. Times are epoch
seconds UTC in storage and aware UTC datetimes in snapshots.

Lifecycle: `open` → `closed` (end_reason, ended_at) → `archived` (the snapshot at `ended_at` is
frozen and persisted; FOR SESSION on an archived session uses it, so it ranks exactly as it did
when it closed, whatever the clock or the signal policy says later). Its signals stay, so it keeps
counting in the cross-session signal boost (frozen at `ended_at` too). `sweep(older_than)` removes
sessions whose last activity is older than the retention, with their annotations, signals and
messages (one all-or-nothing batch); statements naming a swept session degrade with
`SESSION_NOT_FOUND`.

Errors: lifecycle mistakes raise `SessionError` (`SessionNotFound` for an unknown id); every
rejected signal or annotation raises `SignalRejected` naming the rule; a write on a read-only
database raises `StoreError` naming the action.
"""

from __future__ import annotations

import builtins
import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

from recallql.grammar.suggest import did_you_mean
from recallql.grammar.timestamps import format_timestamp
from recallql.index import requests
from recallql.index.errors import SignalRejected, StoreError
from recallql.sessions import roots, state
from recallql.sessions import sweep as sweeping
from recallql.sessions.edges import END_REASONS
from recallql.sessions.input import (
    SessionError,
    SessionNotFound,
    check_text,
    future_problem,
    many,
    metadata_json,
    retention_days,
    to_epoch,
)
from recallql.sessions.lineage import SessionRow
from recallql.sessions.lineage_access import LineageAccess
from recallql.sessions.models import SessionSnapshot, SessionState
from recallql.sessions.signals import SignalPolicy, no_session, short_repr, validate_id
from recallql.sessions.state import to_datetime
from recallql.sessions.sweep import SweepReport


class MetaStore(Protocol):
    """What sessions need of the store."""

    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction on the metadata store alone."""

    def read_transaction(self) -> AbstractContextManager[Any]:
        """A consistent read view of the metadata store."""

    def writing(self) -> AbstractContextManager[Any]:
        """Hold the writer: no other write of this process runs until it is released."""

    def delete_messages(self, session_ids: list[str], extra_sql: Callable[[Any], object]
                        ) -> int:
        """Delete the live messages of these sessions in one all-or-nothing batch, running
        `extra_sql(conn)` in its SQLite transaction; returns the number of messages deleted."""

    def message_activity(self) -> Mapping[str, tuple[float | None, int]]:
        """``{session_id: (latest message time or None, live message count)}`` over the
        messages collection at its last committed batch."""

    def last_message_at(self, session_id: str) -> float | None:
        """The time of the session's latest live message (epoch seconds UTC), or None."""


class Sessions(LineageAccess):
    """`db.sessions`: the session lifecycle and the per-statement session state.

    Args:
        meta: the metadata store (transactions on its SQLite connection).
        policy: the signal policy (default: `reward` in [-1, 1], half-life 7 days).
        clock: "now" in epoch seconds UTC (tests pin it).
    """

    def __init__(self, meta: MetaStore, policy: SignalPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._meta = meta
        self.policy = policy or SignalPolicy()
        self._clock = clock

    # -- lifecycle ---------------------------------------------------------------------------

    def create(self, id: str, agent_id: str, parent: str | None = None, source: str = "cli",
               started_at: datetime | float | None = None, branched_from: str | None = None,
               delegate_from: str | None = None, metadata: Mapping[str, Any] | None = None,
               title: str | None = None) -> SessionSnapshot:
        """Create an open session.

        Args:
            id, agent_id: 1–128 letters, digits, `_ . : -`.
            parent: an existing session other than this one (the lineage of conversations
                follows it; the Hermes importer alone may write a parent that does not exist).
            branched_from, delegate_from: markers; session ids that need not exist.
            source: where the session comes from (`cli`, `tool`, `subagent`, ...).
            started_at: datetime or epoch seconds UTC; default now; at most
                `CLOCK_SKEW_SECONDS` (300) after the database's clock (a session started later
                could take no message, signal, annotation or close until then). Sessions of
                another store keep their own times through `recallql import hermes`.
            metadata: a JSON-serialisable mapping with string keys.
            title: an optional display title.

        Returns:
            The new session's snapshot.

        Raises:
            SessionError: an invalid id, source, title, time or metadata (text that is not
                valid Unicode, e.g. a lone surrogate, included), `started_at` more than
                `CLOCK_SKEW_SECONDS` after the clock (naming the session, the time and the
                clock), the id already exists, or the parent is the session itself or does not
                exist.
            StoreError: the database is read-only.
        """
        self._check_new(id, agent_id, (parent, branched_from, delegate_from), source, title)
        now = self._clock()
        started = to_epoch(started_at, now, "started_at")
        problem = future_problem(started, now, "its start", "started_at")
        if problem is not None:
            raise SessionError(f"cannot create session {id!r}: {problem} (a session started "
                               "later takes no message, signal, annotation or close until then)")
        meta_json = metadata_json(metadata)
        with self._write(f"create session {id!r}") as conn:
            if self._row(conn, id) is not None:
                raise SessionError(f"session {id!r} already exists")
            if parent is not None and self._row(conn, parent) is None:
                raise SessionError(f"cannot create session {id!r}: its parent session "
                                   f"{parent!r} does not exist (create the parent first)")
            conn.execute(
                "INSERT INTO sessions (id, agent_id, status, parent_session_id, source, "
                "branched_from, delegate_from, started_at, metadata, title) "
                "VALUES (?, ?, 'open', ?, ?, ?, ?, ?, ?, ?)",
                (id, agent_id, parent, source, branched_from, delegate_from, started, meta_json,
                 title),
            )
            roots.refresh(conn, [id])
        return self.snapshot(id, as_of=max(started, self._clock()))

    def _check_new(self, id: str, agent_id: str, refs: tuple[str | None, ...], source: str,
                   title: str | None) -> None:
        """The checks of `create` that need no database: ids (`refs`: parent, branched_from,
        delegate_from), source, title, and a parent other than the session itself."""
        self._validate(id, "session id")
        self._validate(agent_id, "agent id")
        for what, ref in zip(("parent", "branched_from", "delegate_from"), refs, strict=True):
            if ref is not None:
                self._validate(ref, f"{what} session id")
        if refs[0] == id:
            raise SessionError(f"cannot create session {id!r}: a session cannot be its own "
                               "parent")
        if not isinstance(source, str) or not source:
            raise SessionError(f"source must be a non-empty string, got {source!r}")
        check_text(source, "source")
        if title is not None and not isinstance(title, str):
            raise SessionError(f"title must be a string, got {title!r}")
        if title is not None:
            check_text(title, "title")

    def annotate(self, id: str, text: str, at: datetime | float | None = None) -> None:
        """Add annotation text to an open session; its whitespace-separated words, lower-cased,
        become session keywords.

        Raises:
            SignalRejected: rule `empty_text`, `bad_text` (not valid Unicode: a lone
                surrogate), `bad_time`, `in_future` (more than `CLOCK_SKEW_SECONDS` after
                the clock), `unknown_session`, `session_not_open` or `before_start`; nothing
                is written.
            StoreError: the database is read-only.
        """
        if not isinstance(text, str) or not text.strip():
            raise SignalRejected(f"annotation rejected (rule empty_text): {text!r} has no words")
        check_text(text, "annotation text", SignalRejected, "annotation rejected (rule bad_text)")
        when = self._write_time(at, "annotation")
        with self._write(f"annotate session {id!r}") as conn:
            row = self._row(conn, id)
            self.policy.check_session(id, row.status if row else None, "annotation")
            _check_after_start(row, when, "annotation")
            conn.execute("INSERT INTO annotations (session_id, text, at) VALUES (?, ?, ?)",
                         (id, text, when))

    def signal(self, id: str, name: str, value: float, entity: str | None = None,
               at: datetime | float | None = None, *, key: str | None = None) -> None:
        """Record a signal on an open session, e.g. `reward 1.0` on entity `doc:42`.

        Args:
            id: the session.
            name: a signal name the policy allows.
            value: a finite number within the name's bounds.
            entity: the item entity it is about (feeds the entity and signal boosts), or None.
            at: datetime or epoch seconds UTC; default now; not before the session started nor
                more than `CLOCK_SKEW_SECONDS` (300) after the clock.
            key: an idempotency key: a retry with the same key and arguments records nothing
                (see `signal_many`).

        Raises:
            SignalRejected: naming the rule (`unknown_session`, `session_not_open`,
                `unknown_name`, `not_finite`, `out_of_bounds`, `bad_entity`, `bad_time`,
                `in_future`, `before_start`); nothing is written.
            IdempotencyKeyReused: `key` was used for another request.
            StoreError: the database is read-only.
        """
        self._signals([{"session_id": id, "name": name, "value": value, "entity": entity,
                        "at": at}], key, numbered=False)

    def signal_many(self, signals: Iterable[Mapping[str, Any]], *, key: str | None = None
                    ) -> int:
        """Record many signals, on one or several open sessions, in one transaction: all of
        them or none (one commit, however many signals).

        Args:
            signals: mappings with the arguments of `signal`: ``session_id``, ``name``,
                ``value`` and optionally ``entity`` and ``at``.
            key: an idempotency key (≤ 256 characters), stored in the same transaction: a
                retry with the same key and signals records nothing again.

        Returns:
            The number of signals recorded (0 for a retry, or for no signals).

        Raises:
            SignalRejected: the first rejected signal, naming it (``signal #i``) and the rule
                (as `signal`); nothing is written.
            IdempotencyKeyReused: `key` was used for another request.
            StoreError: the database is read-only.
        """
        return self._signals(list(many(signals, "signals", SignalRejected)), key, numbered=True)

    def _signals(self, signals: list[Any], key: str | None, numbered: bool) -> int:
        checked = [self._checked_signal(s, i if numbered else None) for i, s in
                   enumerate(signals)]
        req = None if key is None else requests.request(
            key, "signals", [tuple(sorted(s.items())) for s in signals])
        action = f"signal session {checked[0]['session_id']!r}" if len(checked) == 1 \
            else f"record {len(checked)} signals"
        with self._write(action) as conn:
            if req is not None and requests.replay(conn, req) is not None:
                return 0
            rows: dict[str, SessionRow | None] = {}
            values = []
            for i, sig in enumerate(checked):
                sid = sig["session_id"]
                if not isinstance(sid, str):  # not hashable, maybe: never cached, not found
                    row = self._row(conn, sid)
                elif sid in rows:
                    row = rows[sid]
                else:
                    row = rows[sid] = self._row(conn, sid)
                try:
                    number = self.policy.check(sid, sig["name"], sig["value"],
                                               row.status if row else None)
                    _check_after_start(row, sig["at"], "signal")
                except SignalRejected as exc:
                    raise _numbered(exc, i if numbered else None) from None
                values.append((sid, sig["name"], number, sig["at"], sig["entity"]))
            conn.executemany("INSERT INTO signals (session_id, name, value, at, entity) "
                             "VALUES (?, ?, ?, ?, ?)", values)
            if req is not None:
                requests.record(conn, req, len(values), self._clock())
        return len(values)

    def _checked_signal(self, sig: Any, index: int | None) -> dict[str, Any]:
        """One signal's arguments, checked without the database."""
        try:
            if not isinstance(sig, Mapping) or not {"session_id", "name", "value"} <= set(sig) \
                    or set(sig) - {"session_id", "name", "value", "entity", "at"}:
                raise SignalRejected(
                    "signal rejected (rule bad_signal): a signal is a mapping with session_id, "
                    f"name, value and optionally entity and at, got {short_repr(sig)}")
            when = self._write_time(sig.get("at"), "signal")
            entity = sig.get("entity")
            if entity is not None and (not isinstance(entity, str) or not entity):
                raise SignalRejected(f"signal rejected (rule bad_entity): entity {entity!r} is "
                                     "not a non-empty string")
            if entity is not None:
                check_text(entity, "entity", SignalRejected, "signal rejected (rule bad_entity)")
        except SignalRejected as exc:
            raise _numbered(exc, index) from None
        return {"session_id": sig["session_id"], "name": sig["name"], "value": sig["value"],
                "entity": entity, "at": when}

    def close(self, id: str, end_reason: str = "user_exit",
              at: datetime | float | None = None, *, any_reason: bool = False
              ) -> SessionSnapshot:
        """Close an open session with `end_reason` at `at` (default now). Its signals then stay
        frozen at `at`.

        `end_reason` must be one of `recallql.sessions.edges.END_REASONS` unless `any_reason`:
        only ``compression`` continues a conversation, so a typo (``compresion``) would end
        one without a word.

        Returns:
            The closed session's snapshot.

        Raises:
            SessionNotFound: no such session.
            SessionError: not open, an empty or unknown end_reason (with a did-you-mean; or
                one that is not valid Unicode), or
                `at` before the session's start or its last message, signal or annotation
                (naming both times), or more than `CLOCK_SKEW_SECONDS` (300 s) after the
                database's clock (as `create` refuses a start); nothing is written.
            StoreError: the database is read-only.
        """
        if not isinstance(end_reason, str) or not end_reason:
            raise SessionError(f"end_reason must be a non-empty string, got {end_reason!r}")
        check_text(end_reason, "end_reason")
        if not any_reason and end_reason not in END_REASONS:
            raise SessionError(f"unknown end reason {end_reason!r}; "
                               f"{did_you_mean(end_reason, END_REASONS)} (any_reason=True "
                               "records another)")
        when = None if at is None else to_epoch(at, self._clock(), "at")
        with self._write(f"close session {id!r}") as conn:
            now = self._clock()  # once the writer is ours: after any write it waited for
            if when is None:
                when = now
            row = self._require_open(conn, id)
            problem = future_problem(when, now, "its end", "at")
            if problem is not None:
                raise SessionError(f"cannot close session {id!r}: {problem} (a session is "
                                   "closed when it ends)")
            self._close(conn, row, end_reason, when, self._meta.last_message_at(id))
        return self.snapshot(id, as_of=when)

    def archive(self, id: str) -> SessionSnapshot:
        """Archive a session: close it now if it is open (end_reason `archived`), then freeze and
        persist its snapshot at `ended_at`, in one transaction. Archiving twice is a no-op.

        Returns:
            The frozen snapshot.

        Raises:
            SessionNotFound: no such session.
            SessionError: closing it now would precede its last message, signal or
                annotation.
            StoreError: the database is read-only.
        """
        with self._write(f"archive session {id!r}") as conn:
            row = self._row(conn, id)
            if row is None:
                raise SessionNotFound(f"cannot archive: {no_session(id)}")
            if row.status == "open":
                self._close(conn, row, "archived", self._clock(),
                            self._meta.last_message_at(id))
            ended, stored = conn.execute("SELECT ended_at, frozen_snapshot FROM sessions "
                                         "WHERE id = ?", (id,)).fetchone()
            if row.status != "archived":
                frozen = state.live_snapshot(conn, id, self._clock() if ended is None else ended,
                                             self.policy).model_copy(update={"status": "archived"})
                stored = frozen.model_dump_json()
                conn.execute("UPDATE sessions SET status = 'archived', frozen_snapshot = ? "
                             "WHERE id = ?", (stored, id))
        if stored is None:  # archived elsewhere without a frozen snapshot
            return self.snapshot(id, as_of=ended)
        return SessionSnapshot.model_validate_json(stored)

    def sweep(self, older_than: timedelta | float, *, dry_run: bool = False) -> SweepReport:
        """Remove the sessions whose whole conversation has been inactive for more than
        `older_than`, with their annotations, signals and messages (the items of `messages`
        with their `session_id`), in one all-or-nothing batch. The rule is
        `recallql.sessions.sweep`: a session's activity is the latest of its start, end,
        signals, annotations and messages; a conversation (the sessions sharing a root) goes as
        a whole; a surviving child of a swept session loses its parent link and stays the root
        of its own conversation.

        Args:
            older_than: the retention, a timedelta or a number of days (≥ 0).
            dry_run: only report what would go; nothing is written (works on a read-only
                database).

        Returns:
            The number of sessions removed, as a `SweepReport` (an int; `.messages`,
            `.swept`, `.kept`, `.detached`, `.dry_run`).

        Raises:
            SessionError: a negative or non-finite retention.
            StoreError: the database is read-only (unless `dry_run`).
        """
        days = older_than.total_seconds() / 86400 if isinstance(older_than, timedelta) \
            else retention_days(older_than)
        if not math.isfinite(days) or days < 0:
            raise SessionError(f"older_than must be a non-negative duration, got {older_than!r}")
        cutoff = self._clock() - days * 86400
        if dry_run:
            found = self._sweep_plan(cutoff)
            return SweepReport(len(found.swept), sum(x.messages for x in found.swept),
                               swept=found.swept, kept=found.kept, dry_run=True)
        with self._guard("sweep sessions"), self._meta.writing():  # select and delete as one
            found = self._sweep_plan(cutoff)
            if not found.swept:
                return SweepReport(0, kept=found.kept)
            ids = [x.id for x in found.swept]
            detached: list[str] = []
            messages = self._meta.delete_messages(
                ids, lambda conn: detached.extend(sweeping.delete_sessions(ids, conn)))
        return SweepReport(len(ids), messages, swept=found.swept, kept=found.kept,
                           detached=tuple(detached))

    def _sweep_plan(self, cutoff: float) -> sweeping.SweepPlan:
        activity = self._meta.message_activity()
        with self._meta.read_transaction() as conn:
            return sweeping.plan(conn, activity, cutoff, self._has_roots(conn))

    # -- reads -------------------------------------------------------------------------------

    def snapshot(self, id: str, as_of: datetime | float | None = None) -> SessionSnapshot:
        """The session's state at `as_of` (datetime or epoch seconds UTC; default now).

        Raises:
            SessionNotFound: no such session, or none yet at a given `as_of` (before it
                started, as ``FOR SESSION ... AS OF`` then reports ``SESSION_NOT_FOUND``; a
                start up to 300 s ahead of the clock still answers for now).
        """
        now = to_epoch(as_of, self._clock(), "as_of")
        with self._meta.read_transaction() as conn:
            found = state.snapshot(conn, id, now, self.policy)
        if found is None:
            raise SessionNotFound(no_session(id))
        if as_of is not None and found.started_at.timestamp() > now:
            raise SessionNotFound(f"session {id!r} did not exist yet at {format_timestamp(now)} "
                                  f"(it started at {format_timestamp(found.started_at)})")
        return found

    def state(self, id: str, now_ts: float) -> tuple[SessionState, SessionSnapshot] | None:
        """The session boost's inputs and the snapshot for a statement at `now_ts` (epoch
        seconds UTC), or None when the session does not exist."""
        with self._meta.read_transaction() as conn:
            snap = state.snapshot(conn, id, now_ts, self.policy)
        if snap is None:
            return None
        return SessionState(snap.id, tuple(snap.keywords), snap.velocity, dict(snap.entities)), snap

    def get(self, id: str) -> SessionRow | None:
        """The session's lineage row, or None."""
        with self._meta.read_transaction() as conn:
            return self._row(conn, id)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every session as a dict of its columns (times in epoch seconds UTC), ordered by
        started_at then id (SHOW SESSIONS)."""
        with self._meta.read_transaction() as conn:
            rows = state.session_dicts(conn)
        yield from rows

    def list(self, agent_id: str | None = None, status: str | None = None
             ) -> list[dict[str, Any]]:
        """Sessions for listing (e.g. `recallql sessions list`), ordered by start then id.

        Args:
            agent_id: only this agent's sessions.
            status: only sessions with this status (`open`, `closed`, `archived`).

        Returns:
            Dicts with `id`, `agent_id`, `status`, `source`, `parent_session_id`, `end_reason`,
            `branched_from`, `delegate_from`, `title`, and `started_at` / `ended_at` as aware
            UTC datetimes (`ended_at` None while open).
        """
        out = []
        for row in self.rows():
            if (agent_id is None or row["agent_id"] == agent_id) and \
                    (status is None or row["status"] == status):
                row = {k: v for k, v in row.items() if k not in ("metadata", "frozen_snapshot")}
                row["started_at"] = to_datetime(row["started_at"])
                row["ended_at"] = to_datetime(row["ended_at"])
                out.append(row)
        return out

    def entity_sums(self, entities: builtins.list[str], names: builtins.list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        """Cross-session decayed sums `{name: {entity: sum}}` at `now_ts` (epoch seconds UTC;
        SPEC §4.4), each session's signals decayed to its reference time (frozen at
        `ended_at` once closed). The engine's `SignalSource`."""
        with self._meta.read_transaction() as conn:
            return state.entity_sums(conn, entities, names, now_ts, self.policy)

    # -- internals ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self, action: str) -> Iterator[Any]:
        """A write transaction; a store that refuses writes (read-only, closed) raises
        `StoreError` naming `action`."""
        with self._guard(action), self._meta.transaction() as conn:
            yield conn

    @staticmethod
    @contextlib.contextmanager
    def _guard(action: str) -> Iterator[None]:
        """Re-raise a `StoreError` as one naming `action`."""
        try:
            yield
        except StoreError as exc:
            raise StoreError(f"cannot {action}: {exc}") from None

    def _write_time(self, at: datetime | float | None, what: str) -> float:
        now = self._clock()
        try:
            when = to_epoch(at, now, "at")
        except SessionError as exc:
            raise SignalRejected(f"{what} rejected (rule bad_time): {exc}") from None
        problem = future_problem(when, now, what)
        if problem is not None:
            raise SignalRejected(f"{what} rejected (rule in_future): {problem}")
        return when

    def _validate(self, value: object, what: str) -> str:
        try:
            return validate_id(value, what)
        except ValueError as exc:
            raise SessionError(str(exc)) from None

    def _row(self, conn: Any, id: str) -> SessionRow | None:
        return state.session_row(conn, id, self._columns(conn))

    def _require_open(self, conn: Any, id: str) -> SessionRow:
        row = self._row(conn, id)
        if row is None:
            raise SessionNotFound(f"cannot close: {no_session(id)}")
        if row.status != "open":
            raise SessionError(f"cannot close session {id!r}: it is already {row.status}")
        return row

    @staticmethod
    def _close(conn: Any, row: SessionRow, end_reason: str, when: float,
               last_message: float | None) -> None:
        floors = [(row.started_at, "its start"),
                  (state.last_write(conn, row.id), "its last signal or annotation"),
                  (last_message, "its last message")]
        floor, what = max(((t, w) for t, w in floors if t is not None),
                          key=lambda pair: pair[0], default=(when, ""))
        if when < floor:
            raise SessionError(f"cannot close session {row.id!r} at {_iso(when)}: {what} is at "
                               f"{_iso(floor)}")
        conn.execute("UPDATE sessions SET status = 'closed', end_reason = ?, ended_at = ? "
                     "WHERE id = ?", (end_reason, when, row.id))
        roots.refresh(conn, [row.id])  # its end reason decides its children's edges


def _numbered(exc: Exception, index: int | None) -> Exception:
    """`exc` itself, or the same kind of error naming ``signal #index``."""
    return exc if index is None else type(exc)(f"signal #{index}: {exc}")


def _check_after_start(row: SessionRow | None, when: float, what: str) -> None:
    if row is not None and row.started_at is not None and when < row.started_at:
        raise SignalRejected(f"{what} rejected (rule before_start): at {_iso(when)} is before "
                             f"session {row.id!r} started ({_iso(row.started_at)})")


def _iso(ts: float) -> str:
    return format_timestamp(ts)


__all__ = ["SessionError", "SessionNotFound", "Sessions", "SweepReport", "check_text", "short_repr",
           "to_epoch"]
