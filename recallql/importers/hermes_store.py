"""Read a Hermes Agent session store (``state.db``, Hermes 0.19.0, schema 22) strictly read-only.

Hermes keeps sessions and messages in one SQLite file in WAL mode; recent rows may still sit in
``state.db-wal``. The reader never writes to the user's files, and SQLite's ``mode=ro`` alone
does not guarantee that: a read-only connection to a WAL database creates ``-wal``/``-shm``
files when they are absent and writes its read marks into an existing ``-shm``. So:

- **No sidecar with content** (no ``-wal``/``-journal``, or empty ones): the file is opened in
  place with ``mode=ro&immutable=1`` (no locks, no sidecar files). Immutable means SQLite assumes
  nobody writes; the reader checks that the file's size and mtime did not change during the read
  (a Hermes checkpoint meanwhile) and otherwise retries, then falls back to a copy.
- **A non-empty ``-wal`` or ``-journal``**: the database and that sidecar are copied into a
  private temporary directory (the ``-shm`` is not needed; SQLite rebuilds it from the WAL), the
  copy is opened and read, and the directory is removed. The copy is taken again if any source
  file changed while it was being copied. This costs disk and time proportional to the store.

Either way the store, its ``-wal`` and its ``-shm`` stay byte-identical and no file appears next to
them. A TEXT value that is not valid UTF-8 (a torn write, a legacy client) never aborts the read:
a row whose id, lineage or message text is undecodable is left out and counted
(``undecodable_text``); a display-only value (session ``title``, ``model``, message
``tool_name``) is decoded with U+FFFD replacement characters and counted
(``undecodable_text_replaced``).

Rows are returned as plain dicts (see :func:`read_hermes_store`); message text is decoded by
`recallql.importers.hermes_content`. Neither module imports anything else of the project.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from recallql.importers.hermes_content import JSON_CONTENT_PREFIX, decode_content, tool_calls_text

_SIDECARS: Final = ("-wal", "-journal")
_ATTEMPTS: Final = 3

_SESSION_REQUIRED: Final = ("id", "source", "parent_session_id", "started_at")
_SESSION_OPTIONAL: Final = ("ended_at", "end_reason", "model_config", "title", "model", "archived")
_MESSAGE_REQUIRED: Final = ("id", "session_id", "role", "content", "timestamp")
_MESSAGE_OPTIONAL: Final = ("tool_name", "tool_calls", "active", "compacted")
#: Columns decoded with U+FFFD replacement when their text is not valid UTF-8 (display only);
#: an undecodable value in any other column leaves its row out.
_LENIENT: Final = frozenset({"title", "model", "tool_name"})


class HermesFormatError(ValueError):
    """The path is not a readable Hermes Agent store; the message names the path and the gap."""


class HermesStoreBusy(RuntimeError):
    """The store kept changing while it was read (Hermes writing); retry when it is idle."""


@dataclass(slots=True)
class HermesReadReport:
    """What was read and what was left out.

    Attributes:
        path: The store path as given.
        snapshot: ``immutable`` (read in place) or ``copy`` (read from a private copy).
        schema_version: ``schema_version.version``, or None when the table is absent.
        sessions: Session rows returned.
        messages: Message rows returned.
        skipped: Rows or values left out, by reason: ``undecodable_json_content`` (message
            dropped), ``message_without_session`` (message dropped: its session is not in the
            file), ``malformed_model_config`` (session kept with ``markers_unreadable``: its
            parent link proves no continuation), ``non_text_marker`` (a marker that is not a
            string, e.g. a number: it equals no session id, as a JSON value never equals a
            text id, so it is dropped), ``undecodable_text`` (a row whose id,
            lineage or message text is not valid UTF-8: dropped), ``undecodable_text_replaced``
            (a title, model or tool name that is not valid UTF-8: kept with U+FFFD).
        structured_without_text: ``"\\x00json:"`` messages kept with empty content (no text part).
        text_from_tool_calls: Messages without content whose text was taken from their
            ``tool_calls`` (the tool names and argument values).
        missing_parents: Sorted parent ids that sessions link to but the file does not hold.
        missing_columns: Optional columns absent in this (older) schema, as ``table.column``.
    """

    path: str
    snapshot: str = ""
    schema_version: int | None = None
    sessions: int = 0
    messages: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    structured_without_text: int = 0
    text_from_tool_calls: int = 0
    missing_parents: list[str] = field(default_factory=list)
    missing_columns: list[str] = field(default_factory=list)


@dataclass(slots=True)
class HermesStore:
    """A Hermes store read into memory.

    Attributes:
        sessions: Dicts with ``id, source, parent_session_id, started_at, ended_at, end_reason,
            branched_from, delegate_from, markers_unreadable, title, model, archived`` (times:
            epoch seconds UTC).
        messages: Dicts with ``id, session_id, role, content, timestamp, active, compacted,
            tool_name`` in ``id`` order; ``content`` is text (structured content decoded; for a
            message with no content, the text of its ``tool_calls``, see `tool_calls_text`).
        report: Counts and gaps.
    """

    sessions: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    report: HermesReadReport


def read_hermes_store(path: str | os.PathLike[str]) -> HermesStore:
    """Read every session and message of a Hermes ``state.db`` without writing anything.

    Args:
        path: The ``state.db`` file.

    Returns:
        The sessions, messages and a report.

    Raises:
        HermesFormatError: The file is missing, not SQLite, or lacks the Hermes tables/columns.
        HermesStoreBusy: The file kept changing over several attempts.
    """
    source = Path(path)
    if not source.exists():
        raise HermesFormatError(f"Hermes store {str(source)!r}: no such file")
    if not source.is_file():
        raise HermesFormatError(f"Hermes store {str(source)!r}: not a regular file")
    real = source.resolve()  # SQLite keeps the sidecars next to the real file (symlinks)
    for _ in range(_ATTEMPTS):
        before = _fingerprint(real)
        if _live_sidecars(real):
            break
        report = HermesReadReport(path=str(source))
        with _closing(_connect(_ro_uri(real, immutable=True), source, uri=True)) as conn:
            store = _read(conn, source, report)
        if _fingerprint(real) == before:
            report.snapshot = "immutable"
            return store
    return _read_copy(source, real)


def _read_copy(source: Path, real: Path) -> HermesStore:
    """Copy the store and its live sidecars to a private directory and read the copy."""
    with tempfile.TemporaryDirectory(prefix="recallql-hermes-") as tmp:
        copy = Path(tmp) / "state.db"
        for _ in range(_ATTEMPTS):
            before = _fingerprint(real)
            shutil.copyfile(real, copy)
            for suffix in _live_sidecars(real):
                shutil.copyfile(_sidecar(real, suffix), _sidecar(copy, suffix))
            if _fingerprint(real) == before:
                break
            for leftover in Path(tmp).iterdir():
                leftover.unlink()
        else:
            raise HermesStoreBusy(f"Hermes store {str(source)!r} kept changing while being read")
        report = HermesReadReport(path=str(source))
        with _closing(_connect(str(copy), source, uri=False)) as conn:
            conn.execute("PRAGMA query_only = 1")
            store = _read(conn, source, report)
    report.snapshot = "copy"
    return store


def _sidecar(db: Path, suffix: str) -> Path:
    return db.with_name(db.name + suffix)


def _live_sidecars(db: Path) -> list[str]:
    """Sidecar suffixes (``-wal``, ``-journal``) that exist next to ``db`` with content."""
    live = []
    for suffix in _SIDECARS:
        try:
            if _sidecar(db, suffix).stat().st_size > 0:
                live.append(suffix)
        except FileNotFoundError:
            continue
    return live


def _fingerprint(db: Path) -> tuple[tuple[int, int] | None, ...]:
    """(size, mtime_ns) of the store and each sidecar, None when absent."""
    out: list[tuple[int, int] | None] = []
    for suffix in ("", *_SIDECARS):
        try:
            st = _sidecar(db, suffix).stat()
            out.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


def _ro_uri(db: Path, *, immutable: bool) -> str:
    """A ``file:`` URI (percent-encoded by ``Path.as_uri``) opening absolute ``db`` read-only."""
    uri = db.as_uri() + "?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def _connect(target: str, source: Path, *, uri: bool) -> sqlite3.Connection:
    """Open ``target`` and touch the schema, so a non-SQLite file fails here. TEXT values that
    are not valid UTF-8 come back as `_Undecodable` instead of raising."""
    try:
        conn = sqlite3.connect(target, uri=uri)
        conn.text_factory = _text
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise HermesFormatError(
            f"Hermes store {str(source)!r}: not an SQLite database ({exc})"
        ) from exc
    return conn


class _closing:
    """``contextlib.closing`` for a connection (sqlite3's own context manager does not close)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def _read(conn: sqlite3.Connection, source: Path, report: HermesReadReport) -> HermesStore:
    """Read both tables inside one read transaction (one consistent snapshot)."""
    conn.execute("BEGIN")
    try:
        s_cols = _columns(conn, source, "sessions", _SESSION_REQUIRED, _SESSION_OPTIONAL, report)
        m_cols = _columns(conn, source, "messages", _MESSAGE_REQUIRED, _MESSAGE_OPTIONAL, report)
        report.schema_version = _schema_version(conn)
        skipped: Counter[str] = Counter()
        sessions = [_session(r, skipped)
                    for r in _decoded(_select(conn, "sessions", s_cols, "rowid"), skipped)]
        known = {s["id"] for s in sessions}
        messages = list(_messages(_decoded(_select(conn, "messages", m_cols, "id"), skipped),
                                  known, skipped, report))
    finally:
        conn.rollback()
    report.sessions, report.messages = len(sessions), len(messages)
    report.skipped = dict(sorted(skipped.items()))
    report.missing_parents = sorted(
        {p for s in sessions if (p := s["parent_session_id"]) is not None and p not in known}
    )
    return HermesStore(sessions, messages, report)


def _columns(
    conn: sqlite3.Connection, source: Path, table: str, required: tuple[str, ...],
    optional: tuple[str, ...], report: HermesReadReport,
) -> list[str]:
    """The columns to select; raises when the table or a required column is missing."""
    present = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}
    if not present:
        raise HermesFormatError(
            f"Hermes store {str(source)!r}: not a Hermes Agent store (no {table!r} table)"
        )
    lacking = [c for c in required if c not in present]
    if lacking:
        raise HermesFormatError(
            f"Hermes store {str(source)!r}: table {table!r} lacks column(s) {', '.join(lacking)}"
        )
    report.missing_columns += [f"{table}.{c}" for c in optional if c not in present]
    return [c for c in (*required, *optional) if c in present]


