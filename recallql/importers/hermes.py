"""`db.import_hermes(path)`: a Hermes Agent session store into sessions and messages (SPEC §6).

The store is read strictly read-only by
`recallql.importers.hermes_store.read_hermes_store` (the file, its ``-wal`` and ``-shm`` stay
byte-identical). Mapping:

- **Session** → a row of the sessions table: same id, ``agent_id = 'hermes'``, ``source``,
  ``parent_session_id``, ``end_reason``, ``started_at`` / ``ended_at`` (epoch seconds),
  ``branched_from`` / ``delegate_from`` from the ``_branched_from`` / ``_delegate_from`` markers of
  ``model_config``, ``title``; status ``archived`` when Hermes archived it, else ``closed`` once
  it ended, else ``open``; metadata ``{"origin": "hermes", "model": ...}``.
- **Message** → an item of ``messages``: item id ``hermes:<session_id>:<hermes message id>``,
  text ``content`` (``"\\x00json:"`` structured content decoded to its text parts), ``role``,
  ``created_at`` = the message time, ``active`` / ``compacted`` kept, ``seq`` = 1-based position
  among the session's messages in the file (or just after the session's last stored message,
  when a message appended through recallql holds that seq), a fresh database-unique
  ``message_id`` (both assigned inside the batch's write); embedded with the collection's
  embedder at ingest. Messages without text are skipped (nothing to find).

Re-importing: sessions and messages already imported are matched by id. A session row that
changed (e.g. it has ended since) is updated; a message whose flags, role or time changed (e.g.
compacted in place since) is replaced under its old ``message_id`` and ``seq``; everything else
is left alone, so re-importing the same file writes nothing. A database session with the same id
that was not imported from Hermes is never overwritten (skipped as ``session_id_taken``).

Atomicity: the work is cut into batches of whole sessions (about ``batch_size`` messages each).
Each batch is one all-or-nothing `Store.ingest` whose ``extra_sql`` writes that batch's session
rows inside the same SQLite transaction, so a session appears together with all its messages.
An interrupted import leaves whole batches; running it again completes it (idempotent).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from recallql.importers.hermes_store import HermesStore, read_hermes_store
from recallql.sessions import roots
from recallql.sessions.messages import COLLECTION, message_item, next_message_id, next_seq
from recallql.sessions.signals import validate_id
from recallql.sessions.state import MAX_TIME, MIN_TIME

AGENT_ID: Final = "hermes"
ORIGIN: Final = "hermes"
DEFAULT_BATCH_SIZE: Final = 2000
#: Session columns the importer writes, in statement order.
_COLUMNS: Final = ("id", "agent_id", "status", "parent_session_id", "source", "end_reason",
                   "branched_from", "delegate_from", "started_at", "ended_at", "metadata",
                   "title", "markers_unreadable")
_UPSERT: Final = (
    f"INSERT INTO sessions ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[3:])
    + ", status = CASE WHEN sessions.status = 'archived' THEN 'archived' "
    "ELSE excluded.status END"
)

Progress = Callable[[int, int], None]


class ImportReport(BaseModel):
    """What `import_hermes` read, wrote and left out.

    Attributes:
        path: The store path as given.
        snapshot: How the store was read: ``immutable`` (in place) or ``copy`` (private copy of
            a store with a live ``-wal``).
        schema_version: The store's schema version (22 for Hermes 0.19.0), None if absent.
        sessions: Sessions of the file now in the database (added + updated + unchanged).
        sessions_added, sessions_updated: Session rows inserted / changed by this run.
        messages: Messages of the file now in the database.
        messages_added, messages_updated: Message items added / replaced by this run.
        skipped: Rows or values left out, by reason (the reader's reasons plus
            ``invalid_session_id``, ``no_start_time``, ``session_time_out_of_range`` (a start or
            end that is not a finite time in years 1..9999 UTC: the session and its messages
            are left out), ``session_id_taken``, ``message_of_skipped_session``,
            ``empty_content``, ``message_time_out_of_range`` (the message is kept without a
            time, as one with no timestamp)).
        missing_parents: Parent ids that imported sessions link to but the database lacks.
        unresolved: Imported sessions whose lineage does not resolve, by reason (``cycle``,
            ``missing_parent``); their messages are dropped by GROUP BY CONVERSATION.
        roots_updated: Stored conversation roots this run wrote or changed (new sessions, and
            sessions whose own or an ancestor's lineage changed since the last import).
        batches: Batches committed by this run (0 when there was nothing to write).
        missing_columns: Optional Hermes columns absent from this (older) store.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    snapshot: str = ""
    schema_version: int | None = None
    sessions: int = 0
    sessions_added: int = 0
    sessions_updated: int = 0
    messages: int = 0
    messages_added: int = 0
    messages_updated: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)
    missing_parents: list[str] = Field(default_factory=list)
    unresolved: dict[str, int] = Field(default_factory=dict)
    roots_updated: int = 0
    batches: int = 0
    missing_columns: list[str] = Field(default_factory=list)

    def to_text(self) -> str:
        """A short human summary (what the CLI prints)."""
        lines = [
            f"imported {self.path} (schema {self.schema_version}, read {self.snapshot})",
            f"  sessions: {self.sessions} ({self.sessions_added} added, "
            f"{self.sessions_updated} updated)",
            f"  messages: {self.messages} ({self.messages_added} added, "
            f"{self.messages_updated} updated) in {self.batches} batch(es)",
        ]
        if self.skipped:
            lines.append("  skipped: " + ", ".join(f"{k}={v}" for k, v in self.skipped.items()))
        if self.unresolved:
            lines.append("  unresolved lineage: "
                         + ", ".join(f"{k}={v}" for k, v in self.unresolved.items()))
        if self.missing_parents:
            lines.append("  missing parents: " + ", ".join(self.missing_parents))
        return "\n".join(lines)


