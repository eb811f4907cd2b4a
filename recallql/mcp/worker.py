"""One thread owns the database; writes arriving together are committed together.

The MCP server is the database's single writer, and many clients may call it at once. Every
call becomes a request on one queue, served by one thread (the `Database` and its SQLite
connections are used from that thread only):

- a **read** (a statement) runs when its turn comes;
- a **write** waits up to `window` seconds for more writes (group commit, as PostgreSQL's
  ``commit_delay``): consecutive ``remember`` requests into the same collection go into one
  all-or-nothing ingest batch, other writes run in arrival order. A read arriving meanwhile
  ends the window, so a client always reads what it wrote before.

When a combined batch fails (one client's invalid item), each of its requests is retried alone,
so every caller gets its own outcome and no one else's error.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

#: How long a write waits for others to share its commit (seconds).
DEFAULT_WINDOW = 0.01
#: Most items one combined ingest batch takes.
MAX_BATCH_ITEMS = 2000


@dataclass
class Request:
    """One call: `fn(db)` for a read or a write, or an ``ingest`` of `items` into `collection`
    that may share a batch with its neighbours."""

    fn: Callable[[Any], Any] | None
    write: bool
    collection: str | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    future: Future = field(default_factory=Future)


@dataclass
class Stats:
    """What the worker did: requests served, write requests, batches committed for them."""

    reads: int = 0
    writes: int = 0
    batches: int = 0
    largest_group: int = 0


class DatabaseWorker:
    """Serve reads and group-committed writes on one thread.

    Args:
        db: an open `Database` (used from the worker thread only, once started).
        window: seconds a write waits for others to commit with it.
    """

    def __init__(self, db: Any, window: float = DEFAULT_WINDOW) -> None:
        self.db = db
        self.window = window
        self.stats = Stats()
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="recallql-db", daemon=True)
        self._thread.start()

    # -- callers ---------------------------------------------------------------------------------

    def read(self, fn: Callable[[Any], Any]) -> Any:
        """Run `fn(db)` on the worker; return its value or raise its exception."""
        return self._submit(Request(fn, write=False))

    def write(self, fn: Callable[[Any], Any]) -> Any:
        """Run the write `fn(db)` in arrival order with the other writes of its window."""
        return self._submit(Request(fn, write=True))

    def ingest(self, collection: str, items: list[dict[str, Any]]) -> Any:
        """Ingest `items`, possibly in one batch with other callers' items for `collection`.

        Returns:
            The `IngestReport` of the batch that held them.
        """
        return self._submit(Request(None, write=True, collection=collection, items=items))

    def _submit(self, request: Request) -> Any:
        if not self._thread.is_alive():
            raise RuntimeError("the database worker has stopped")
        self._queue.put(request)
        return request.future.result()

    def close(self) -> None:
        """Finish the queued requests, stop the thread, close the database."""
        self._queue.put(None)
        self._thread.join()
        self.db.close()

    # -- the worker thread -----------------------------------------------------------------------

    def _loop(self) -> None:
        pending: Request | None = None
        while True:
            request = pending if pending is not None else self._queue.get()
            if request is None:
                return
            if not request.write:
                self.stats.reads += 1
                self._run(request, request.fn)
                pending = None
                continue
            group, pending, stop = self._gather(request)
            self._commit(group)
            if stop:
                return

    def _gather(self, first: Request) -> tuple[list[Request], Request | None, bool]:
        """`first` and the writes that arrive within the window; a read ends it early and is
        handed back to be served next; the stop marker ends it and the loop."""
        group, deadline = [first], time.monotonic() + self.window
        while True:
            left = deadline - time.monotonic()
            try:
                nxt = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                return group, None, False
            if nxt is None:
                return group, None, True
            if not nxt.write:
                return group, nxt, False
            group.append(nxt)

    def _commit(self, group: list[Request]) -> None:
        self.stats.writes += len(group)
        self.stats.largest_group = max(self.stats.largest_group, len(group))
        run: list[Request] = []
        for request in group:
            if run and not _joins(run, request):
                self._ingest_run(run)
                run = []
            if request.collection is not None:
                run.append(request)
            else:
                self.stats.batches += 1
                self._run(request, request.fn)
        if run:
            self._ingest_run(run)

    def _ingest_run(self, run: list[Request]) -> None:
        """One ingest batch for consecutive ``remember`` requests into one collection; on
        failure each request alone (its own error, nobody else's)."""
        collection = run[0].collection
        if len(run) > 1:
            try:
                report = self.db.ingest(collection, [i for r in run for i in r.items])
            except Exception:  # noqa: BLE001, S110 - retried one by one below, each with its error
                pass
            else:
                self.stats.batches += 1
                for request in run:
                    request.future.set_result(report)
                return
        for request in run:
            self.stats.batches += 1
            self._run(request, functools.partial(_ingest, request=request))

    def _run(self, request: Request, fn: Callable[[Any], Any] | None) -> None:
        assert fn is not None
        try:
            value = fn(self.db)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            request.future.set_exception(exc)
        else:
            request.future.set_result(value)


def _joins(run: list[Request], request: Request) -> bool:
    """Whether `request` can share the ingest batch of `run`: same collection, no item id in
    both (a batch holds each id once), and the batch stays within `MAX_BATCH_ITEMS`."""
    if request.collection is None or request.collection != run[0].collection:
        return False
    ids = {str(item.get("id")) for r in run for item in r.items}
    size = sum(len(r.items) for r in run) + len(request.items)
    return size <= MAX_BATCH_ITEMS and not ids & {str(i.get("id")) for i in request.items}


def _ingest(db: Any, request: Request) -> Any:
    """One ``remember`` request alone, as its own batch."""
    return db.ingest(request.collection, request.items)
