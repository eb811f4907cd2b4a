"""Raw items of the `messages` collection (`Database.ingest("messages", items)`): checked as
`db.messages.extend` checks messages, since both write the same rows.

The raw path is for messages written by a loader or an import of another store, which may
carry their own numbering and time (`seq`, `message_id`, `created_at`). It keeps the
invariants `append` and `extend` keep, which nothing downstream re-checks: a message belongs to
an existing, open session; it has a place in its session: a `seq` (1, 2, ...), unique among
the session's live messages (WITH CONTEXT, context credit and live context read neighbours by
it); a `message_id`, a positive integer no other live message holds (`append` numbers after
the largest); a time (`created_at`: AS OF, recency, sweep and `close`'s last-message check
read it), neither before the session started nor more than `CLOCK_SKEW_SECONDS` after the
clock; its session's `source` and `agent_id` (so `WHERE agent_id = ...` and `WHERE source
...` see raw messages too; a differing value is refused).

What an item leaves out is filled in as `append` fills it (`with_session_fields`,
`with_numbering`): its session's `source` / `agent_id`; for an item that replaces a live
message of the same id and session, that message's `seq`, `message_id` and `created_at` (a
re-ingest of the same item is unchanged); otherwise the next `seq` of its session (after its
live messages and the seqs the batch gives it), the next `message_id` of the database (after
every one stored or given in the batch), in the batch's order, and the clock's time.
The Hermes importer writes through the store directly (its sessions come closed, with their
own clock).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

import numpy as np

from recallql.grammar.timestamps import format_timestamp
from recallql.index.errors import IngestError
from recallql.index.timestamps import item_epoch
from recallql.sessions.input import future_problem
from recallql.sessions.lineage import SessionRow
from recallql.sessions.messages import (
    MAX_NUMBER,
    SESSION_FIELDS,
    next_message_id,
    next_seq,
    numbers_left,
)
from recallql.sessions.signals import no_session


def with_session_fields(items: Sequence[Any], session_row: Callable[[str], SessionRow | None]
                        ) -> list[Any]:
    """The batch with each message's `SESSION_FIELDS` (``source``, ``agent_id``) copied from
    its session where the item leaves them out, as `db.messages.append` writes them (left NULL,
    a filter on them would never match the message). Items that are not mappings, or name no
    existing session, are left as they are (`check_raw_messages` reports them)."""
    rows: dict[str, SessionRow | None] = {}
    out: list[Any] = []
    for item in items:
        sid = item.get("session_id") if isinstance(item, Mapping) else None
        if not isinstance(sid, str):
            out.append(item)
            continue
        if sid not in rows:
            rows[sid] = session_row(sid)
        row = rows[sid]
        if row is None:
            out.append(item)
            continue
        copied = {f: getattr(row, f) for f in SESSION_FIELDS if getattr(row, f) is not None}
        out.append({**copied, **item})
    return out


def with_numbering(items: Sequence[Any], snap: Any, now: float) -> list[Any]:
    """The batch with the ``seq``, ``message_id`` and ``created_at`` each message leaves out
    (absent or None) filled in as the module docstring says. Call it holding the writer, with
    the collection's committed snapshot; items that are not mappings or have no str
    ``session_id`` are left as they are (`check_raw_messages` or ingest report them)."""
    wanted = [i for i, item in enumerate(items) if isinstance(item, Mapping)
              and isinstance(item.get("session_id"), str)
              and any(item.get(f) is None for f in _NUMBERING)]
    if not wanted:
        return list(items)
    stored = _stored_numbering(snap, {str(items[i].get("id")) for i in wanted},
                               {items[i]["session_id"] for i in wanted})
    next_id = next_message_id(snap)
    next_seqs: dict[str, int] = {}
    for item in items:  # after what the batch gives, too
        if not isinstance(item, Mapping) or not isinstance(item.get("session_id"), str):
            continue
        sid, seq, mid = item["session_id"], item.get("seq"), item.get("message_id")
        if sid not in next_seqs:
            next_seqs[sid] = next_seq(snap, sid)
        if _whole(seq):
            next_seqs[sid] = max(next_seqs[sid], int(seq) + 1)
        if _whole(mid):
            next_id = max(next_id, int(mid) + 1)
    out = list(items)
    for i in wanted:
        item = items[i]
        sid = item["session_id"]
        old = stored.get(str(item.get("id")))
        old = old if old is not None and old[0] == sid else None
        fill: dict[str, Any] = {}
        if item.get("seq") is None:
            if old is not None and old[1] is not None:
                fill["seq"] = old[1]
            else:
                fill["seq"] = next_seqs[sid]
                next_seqs[sid] += 1
        if item.get("message_id") is None:
            if old is not None and old[2] is not None:
                fill["message_id"] = old[2]
            else:
                fill["message_id"] = next_id
                next_id += 1
        if item.get("created_at") is None:
            fill["created_at"] = old[3] if old is not None and old[3] is not None else now
        problem = numbers_left(sid, fill.get("message_id", 1), fill.get("seq", 1))
        if problem is not None:
            raise IngestError(problem[1], item=_name(item, i), field=problem[0])
        out[i] = {**item, **fill}
    return out


def _name(item: Mapping[str, Any], index: int) -> str:
    """How an error names an item: its id, or ``#index`` (as ingest names an item without a
    valid id)."""
    given = item.get("id")
    return repr(str(given)) if isinstance(given, str | int) and not isinstance(given, bool) \
        else f"#{index}"


_NUMBERING = ("seq", "message_id", "created_at")


def _whole(value: object) -> TypeGuard[int | np.integer]:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _stored_numbering(snap: Any, ids: set[str], sessions: set[str]
                      ) -> dict[str, tuple[str | None, int | None, int | None, float | None]]:
    """For the live rows of the snapshot in one of `sessions` with one of `ids`: id ->
    (session_id, seq, message_id, created_at). Reads the ids of those sessions' rows only."""
    if snap.size == 0 or not ids:
        return {}
    column = snap.column("session_id")
    codes = [c for c in (column.pool.index.get(sid) for sid in sessions) if c is not None]
    if not codes:
        return {}
    rows = np.flatnonzero(np.isin(column.codes(snap.size), codes) & snap.live)
    rows = np.asarray([r for r, item_id in zip(rows.tolist(), snap.ids.take(rows), strict=True)
                       if item_id in ids], np.int64)
    if not len(rows):
        return {}
    found, sids, seqs, mids = (snap.values(name, rows) for name in ("id", "session_id", "seq",
                                                                    "message_id"))
    times = snap.created_at[rows]
    return {str(item_id): (sid, None if seq is None else int(seq),  # type: ignore[call-overload]
                           None if mid is None else int(mid),  # type: ignore[call-overload]
                           None if np.isnan(t) else float(t))
            for item_id, sid, seq, mid, t in zip(found, sids, seqs, mids, times, strict=True)}


