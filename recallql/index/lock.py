"""The writer lock of a database directory: one writer at a time, across processes.

``<db>/LOCK`` is held with a non-blocking ``fcntl.flock``; the holder writes its pid into it.
A second writer (another process, or another `Store` in this process) gets `DatabaseLocked` at
once. Readers take no lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from recallql.index.errors import DatabaseLocked

LOCK_FILE = "LOCK"


def acquire_lock(directory: Path) -> tuple[int, bool]:
    """Take the writer lock of `directory`.

    Returns:
        (the open file descriptor, whether this call created the lock file).

    Raises:
        DatabaseLocked: another writer holds it.
    """
    path = directory / LOCK_FILE
    while True:
        try:
            fd, created = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            fd, created = os.open(path, os.O_RDWR | os.O_CREAT, 0o644), False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DatabaseLocked(
                f"the database {directory} is locked by another writer (lock file {path}); "
                "close it there, or open this one read-only (readonly=True)") from None
        if _is_current(fd, path):
            break
        os.close(fd)  # a failed open removed the file while we waited: lock the new one
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd, created


def _is_current(fd: int, path: Path) -> bool:
    """Whether `fd` is still the file at `path` (not unlinked or replaced)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
