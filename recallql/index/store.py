"""`Store`: one recallql database — a directory (or memory) holding the SQLite metadata store,
one tantivy index and one vector-segment directory per collection.

Layout of a database directory::

    LOCK                              writer lock (fcntl.flock, non-blocking)
    meta.sqlite (+ -wal, -shm)        `recallql.index.metadata`
    collections/<name>/text/          tantivy index (`recallql.index.text`)
    collections/<name>/vectors/*.npy  vector segments (`recallql.index.vectors`)

Writes are batches, all-or-nothing across the three stores; the protocol and the crash recovery
are described in `recallql.index.batch`. One writer at a time: a second writer (another process,
or another `Store` in this process) gets `DatabaseLocked` at once. Readers (``readonly=True``)
take no lock, never write, and see the last committed batch: `snapshot` checks SQLite's
committed batch number on every call and refreshes incrementally when it changed.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from recallql.index import batch as batches
from recallql.index import changes
from recallql.index import reindex as rebuilds
from recallql.index.analysis import CURRENT_VERSION as CURRENT
from recallql.index.batch import DeleteReport, IngestReport
from recallql.index.changes import Plan
from recallql.index.embedders import Embedder
from recallql.index.errors import StoreError
from recallql.index.items import ItemBatch
from recallql.index.lock import LOCK_FILE, acquire_lock
from recallql.index.metadata import CollectionRow, ExtraSql, MetadataStore
from recallql.index.reindex import Progress, ReindexReport
from recallql.index.schema import CollectionInfo, make_info
from recallql.index.snapshot import CollectionSnapshot, CollectionState
from recallql.index.text import TextIndex, stored_version
from recallql.index.vectors import SegmentFiles

META_FILE = "meta.sqlite"


class Store:
    """A recallql database.

    Use `Store.open`. Thread-safe: one lock serialises writes and snapshot refreshes.

    Attributes:
        path: the database directory, or ``None`` in memory.
        readonly: True for a reader.
        meta: the `MetadataStore` (``meta.read`` is a read connection for session lookups).
    """

    def __init__(self, path: Path | None, readonly: bool, lock_fd: int | None):
        self.path = path
        self.readonly = readonly
        self._lock_fd = lock_fd
        self._mutex = threading.RLock()
        self._states: dict[str, CollectionState] = {}
        self._broken: str | None = None
        self._closed = False
        self.meta = MetadataStore(None if path is None else path / META_FILE, readonly=readonly)

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, readonly: bool = False) -> Store:
        """Open or create a database.

        Args:
            path: a directory (created when missing, unless `readonly`), or ``None`` for an
                in-memory database.
            readonly: open an existing database as a reader: no lock, no writes.

        Raises:
            DatabaseLocked: another writer holds the lock.
            StoreError: not a recallql database, or missing when `readonly`.
        """
        if path is None:
            return cls(None, False, None)
        directory = Path(path)
        if readonly:
            if not (directory / META_FILE).is_file():
                raise StoreError(f"{directory} is not a recallql database (no {META_FILE})")
            return cls(directory, True, None)
        if directory.exists() and not directory.is_dir():
            raise StoreError(f"{directory} exists and is not a directory")
        if directory.is_dir() and any(directory.iterdir()) and not (directory / META_FILE).exists():
            raise StoreError(f"{directory} is not empty and is not a recallql database")
        directory.mkdir(parents=True, exist_ok=True)
        fd, created = acquire_lock(directory)
        store = None
        try:
            store = cls(directory, False, fd)
            store.recover()
        except BaseException:
            if created:  # leave the directory as this open found it (unlinked under the lock)
                (directory / LOCK_FILE).unlink(missing_ok=True)
            if store is not None:
                store.close()  # releases the lock too
            else:
                os.close(fd)
            raise
        return store

    # -- collections ---------------------------------------------------------------------------

    def collections(self) -> list[CollectionInfo]:
        """All collections, by name.

        Raises:
            StoreError: the store is closed.
        """
        self.check_open()
        return [row.info for row in self.meta.collections()]

    def collection(self, name: str) -> CollectionInfo:
        """One collection's schema.

        Raises:
            StoreError: no such collection.
        """
        return self._row(name).info

    def _row(self, name: str) -> CollectionRow:
        row = self.meta.collection(name)
        if row is None:
            known = ", ".join(info.name for info in self.collections()) or "none"
            raise StoreError(f"no collection {name!r} (collections: {known})")
        return row

    def create_collection(self, name: str, text_fields: Sequence[str] = ("title", "body"),
                          fields: Mapping[str, object] | None = None, dim: int = 0,
                          embedder_name: str | None = None) -> CollectionInfo:
        """Create a collection, or return it when it exists with the same definition.

        Raises:
            StoreError: invalid definition; the collection exists with another schema, dimension
                or embedder (both are named); read-only store.
        """
        info = make_info(name, text_fields, fields, dim, embedder_name)
        with self._mutex:
            self._check_writable()
            existing = self.meta.collection(name)
            if existing is not None:
                check_same(existing.info, info)
                return existing.info
            TextIndex(self._text_dir(name)).close()
            self.meta.insert_collection(info)
            return info

    # -- writes --------------------------------------------------------------------------------

    def ingest(self, name: str, items: Iterable[object], embedder: Embedder | None = None, *,
               replace_documents: bool = False, extra_sql: ExtraSql | None = None
               ) -> IngestReport:
        """Write one all-or-nothing batch of items.

        Args:
            name: collection.
            items: item dicts (see SPEC §8); an item whose id is live is replaced, unless it is
                identical to its live version (then it is left alone and counted `unchanged`).
            embedder: embeds items without a vector; ``None`` when not attached.
            replace_documents: for every document (``doc_id``, default the item id) in the
                batch, also tombstone its live chunks whose item id is not in the batch, so a
                re-ingested document keeps exactly the chunks given (counted `removed`).
            extra_sql: called with the write connection inside the batch's SQLite transaction
                (e.g. to write session rows atomically with message items).

        Returns:
            The `IngestReport` (batch 0 when nothing changed and there is no `extra_sql`).

        Raises:
            IngestError: an invalid item (nothing written).
            StoreError: unknown collection, read-only store, or an I/O failure (the batch is
                rolled back).
        """
        started = time.perf_counter()
        with self._mutex:
            self._check_writable()
            state = self._state(name)
            if embedder is not None and embedder.name != state.info.embedder_name:
                raise StoreError(f"collection {name!r} uses embedder "
                                 f"{state.info.embedder_name!r}, not {embedder.name!r}")
            seq = self._begin(state)
            try:  # tantivy indexes validated chunks while the rest is validated
                plan = batches.prepare(state, items, embedder,
                                       batches.PrefixIndexer(state, seq), replace_documents)
            except BaseException:
                state.text.rollback()
                raise
            first_row = state.size
            written = self._write(state, seq, plan, extra_sql)
            n, replaced = len(plan.batch), len(plan.replaced)
            return IngestReport(name, seq if written else 0, n - replaced, replaced,
                                plan.embedded, first_row, time.perf_counter() - started,
                                plan.unchanged, len(plan.removed))

    def delete(self, name: str, ids: Iterable[object] | None = None,
               doc_ids: Iterable[object] | None = None, *,
               extra_sql: ExtraSql | None = None) -> DeleteReport:
        """Tombstone live items, as one all-or-nothing batch (the commit protocol of `ingest`).

        Readers stop seeing the rows when the batch commits; their tantivy documents are purged
        by a later batch, like replaced rows.

        Args:
            name: collection.
            ids: item ids to delete (str or int, as at ingest).
            doc_ids: documents to delete: every live chunk with one of these ``doc_id`` values
                (an item without ``doc_id`` is the document named by its id).
            extra_sql: called with the write connection inside the batch's SQLite transaction.

        Returns:
            The `DeleteReport`: rows deleted, and ids and doc ids that matched no live row
            (`missing`, not an error). Batch 0 when nothing matched and there is no `extra_sql`.

        Raises:
            IngestError: neither `ids` nor `doc_ids`, one of them not a list, or an id that
                ingest would refuse (naming its position and the argument); nothing written.
            StoreError: unknown collection, read-only store, or an I/O failure (rolled back).
        """
        started = time.perf_counter()
        wanted, docs = changes.delete_args(ids, doc_ids)
        with self._mutex:
            self._check_writable()
            state = self._state(name)
            seq = self._begin(state)
            plan, missing = changes.delete_plan(state, wanted, docs)
            written = self._write(state, seq, plan, extra_sql)
            return DeleteReport(name, seq if written else 0, len(plan.removed), missing,
                                time.perf_counter() - started)

    def reindex(self, name: str, progress: Progress | None = None) -> ReindexReport:
        """Rebuild the collection's text index from its live rows with the current analyser:
        migrates an index of an older analyser and makes BM25's statistics exact (no deleted
        or replaced row counted). See `recallql.index.reindex`.

        Raises:
            StoreError: unknown collection, read-only, closed or broken store.
        """
        with self._mutex:
            self._check_writable()
            state = self._state(name)
            try:
                return rebuilds.rebuild(state, self._text_dir(name),
                                        self.meta.committed_batch(self.meta.write), progress)
            except BaseException:
                state.text.close()
                self._states.pop(name, None)  # reopened (and the rebuild recovered) on next use
                raise

    def analyzer_versions(self) -> dict[str, int]:
        """The text analyser version of each collection's index (`recallql.index.analysis`)."""
        out = {}
        for info in self.collections():
            state = self._states.get(info.name)
            path = self._text_dir(info.name)
            found = None if path is None else stored_version(path)
            out[info.name] = state.text.version if state is not None else found or CURRENT
        return out

    def _begin(self, state: CollectionState) -> int:
        """The number of the next batch, with `state` brought up to the committed one."""
        seq = self.meta.committed_batch(self.meta.write) + 1
        state.current(seq - 1)
        return seq

    def _write(self, state: CollectionState, seq: int, plan: Plan,
               extra_sql: ExtraSql | None) -> bool:
        """Commit `plan` as batch `seq` (recovering on failure); returns False, writing nothing,
        when the plan changes nothing and there is no `extra_sql`."""
        if plan.writes_nothing() and extra_sql is None:
            state.text.rollback()  # nothing can be queued, but leave the writer clean
            return False
        try:
            batches.commit(state, plan, extra_sql, seq)
        except BaseException:
            self._recover_after_failure(state)
            raise
        self._advance(state, seq, plan.batch, plan.dead)
        return True

    def _advance(self, state: CollectionState, seq: int, batch: ItemBatch, dead: list[int]
                 ) -> None:
        """Bring the in-memory state to the batch just committed, then merge segments."""
        try:
            state.apply_local(seq, batch, dead)
        except BaseException:
            self._states.pop(state.info.name, None)  # rebuilt from SQLite on next use
            state.text.close()
            raise
        batches.merge_segments(state, self.meta)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the writer's mutex (no other write of this process interleaves) for a read and
        the batch that depends on it, e.g. a sweep that deletes what it just selected.

        Raises:
            StoreError: read-only, closed or broken store.
        """
        with self._mutex:
            self._check_writable()
            yield

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the metadata store alone (sessions, annotations, signals).

        Raises:
            StoreError: read-only store.
        """
        with self._mutex:
            self._check_writable()
            with self.meta.transaction() as conn:
                yield conn

    def recover(self) -> None:
        """Remove what unfinished batches and merges left behind (runs when a writer opens)."""
        with self._mutex:
            committed = self.meta.committed_batch(self.meta.write)
            for row in self.meta.collections(self.meta.write):
                batches.recover(self._state(row.info.name), committed)

    def _recover_after_failure(self, state: CollectionState) -> None:
        try:
            batches.recover(state, self.meta.committed_batch(self.meta.write))
        except BaseException as exc:  # the store is in an unknown state: refuse more writes
            self._broken = f"recovery after a failed batch failed: {exc!r}; reopen the database"

    def check_open(self) -> None:
        """Raise `StoreError` when the store is closed (every read and write path calls it,
        directly or through the metadata store)."""
        if self._closed:
            raise StoreError(f"the database {self.path or '(in memory)'} is closed")

    def _check_writable(self) -> None:
        self.check_open()
        if self.readonly:
            raise StoreError(f"the database {self.path} is open read-only")
        if self._broken:
            raise StoreError(self._broken)

    # -- reads ---------------------------------------------------------------------------------

    def snapshot(self, name: str) -> CollectionSnapshot:
        """A consistent view of the collection at the last committed batch (cached until a new
        batch commits).

        Raises:
            StoreError: unknown collection.
        """
        with self._mutex:
            self.check_open()
            state = self._state(name)
            return state.current(self.meta.committed_batch())

    def committed_batch(self) -> int:
        """The last committed batch number.

        Raises:
            StoreError: the store is closed.
        """
        return self.meta.committed_batch()

    def _text_dir(self, name: str) -> Path | None:
        return None if self.path is None else self.path / "collections" / name / "text"

    def _state(self, name: str) -> CollectionState:
        state = self._states.get(name)
        if state is not None and state.broken:  # a failed refresh: rebuild from SQLite
            state.text.close()
            state = None
        if state is None:
            row = self._row(name)
            base = None if self.path is None else self.path / "collections" / name
            text = TextIndex(self._text_dir(name), readonly=self.readonly)
            files = SegmentFiles(None if base is None else base / "vectors", row.info.dim)
            state = self._states[name] = CollectionState(row, self.meta, text, files)
        return state

    def close(self) -> None:
        """Release the tantivy writers, the SQLite connections and the writer lock."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            for state in self._states.values():
                state.text.close()
            self._states.clear()
            self.meta.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_same(stored: CollectionInfo, wanted: CollectionInfo) -> None:
    """Raise `StoreError` naming both definitions when they differ."""
    if not stored.same_schema(wanted):
        raise StoreError(
            f"collection {stored.name!r} exists with text fields {list(stored.text_fields)} and "
            f"fields {dict(stored.fields)}; asked for {list(wanted.text_fields)} and "
            f"{dict(wanted.fields)}")
    if stored.embedder_name != wanted.embedder_name or stored.dim != wanted.dim:
        raise StoreError(
            f"collection {stored.name!r} uses embedder {stored.embedder_name!r} (dim "
            f"{stored.dim}); asked for embedder {wanted.embedder_name!r} (dim {wanted.dim})")
