"""The SQLite metadata store: collections, item metadata, vector-segment manifest, batch state,
and the sessions / annotations / signals tables of the sessions layer.

One write connection (owned by the single writer) and one read connection. The database runs in
WAL mode with ``synchronous=FULL``, so a committed transaction survives a crash or power loss.
The row ``state('committed_batch')`` is the commit point of every item batch (see
`recallql.index.batch`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from recallql.index.errors import StoreError
from recallql.index.schema import NAME_RE, CollectionInfo, FieldType

FORMAT_VERSION = 1

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS state(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS collections(
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, text_fields TEXT NOT NULL,
    fields TEXT NOT NULL, dim INTEGER NOT NULL, embedder TEXT, created_at REAL NOT NULL,
    next_row INTEGER NOT NULL DEFAULT 0, purged_batch INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS items(
    collection_id INTEGER NOT NULL, row INTEGER NOT NULL, item_id TEXT NOT NULL,
    doc_id TEXT, entity TEXT, position INTEGER NOT NULL, created_at REAL,
    batch INTEGER NOT NULL, dead_batch INTEGER, has_vector INTEGER NOT NULL,
    texts TEXT NOT NULL, fields TEXT, content_hash INTEGER, PRIMARY KEY (collection_id, row));
CREATE UNIQUE INDEX IF NOT EXISTS items_live_id ON items(collection_id, item_id)
    WHERE dead_batch IS NULL;
CREATE INDEX IF NOT EXISTS items_dead ON items(collection_id, dead_batch)
    WHERE dead_batch IS NOT NULL;
CREATE TABLE IF NOT EXISTS segments(
    collection_id INTEGER NOT NULL, file TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
    n INTEGER NOT NULL, rowids BLOB, PRIMARY KEY (collection_id, file));
CREATE TABLE IF NOT EXISTS batches(
    seq INTEGER PRIMARY KEY, collection_id INTEGER NOT NULL, n_items INTEGER NOT NULL,
    committed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    id TEXT PRIMARY KEY, agent_id TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open','closed','archived')),
    parent_session_id TEXT, source TEXT NOT NULL DEFAULT 'cli', end_reason TEXT,
    branched_from TEXT, delegate_from TEXT, started_at REAL NOT NULL, ended_at REAL,
    metadata TEXT NOT NULL DEFAULT '{}', frozen_snapshot TEXT, title TEXT);
CREATE TABLE IF NOT EXISTS annotations(
    id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, text TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS signals(
    id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,
    at REAL NOT NULL, entity TEXT);
CREATE INDEX IF NOT EXISTS signals_session ON signals(session_id);
CREATE INDEX IF NOT EXISTS annotations_session ON annotations(session_id);
CREATE INDEX IF NOT EXISTS signals_entity_name ON signals(entity, name);
CREATE INDEX IF NOT EXISTS sessions_parent ON sessions(parent_session_id);
INSERT OR IGNORE INTO state(key, value) VALUES ('format', 1), ('committed_batch', 0);
"""

ITEM_INSERT = (
    "INSERT INTO items(collection_id, row, item_id, doc_id, entity, position, created_at, batch,"
    " has_vector, texts, fields, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
NEW_ROWS_SQL = (
    "SELECT row, item_id, doc_id, entity, position, created_at, has_vector, fields FROM items"
    " WHERE collection_id = ? AND row >= ? AND row < ? ORDER BY row"
)


@dataclass(frozen=True)
class CollectionRow:
    """A collection as stored: its schema, SQLite id, next rowid and tantivy purge mark."""

    id: int
    info: CollectionInfo
    next_row: int
    purged_batch: int


@dataclass(frozen=True)
class SegmentRow:
    """One vector segment of the manifest; `rowids` is ``None`` for the range ``lo..hi-1``."""

    file: str
    lo: int
    hi: int
    n: int


def _connect(path: Path | None, readonly: bool) -> sqlite3.Connection:
    if path is None:
        target, uri = ":memory:", False
    elif readonly:
        target, uri = f"file:{path}?mode=ro", True
    else:
        target, uri = str(path), False
    conn = None
    try:
        conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA cache_size = -512")  # KiB; rows are read once into columns
        if not readonly:
            _refuse_foreign(conn, path)  # before WAL mode, which would change the file
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
    except (sqlite3.Error, StoreError) as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"cannot open the metadata store {path}: {exc}") from exc
    return conn


