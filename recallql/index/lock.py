"""The writer lock of a database directory: one writer at a time, across processes.

``<db>/LOCK`` is held with ``fcntl.flock`` for the duration of one write (a batch, a session
transaction, a sweep), not for the life of a connection, so several processes can each keep a
database open for writing and take turns, as SQLite's connections do. The holder writes its pid
into the file. A writer that finds the lock held retries every few milliseconds (jittered) until
`timeout` seconds have passed, then raises `DatabaseLocked` naming the holder's pid. Waiting
writers queue at a turnstile (``<db>/LOCK.wait``): a writer that just released ``LOCK`` must
pass it again behind the one waiting there, so a process writing back to back cannot starve
the others. Readers take no lock.
"""

from __future__ import annotations

import fcntl
import functools
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from recallql.index.errors import DatabaseLocked

LOCK_FILE = "LOCK"
#: The turnstile writers queue at while they wait for `LOCK_FILE`.
TURN_FILE = "LOCK.wait"
#: Default seconds a writer waits for the lock (Python's sqlite3 default ``timeout``).
DEFAULT_LOCK_TIMEOUT = 5.0
#: Seconds between attempts (then the last value, plus up to as much again at random). Short,
#: because a fresh writer tries at once: waiters that slept longer would lose every race to a
#: process writing back to back (a write is a few to a few tens of milliseconds).
_BACKOFF = (0.001, 0.002, 0.003, 0.005)


def acquire_lock(directory: Path, timeout: float = 0.0) -> tuple[int, bool]:
    """Take the writer lock of `directory`, waiting up to `timeout` seconds.

    Waiting writers queue at a turnstile (``LOCK.wait``, held while waiting for ``LOCK``): a
    writer that just released ``LOCK`` must pass the turnstile again, behind the writer already
    waiting there, so a process writing back to back cannot starve the others.

    Args:
        directory: the database directory.
        timeout: seconds to wait for another writer to release the lock (0: do not wait).

    Returns:
        (the open file descriptor, whether this call created the lock file). Closing the
        descriptor releases the lock.

    Raises:
        DatabaseLocked: another writer held it for the whole `timeout` (names its pid).
    """
    path = directory / LOCK_FILE
    deadline = time.monotonic() + max(0.0, timeout)
    turn = os.open(directory / TURN_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _wait_for(functools.partial(_try_lock, turn), deadline):
            raise _locked(directory, path, timeout)
        while True:
            fd, created = _open(path)
            if _wait_for(functools.partial(_try_lock, fd), deadline):
                if _is_current(fd, path):
                    break
                os.close(fd)  # a failed open removed the file meanwhile: lock the new one
                continue
            os.close(fd)
            raise _locked(directory, path, timeout)
    finally:
        os.close(turn)  # the next waiter may now queue for LOCK
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd, created


def _wait_for(attempt: Callable[[], bool], deadline: float) -> bool:
    """Call `attempt` until it succeeds (True) or `deadline` (monotonic) would pass (False),
    sleeping `_BACKOFF` between calls (its last value, jittered, from then on)."""
    tries = 0
    while not attempt():
        pause = _BACKOFF[min(tries, len(_BACKOFF) - 1)]
        if tries >= len(_BACKOFF):
            pause += random.uniform(0.0, pause)
        if time.monotonic() + pause > deadline:
            return False
        time.sleep(pause)
        tries += 1
    return True


def _locked(directory: Path, path: Path, timeout: float) -> DatabaseLocked:
    pid = holder_pid(path)
    return DatabaseLocked(_locked_message(directory, path, pid, timeout), path=directory,
                          pid=pid, waited=max(0.0, timeout))


def _open(path: Path) -> tuple[int, bool]:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
    except FileExistsError:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644), False


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def holder_pid(path: Path) -> int | None:
    """The pid written in a lock file by its last holder, or None (none, or unreadable)."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def holder(pid: int | None) -> str:
    """The lock holder in words: ``process 1234``."""
    if pid is None:
        return "another process"
    if pid == os.getpid():
        return f"this process ({pid}, through another connection)"
    return f"process {pid}"


def _locked_message(directory: Path, path: Path, pid: int | None, timeout: float) -> str:
    return (f"the database {directory} is locked by another writer, {holder(pid)} (lock file "
            f"{path}); waited {max(0.0, timeout):g} s. Retry, pass a longer lock_timeout, or "
            "open it read-only (readonly=True) to read meanwhile")


def _is_current(fd: int, path: Path) -> bool:
    """Whether `fd` is still the file at `path` (not unlinked or replaced)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
