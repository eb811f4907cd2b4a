"""This process's side of "one writer at a time": a reentrant mutex and, on disk, the
directory's LOCK (`recallql.index.lock`) for the outermost hold.

A write holds the writer for its own duration only. Nested holds (a sweep's read and its
batch, an append's id assignment and its batch) share the outermost one's lock. On release the
store closes its tantivy writers (`release`), so the next process's write can open its own.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from recallql.index.errors import DatabaseLocked
from recallql.index.lock import acquire_lock


class Writer:
    """The writer of one store in this process.

    Args:
        path: the database directory, or None in memory (no LOCK then).
        timeout: seconds the outermost hold waits for another process's write.

    Attributes:
        mutex: serialises this process's writes (and snapshot refreshes).
        recovered: collections recovered in the current hold (a write recovers its collection
            first, once per hold: another process may have crashed mid-batch meanwhile).
    """

    def __init__(self, path: Path | None, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.mutex = threading.RLock()
        self.recovered: set[str] = set()
        self._depth = 0
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this thread is inside a hold (only meaningful under `mutex`)."""
        return self._depth > 0

    @contextlib.contextmanager
    def hold(self, check: Callable[[], None], release: Callable[[], None],
             acquired: Callable[[], None] = lambda: None) -> Iterator[None]:
        """Be the writer for the block.

        Args:
            check: called first, under the mutex (raises when the store refuses writes).
            release: called when the outermost hold ends, before the LOCK is released.
            acquired: called when the outermost hold has taken the LOCK (the store finishes
                what another process's crash left that must be settled before anything else).

        Raises:
            DatabaseLocked: the LOCK stayed held by another process for `timeout`.
        """
        with self.mutex:
            check()
            if self._depth == 0 and self.path is not None:
                self._fd = acquire_lock(self.path, self.timeout)[0]
                self.recovered = set()
                try:
                    acquired()
                except BaseException:
                    self.close()
                    raise
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self.path is not None:
                    try:
                        release()
                    finally:
                        self.close()

    @contextlib.contextmanager
    def lock_for_reading(self) -> Iterator[bool]:
        """Hold the LOCK without being a writer (`check` reads the three stores as one
        state); yields False when it could not be taken (waited `timeout`, or not writable)."""
        with self.mutex:
            if self.path is None or self._depth:
                yield True
                return
            try:
                fd: int | None = acquire_lock(self.path, self.timeout)[0]
            except (DatabaseLocked, OSError):
                fd = None
            try:
                yield fd is not None
            finally:
                if fd is not None:
                    os.close(fd)

    def close(self) -> None:
        """Release the LOCK if this process holds it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
