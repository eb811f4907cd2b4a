"""The database directory: what may be opened, created, or cleaned up.

A directory is a store when it holds ``meta.sqlite``; a directory that holds any other part of a
store (``collections/``) but no ``meta.sqlite`` is a damaged store, never an empty one to create
afresh (re-creating it would hand the old tantivy documents and vectors to new rows). A new
store's ``meta.sqlite`` is written under a temporary name and renamed into place, so the only
leftovers of an interrupted creation are ``LOCK`` and ``meta.sqlite.creating*``, which a new
creation removes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from recallql.index.connections import check_header, create_file
from recallql.index.errors import StoreError
from recallql.index.lock import LOCK_FILE, TURN_FILE, acquire_lock

META_FILE = "meta.sqlite"
#: What an interrupted creation may leave in a directory without ``meta.sqlite``.
_CREATION_LEFTOVERS = {LOCK_FILE, TURN_FILE, f"{META_FILE}.creating", f"{META_FILE}.creating-wal",
                       f"{META_FILE}.creating-shm", f"{META_FILE}.creating-journal"}


def check_directory(directory: Path, readonly: bool) -> None:
    """Refuse a path that is not a (possibly new) database directory, without changing it.

    Raises:
        StoreError: a file; a directory with other content and no ``meta.sqlite`` (naming the
            missing file when it holds parts of a store); a damaged ``meta.sqlite`` header;
            missing when `readonly`; a database directory that is not writable
            (`check_writable`).
    """
    meta = directory / META_FILE
    if readonly and not meta.is_file():
        if (directory / "collections").exists():
            raise _missing_meta(directory)
        raise StoreError(f"{directory} is not a recallql database (no {META_FILE})")
    if directory.exists() and not directory.is_dir():
        raise StoreError(f"{directory} exists and is not a directory")
    if meta.exists() or meta.is_symlink():
        if not meta.is_file():
            raise StoreError(f"{meta} is not a file: the database is damaged")
        check_header(meta)
        check_writable(directory)
        return
    if not directory.is_dir():
        return
    names = {p.name for p in directory.iterdir()}
    if "collections" in names:
        raise _missing_meta(directory)
    if names - _CREATION_LEFTOVERS:
        raise StoreError(f"{directory} is not empty and is not a recallql database")


def check_writable(directory: Path) -> None:
    """Refuse a database directory this process may not write, naming the cause: even a reader
    writes there (SQLite's ``meta.sqlite-shm`` of WAL mode, tantivy's ``.tantivy-meta.lock``,
    which tantivy creates to read an index).

    Raises:
        StoreError: on a read-only file system or without write permission.
    """
    if os.access(directory, os.W_OK):
        return
    read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    cause = "it is on a read-only file system" if read_only else "no write permission"
    raise StoreError(f"the database directory {directory} is not writable ({cause}); even "
                     "reading writes lock files there (SQLite's meta.sqlite-shm, tantivy's "
                     ".tantivy-meta.lock): copy the database to a writable directory (cp -r) "
                     "and open the copy")


def _missing_meta(directory: Path) -> StoreError:
    return StoreError(f"{directory / META_FILE} is missing but {directory / 'collections'} "
                      "exists: the database is damaged (it is never re-created; restore it "
                      "from a backup)")


def create(directory: Path, lock_timeout: float) -> None:
    """Create an empty store in `directory` (under the writer lock; a no-op when another
    process created it meanwhile). On failure the directory is left as it was found.

    Raises:
        StoreError: the files cannot be written (disk full, permissions), naming them.
        DatabaseLocked: another writer held the lock for `lock_timeout`.
    """
    made = not directory.exists()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the database directory {directory}: "
                         f"{exc.strerror or exc}") from exc
    try:
        fd, created = acquire_lock(directory, lock_timeout)
    except BaseException:
        if made:
            directory.rmdir()
        raise
    try:
        if not (directory / META_FILE).exists():
            create_file(directory / META_FILE)
    except BaseException:
        if created:  # unlinked under the lock: leave the directory as this open found it
            (directory / LOCK_FILE).unlink(missing_ok=True)
            (directory / TURN_FILE).unlink(missing_ok=True)
        if made:
            os.close(fd)
            fd = -1
            shutil.rmtree(directory, ignore_errors=True)
        raise
    finally:
        if fd >= 0:
            os.close(fd)


def clear_unborn(collection_dir: Path | None) -> None:
    """Remove what an interrupted `create_collection` left for a collection that SQLite does
    not know: an index directory with no document (created before the collection's row
    committed). A directory that holds documents is refused instead.

    Raises:
        StoreError: the directory holds data of a collection SQLite does not know.
    """
    if collection_dir is None or not collection_dir.exists():
        return
    vectors = collection_dir / "vectors"
    if vectors.exists() and any(vectors.iterdir()):
        raise StoreError(f"{collection_dir} holds vector segments of a collection that "
                         f"{META_FILE} does not know: the database is damaged")
    text = collection_dir / "text"
    if text.exists() and any(p.name.endswith((".idx", ".term", ".store")) for p in
                             text.iterdir()):
        raise StoreError(f"{text} holds a text index with documents of a collection that "
                         f"{META_FILE} does not know: the database is damaged")
    shutil.rmtree(collection_dir)