def check_raw_messages(items: Sequence[Any], session_row: Callable[[str], SessionRow | None],
                       snap: Any, now: float, *, replace_documents: bool = False) -> None:
    """Refuse a batch of raw `messages` items that `db.messages.extend` would refuse (see the
    module docstring). Call it holding the writer, with the collection's committed snapshot.
    What ingest itself checks (a non-mapping item, a field of the wrong type, a time that is
    not a time, a duplicate id) is left to it.

    Args:
        items: the batch (mappings with ``id``, ``session_id``, ``seq``, ``created_at``, ...).
        session_row: a session's row by id, or None (`Sessions.get`).
        snap: the committed `messages` snapshot (its live rows hold the seqs taken).
        now: the database's clock, epoch seconds UTC.
        replace_documents: as `Database.ingest`: the live messages of the batch's documents
            that the batch does not hold go away with it (their seqs are free).

    Raises:
        IngestError: naming the item and the field: ``session_id`` missing, naming no
            session, or a session that is not open; ``source`` or ``agent_id`` other than the
            session's; ``created_at`` before the session started or more than
            `CLOCK_SKEW_SECONDS` after `now`; ``seq`` below 1 or above 2**63 - 1, or already
            held by another live message of the session or by another item of the batch;
            ``message_id`` below 1 or already held by another live message or by another item
            of the batch. (Call `with_numbering` first: it fills what an item leaves out.)
    """
    mappings = [(i, item) for i, item in enumerate(items) if isinstance(item, Mapping)]
    batch_ids = {_id(item) for _, item in mappings}
    leaving = ({str(item.get("doc_id", item.get("id"))) for _, item in mappings}
               if replace_documents else set())
    taken = _LiveSeqs(snap, batch_ids, leaving)
    held = _LiveMessageIds(snap, batch_ids, leaving)
    rows: dict[str, SessionRow] = {}
    seen: dict[tuple[str, int], str] = {}
    seen_ids: dict[int, str] = {}
    for index, item in mappings:
        name = _name(item, index)
        sid = item.get("session_id")
        if sid is None:
            raise IngestError("a message belongs to a session: give its session_id (or write "
                              "it with db.messages.append / extend, which number it too)",
                              item=name, field="session_id")
        if not isinstance(sid, str):
            continue  # ingest's type check names it
        row = rows.get(sid) or _open_row(session_row, sid, name)
        rows[sid] = row
        for field in SESSION_FIELDS:
            given, own = item.get(field), getattr(row, field)
            if field in item and given != own:
                raise IngestError(f"session {sid!r} has {field} {own!r}, the message says "
                                  f"{given!r}: a message carries its session's {field} "
                                  "(leave it out)", item=name, field=field)
        _check_time(item, row, now, name)
        _check_message_id(item, held, seen_ids, name)
        seq = item.get("seq")
        if not _whole(seq):
            continue  # unnumbered (no session to number it in), or ingest's type check names it
        if not 1 <= seq <= MAX_NUMBER:
            raise IngestError(f"seq must be 1 or more (a session numbers its messages 1, "
                              f"2, ...) and at most {MAX_NUMBER}, got {seq}", item=name,
                              field="seq")
        holder = seen.get((sid, int(seq))) or taken.holder(sid, int(seq))
        if holder is not None and holder != _id(item):
            raise IngestError(f"session {sid!r} already has message {holder!r} at seq {seq}: "
                              "a session numbers its messages once each (db.messages.append "
                              "gives the next seq)", item=name, field="seq")
        seen[(sid, int(seq))] = _id(item)


