"""The SQLite metadata store: collections, item metadata, vector-segment manifest, batch state,
and the sessions / annotations / signals tables of the sessions layer.

One write connection (used under the store's writer lock) and one read connection per thread
(SQLite connections must not run two transactions at once; a connection per thread lets any
number of threads read at the same time, each in its own WAL snapshot). In memory there is one
connection, guarded by the store's mutex. The database runs in WAL mode with
``synchronous=FULL``, so a committed transaction survives a crash or power loss. The row
``state('committed_batch')`` is the commit point of every item batch (see
`recallql.index.batch`); ``batches.committed_at`` records when each batch committed (for
``AS OF``).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from recallql.index.connections import (
    FORMAT_VERSION,
    ReadConnections,
    connect,
    create_schema,
    sqlite_errors,
    up_to_date,
)
from recallql.index.errors import StoreError
from recallql.index.schema import NAME_RE, CollectionInfo, FieldType

ITEM_INSERT = (
    "INSERT INTO items(collection_id, row, item_id, doc_id, entity, position, created_at, batch,"
    " has_vector, texts, fields, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
NEW_ROWS_SQL = (
    "SELECT row, item_id, doc_id, entity, position, created_at, has_vector, fields FROM items"
    " WHERE collection_id = ? AND row >= ? AND row < ? ORDER BY row"
)


#: The `state` key counting committed schema changes (`MetadataStore.committed_head`).
SCHEMA_KEY = "schema_version"


@dataclass(frozen=True)
class CollectionRow:
    """A collection as stored: its schema, SQLite id, next rowid, tantivy purge mark (rows
    tombstoned at or before `purged_batch` are deleted from tantivy) and retention horizon
    (rows tombstoned at or before `horizon` may be deleted from tantivy and the vector segments
    at any time; `AS OF` cannot show them)."""

    id: int
    info: CollectionInfo
    next_row: int
    purged_batch: int
    horizon: int = 0


@dataclass(frozen=True)
class SegmentRow:
    """One vector segment of the manifest; `rowids` is ``None`` for the range ``lo..hi-1``."""

    file: str
    lo: int
    hi: int
    n: int


class MetadataStore:
    """SQLite metadata for one database.

    Args:
        path: the SQLite file, or ``None`` for an in-memory database.
        readonly: open without ever writing (readers in other processes).
        lock: in memory, the lock that guards the one connection (the store's mutex); on disk
            every thread reads through its own connection and this lock is not used.

    Raises:
        StoreError: the file cannot be opened or is not a recallql metadata store.
    """

    def __init__(self, path: Path | None, *, readonly: bool = False,
                 lock: threading.RLock | None = None):
        self.path = path
        self.readonly = readonly
        self._closed = False
        self._lock = lock or threading.RLock()
        self._write: sqlite3.Connection | None = None
        self._columns = _COLLECTION_COLUMNS
        self._reads = None if path is None else ReadConnections(path)
        try:
            if not readonly:
                self._write = connect(path, False)
            if path is None:
                create_schema(self.write, None)
            self._check_format()
            self._columns = self._collection_columns()
        except BaseException:
            self.close()
            raise

    def migrate(self) -> bool:
        """Create the tables an earlier version did not have (the writer runs it under the
        writer lock when it opens); returns False when there was nothing to do.

        Raises:
            StoreError: the tables cannot be created; nothing is changed.
        """
        if up_to_date(self.write):
            return False
        create_schema(self.write, self.path)
        self._columns = self._collection_columns()
        return True

    def up_to_date(self) -> bool:
        """Whether the schema needs no migration."""
        with self.reading() as conn:
            return up_to_date(conn)

    def _collection_columns(self) -> str:
        """The columns of a collection row; a store written by an earlier version (read before
        a writer migrated it) has no ``horizon``: its purge mark is its horizon."""
        names = {name for (_, name, *_) in self.read.execute("PRAGMA table_info(collections)")}
        return _COLLECTION_COLUMNS if "horizon" in names else _COLLECTION_COLUMNS.replace(
            " horizon", " purged_batch")

    def _check_format(self) -> None:
        try:
            row = self.read.execute("SELECT value FROM state WHERE key = 'format'").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path} is not a recallql metadata store: {exc}") from exc
        if row is None or row[0] != FORMAT_VERSION:
            raise StoreError(f"{self.path}: unsupported store format {row and row[0]}")

    @property
    def read(self) -> sqlite3.Connection:
        """This thread's connection for reads (snapshots, the engine's session lookups); in
        memory it is the write connection (use it under `read_transaction`, which takes the
        lock, when other threads may write).

        Raises:
            StoreError: the store is closed.
        """
        if self._closed:
            raise self._closed_error()
        if self._reads is None:
            return self._write  # type: ignore[return-value]
        return self._reads.get()

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
        """Close every connection; later use raises `StoreError`."""
        self._closed = True
        if self._reads is not None:
            self._reads.close()
        if self._write is not None:
            self._write.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` on the write connection; rolls back on error.

        Raises:
            StoreError: SQLite failed (disk full, I/O error, ...): naming the file and the
                cause; the transaction is rolled back (nothing of it is visible).
        """
        with self._lock:
            conn = self.write
            with sqlite_errors(self.path, "write"):
                conn.execute("BEGIN IMMEDIATE")
            try:
                with sqlite_errors(self.path, "write"):
                    yield conn
                with sqlite_errors(self.path, "commit to"):
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a failed COMMIT may already have rolled back
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[sqlite3.Connection]:
        """A consistent read view (one WAL snapshot) on this thread's read connection; nested
        calls share the outer one."""
        with self._lock if self._reads is None else contextlib.nullcontext():
            conn = self.read
            if conn.in_transaction:  # nested (or, in memory, inside a write): consistent
                yield conn
                return
            with sqlite_errors(self.path, "read"):
                conn.execute("BEGIN")
            try:
                with sqlite_errors(self.path, "read"):
                    yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    @contextlib.contextmanager
    def reading(self, conn: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """`conn` when given, else a connection for a single read statement (in memory: under
        the lock, so no other thread's open write transaction is seen)."""
        if conn is not None:
            yield conn
            return
        with self._lock if self._reads is None else contextlib.nullcontext(), \
                sqlite_errors(self.path, "read"):
            yield self.read

    def committed_batch(self, conn: sqlite3.Connection | None = None) -> int:
        """The sequence number of the last committed item batch (0 before the first)."""
        sql = "SELECT value FROM state WHERE key = 'committed_batch'"
        with self.reading(conn) as c:
            return int(c.execute(sql).fetchone()[0])

    def committed_head(self, conn: sqlite3.Connection | None = None) -> tuple[int, int]:
        """(last committed batch, schema version) in one read: the schema version counts
        committed schema changes that start no batch (`add_fields`; 0 before the first), so
        a process holding a collection's state can tell that its field schema is stale."""
        sql = f"SELECT key, value FROM state WHERE key IN ('committed_batch', '{SCHEMA_KEY}')"
        with self.reading(conn) as c:
            found = dict(c.execute(sql).fetchall())
        return int(found["committed_batch"]), int(found.get(SCHEMA_KEY, 0))

    def schema_version(self, conn: sqlite3.Connection | None = None) -> int:
        """The schema version (`committed_head`)."""
        return self.committed_head(conn)[1]

    def collections(self, conn: sqlite3.Connection | None = None) -> list[CollectionRow]:
        """All collections, by name."""
        with self.reading(conn) as c:
            rows = c.execute(f"SELECT {self._columns} FROM collections ORDER BY name"
                             ).fetchall()
        return [_collection_row(r) for r in rows]

    def collection(self, name: str, conn: sqlite3.Connection | None = None) -> CollectionRow | None:
        """One collection by name, or ``None`` (also for a name no collection can have, such
        as one with a lone surrogate, which SQLite could not even encode)."""
        if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
            return None
        with self.reading(conn) as c:
            row = c.execute(f"SELECT {self._columns} FROM collections WHERE name = ?",
                            (name,)).fetchone()
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
            conn.execute(f"INSERT INTO state(key, value) VALUES ('{SCHEMA_KEY}', 1) "
                         "ON CONFLICT(key) DO UPDATE SET value = value + 1")
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

    def pending_purge(self, collection: CollectionRow, upto: int) -> list[int]:
        """Rowids tombstoned after the tantivy index last deleted them and at or before batch
        `upto` (the horizon recorded by the previous batch), read on the write connection."""
        return [r for (r,) in self.write.execute(
            "SELECT row FROM items WHERE collection_id = ? AND dead_batch > ? AND dead_batch <= ?",
            (collection.id, collection.purged_batch, upto))]

    def batch_at(self, at: float, conn: sqlite3.Connection | None = None) -> int:
        """The last batch committed at or before `at` (epoch seconds UTC), 0 when none."""
        with self.reading(conn) as c:
            row = c.execute("SELECT MAX(seq) FROM batches WHERE committed_at <= ?",
                            (at,)).fetchone()
        return int(row[0] or 0)

    def committed_at(self, seq: int, conn: sqlite3.Connection | None = None) -> float | None:
        """When batch `seq` committed (epoch seconds UTC), None for batch 0 or an unknown one."""
        with self.reading(conn) as c:
            row = c.execute("SELECT committed_at FROM batches WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else float(row[0])

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
        with self.reading(conn) as c:
            rows = c.execute(
                "SELECT file, lo, hi, n FROM segments WHERE collection_id = ? ORDER BY lo, file",
                (collection_id,)).fetchall()
        return [SegmentRow(*r) for r in rows]

    def segment_rowids(self, collection_id: int, file: str,
                       conn: sqlite3.Connection | None = None) -> bytes | None:
        """The explicit rowids (int64 bytes) of a segment, ``None`` for a contiguous range."""
        with self.reading(conn) as c:
            row = c.execute("SELECT rowids FROM segments WHERE collection_id = ? AND file = ?",
                            (collection_id, file)).fetchone()
        if row is None:
            raise FileNotFoundError(file)
        return row[0]

    def live_rows(self, collection_id: int, ids: Sequence[str], size: int) -> dict[str, int]:
        """The live rowid (< `size`) of each of `ids` that has one, from the ``items_live_id``
        index, read on the write connection (the writer's committed state)."""
        found: dict[str, int] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update((item, row) for item, row in self.write.execute(
                f"SELECT item_id, row FROM items WHERE collection_id = ? AND item_id IN "
                f"({marks}) AND dead_batch IS NULL AND row < ?", (collection_id, *chunk, size)))
        return found

    def fetch(self, collection_id: int, rows: Sequence[int]
              ) -> dict[int, tuple[str, str | None, int]]:
        """Text JSON, fields JSON and batch number of the given rowids."""
        out: dict[int, tuple[str, str | None, int]] = {}
        with self.reading() as conn:
            for start in range(0, len(rows), 500):
                chunk = [int(r) for r in rows[start:start + 500]]
                marks = ",".join("?" * len(chunk))
                for row, texts, fields, batch in conn.execute(
                        f"SELECT row, texts, fields, batch FROM items WHERE collection_id = ?"
                        f" AND row IN ({marks})", (collection_id, *chunk)):
                    out[row] = (texts, fields, batch)
        return out


_COLLECTION_COLUMNS = ("id, name, text_fields, fields, dim, embedder, next_row, purged_batch,"
                       " horizon")


def _collection_row(row: tuple) -> CollectionRow:
    cid, name, texts, fields, dim, embedder, next_row, purged, horizon = row
    info = CollectionInfo(
        name=name,
        text_fields=tuple(json.loads(texts)),
        fields={k: FieldType(v) for k, v in json.loads(fields).items()},
        dim=dim,
        embedder_name=embedder,
    )
    return CollectionRow(cid, info, next_row, purged, horizon)


ExtraSql = Callable[[sqlite3.Connection], object]
