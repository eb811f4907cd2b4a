"""SQLite connections of the metadata store: the schema, opening, and one read connection per
thread.

A new store's file is created complete under a temporary name and renamed into place
(`create_file`), so a ``meta.sqlite`` that exists always holds the schema: an empty or truncated
one is damage, never "a store still being created". Errors of SQLite become `StoreError`s naming
the file and the cause.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import urllib.parse
import weakref
from collections.abc import Iterator
from pathlib import Path

from recallql.index.errors import StoreError
from recallql.index.storage import AFTER

FORMAT_VERSION = 1
#: The first 16 bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS state(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS collections(
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, text_fields TEXT NOT NULL,
    fields TEXT NOT NULL, dim INTEGER NOT NULL, embedder TEXT, created_at REAL NOT NULL,
    next_row INTEGER NOT NULL DEFAULT 0, purged_batch INTEGER NOT NULL DEFAULT 0,
    horizon INTEGER NOT NULL DEFAULT 0);
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
CREATE INDEX IF NOT EXISTS batches_time ON batches(committed_at);
CREATE TABLE IF NOT EXISTS request_keys(
    key TEXT PRIMARY KEY, kind TEXT NOT NULL, request TEXT NOT NULL, response TEXT NOT NULL,
    at REAL NOT NULL);
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


def connect(path: Path | None, readonly: bool, new: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any thread.

    A writer's connection refuses another application's SQLite file (and, unless `new`, a file
    without tables) before it changes anything, then turns on WAL mode and ``synchronous=FULL``.

    Raises:
        StoreError: the file cannot be opened or is not a recallql metadata store.
    """
    if path is None:
        target, uri = ":memory:", False
    elif readonly:
        # the path %-escaped: a URI would read '%20' in a directory name as a space and stop
        # at a '?' or '#'
        target, uri = f"file:{urllib.parse.quote(str(path), safe='/')}?mode=ro", True
    else:
        target, uri = str(path), False
    conn = None
    try:
        conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA cache_size = -512")  # KiB; rows are read once into columns
        if not readonly:
            # before WAL mode, which would change the file
            refuse_foreign(conn, None if new else path)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
    except (sqlite3.Error, StoreError) as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"cannot open the metadata store {path}: {exc}") from exc
    return conn


def check_header(path: Path) -> None:
    """Refuse a ``meta.sqlite`` that cannot be an SQLite database: empty, shorter than its
    100-byte header, or without SQLite's magic string (nothing is opened or written).

    Raises:
        StoreError: naming the file and what is wrong with it.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            head = file.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read the metadata store {path}: {exc.strerror or exc}") \
            from exc
    if size == 0:
        raise StoreError(f"the metadata store {path} is empty (0 bytes): the database is "
                         "damaged; restore it from a backup (it is never re-created)")
    if size < 100 or head != SQLITE_MAGIC:
        raise StoreError(f"{path} is not a recallql metadata store (not an SQLite database "
                         f"file: {size} bytes, header {head[:16]!r})")


def refuse_foreign(conn: sqlite3.Connection, path: Path | None) -> None:
    """Raise `StoreError` when the file is another application's SQLite database (tables, but
    no recallql ``state`` table) or, when `path` is given, holds no tables at all (a store's
    file always has them), so that opening it writes nothing into it."""
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    if not names:
        if path is not None:
            raise StoreError(f"the metadata store {path} holds no tables: the database is "
                             "damaged; restore it from a backup (it is never re-created)")
        return
    try:
        conn.execute("SELECT value FROM state WHERE key = 'format'")
    except sqlite3.Error:
        raise StoreError(f"{path} is not a recallql metadata store (an SQLite database with "
                         f"tables {', '.join(sorted(names)[:5])})") from None


def create_schema(conn: sqlite3.Connection, path: Path | None) -> None:
    """Create the tables of a new store, or bring an existing one up to date, in one
    transaction.

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