def _check_message_id(item: Mapping[str, Any], held: _LiveMessageIds,
                      seen: dict[int, str], name: str) -> None:
    value = item.get("message_id")
    if value is None or not isinstance(value, int | np.integer) or isinstance(value, bool):
        return  # optional; a value of the wrong type is named by ingest's type check
    if not 1 <= value <= MAX_NUMBER:
        raise IngestError(f"message_id must be 1 or more and at most {MAX_NUMBER}, got "
                          f"{value}", item=name, field="message_id")
    holder = seen.get(int(value)) or held.holder(int(value))
    if holder is not None and holder != _id(item):
        raise IngestError(f"message {holder!r} already has message_id {value}: a message id "
                          "is unique in the database (leave it out, or write the message with "
                          "db.messages.append, which gives the next one)", item=name,
                          field="message_id")
    seen[int(value)] = _id(item)


def _id(item: Mapping[str, Any]) -> str:
    return str(item.get("id"))


def _open_row(session_row: Callable[[str], SessionRow | None], sid: str, name: str
              ) -> SessionRow:
    row = session_row(sid)
    if row is None:
        raise IngestError(f"{no_session(sid)}: a message belongs to an existing session "
                          "(create it first with db.sessions.create)", item=name,
                          field="session_id")
    if row.status != "open":
        raise IngestError(f"session {sid!r} is {row.status}: messages go to an open session "
                          "(as db.messages.append)", item=name, field="session_id")
    return row