@dataclass(slots=True)
class _SessionWork:
    """One session of the file: its row (None: unchanged) and the message items to write."""

    id: str
    row: tuple | None
    added: bool
    items: list[dict[str, Any]] = field(default_factory=list)
    updated_items: int = 0
    new_items: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Plan:
    work: list[_SessionWork]
    kept_sessions: list[str]
    messages: int
    skipped: Counter[str]


def import_hermes(db: Any, path: str | os.PathLike[str], *, progress: Progress | None = None,
                  batch_size: int = DEFAULT_BATCH_SIZE) -> ImportReport:
    """Import a Hermes Agent ``state.db`` into the sessions table and the messages collection.

    Args:
        db: The `recallql.api.Database` (opened as a writer).
        path: The Hermes ``state.db`` file (never written to).
        progress: Called as ``progress(done, total)`` with message items written so far and in
            all, once before the first batch and after each batch (a CLI progress bar hook).
        batch_size: Messages per batch (whole sessions; a session's messages never split).

    Returns:
        The `ImportReport`.

    Raises:
        HermesFormatError: not a readable Hermes store. HermesStoreBusy: it kept changing.
        IngestError, StoreError: a batch could not be written (earlier batches stay committed;
            re-running the import completes it). ValueError: ``batch_size < 1``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    store = read_hermes_store(path)
    plan = _plan(db, store)
    batches, roots_updated = _write(db, plan, progress, batch_size)
    return _report(db, store, plan, batches).model_copy(update={"roots_updated": roots_updated})


# -- planning ------------------------------------------------------------------------------------


def _plan(db: Any, store: HermesStore) -> _Plan:
    """Decide, per session of the file, what to insert, update or leave alone."""
    skipped: Counter[str] = Counter(store.report.skipped)
    by_session = _group_messages(_valid_times(store.messages, skipped))
    existing = _existing_sessions(db, [s["id"] for s in store.sessions])
    snap = db.snapshot(COLLECTION)
    known = _existing_messages(snap)
    next_id = next_message_id(snap)
    work, kept, count = [], [], 0
    for session in store.sessions:
        msgs = by_session.get(session["id"], [])
        row = _session_row(session, msgs, skipped)
        if row is None or _taken(existing.get(session["id"]), skipped):
            skipped["message_of_skipped_session"] += len(msgs)
            continue
        kept.append(session["id"])
        old = existing.get(session["id"])
        unchanged = old is not None and old == _comparable(row, old)
        item = _SessionWork(session["id"], None if unchanged else row, added=old is None)
        next_id = _plan_messages(item, msgs, row[4], known, next_id, skipped)
        count += sum(1 for m in msgs if m["content"])
        if item.row is not None or item.items:
            work.append(item)
    return _Plan(work, kept, count, skipped)


def _valid_times(messages: Iterable[dict[str, Any]], skipped: Counter[str]
                 ) -> Iterator[dict[str, Any]]:
    """The messages, each timestamp outside years 1..9999 UTC (or not finite) dropped to None
    (counted): a message's text is worth keeping without its time."""
    for m in messages:
        if _in_range(m["timestamp"]):
            yield m
        else:
            skipped["message_time_out_of_range"] += 1
            yield {**m, "timestamp": None}


