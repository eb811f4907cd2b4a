"""`db.messages`: appending an agent's messages to the `messages` collection (SPEC §2 Message).

A message is an item of `messages`: item id `msg:<message_id>`, text field `content`, fields
`session_id`, `message_id`, `seq` (1-based order within its session), `role`, `active`,
`compacted`; `doc_id` is `session:<session_id>` (so GROUP BY DOCUMENT groups by session) and
`created_at` is the message time. `active=False, compacted=True` marks a message summarised away
but still searchable; `active=False, compacted=False` a message rewound by the user, never
searchable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from recallql.grammar.timestamps import format_timestamp
from recallql.index.errors import IngestError
from recallql.index.filters import In
from recallql.sessions.lifecycle import (
    SessionError,
    SessionNotFound,
    check_text,
    short_repr,
    to_epoch,
)
from recallql.sessions.signals import no_session

COLLECTION = "messages"


class Messages:
    """Append messages to sessions. Each append is one all-or-nothing batch.

    Args:
        db: the `Database`.
        clock: "now" in epoch seconds UTC.
    """

    def __init__(self, db: Any, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    def append(self, session_id: str, role: str, content: str,
               at: datetime | float | None = None, active: bool = True,
               compacted: bool = False) -> int:
        """Append one message to an open session.

        Args:
            session_id: an existing, open session.
            role: e.g. `user`, `assistant`, `tool`, `system`.
            content: the message text.
            at: the message time (default now; naive datetimes are UTC).
            active, compacted: the message's flags (see the module docstring): bools, or the
                ints 0 / 1.

        Returns:
            The new message id (an int, unique in the database).

        Raises:
            SessionNotFound: no such session. SessionError: the session is not open, a bad
            role/content/flag (text that is not valid Unicode included), or `at` before the
            session started. IngestError: the item is invalid,
            e.g. `at` is not a time in years 1..9999 UTC (nothing is written).
        """
        row = self._db.sessions.get(session_id)
        if row is None:
            raise SessionNotFound(f"cannot append: {no_session(session_id)}")
        if row.status != "open":
            raise SessionError(f"cannot append to session {session_id!r}: it is {row.status}")
        if not isinstance(role, str) or not role:
            raise SessionError("role must be a non-empty string")
        if not isinstance(content, str):
            raise SessionError("content must be a string")
        check_text(role, "role")
        check_text(content, "content")
        active, compacted = flag(active, "active"), flag(compacted, "compacted")
        when = message_time(at, self._clock(), row.started_at)
        message_id, seq = self.next_ids(session_id)
        self._db.ingest(COLLECTION, [message_item(session_id, message_id, seq, role, content,
                                                  when, active, compacted)])
        return message_id

    def next_ids(self, session_id: str) -> tuple[int, int]:
        """The next free message id in the database and the next seq in `session_id`.

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
            annotations refuse that too).
    """
    when = to_epoch(at, now, "at", error=IngestError)
    if started_at is not None and when < started_at:
        raise SessionError(f"message at {_iso(when)} is before its session started "
                           f"({_iso(started_at)})")
    return when


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


def session_item_ids(snap: Any, session_ids: Sequence[str]) -> list[str]:
    """Item ids of the live rows of a `messages` snapshot whose `session_id` is one of
    `session_ids` (what a sweep of those sessions deletes)."""
    if snap.size == 0 or not session_ids:
        return []
    rows = np.flatnonzero(snap.filter_mask(In("session_id", tuple(session_ids))) & snap.live)
    return snap.column("id").take(rows, snap.size)


def _iso(ts: float) -> str:
    return format_timestamp(ts)


def message_item(session_id: str, message_id: int, seq: int, role: str, content: str,
                 at: float | None, active: bool, compacted: bool) -> dict[str, Any]:
    """The `messages` item of one message."""
    return {
        "id": f"msg:{message_id}", "content": content,
        "created_at": at if at is not None and math.isfinite(at) else None,
        "doc_id": f"session:{session_id}", "position": seq,
        "session_id": session_id, "message_id": message_id, "seq": seq, "role": role,
        "active": bool(active), "compacted": bool(compacted),
    }