def _check_time(item: Mapping[str, Any], row: SessionRow, now: float, name: str) -> None:
    value = item.get("created_at")
    if value is None:
        return  # `with_numbering` gives one
    try:
        when = item_epoch(value)
    except ValueError:
        return  # ingest names it
    if row.started_at is not None and when < row.started_at:
        raise IngestError(f"message at {format_timestamp(when)} is before its session "
                          f"{row.id!r} started ({format_timestamp(row.started_at)})",
                          item=name, field="created_at")
    problem = future_problem(when, now, "message", "created_at")
    if problem is not None:
        raise IngestError(problem, item=name, field="created_at")


class _LiveSeqs:
    """Which live message of a `messages` snapshot holds a session's seq, leaving out the rows
    the batch replaces (`batch_ids`) or removes (documents in `leaving`). Indexed on first use
    (one sort of the live numbered rows), then O(messages of the session) per session."""

    def __init__(self, snap: Any, batch_ids: set[str], leaving: set[str]) -> None:
        self._snap = snap
        self._batch_ids = batch_ids
        self._leaving = leaving
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None
        self._per_session: dict[str, dict[int, int]] = {}

    def holder(self, sid: str, seq: int) -> str | None:
        """The id of the live message of session `sid` at `seq` that stays, or None."""
        seqs = self._per_session.get(sid)
        if seqs is None:
            seqs = self._per_session[sid] = self._session_seqs(sid)
        row = seqs.get(seq)
        if row is None:
            return None
        snap = self._snap
        (item_id,) = snap.ids.take([row])
        if item_id in self._batch_ids:
            return None
        if self._leaving and snap.doc_ids.take([row])[0] in self._leaving:
            return None
        return str(item_id)

    def _session_seqs(self, sid: str) -> dict[int, int]:
        snap = self._snap
        if snap.size == 0:
            return {}
        sessions = snap.column("session_id")
        code = sessions.pool.index.get(sid)
        if code is None:
            return {}
        if self._sorted is None:
            seq = snap.column("seq")
            rows = np.flatnonzero(snap.live & seq.present(snap.size)
                                  & (sessions.codes(snap.size) >= 0))
            codes = sessions.codes(snap.size)[rows]
            order = np.argsort(codes, kind="stable")
            self._sorted = (codes[order], rows[order])
        codes, rows = self._sorted
        lo, hi = np.searchsorted(codes, code, "left"), np.searchsorted(codes, code, "right")
        mine = rows[lo:hi]
        values = self._snap.column("seq").values(snap.size)[mine]
        return {int(v): int(r) for v, r in zip(values, mine, strict=True)}


class _LiveMessageIds:
    """Which live message of a `messages` snapshot holds a `message_id`, leaving out the rows
    the batch replaces (`batch_ids`) or removes (documents in `leaving`). An id above every
    stored one (what `with_numbering` gives, and every `append`) is held by none: answered
    from the largest stored id (one pass, on first use). Otherwise indexed on first use (one
    sort of the live rows that have one), then O(log n) per look-up."""

    def __init__(self, snap: Any, batch_ids: set[str], leaving: set[str]) -> None:
        self._snap = snap
        self._batch_ids = batch_ids
        self._leaving = leaving
        self._next: int | None = None
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    def holder(self, message_id: int) -> str | None:
        """The id of a live message at `message_id` that stays, or None."""
        snap = self._snap
        if snap.size == 0:
            return None
        if self._next is None:
            self._next = next_message_id(snap)
        if message_id >= self._next:
            return None  # above every stored id: no sort of the collection's ids for it
        if self._sorted is None:
            column = snap.column("message_id")
            rows = np.flatnonzero(snap.live & column.present(snap.size))
            values = column.values(snap.size)[rows]
            order = np.argsort(values, kind="stable")
            self._sorted = (values[order], rows[order])
        values, rows = self._sorted
        lo = np.searchsorted(values, message_id, "left")
        hi = np.searchsorted(values, message_id, "right")
        for row in rows[lo:hi].tolist():
            (item_id,) = snap.ids.take([row])
            if item_id in self._batch_ids:
                continue
            if self._leaving and snap.doc_ids.take([row])[0] in self._leaving:
                continue
            return str(item_id)
        return None