def _in_range(ts: float | None) -> bool:
    """True for None (no time) and for a finite time in years 1..9999 UTC."""
    return ts is None or MIN_TIME <= ts <= MAX_TIME


def _group_messages(messages: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        out.setdefault(m["session_id"], []).append(m)
    return out


def _session_row(session: dict[str, Any], msgs: list[dict[str, Any]], skipped: Counter[str]
                 ) -> tuple | None:
    """The sessions-table values of a Hermes session, or None (skipped, counted)."""
    try:
        validate_id(session["id"], "session id")
    except ValueError:
        skipped["invalid_session_id"] += 1
        return None
    times = [m["timestamp"] for m in msgs if m["timestamp"] is not None]
    started = session["started_at"]
    if started is None:
        started = min(times) if times else session["ended_at"]
    if started is None:
        skipped["no_start_time"] += 1
        return None
    if not (_in_range(started) and _in_range(session["ended_at"])):
        skipped["session_time_out_of_range"] += 1
        return None
    ended, reason = session["ended_at"], session["end_reason"]
    status = "archived" if session["archived"] else (
        "closed" if ended is not None or reason is not None else "open")
    meta = json.dumps({"origin": ORIGIN, "model": session["model"]}, sort_keys=True)
    return (session["id"], AGENT_ID, status, session["parent_session_id"],
            session["source"] or "cli", reason, session["branched_from"],
            session["delegate_from"], float(started), ended, meta, session["title"],
            int(bool(session.get("markers_unreadable"))))


def _comparable(row: tuple, old: tuple) -> tuple:
    """`row` as it would read back over `old` after the upsert (archived stays archived)."""
    return row[:2] + (old[2] if old[2] == "archived" else row[2],) + row[3:]


def _taken(old: tuple | None, skipped: Counter[str]) -> bool:
    """True (counted) when the id belongs to a session that was not imported from Hermes."""
    if old is None:
        return False
    try:
        origin = json.loads(old[10] or "{}").get("origin")
    except (ValueError, AttributeError):
        origin = None
    if origin == ORIGIN:
        return False
    skipped["session_id_taken"] += 1
    return True


def _existing_sessions(db: Any, ids: list[str]) -> dict[str, tuple]:
    """Current sessions-table values (in `_COLUMNS` order, agent id as stored) by id."""
    out: dict[str, tuple] = {}
    with db.read_transaction() as conn:
        for chunk in _chunks(ids, 500):
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE id IN ({marks})"
            for values in conn.execute(sql, chunk):
                out[values[0]] = tuple(values)
    return out


def _existing_messages(snap: Any) -> dict[str, tuple]:
    """Imported messages already in the collection: item id -> (message_id, seq, role,
    created_at, active, compacted, source)."""
    ids = snap.ids
    rows = [r for r in range(snap.size) if snap.live[r] and ids[r].startswith("hermes:")]
    if not rows:
        return {}
    cols = [snap.values(name, rows) for name in ("message_id", "seq", "role")]
    flags = [snap.values(name, rows) for name in ("active", "compacted")]
    sources = snap.values("source", rows)
    created = snap.created_at[rows].tolist()
    return {ids[r]: (cols[0][i], cols[1][i], cols[2][i], _time(created[i]), bool(flags[0][i]),
                     bool(flags[1][i]), sources[i]) for i, r in enumerate(rows)}


def _plan_messages(work: _SessionWork, msgs: list[dict[str, Any]], source: str,
                   known: dict[str, tuple], next_id: int, skipped: Counter[str]) -> int:
    """Queue the session's new and changed messages (`source`: the session's, which its
    messages carry); returns the next free message id."""
    for seq, m in enumerate(msgs, start=1):
        if not m["content"]:
            skipped["empty_content"] += 1
            continue
        item_id = f"hermes:{m['session_id']}:{m['id']}"
        old = known.get(item_id)
        facts = (m["role"] or "unknown", m["timestamp"], m["active"], m["compacted"], source)
        if old is not None and old[2:] == facts:
            continue
        message_id, position = (next_id, seq) if old is None else (old[0], old[1])
        next_id += old is None
        work.updated_items += old is not None
        item = message_item(m["session_id"], message_id, position, facts[0], m["content"],
                            m["timestamp"], m["active"], m["compacted"], source=source,
                            agent_id=AGENT_ID)
        work.items.append({**item, "id": item_id})
        if old is None:
            work.new_items.append(work.items[-1])
    return next_id


# -- writing -------------------------------------------------------------------------------------


def _write(db: Any, plan: _Plan, progress: Progress | None, batch_size: int) -> tuple[int, int]:
    """Commit the planned work in batches of whole sessions; returns the number of batches and
    of stored conversation roots that changed."""
    total = sum(len(w.items) for w in plan.work)
    done = batches = 0
    if progress is not None:
        progress(0, total)
    embedder = db.embedder(COLLECTION)
    updates: list[roots.RootUpdate] = []
    for group in _batches(plan.work, batch_size):
        items = [item for w in group for item in w.items]
        rows = [w.row for w in group if w.row is not None]
        with db.store.writing():  # ids after the committed ones, as `db.messages` assigns them
            _number([item for w in group for item in w.new_items], db.snapshot(COLLECTION))
            db.store.ingest(COLLECTION, items, embedder, extra_sql=_upsert(rows, updates))
        batches += 1
        done += len(items)
        if progress is not None:
            progress(done, total)
    return batches, sum(u.changed for u in updates)


def _number(new_items: list[dict[str, Any]], snap: Any) -> None:
    """Give a batch's new message items fresh database-unique ``message_id`` values after the
    committed ones, and seqs after their session's committed messages (call it holding the
    writer): a write committed since the import was planned (another thread or process) may
    have taken the planned ids, and a message appended through recallql to an imported open
    session holds the seq that the file's next message would take. A seq stays the file
    position when that is free."""
    last: dict[str, int] = {}
    for message_id, item in enumerate(new_items, start=next_message_id(snap)):
        item["message_id"] = message_id
        sid = item["session_id"]
        if sid not in last:
            last[sid] = next_seq(snap, sid) - 1
        item["seq"] = item["position"] = last[sid] = max(item["seq"], last[sid] + 1)


def _upsert(rows: list[tuple], updates: list[roots.RootUpdate]) -> Callable[[Any], None]:
    """The batch's session rows, with their stored conversation roots (and their descendants')
    brought up to date in the same transaction (`recallql.sessions.roots.refresh`: only these
    sessions and their descendants are recomputed); the update is appended to `updates`."""
    def write(conn: Any) -> None:
        conn.executemany(_UPSERT, rows)
        updates.append(roots.refresh(conn, [r[0] for r in rows]))
    return write


def _batches(work: list[_SessionWork], size: int) -> Iterator[list[_SessionWork]]:
    group: list[_SessionWork] = []
    count = 0
    for w in work:
        if group and count + len(w.items) > size:
            yield group
            group, count = [], 0
        group.append(w)
        count += len(w.items)
    if group:
        yield group


# -- report --------------------------------------------------------------------------------------


def _report(db: Any, store: HermesStore, plan: _Plan, batches: int) -> ImportReport:
    read = store.report
    missing, unresolved = _lineage_summary(db, plan.kept_sessions)
    return ImportReport(
        path=read.path, snapshot=read.snapshot, schema_version=read.schema_version,
        sessions=len(plan.kept_sessions),
        sessions_added=sum(1 for w in plan.work if w.added),
        sessions_updated=sum(1 for w in plan.work if w.row is not None and not w.added),
        messages=plan.messages,
        messages_added=sum(len(w.items) - w.updated_items for w in plan.work),
        messages_updated=sum(w.updated_items for w in plan.work),
        skipped=dict(sorted((k, v) for k, v in plan.skipped.items() if v)),
        missing_parents=missing, unresolved=unresolved, batches=batches,
        missing_columns=list(read.missing_columns),
    )


def _lineage_summary(db: Any, ids: list[str]) -> tuple[list[str], dict[str, int]]:
    """Parent ids absent from the database, and imported sessions that do not resolve (read
    from the stored roots, which every batch kept up to date)."""
    with db.read_transaction() as conn:
        stored = db.sessions.stored_roots(conn, ids)
        counts = Counter(str(res.reason) for res in stored.values()
                         if res is not None and res.reason is not None)
        parents = {p for chunk in _chunks(ids, 500) for (p,) in conn.execute(
            "SELECT parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL AND "
            f"id IN ({', '.join('?' * len(chunk))})", chunk)}
        present = {p for chunk in _chunks(sorted(parents), 500) for (p,) in conn.execute(
            f"SELECT id FROM sessions WHERE id IN ({', '.join('?' * len(chunk))})", chunk)}
    return sorted(parents - present), dict(sorted(counts.items()))


def _time(value: float) -> float | None:
    return None if value != value else float(value)  # NaN: no time


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