def _refuse_foreign(conn: sqlite3.Connection, path: Path | None) -> None:
    """Raise `StoreError` when the file is another application's SQLite database (tables, but
    no recallql ``state`` table), so that opening it writes nothing into it."""
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    if not names:
        return
    try:
        conn.execute("SELECT value FROM state WHERE key = 'format'")
    except sqlite3.Error:
        raise StoreError(f"{path} is not a recallql metadata store (an SQLite database with "
                         f"tables {', '.join(sorted(names)[:5])})") from None


def _create_schema(conn: sqlite3.Connection, path: Path | None) -> None:
    """Create the tables of a new store in one transaction (a no-op on an existing one).

    Raises:
        StoreError: the tables cannot be created (e.g. a ``state`` table of another shape);
            nothing is changed.
    """
    try:
        conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA_SQL}{_migrations(conn)}COMMIT;")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StoreError(f"{path} is not a recallql metadata store: {exc}") from exc


def _migrations(conn: sqlite3.Connection) -> str:
    """SQL bringing a store written by an earlier version up to date (run with the schema).

    * ``items.content_hash`` (the row's `recallql.index.fingerprint`): rows written before it
      existed keep NULL, which never matches, so their first re-ingest rewrites them.
    """
    columns = {name for (_, name, *_) in conn.execute("PRAGMA table_info(items)")}
    if columns and "content_hash" not in columns:
        return "ALTER TABLE items ADD COLUMN content_hash INTEGER;"
    return ""


