"""`Store`: one recallql database — a directory (or memory) holding the SQLite metadata store,
one tantivy index and one vector-segment directory per collection.

Layout of a database directory::

    LOCK                              writer lock (fcntl.flock, `recallql.index.lock`)
    meta.sqlite (+ -wal, -shm)        `recallql.index.metadata`
    collections/<name>/text/          tantivy index (`recallql.index.text`)
    collections/<name>/vectors/*.npy  vector segments (`recallql.index.vectors`)

Writes are batches, all-or-nothing across the three stores; the protocol and the crash recovery
are described in `recallql.index.batch`. One writer at a time: every write (a batch, a session
transaction, a sweep) takes the directory's LOCK for its own duration, waiting up to
`lock_timeout` seconds for another process's write, so several processes can keep one database
open for writing. In-process, one mutex serialises writes; any number of threads read at once.
Readers (``readonly=True``) take no lock, never write, and see the last committed batch on every
leg (`recallql.index.snapshot`). A directory that holds any part of a store is never re-created:
`recallql.index.integrity` refuses a missing or damaged file by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from recallql.index import batch as batches
from recallql.index import changes, indexer, integrity, layout, maintenance
from recallql.index import optimize as vector_merges
from recallql.index import reindex as rebuilds
from recallql.index import requests as keys
from recallql.index.analysis import CURRENT_VERSION as CURRENT
from recallql.index.batch import DeleteReport, IngestReport, Stamp
from recallql.index.changes import Plan
from recallql.index.embedders import Embedder
from recallql.index.errors import StoreError
from recallql.index.history import as_of_snapshot
from recallql.index.indexer import GraphBuilder
from recallql.index.integrity import CheckReport
from recallql.index.items import ItemBatch
from recallql.index.keyterms import keyword_fields
from recallql.index.lock import DEFAULT_LOCK_TIMEOUT
from recallql.index.metadata import CollectionRow, ExtraSql, MetadataStore
from recallql.index.optimize import OptimizeReport
from recallql.index.reindex import Progress, ReindexReport
from recallql.index.schema import CollectionInfo, check_fields, check_same, make_info
from recallql.index.snapshot import CollectionSnapshot, CollectionState
from recallql.index.storage import storage_errors
from recallql.index.text import TextIndex, rebuild_pending, recover_rebuild, stored_version
from recallql.index.vectors import SegmentFiles
from recallql.index.writer import Writer

META_FILE = layout.META_FILE
#: Default AS OF retention: tombstoned rows stay searchable `AS OF` a time for this long
#: (seconds; 7 days, the default of Delta Lake's and Lance's version retention).
DEFAULT_RETENTION = 7 * 86400.0


class Store:
    """A recallql database. Use `Store.open`.

    Thread-safe: a mutex serialises this process's writes and snapshot refreshes; reads run
    in parallel on per-thread SQLite connections.

    Attributes:
        path: the database directory, or ``None`` in memory.
        readonly: True for a reader.
        meta: the `MetadataStore` (``meta.read`` is this thread's read connection).
        lock_timeout: seconds a write waits for another process's write (the LOCK).
        retention: seconds tombstoned rows stay visible to ``AS OF`` (then purged).
        clock: the commit clock, epoch seconds UTC.
    """

    def __init__(self, path: Path | None, readonly: bool, *,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 retention: float = DEFAULT_RETENTION,
                 clock: Callable[[], float] = time.time):
        self.path = path
        self.readonly = readonly
        self.lock_timeout = float(lock_timeout)
        self.retention = float(retention)
        self.clock = clock
        self.writer = Writer(path, self.lock_timeout)
        self._mutex = self.writer.mutex
        self._states: dict[str, CollectionState] = {}
        self._broken: str | None = None
        self._closed = False
        self.meta = MetadataStore(None if path is None else path / META_FILE, readonly=readonly,
                                  lock=self._mutex)
        self.graph_builder = GraphBuilder(self._mutex, lambda: list(self._states.values()))
        #: Build ANN graphs on a background thread after writes (False: only `build_graphs`).
        self.background_graphs = not readonly

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, readonly: bool = False,
             lock_timeout: float = DEFAULT_LOCK_TIMEOUT, retention: float = DEFAULT_RETENTION,
             clock: Callable[[], float] = time.time) -> Store:
        """Open or create a database.

        Args:
            path: a directory (created when missing, unless `readonly`), or ``None`` for an
                in-memory database.
            readonly: open an existing database as a reader: no lock, no writes.
            lock_timeout: seconds each write waits for the writer lock (default 5).
            retention: seconds tombstoned rows stay visible to ``AS OF`` (default 7 days).
            clock: the commit clock (epoch seconds UTC; batches record it for ``AS OF``).

        Raises:
            DatabaseLocked: creating the database, migrating one written by an earlier
                version, or finishing a rebuild a crashed ``reindex`` left, waited
                `lock_timeout` for another writer.
            StoreError: not a recallql database, a missing or damaged file (named; nothing is
                changed), or missing when `readonly`.
        """
        options = {"lock_timeout": lock_timeout, "retention": retention, "clock": clock}
        if path is None:
            return cls(None, False, **options)  # type: ignore[arg-type]
        directory = Path(path)
        layout.check_directory(directory, readonly)
        if not readonly and not (directory / META_FILE).exists():
            layout.create(directory, lock_timeout)
        store = cls(directory, readonly, **options)  # type: ignore[arg-type]
        try:
            integrity.validate(store)
            if not readonly and not store.meta.up_to_date():
                with store._hold():  # an older version's file: add what it lacks
                    store.meta.migrate()
            if not readonly and store._rebuild_left():
                with store._hold():  # finishes or discards it (`_acquired`)
                    pass
        except BaseException:
            store.close()
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
                or embedder (both are named); read-only store; a storage failure.
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        info = make_info(name, text_fields, fields, dim, embedder_name)
        existing = self.meta.collection(name)
        if existing is not None:  # no write, no lock
            check_same(existing.info, info)
            return existing.info
        with self._hold():
            existing = self.meta.collection(name, self.meta.write)
            if existing is not None:
                check_same(existing.info, info)
                return existing.info
            with storage_errors(self._text_dir(name)):
                layout.clear_unborn(self._collection_dir(name))
                TextIndex(self._text_dir(name), create=True,
                          keywords=keyword_fields(info.fields)).close()
            self.meta.insert_collection(info)
            return info

    def add_fields(self, name: str, fields: Mapping[str, object],
                   fill: Callable[[dict], dict] | None = None) -> CollectionInfo:
        """Declare more filterable fields on an existing collection, as SQL's ``ALTER TABLE ADD
        COLUMN``: stored rows get what `fill(row_fields)` returns for them (a dict of new field
        values; missing or None: absent). One transaction, which also increments the schema
        version (`MetadataStore.committed_head`): the collection's cached state is rebuilt on
        its next use, in this process and in every other one that has the database open.
        Text fields, vectors and the tantivy index are unchanged.

        Returns:
            The collection's new `CollectionInfo`.

        Raises:
            StoreError: unknown collection, a name that is taken, an invalid type, or a
                read-only store.
        """
        fields = check_fields(fields, name)
        with self._hold():
            row = self._row(name)
            taken = sorted(set(fields) & set(row.info.fields))
            if taken:
                raise StoreError(f"collection {name!r} already has field(s) {taken}")
            old = row.info
            info = make_info(name, old.text_fields, {**old.fields, **fields}, old.dim,
                             old.embedder_name)
            self.meta.add_fields(row, info, fill)
            if self._collection_dir(name) is not None:  # in memory: `_state` keeps the indexes
                state = self._states.pop(name, None)
                if state is not None:
                    state.text.close()
            return info

    # -- writes --------------------------------------------------------------------------------

    def ingest(self, name: str, items: Iterable[object], embedder: Embedder | None = None, *,
               replace_documents: bool = False, extra_sql: ExtraSql | None = None,
               key: str | None = None, request_items: list[object] | None = None
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
            key: an idempotency key: a retry with the same key and items returns the first
                call's report without writing (`recallql.index.requests`).
            request_items: the items the key's request is recorded from, when the caller
                completed `items` from the store's state (messages numbered after the live
                ones: a retry would number them anew); default `items`.

        Returns:
            The `IngestReport` (batch 0 when nothing changed and there is no `extra_sql`).

        Raises:
            IngestError: an invalid item or key (nothing written).
            IdempotencyKeyReused: `key` was used for other items.
            StoreError: unknown collection, read-only store, or a storage failure (disk full,
                permissions, I/O; the batch is rolled back, the file and cause are named).
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        started = time.perf_counter()
        with self._hold():
            state = self._state(name)
            if embedder is not None and embedder.name != state.info.embedder_name:
                raise StoreError(f"collection {name!r} uses embedder "
                                 f"{state.info.embedder_name!r}, not {embedder.name!r}")
            stamp = self._begin(state)
            req = None
            if key is not None:
                items = list(items)
                req = keys.request(key, f"ingest:{name}", batches.request_parts(
                    state, items if request_items is None else request_items,
                    replace_documents))
                done = keys.replay(self.meta.write, req)
                if done is not None:
                    return IngestReport(**done)  # type: ignore[arg-type]
            try:  # tantivy indexes validated chunks while the rest is validated
                plan = batches.prepare(state, items, embedder,
                                       batches.PrefixIndexer(state, stamp.seq), replace_documents)
            except BaseException:
                state.text.rollback()
                raise
            return self._commit_ingest(state, stamp, plan, extra_sql, req, started)

    def _commit_ingest(self, state: CollectionState, stamp: Stamp, plan: Plan,
                       extra_sql: ExtraSql | None, req: keys.Request | None, started: float
                       ) -> IngestReport:
        """Commit an ingest's plan (with its idempotency key, when given) and report it."""
        nothing = plan.writes_nothing() and extra_sql is None
        report = IngestReport(state.info.name, 0 if nothing else stamp.seq,
                              len(plan.batch) - len(plan.replaced), len(plan.replaced),
                              plan.embedded, state.size, time.perf_counter() - started,
                              plan.unchanged, len(plan.removed))
        if req is None:
            self._write(state, stamp, plan, extra_sql)
        elif nothing:  # no batch to carry the key: it gets its own transaction
            state.text.rollback()
            with self.meta.transaction() as conn:
                keys.record(conn, req, dataclasses.asdict(report), stamp.at)
        else:
            self._write(state, stamp, plan, _and(extra_sql, functools.partial(
                keys.record, req=req, response=dataclasses.asdict(report), at=stamp.at)))
        return report

    def delete(self, name: str, ids: Iterable[object] | None = None,
               doc_ids: Iterable[object] | None = None, *,
               extra_sql: ExtraSql | None = None) -> DeleteReport:
        """Tombstone live items, as one all-or-nothing batch (the commit protocol of `ingest`).

        Readers stop seeing the rows when the batch commits; `AS OF` an earlier time still
        shows them within the retention window, after which their tantivy documents and
        vectors are purged by later batches.

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
            StoreError: unknown collection, read-only store, or a storage failure (rolled back).
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        started = time.perf_counter()
        wanted, docs = changes.delete_args(ids, doc_ids)
        with self._hold():
            state = self._state(name)
            stamp = self._begin(state)
            plan, missing = changes.delete_plan(state, wanted, docs)
            written = self._write(state, stamp, plan, extra_sql)
            return DeleteReport(name, stamp.seq if written else 0, len(plan.removed), missing,
                                time.perf_counter() - started)

    def reindex(self, name: str, progress: Progress | None = None) -> ReindexReport:
        """Rebuild the collection's text index from its live rows with the current analyser:
        migrates an index of an older analyser and makes BM25's statistics exact (no deleted
        or replaced row counted). See `recallql.index.reindex`. The rebuilt index holds no
        tombstoned row, so a batch first moves the retention horizon to the last batch: `AS OF`
        an earlier time then says rows deleted since are purged, as after `vacuum`.

        Raises:
            StoreError: unknown collection, read-only, closed or broken store; a storage
                failure (the old index is kept).
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        with self._hold():
            state = self._state(name)
            write = self.meta.write
            stamp = self._begin(state, horizon=self.meta.committed_batch(write))
            self._write(state, stamp, Plan(), batches.no_sql)
            try:
                with storage_errors(self._text_dir(name)):
                    report = rebuilds.rebuild(state, self._text_dir(name), stamp.seq, progress)
            except BaseException:
                state.text.close()
                self._states.pop(name, None)  # reopened (and the rebuild recovered) on next use
                raise
            with self.meta.transaction() as conn:  # tantivy holds no tombstoned row now
                conn.execute("UPDATE collections SET purged_batch = horizon WHERE id = ?",
                             (state.id,))
            return report

    def analyzer_versions(self) -> dict[str, int]:
        """The text analyser version of each collection's index (`recallql.index.analysis`)."""
        out = {}
        for info in self.collections():
            state = self._states.get(info.name)
            path = self._text_dir(info.name)
            found = None if path is None else stored_version(path)
            out[info.name] = state.text.version if state is not None else found or CURRENT
        return out

    def optimize_vectors(self, name: str, *, threads: int | None = None,
                         progress: Progress | None = None) -> OptimizeReport:
        """Merge the collection's vector segments into one with its ANN graph, reusing the
        largest input's graph (`recallql.index.optimize`); rows and answers are unchanged
        (the ANN leg then searches one graph). Nothing is written when there is one segment
        that needs nothing.

        Args:
            name: collection.
            threads: graph insertion threads (default: the machine's CPUs, at most 4; the
                graph then differs run to run).
            progress: called with (rows added to the graph, rows to add).

        Raises:
            StoreError: unknown collection, read-only, closed or broken store; a storage
                failure (the old segments stay; the new files are removed on the next open).
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        threads = threads or min(4, os.cpu_count() or 1)
        with self._hold():
            state = self._state(name)
            self._begin(state)  # recovered from a crashed writer, at the committed batch
            keep = batches.kept_rows(state, self.meta)
            try:
                return vector_merges.optimize_vectors(state, self.meta, keep, threads=threads,
                                                      progress=progress)
            except BaseException:
                self._recover_after_failure(state)  # removes the new files
                raise

    def vacuum(self) -> list[int]:
        """Purge every tombstoned row now: its tantivy document and its vector (`AS OF` can no
        longer show rows deleted before now). Writes two batches per collection with
        tombstoned rows (one moves the retention horizon, the next purges up to it).

        Returns:
            The batch numbers written.

        Raises:
            StoreError: read-only store, or a storage failure (the store stays at its last
                committed batch).
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        return maintenance.vacuum(self)

    def _begin(self, state: CollectionState, horizon: int | None = None) -> Stamp:
        """The stamp of the next batch, with `state` brought up to the committed one (and, first
        in a hold, recovered from what a crashed writer left)."""
        write = self.meta.write
        committed = self.meta.committed_batch(write)
        if self.path is not None and state.info.name not in self.writer.recovered:
            with storage_errors(self._collection_dir(state.info.name)):
                batches.recover(state, committed)
            self.writer.recovered.add(state.info.name)
        state.current(committed)
        last = self.meta.committed_at(committed, write) or 0.0
        at = max(self.clock(), last)
        if horizon is None:
            horizon = self.meta.batch_at(at - self.retention, write)
        return Stamp(committed + 1, at, horizon)

    def _write(self, state: CollectionState, stamp: Stamp, plan: Plan,
               extra_sql: ExtraSql | None) -> bool:
        """Commit `plan` as batch ``stamp.seq`` (recovering on failure); returns False, writing
        nothing, when the plan changes nothing and there is no `extra_sql`."""
        if plan.writes_nothing() and extra_sql is None:
            state.text.rollback()  # nothing can be queued, but leave the writer clean
            return False
        try:
            with storage_errors(self._collection_dir(state.info.name)):
                batches.commit(state, plan, extra_sql, stamp)
        except BaseException:
            self._recover_after_failure(state)
            raise
        self._advance(state, stamp.seq, plan.batch, plan.dead)
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
        if self.background_graphs and (indexer.missing(state) or indexer.checkpoint_due(state)):
            self.graph_builder.kick()

    def build_graphs(self) -> int:
        """Build now the ANN graph of every large vector segment that has none yet, and the
        column checkpoints that are due (what the background builder does after writes;
        `recallql.index.indexer`, `recallql.index.checkpoint`), in this thread.

        Returns:
            Graphs built.

        Raises:
            StoreError: read-only or closed store; a storage failure (naming the file).
        """
        self._check_writable()
        with self._mutex:
            for row in self.meta.collections():
                self._state(row.info.name).current(self.meta.committed_batch())
        return self.graph_builder.build_all()

    @contextlib.contextmanager
    def _hold(self) -> Iterator[None]:
        """Be the writer for the block: this process's mutex and, on disk, the LOCK (waiting
        up to `lock_timeout`); reentrant. On release the tantivy writers are closed, so the
        next process's write can open its own.

        Raises:
            StoreError: read-only, closed or broken store.
            DatabaseLocked: the LOCK stayed held by another process for `lock_timeout`.
        """
        with self.writer.hold(self._check_writable, self._release, self._acquired):
            yield

    def _rebuild_left(self) -> bool:
        """Whether a crashed `reindex` left a ``text.rebuild`` or ``text.old`` directory."""
        root = None if self.path is None else self.path / "collections"
        return root is not None and root.is_dir() and any(
            rebuild_pending(folder / "text") for folder in root.iterdir())

    def _acquired(self) -> None:
        """Finish or discard a text-index rebuild a crashed writer left (the collection's
        in-memory state is reopened from the settled directory)."""
        root = None if self.path is None else self.path / "collections"
        if root is None or not root.is_dir():
            return
        for folder in root.iterdir():
            text = folder / "text"
            if rebuild_pending(text):
                state = self._states.pop(folder.name, None)
                if state is not None:
                    state.text.close(quiet=True)
                with storage_errors(text):
                    recover_rebuild(text)

    def _release(self) -> None:
        for state in self._states.values():
            state.text.close()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Be the writer (no other write of this or another process interleaves) for a read and
        the writes that depend on it, e.g. a sweep that deletes what it just selected, or
        message ids assigned from the committed ones.

        Raises:
            StoreError: read-only, closed or broken store.
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        with self._hold():
            yield

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the metadata store alone (sessions, annotations, signals).

        Raises:
            StoreError: read-only store; a storage failure (rolled back).
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        with self._hold(), self.meta.transaction() as conn:
            yield conn

    def request(self, req: keys.Request) -> object | None:
        """The stored response of an earlier write with ``req.key`` (None: new), read on the
        write connection; call it inside `writing`.

        Raises:
            IdempotencyKeyReused: the key was used for another request.
        """
        return keys.replay(self.meta.write, req)

    def ingest_replay(self, name: str, items: list[object], key: str,
                      replace_documents: bool = False) -> IngestReport | None:
        """The report of an earlier `ingest` of these items with `key` (None: new), as
        `ingest` replays it; call it inside `writing` (a caller checking items first).

        Raises:
            IdempotencyKeyReused: the key was used for another request.
            StoreError: unknown collection.
        """
        state = self._state(name)
        req = keys.request(key, f"ingest:{name}",
                           batches.request_parts(state, items, replace_documents))
        done = keys.replay(self.meta.write, req)
        return None if done is None else IngestReport(**done)  # type: ignore[arg-type]

    def recover(self) -> None:
        """Remove what unfinished batches and merges left behind, in every collection (each
        write also does it for its collection, first thing in each hold of the lock)."""
        with self._hold():
            committed = self.meta.committed_batch(self.meta.write)
            for row in self.meta.collections(self.meta.write):
                state = self._state(row.info.name)
                with storage_errors(self._collection_dir(row.info.name)):
                    batches.recover(state, committed)
                self.writer.recovered.add(row.info.name)

    def _recover_after_failure(self, state: CollectionState) -> None:
        try:
            batches.recover(state, self.meta.committed_batch(self.meta.write))
        except BaseException as exc:  # the store is in an unknown state: refuse more writes
            self._broken = (f"recovery after a failed batch failed: {exc}; the committed "
                            "batches are intact on disk: reopen the database")

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

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

    def snapshot(self, name: str, as_of: float | None = None) -> CollectionSnapshot:
        """A consistent view of the collection at the last committed batch (cached until a new
        batch commits), or as committed at `as_of` (epoch seconds UTC; see
        `recallql.index.history`).

        Raises:
            StoreError: unknown collection.
        """
        self.check_open()
        committed, schema = self.meta.committed_head()
        state = self._states.get(name)
        snap = None if state is None else state.snapshot
        if state is None or snap is None or snap.seq != committed or state.broken \
                or state.schema != schema:
            with self._mutex:
                self.check_open()
                snap = self._state(name).current(self.meta.committed_batch())
        return snap if as_of is None else as_of_snapshot(snap, as_of)

    def committed_batch(self) -> int:
        """The last committed batch number.

        Raises:
            StoreError: the store is closed.
        """
        return self.meta.committed_batch()

    def check(self) -> CheckReport:
        """Verify the database: SQLite's ``PRAGMA integrity_check``, the three stores'
        agreement on rowids and batches, every vector segment's shape and finiteness (see
        `recallql.index.integrity.check`). Never raises for damage: it is reported. Holds the
        writer lock while it reads (waiting up to `lock_timeout`), so no write runs meanwhile.

        Raises:
            StoreError: the store is closed.
        """
        self.check_open()
        return maintenance.check(self)

    def _collection_dir(self, name: str) -> Path | None:
        return None if self.path is None else self.path / "collections" / name

    def _text_dir(self, name: str) -> Path | None:
        base = self._collection_dir(name)
        return None if base is None else base / "text"

    def _state(self, name: str) -> CollectionState:
        """The collection's state, rebuilt when a refresh failed, when its field schema
        changed since it was built (`add_fields`, in this process or another: a committed
        schema change starts no batch, so the schema version is compared), or when another
        store rebuilt its text index (`reindex` in another process: this one would go on
        writing and querying with the old index's analyser version and ``keys`` fields)."""
        state = self._states.get(name)
        schema = self.meta.schema_version()  # read before the row: never older than it
        base = self._collection_dir(name)
        kept = None  # in memory, the text index and vectors live only in the state: keep them
        if state is not None and (state.broken or state.schema != schema
                                  or state.text.replaced(self._text_dir(name))):
            if base is None:
                kept = (state.text, state.files)
            else:
                state.text.close()  # a failed refresh or a new schema: rebuild from SQLite
            state = None
        if state is None:
            row = self._row(name)
            text, files = kept or (
                TextIndex(self._text_dir(name), readonly=self.readonly,
                          keywords=keyword_fields(row.info.fields)),
                SegmentFiles(None if base is None else base / "vectors", row.info.dim))
            state = self._states[name] = CollectionState(row, self.meta, text, files)
            state.schema = schema
        return state

    def close(self) -> None:
        """Release the tantivy writers, the SQLite connections and the writer lock."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        self.graph_builder.close()  # outside the mutex: the builder publishes under it
        with self._mutex:
            for state in self._states.values():
                state.text.close()
            self._states.clear()
            self.meta.close()
            self.writer.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _and(first: ExtraSql | None, then: ExtraSql) -> ExtraSql:
    """`first` (when given), then `then`, in the same transaction."""
    def run(conn: sqlite3.Connection) -> None:
        if first is not None:
            first(conn)
        then(conn)
    return run


def check_directory(path: str | os.PathLike) -> CheckReport:
    """Check the database at `path` without refusing it for damage (``recallql check``): the
    store is opened read-only and unvalidated, and whatever is wrong is reported.

    Returns:
        The `CheckReport`; a store that cannot even be opened (its ``meta.sqlite`` missing or
        damaged) gives a report holding that one error.
    """
    directory = Path(path)
    try:
        layout.check_directory(directory, readonly=True)
        store = Store(directory, True)
    except StoreError as exc:
        problem = integrity.Problem(str(directory / META_FILE), "error", "missing", str(exc))
        return CheckReport(str(directory), 0, [], [problem])
    try:
        return store.check()
    finally:
        store.close()