def up_to_date(conn: sqlite3.Connection) -> bool:
    """Whether the file has every table and index of `SCHEMA_SQL` and needs no migration."""
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    wanted = set(re.findall(r"CREATE (?:UNIQUE )?(?:TABLE|INDEX) IF NOT EXISTS (\w+)",
                            SCHEMA_SQL))
    return wanted <= names and not _migrations(conn)


def _migrations(conn: sqlite3.Connection) -> str:
    """SQL bringing a store written by an earlier version up to date (run with the schema).

    * ``items.content_hash`` (the row's `recallql.index.fingerprint`): rows written before it
      existed keep NULL, which never matches, so their first re-ingest rewrites them.
    * ``collections.horizon`` (the AS OF retention horizon): earlier stores purged every
      tombstoned row at the next batch, so their horizon is their purge mark.
    """
    sql = []
    columns = {name for (_, name, *_) in conn.execute("PRAGMA table_info(items)")}
    if columns and "content_hash" not in columns:
        sql.append("ALTER TABLE items ADD COLUMN content_hash INTEGER;")
    columns = {name for (_, name, *_) in conn.execute("PRAGMA table_info(collections)")}
    if columns and "horizon" not in columns:
        sql.append("ALTER TABLE collections ADD COLUMN horizon INTEGER NOT NULL DEFAULT 0;"
                   "UPDATE collections SET horizon = purged_batch;")
    return "".join(sql)


def create_file(path: Path) -> None:
    """Create a complete, empty metadata store at `path`: written under a temporary name,
    fsynced and renamed into place, so `path` never exists half-made.

    Raises:
        StoreError: the file cannot be written (disk full, permissions), naming it.
    """
    tmp = path.with_name(path.name + ".creating")
    for leftover in (tmp, *(tmp.with_name(tmp.name + s) for s in ("-wal", "-shm", "-journal"))):
        leftover.unlink(missing_ok=True)  # a creation that never finished
    try:
        conn = connect(tmp, False, new=True)
        try:
            create_schema(conn, tmp)
        finally:
            conn.close()
        with open(tmp, "rb") as file:
            os.fsync(file.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot create the metadata store {path}: {exc.strerror or exc}") \
            from exc
    except StoreError:
        tmp.unlink(missing_ok=True)
        raise


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or unlink in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ReadConnections:
    """One read-only connection per thread (created on first use, closed with the store or
    when its thread is gone).

    Args:
        path: the SQLite file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._open: set[sqlite3.Connection] = set()
        self._guard = threading.Lock()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        """This thread's connection.

        Raises:
            StoreError: closed, or the file cannot be opened.
        """
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = connect(self.path, True)
        with self._guard:
            if self._closed:
                conn.close()
                raise StoreError(f"the database {self.path.parent} is closed")
            self._open.add(conn)
        self._local.conn = conn
        weakref.finalize(threading.current_thread(), self._drop, conn)
        return conn

    def _drop(self, conn: sqlite3.Connection) -> None:
        with self._guard:
            self._open.discard(conn)
        conn.close()

    def close(self) -> None:
        """Close every thread's connection."""
        with self._guard:
            self._closed = True
            conns, self._open = list(self._open), set()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


@contextlib.contextmanager
def sqlite_errors(path: Path | None, action: str) -> Iterator[None]:
    """Turn an `sqlite3.Error` of the storage (disk full, I/O error, a locked or damaged file:
    `OperationalError`, `DatabaseError`, `InternalError`) into a `StoreError` naming the file,
    the action and SQLite's cause; errors of the statement itself pass through.

    Raises:
        StoreError: with the `sqlite3.Error` as its ``__cause__``.
    """
    try:
        yield
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError,
            sqlite3.DataError):
        raise  # a mistake in the statement, not in the storage
    except sqlite3.Error as exc:
        where = "(in memory)" if path is None else str(path)
        after = "" if action == "read" else f"; {AFTER} (the transaction was rolled back)"
        raise StoreError(f"cannot {action} the metadata store {where}: {exc} "
                         f"({type(exc).__name__}){after}") from exc