class MetadataStore:
    """SQLite metadata for one database.

    Args:
        path: the SQLite file, or ``None`` for an in-memory database.
        readonly: open without ever writing (readers in other processes).

    Raises:
        StoreError: the file cannot be opened or is not a recallql metadata store.
    """

    def __init__(self, path: Path | None, *, readonly: bool = False):
        self.path = path
        self.readonly = readonly
        self._closed = False
        self._write = None if readonly else _connect(path, False)
        self._read = self._write
        try:
            if self._write is not None:
                _create_schema(self._write, path)
            if path is not None:
                self._read = _connect(path, True)
            self._check_format()
        except BaseException:
            self.close()
            raise

    def _check_format(self) -> None:
        try:
            row = self.read.execute("SELECT value FROM state WHERE key = 'format'").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path} is not a recallql metadata store: {exc}") from exc
        if row is None or row[0] != FORMAT_VERSION:
            raise StoreError(f"{self.path}: unsupported store format {row and row[0]}")

    @property
    def read(self) -> sqlite3.Connection:
        """The connection for reads (snapshots, the engine's session lookups); in memory it is
        the write connection.

        Raises:
            StoreError: the store is closed.
        """
        if self._closed:
            raise self._closed_error()
        return self._read  # type: ignore[return-value]

    @property
    def write(self) -> sqlite3.Connection:
        """The write connection.

        Raises:
            StoreError: on a read-only or closed store.
        """
        if self._closed:
            raise self._closed_error()
        if self._write is None:
            raise StoreError(f"the database {self.path} is open read-only")
        return self._write

    def _closed_error(self) -> StoreError:
        where = "(in memory)" if self.path is None else str(self.path.parent)
        return StoreError(f"the database {where} is closed")

    def close(self) -> None:
        """Close both connections; later use raises `StoreError`."""
        self._closed = True
        for conn in {id(c): c for c in (self._read, self._write) if c is not None}.values():
            conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` on the write connection; rolls back on error."""
        conn = self.write
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[sqlite3.Connection]:
        """A consistent read view (one WAL snapshot) on the read connection."""
        conn = self.read
        if conn.in_transaction:  # in memory, nested in a write: already consistent
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def committed_batch(self, conn: sqlite3.Connection | None = None) -> int:
        """The sequence number of the last committed item batch (0 before the first)."""
        sql = "SELECT value FROM state WHERE key = 'committed_batch'"
        return int((conn or self.read).execute(sql).fetchone()[0])

    def collections(self, conn: sqlite3.Connection | None = None) -> list[CollectionRow]:
        """All collections, by name."""
        rows = (conn or self.read).execute(
            "SELECT id, name, text_fields, fields, dim, embedder, next_row, purged_batch"
            " FROM collections ORDER BY name").fetchall()
        return [_collection_row(r) for r in rows]

    def collection(self, name: str, conn: sqlite3.Connection | None = None) -> CollectionRow | None:
        """One collection by name, or ``None`` (also for a name no collection can have, such
        as one with a lone surrogate, which SQLite could not even encode)."""
        if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
            return None
        row = (conn or self.read).execute(
            "SELECT id, name, text_fields, fields, dim, embedder, next_row, purged_batch"
            " FROM collections WHERE name = ?", (name,)).fetchone()
        return None if row is None else _collection_row(row)

    def insert_collection(self, info: CollectionInfo) -> None:
        """Record a new collection (its own committed transaction)."""
        fields = {k: v.value for k, v in info.fields.items()}
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO collections(name, text_fields, fields, dim, embedder, created_at)"
                " VALUES (?,?,?,?,?,?)",
                (info.name, json.dumps(list(info.text_fields)), json.dumps(fields), info.dim,
                 info.embedder_name, time.time()))

    def add_fields(self, collection: CollectionRow, info: CollectionInfo,
                   fill: Callable[[dict], dict] | None) -> None:
        """Record `info`'s declared fields for an existing collection and give every stored row
        the values `fill(row_fields)` returns for the new fields (None: absent), in one
        transaction. A changed row's fingerprint is cleared (it no longer describes the row; a
        NULL fingerprint never matches, so an identical re-ingest rewrites it once)."""
        fields = {k: v.value for k, v in info.fields.items()}
        with self.transaction() as conn:
            conn.execute("UPDATE collections SET fields = ? WHERE id = ?",
                         (json.dumps(fields), collection.id))
            if fill is None:
                return
            rows = conn.execute("SELECT row, fields FROM items WHERE collection_id = ?",
                                (collection.id,)).fetchall()
            updates = []
            for row, raw in rows:
                values = json.loads(raw) if raw else {}
                added = {k: v for k, v in fill(values).items() if v is not None}
                if added:
                    updates.append((json.dumps({**values, **added}), collection.id, row))
            conn.executemany("UPDATE items SET fields = ?, content_hash = NULL "
                             "WHERE collection_id = ? AND row = ?", updates)

    def pending_purge(self, collection: CollectionRow) -> list[int]:
        """Rowids tombstoned since the tantivy index last deleted them."""
        return [r for (r,) in self.write.execute(
            "SELECT row FROM items WHERE collection_id = ? AND dead_batch > ?",
            (collection.id, collection.purged_batch))]

    def content_hashes(self, collection_id: int, rows: Sequence[int]) -> dict[int, int | None]:
        """The stored fingerprint of each of the given rowids (None: written before
        fingerprints were stored), read on the write connection."""
        out: dict[int, int | None] = {}
        rows = [int(r) for r in rows]
        for start in range(0, len(rows), 500):
            chunk = rows[start:start + 500]
            marks = ",".join("?" * len(chunk))
            out.update(self.write.execute(
                f"SELECT row, content_hash FROM items WHERE collection_id = ? AND row IN ({marks})",
                (collection_id, *chunk)))
        return out

    def segments(self, collection_id: int, conn: sqlite3.Connection | None = None
                 ) -> list[SegmentRow]:
        """The collection's vector-segment manifest, by first rowid."""
        rows = (conn or self.read).execute(
            "SELECT file, lo, hi, n FROM segments WHERE collection_id = ? ORDER BY lo, file",
            (collection_id,)).fetchall()
        return [SegmentRow(*r) for r in rows]

    def segment_rowids(self, collection_id: int, file: str,
                       conn: sqlite3.Connection | None = None) -> bytes | None:
        """The explicit rowids (int64 bytes) of a segment, ``None`` for a contiguous range."""
        row = (conn or self.read).execute(
            "SELECT rowids FROM segments WHERE collection_id = ? AND file = ?",
            (collection_id, file)).fetchone()
        if row is None:
            raise FileNotFoundError(file)
        return row[0]

    def fetch(self, collection_id: int, rows: Sequence[int]) -> dict[int, tuple[str, str | None]]:
        """Text JSON and fields JSON of the given rowids."""
        out: dict[int, tuple[str, str | None]] = {}
        for start in range(0, len(rows), 500):
            chunk = [int(r) for r in rows[start:start + 500]]
            marks = ",".join("?" * len(chunk))
            for row, texts, fields in self.read.execute(
                    f"SELECT row, texts, fields FROM items WHERE collection_id = ?"
                    f" AND row IN ({marks})", (collection_id, *chunk)):
                out[row] = (texts, fields)
        return out


def _collection_row(row: tuple) -> CollectionRow:
    cid, name, texts, fields, dim, embedder, next_row, purged = row
    info = CollectionInfo(
        name=name,
        text_fields=tuple(json.loads(texts)),
        fields={k: FieldType(v) for k, v in json.loads(fields).items()},
        dim=dim,
        embedder_name=embedder,
    )
    return CollectionRow(cid, info, next_row, purged)


ExtraSql = Callable[[sqlite3.Connection], object]