def _select(
    conn: sqlite3.Connection, table: str, cols: list[str], order: str
) -> Iterable[dict[str, Any]]:
    # Identifiers come from this module's constants, checked against PRAGMA table_info.
    sql = f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}"
    for values in conn.execute(sql):
        yield dict(zip(cols, values, strict=True))


class _Undecodable(bytes):
    """A TEXT value that is not valid UTF-8, as its raw bytes (see `_text`)."""


def _text(raw: bytes) -> str | _Undecodable:
    """The connection's text factory: UTF-8 text, or `_Undecodable` where sqlite3's default
    would raise ``OperationalError: Could not decode to UTF-8`` and abort the whole read."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _Undecodable(raw)


def _decoded(rows: Iterable[dict[str, Any]], skipped: Counter[str]
             ) -> Iterable[dict[str, Any]]:
    """The rows without undecodable text: a display-only value (`_LENIENT`) is decoded with
    U+FFFD (counted ``undecodable_text_replaced``); any other undecodable value drops its row
    (counted ``undecodable_text``)."""
    for row in rows:
        bad = [c for c, v in row.items() if isinstance(v, _Undecodable)]
        if not bad:
            yield row
        elif all(c in _LENIENT for c in bad):
            skipped["undecodable_text_replaced"] += len(bad)
            yield {**row, **{c: row[c].decode("utf-8", "replace") for c in bad}}
        else:
            skipped["undecodable_text"] += 1


def _schema_version(conn: sqlite3.Connection) -> int | None:
    try:
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    except sqlite3.OperationalError:
        return None
    return None if row is None or row[0] is None else int(row[0])


def _session(row: dict[str, Any], skipped: Counter[str]) -> dict[str, Any]:
    """One session dict; markers come from ``model_config`` JSON."""
    branched, delegate, unreadable = _markers(row.get("model_config"), skipped)
    return {
        "id": str(row["id"]),
        "source": row["source"],
        "parent_session_id": _opt_str(row["parent_session_id"]),
        "started_at": _as_float(row["started_at"]),
        "ended_at": _as_float(row.get("ended_at")),
        "end_reason": row.get("end_reason"),
        "branched_from": branched,
        "delegate_from": delegate,
        "markers_unreadable": unreadable,
        "title": row.get("title"),
        "model": row.get("model"),
        "archived": bool(row.get("archived") or 0),
    }


def _markers(raw: Any, skipped: Counter[str]) -> tuple[str | None, str | None, bool]:
    """``(_branched_from, _delegate_from, unreadable)`` of a ``model_config`` JSON text.

    ``unreadable`` is True when the text is not a JSON object: the markers cannot be known, so
    the session's parent link proves no continuation (SPEC §6: no proven edge, its own root).
    A marker that is not a string (e.g. the number 42) is compared as the JSON value it is: it
    equals no session id (ids are text), so it is dropped and blocks nothing.
    """
    if raw is None or raw == "":
        return None, None, False
    try:
        config = json.loads(raw)
    except (TypeError, ValueError):
        config = None
    if not isinstance(config, dict):
        skipped["malformed_model_config"] += 1
        return None, None, True
    out: list[str | None] = []
    for key in ("_branched_from", "_delegate_from"):
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            skipped["non_text_marker"] += 1
            value = None
        out.append(value)
    return out[0], out[1], False


def _messages(
    rows: Iterable[dict[str, Any]], known: set[str], skipped: Counter[str],
    report: HermesReadReport,
) -> Iterable[dict[str, Any]]:
    """Message dicts; drops (and counts) undecodable content and messages without a session."""
    for row in rows:
        session_id = str(row["session_id"])
        if session_id not in known:
            skipped["message_without_session"] += 1
            continue
        content = decode_content(row["content"])
        if content is None:
            skipped["undecodable_json_content"] += 1
            continue
        if content == "" and str(row["content"]).startswith(JSON_CONTENT_PREFIX):
            report.structured_without_text += 1
        if not content.strip() and row.get("tool_calls"):
            content = tool_calls_text(row["tool_calls"])
            report.text_from_tool_calls += bool(content)
        active = row.get("active", 1)
        yield {
            "id": int(row["id"]),
            "session_id": session_id,
            "role": row["role"],
            "content": content,
            "timestamp": _as_float(row["timestamp"]),
            "active": True if active is None else bool(active),
            "compacted": bool(row.get("compacted") or 0),
            "tool_name": row.get("tool_name"),
        }


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _as_float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None
