"""`db.messages`: appending an agent's messages to the `messages` collection (SPEC §2 Message).

A message is an item of `messages`: item id `msg:<message_id>`, text field `content`, fields
`session_id`, `message_id`, `seq` (1-based order within its session), `role`, `active`,
`compacted`, and its session's `source` and `agent_id` (copied when the message is written, so
agents can filter, e.g. `WHERE source NOT IN ('subagent', 'tool') AND role != 'tool'`);
`doc_id` is `session:<session_id>` (so GROUP BY DOCUMENT groups by session) and `created_at` is
the message time. `active=False, compacted=True` marks a message summarised away
but still searchable; `active=False, compacted=False` a message rewound by the user, never
searchable.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from recallql.grammar.timestamps import format_timestamp
from recallql.index import requests
from recallql.index.errors import IngestError
from recallql.index.filters import In
from recallql.sessions.input import future_problem, many
from recallql.sessions.lifecycle import (
    SessionError,
    SessionNotFound,
    check_text,
    short_repr,
    to_epoch,
)
from recallql.sessions.signals import no_session

COLLECTION = "messages"

#: The largest seq or message id (the store's whole numbers are SQLite's / numpy's int64).
MAX_NUMBER = 2**63 - 1


class Messages:
    """Append messages to sessions. Each `append` or `extend` call is one all-or-nothing batch;
    message ids and seqs are assigned while holding the writer, so calls from any number of
    threads or processes never share one.

    Args:
        db: the `Database`.
        clock: "now" in epoch seconds UTC.
    """

    def __init__(self, db: Any, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    def append(self, session_id: str, role: str, content: str,
               at: datetime | float | None = None, active: bool = True,
               compacted: bool = False, *, key: str | None = None) -> int:
        """Append one message to an open session.

        Args:
            session_id: an existing, open session.
            role: e.g. `user`, `assistant`, `tool`, `system`.
            content: the message text.
            at: the message time (default now; naive datetimes are UTC).
            active, compacted: the message's flags (see the module docstring): bools, or the
                ints 0 / 1.
            key: an idempotency key: a retry with the same key and arguments appends nothing
                and returns the first call's message id (`extend` explains it).

        Returns:
            The new message id (an int, unique in the database).

        Raises:
            SessionNotFound: no such session. SessionError: the session is not open, a bad
            role/content/flag (text that is not valid Unicode included), or `at` before the
            session started. IngestError: the item is invalid,
            e.g. `at` is not a time in years 1..9999 UTC, or an invalid key (nothing is written).
            IdempotencyKeyReused: `key` was used for another request.
        """
        message = {"session_id": session_id, "role": role, "content": content, "at": at,
                   "active": active, "compacted": compacted}
        return self._write([message], key, numbered=False)[0]

    def extend(self, messages: Iterable[Mapping[str, Any]], *, key: str | None = None
               ) -> list[int]:
        """Append many messages, to one or several open sessions, as one all-or-nothing batch
        (one commit, however many messages: the way to write small messages fast).

        Args:
            messages: mappings with the arguments of `append`: ``session_id``, ``role``,
                ``content`` and optionally ``at``, ``active``, ``compacted``. Within a session
                they get consecutive seqs in the order given.
            key: an idempotency key (≤ 256 characters): the first call stores it with the
                batch; a retry with the same key and messages writes nothing and returns the
                same ids, so a caller that lost the reply can retry safely.

        Returns:
            The new message ids, in the order given (empty for no messages: nothing written).

        Raises:
            SessionNotFound, SessionError, IngestError: as `append`, naming the message
                (``message #i``); nothing of the batch is written.
            IdempotencyKeyReused: `key` was used for another request.
        """
        return self._write(list(many(messages, "messages", SessionError)), key, numbered=True)

    def _write(self, messages: list[Any], key: str | None, numbered: bool) -> list[int]:
        checked = [_checked(m, i if numbered else None) for i, m in enumerate(messages)]
        store = self._db.store
        with store.writing():
            req = None
            if key is not None:
                req = requests.request(key, "messages", [tuple(m.values()) for m in checked])
                done = store.request(req)
                if done is not None:
                    return list(done)  # type: ignore[call-overload]
            if not checked:
                return []
            items = self._items(checked, numbered)
            ids = [item["message_id"] for item in items]
            at = self._clock()
            extra = None if req is None else functools.partial(requests.record, req=req,
                                                               response=ids, at=at)
            store.ingest(COLLECTION, items, self._db.embedder(COLLECTION), extra_sql=extra)
        return ids

    def _items(self, checked: list[dict[str, Any]], numbered: bool) -> list[dict[str, Any]]:
        """The `messages` items of checked messages, with ids and seqs after the committed
        ones (call it holding the writer)."""
        now = self._clock()
        rows = {}
        for i, m in enumerate(checked):
            sid = m["session_id"]
            if not isinstance(sid, str) or sid not in rows:  # a non-str id is not found
                try:
                    rows[sid] = self._open_session(sid)
                except SessionError as exc:
                    raise _numbered(exc, i if numbered else None) from None
        snap = self._db.snapshot(COLLECTION)
        message_id = next_message_id(snap)
        seqs = {sid: next_seq(snap, sid) for sid in rows}
        items = []
        for i, m in enumerate(checked):
            sid = m["session_id"]
            try:
                when = message_time(m["at"], now, rows[sid].started_at)
                problem = numbers_left(sid, message_id + i, seqs[sid])
                if problem is not None:
                    raise IngestError(problem[1], field=problem[0])
            except (SessionError, IngestError) as exc:
                raise _numbered(exc, i if numbered else None) from None
            items.append(message_item(sid, message_id + i, seqs[sid], m["role"], m["content"],
                                      when, m["active"], m["compacted"],
                                      source=rows[sid].source, agent_id=rows[sid].agent_id))
            seqs[sid] += 1
        return items

    def _open_session(self, session_id: str) -> Any:
        row = self._db.sessions.get(session_id)
        if row is None:
            raise SessionNotFound(f"cannot append: {no_session(session_id)}")
        if row.status != "open":
            raise SessionError(f"cannot append to session {session_id!r}: it is {row.status}")
        return row

    def next_ids(self, session_id: str) -> tuple[int, int]:
        """The next free message id in the database and the next seq in `session_id` (as
        committed; the writer assigns them while holding the lock).

        Vectorised over the snapshot's in-memory columns (no per-row Python work), so an append
        costs O(n) numpy work rather than O(n) Python objects. Message ids of replaced rows
        are never reused.

        Args:
            session_id: the session the next message goes to.

        Returns:
            ``(message_id, seq)``: 1 + the largest message id ever stored, and 1 + the largest
            seq among the session's live messages (1 for an empty session).
        """
        snap = self._db.snapshot(COLLECTION)
        return next_message_id(snap), next_seq(snap, session_id)


_MESSAGE_KEYS = ("session_id", "role", "content", "at", "active", "compacted")


def _checked(message: Any, index: int | None) -> dict[str, Any]:
    """One message's arguments, checked without the database (as `append` checks them)."""
    try:
        if not isinstance(message, Mapping):
            raise SessionError(f"a message is a mapping of {', '.join(_MESSAGE_KEYS)}, got "
                               f"{short_repr(message)}")
        unknown = set(message) - set(_MESSAGE_KEYS)
        if unknown:
            raise SessionError(f"unknown message field(s) {sorted(map(str, unknown))}; "
                               f"fields: {', '.join(_MESSAGE_KEYS)}")
        for required in ("session_id", "role", "content"):
            if required not in message:
                raise SessionError(f"a message needs {required!r}")
        role, content = message["role"], message["content"]
        if not isinstance(role, str) or not role:
            raise SessionError("role must be a non-empty string")
        if not isinstance(content, str):
            raise SessionError("content must be a string")
        check_text(role, "role")
        check_text(content, "content")
        return {"session_id": message["session_id"], "role": role, "content": content,
                "at": message.get("at"),
                "active": flag(message.get("active", True), "active"),
                "compacted": flag(message.get("compacted", False), "compacted")}
    except SessionError as exc:
        raise _numbered(exc, index) from None


def _numbered(exc: Exception, index: int | None) -> Exception:
    """`exc` itself, or the same kind of error naming ``message #index``."""
    if index is None:
        return exc
    return type(exc)(f"message #{index}: {exc}")


def flag(value: object, name: str) -> bool:
    """A message flag (`active`, `compacted`) as a bool.

    Only bools (Python or numpy) and the ints 0 and 1 are flags: coercing anything else with
    `bool()` would turn `"false"` into True and make a rewound message searchable.

    Raises:
        SessionError: any other value, naming the flag.
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer) and value in (0, 1):
        return bool(value)
    raise SessionError(f"{name} must be a bool (or 0 / 1), got {short_repr(value)}")


def message_time(at: datetime | float | None, now: float, started_at: float | None) -> float:
    """The time of a message appended to a session that started at `started_at`.

    Args:
        at: datetime or epoch seconds UTC (naive = UTC); None gives `now`.
        now: the clock, epoch seconds UTC.
        started_at: the session's start, epoch seconds UTC (None: unknown).

    Returns:
        Epoch seconds UTC.

    Raises:
        IngestError: `at` is not a time in years 1..9999 UTC (the item's `created_at`, which
            ingest validates). SessionError: `at` is before the session started (signals and
            annotations refuse that too), or more than `CLOCK_SKEW_SECONDS` after `now` (it
            would keep the session from closing now).
    """
    when = to_epoch(at, now, "at", error=IngestError)
    if started_at is not None and when < started_at:
        raise SessionError(f"message at {_iso(when)} is before its session started "
                           f"({_iso(started_at)})")
    problem = future_problem(when, now, "message")
    if problem is not None:
        raise SessionError(problem)
    return when


def numbers_left(session_id: str, message_id: int, seq: int) -> tuple[str, str] | None:
    """Why a message cannot be numbered `message_id` / `seq` (past `MAX_NUMBER`: an import
    may have used the last ones), as ``(field, message)``, or None."""
    if message_id > MAX_NUMBER:
        return "message_id", f"no message id is left: the largest ({MAX_NUMBER}) is taken"
    if seq > MAX_NUMBER:
        return "seq", (f"session {session_id!r} has no seq left: the largest ({MAX_NUMBER}) "
                       "is taken")
    return None


def next_message_id(snap: Any) -> int:
    """1 + the largest `message_id` in any row of the snapshot (live or replaced), or 1."""
    if snap.size == 0:
        return 1
    column = snap.column("message_id")
    present = column.present(snap.size)
    if not present.any():
        return 1
    return int(column.values(snap.size)[present].max()) + 1


def next_seq(snap: Any, session_id: str) -> int:
    """1 + the largest `seq` among the live messages of `session_id`, or 1."""
    if snap.size == 0:
        return 1
    sessions = snap.column("session_id")
    code = sessions.pool.index.get(session_id)
    if code is None:
        return 1
    rows = (sessions.codes(snap.size) == code) & snap.live
    seq = snap.column("seq")
    rows &= seq.present(snap.size)
    return int(seq.values(snap.size)[rows].max()) + 1 if rows.any() else 1


def last_message_time(snap: Any, session_id: str) -> float | None:
    """The latest `created_at` among the live messages of `session_id` (epoch seconds UTC),
    or None (no message with a time)."""
    if snap.size == 0:
        return None
    sessions = snap.column("session_id")
    code = sessions.pool.index.get(session_id)
    if code is None:
        return None
    times = snap.created_at[(sessions.codes(snap.size) == code) & snap.live]
    times = times[~np.isnan(times)]
    return float(times.max()) if len(times) else None


def session_item_ids(snap: Any, session_ids: Sequence[str]) -> list[str]:
    """Item ids of the live rows of a `messages` snapshot whose `session_id` is one of
    `session_ids` (what a sweep of those sessions deletes)."""
    if snap.size == 0 or not session_ids:
        return []
    rows = np.flatnonzero(snap.filter_mask(In("session_id", tuple(session_ids))) & snap.live)
    return snap.column("id").take(rows, snap.size)


def message_activity(snap: Any) -> dict[str, tuple[float | None, int]]:
    """Per session of a `messages` snapshot: the latest `created_at` of its live rows (epoch
    seconds UTC; None when none has a time) and how many live rows it has (the sweep rule's
    message activity, `recallql.sessions.sweep`)."""
    if snap.size == 0:
        return {}
    column = snap.column("session_id")
    codes = column.codes(snap.size)
    rows = snap.live & (codes >= 0)
    picked, times = codes[rows], snap.created_at[rows]
    width = len(column.pool.vocab)
    counts = np.bincount(picked, minlength=width)
    latest = np.full(width, -np.inf)
    np.maximum.at(latest, picked, np.where(np.isnan(times), -np.inf, times))
    vocab = column.pool.vocab
    return {vocab[c]: (float(latest[c]) if np.isfinite(latest[c]) else None, int(counts[c]))
            for c in np.flatnonzero(counts)}


def _iso(ts: float) -> str:
    return format_timestamp(ts)


def message_place(item: Mapping[str, Any]) -> dict[str, Any]:
    """The ``doc_id`` and ``position`` `message_item` gives a message, for a raw `messages`
    item (`Database.ingest`) that has ``session_id`` / ``seq`` but leaves them out: its
    session is its document, its seq its place (what WITH CONTEXT and GROUP BY DOCUMENT
    read). Values of the wrong type are left for ingest to report."""
    place: dict[str, Any] = {}
    session_id, seq = item.get("session_id"), item.get("seq")
    if isinstance(session_id, str) and "doc_id" not in item:
        place["doc_id"] = f"session:{session_id}"
    if isinstance(seq, int) and not isinstance(seq, bool) and "position" not in item:
        place["position"] = seq
    return place


def message_item(session_id: str, message_id: int, seq: int, role: str, content: str,
                 at: float | None, active: bool, compacted: bool, *, source: str | None = None,
                 agent_id: str | None = None) -> dict[str, Any]:
    """The `messages` item of one message (`source`, `agent_id`: its session's)."""
    item = {
        "id": f"msg:{message_id}", "content": content,
        "created_at": at if at is not None and math.isfinite(at) else None,
        "doc_id": f"session:{session_id}", "position": seq,
        "session_id": session_id, "message_id": message_id, "seq": seq, "role": role,
        "active": bool(active), "compacted": bool(compacted),
    }
    if source is not None:
        item["source"] = source
    if agent_id is not None:
        item["agent_id"] = agent_id
    return item


#: The fields a message copies from its session (issue 14).
SESSION_FIELDS = ("source", "agent_id")


def session_fields_filler(conn: Any) -> Callable[[dict], dict]:
    """For upgrading a `messages` collection an earlier version wrote (`Store.add_fields`):
    a function from a stored message's fields to its session's `source` and `agent_id`, read
    once from the sessions table through `conn`."""
    sessions = {sid: (source, agent) for sid, source, agent in conn.execute(
        "SELECT id, source, agent_id FROM sessions")}

    def fill(fields: dict) -> dict:
        found = sessions.get(fields.get("session_id"))  # type: ignore[arg-type]
        return {} if found is None else dict(zip(SESSION_FIELDS, found, strict=True))

    return fill
