"""The Python API: `connect()` and `Database` (SPEC §8).

    >>> import recallql
    >>> db = recallql.connect()                       # in memory; connect("dir/") on disk
    >>> db.ingest("docs", [{"id": "a", "title": "Backup", "body": "retention policy"}])
    >>> db.execute("SEARCH docs MATCHING :q LIMIT 5", q="backup retention")

`Database` is a thin layer over `recallql.index.Store` (storage) and
`recallql.engine.QueryEngine` (statements): it resolves embedders, keeps the one attached to each
collection, and exposes `sessions` and `messages`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recallql.engine.analyzer import BUILTIN_FIELDS
from recallql.engine.engine import QueryEngine
from recallql.engine.legs import LegBatches
from recallql.engine.models import Explain, Result
from recallql.engine.plan import QueryPlan
from recallql.engine.surrounding import Surrounding, surrounding
from recallql.grammar.errors import QueryError
from recallql.importers.hermes_store import HermesFormatError, HermesStoreBusy
from recallql.index import embedders as emb
from recallql.index.analysis import CURRENT_VERSION, describe
from recallql.index.batch import DeleteReport, IngestReport
from recallql.index.embedders import Embedder, HashEmbedder, MiniLMEmbedder
from recallql.index.embedders import resolve as resolve_embedder
from recallql.index.errors import (
    AnalyzerOutdatedWarning,
    DatabaseLocked,
    FilterError,
    IngestError,
    SignalRejected,
    StoreError,
)
from recallql.index.reindex import ReindexReport
from recallql.index.schema import BUILTIN_COLLECTIONS, CollectionInfo, FieldType, make_info
from recallql.index.snapshot import CollectionSnapshot
from recallql.index.store import META_FILE, Store, check_same
from recallql.index.timestamps import parse_timestamp  # noqa: F401  (the CLI's --param)
from recallql.sessions.input import SessionError
from recallql.sessions.lifecycle import Sessions
from recallql.sessions.lineage import SessionRow
from recallql.sessions.messages import COLLECTION as MESSAGES
from recallql.sessions.messages import Messages, session_item_ids
from recallql.sessions.models import SessionSnapshot, SessionState
from recallql.sessions.signals import SignalPolicy

if TYPE_CHECKING:
    from recallql.importers.hermes import ImportReport

__all__ = ["BUILTIN_FIELDS", "USER_ERRORS", "Database", "DeleteReport", "Embedder", "FieldType",
           "HashEmbedder", "IngestReport", "MiniLMEmbedder", "connect", "is_database",
           "resolve_embedder", "stored_embedder"]

#: Exceptions that are the user's or the data's fault (a message, no traceback, exit 1 in the CLI).
USER_ERRORS: tuple[type[BaseException], ...] = (
    QueryError, IngestError, SignalRejected, DatabaseLocked, StoreError, SessionError, FilterError,
    HermesFormatError, HermesStoreBusy, OSError)


def is_database(path: str | os.PathLike) -> bool:
    """Whether `path` is an existing recallql database directory."""
    return (Path(path) / META_FILE).is_file()


def stored_embedder(path: str | os.PathLike, collection: str = "docs") -> Embedder | None:
    """The embedder a collection of the existing database at `path` was created with (None:
    vectors come from the caller, or no such collection). Opens the database read-only.

    Raises:
        StoreError: `path` is not a recallql database.
    """
    store = Store.open(path, readonly=True)
    try:
        names = {c.name: c.embedder_name for c in store.collections()}
    finally:
        store.close()
    return emb.by_name(names.get(collection))


class _SessionStore:
    """Sessions' view of the store: SQLite-only write transactions (with the writer checks),
    consistent reads, and message deletion for sweeps (see
    `recallql.sessions.lifecycle.MetaStore`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._store.transaction()

    def read_transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._store.meta.read_transaction()

    def writing(self) -> AbstractContextManager[None]:
        return self._store.writing()

    def delete_messages(self, session_ids: list[str],
                        extra_sql: Callable[[sqlite3.Connection], object]) -> int:
        ids = session_item_ids(self._store.snapshot(MESSAGES), session_ids)
        return self._store.delete(MESSAGES, ids, extra_sql=extra_sql).deleted


def connect(path: str | os.PathLike | None = None, *, embedder: object = "default",
            readonly: bool = False, signal_policy: SignalPolicy | None = None,
            clock: Callable[[], float] | None = None) -> Database:
    """Open or create a database.

    Args:
        path: a directory (opened, or created when missing), or ``None`` for an in-memory
            database.
        embedder: what the built-in collections ``docs`` and ``messages`` embed with when they
            are first created: ``"default"`` (all-MiniLM-L6-v2, 384-d, local), ``None`` (vectors
            only from the caller; the built-ins are then 384-d) or a callable
            ``list[str] -> float32[n, d]``. On an existing database it must match what they were
            created with (``None`` attaches nothing).
        readonly: open an existing database as a reader (no lock; sees the last committed
            batch; any number of readers alongside one writer).
        signal_policy: allowed signal names, value bounds and half-lives (default: `reward` in
            [-1, 1], half-life 7 days).
        clock: "now" in epoch seconds UTC for statements and session writes (default
            `time.time`; tests pin it).

    Raises:
        DatabaseLocked: another writer has the database open.
        StoreError: not a recallql database, an embedder that does not match, or a text index
            of an analyser version this recallql does not know.

    Warns:
        AnalyzerOutdatedWarning: collections indexed by an older text analyser (they keep it
            until `Database.reindex` / ``recallql reindex``).
    """
    store = Store.open(path, readonly=readonly)
    try:
        db = Database(store, embedder, signal_policy=signal_policy, clock=clock)
        _warn_outdated(db)
    except BaseException:
        store.close()
        raise
    return db


def _warn_outdated(db: Database) -> None:
    """Warn (`AnalyzerOutdatedWarning`) about collections indexed by an older text analyser."""
    by_version: dict[int, list[str]] = {}
    for name, version in sorted(db.store.analyzer_versions().items()):
        if version < CURRENT_VERSION:
            by_version.setdefault(version, []).append(repr(name))
    for version, names in by_version.items():
        warnings.warn(AnalyzerOutdatedWarning(
            f"{db.path}: collection{'s' if len(names) > 1 else ''} {', '.join(names)} "
            f"{'were' if len(names) > 1 else 'was'} indexed by text {describe(version)}; this "
            f"recallql writes {describe(CURRENT_VERSION)}. Statements keep the old analyser "
            f"until you run `recallql reindex --db {db.path}` (it rebuilds the text index "
            "from the stored texts; nothing is lost)."), stacklevel=3)


class Database:
    """A recallql database. Use `connect`. A context manager (closes on exit).

    Attributes:
        store: the underlying `recallql.index.Store`.
    """

    def __init__(self, store: Store, embedder: object = "default", *,
                 signal_policy: SignalPolicy | None = None,
                 clock: Callable[[], float] | None = None):
        self.store = store
        clock = clock or time.time
        self.sessions = Sessions(_SessionStore(store), signal_policy, clock)
        self.messages = Messages(self, clock)
        self._engine = QueryEngine(self, clock)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._embedders: dict[str, emb.Embedder | None] = {}
        resolved = emb.resolve(embedder)
        for name, (text_fields, fields) in BUILTIN_COLLECTIONS.items():
            if store.readonly and name not in {c.name for c in store.collections()}:
                continue
            dim = None if resolved is not None else emb.MINILM_DIM
            self._open_collection(name, text_fields, fields, dim, resolved, builtin=True)

    @property
    def path(self) -> str | None:
        """The database directory, or ``None`` in memory."""
        return None if self.store.path is None else str(self.store.path)

    def _open_collection(self, name: str, text_fields: Sequence[str],
                         fields: Mapping[str, object] | None, dim: int | None,
                         embedder: emb.Embedder | None, builtin: bool = False) -> CollectionInfo:
        existing = self.store.meta.collection(name)
        if existing is not None and embedder is None and builtin:
            self._embedders[name] = None  # explicit None: attach nothing
            return existing.info
        if embedder is not None:
            if dim is not None and dim != embedder.dim:
                raise StoreError(f"collection {name!r}: dim={dim} but embedder "
                                 f"{embedder.name!r} returns {embedder.dim}-d vectors")
            dim = embedder.dim
        elif dim is None:
            if existing is None:
                raise StoreError(f"collection {name!r}: dim is required when embedder=None")
            dim = existing.info.dim
        if self.store.readonly:
            if existing is None:
                raise StoreError(f"the database {self.path} is open read-only; cannot create "
                                 f"collection {name!r}")
            info = existing.info
            check_same(info, make_info(name, text_fields, fields, dim,
                                       embedder.name if embedder is not None else None))
        else:
            info = self.store.create_collection(name, text_fields, fields, dim,
                                                embedder.name if embedder is not None else None)
        self._embedders[name] = embedder
        return info

    def create_collection(self, name: str, text_fields: Sequence[str] = ("title", "body"),
                          fields: Mapping[str, object] | None = None, dim: int | None = None,
                          embedder: object = "default") -> CollectionInfo:
        """Create a collection (or open it when it exists with the same definition).

        Args:
            name: 1–64 letters, digits or ``_``.
            text_fields: fields concatenated into the BM25 text (and embedded).
            fields: filterable fields and types: ``{"tag": str, "year": int, "score": float,
                "ok": bool, "at": datetime, "tags": list[str]}``.
            dim: vector dimension; taken from the embedder when omitted; required with
                ``embedder=None``.
            embedder: ``"default"``, ``None`` (vectors supplied by the caller), or a callable
                ``list[str] -> float32[n, dim]`` (its name: ``fn.name`` or ``fn.__qualname__``).

        Returns:
            The collection's `CollectionInfo`.

        Raises:
            StoreError: invalid definition, or it exists with another schema/embedder/dim.
        """
        resolved = emb.resolve(embedder, dim)
        return self._open_collection(name, text_fields, fields, dim, resolved)

    def set_embedder(self, collection: str, embedder: object) -> None:
        """Re-attach a collection's caller-defined embedder after reopening the database.

        Raises:
            StoreError: its name or dimension differs from the one the collection records.
        """
        info = self.store.collection(collection)
        resolved = emb.resolve(embedder, info.dim)
        if resolved is None or resolved.name != info.embedder_name or resolved.dim != info.dim:
            got = None if resolved is None else f"{resolved.name!r} (dim {resolved.dim})"
            raise StoreError(f"collection {collection!r} uses embedder {info.embedder_name!r} "
                             f"(dim {info.dim}); got {got}")
        self._embedders[collection] = resolved

    def embedder(self, collection: str) -> emb.Embedder | None:
        """The embedder attached to a collection (``None`` when vectors come from the caller
        or the collection's caller-defined embedder was not re-attached)."""
        if collection not in self._embedders:
            self._embedders[collection] = emb.by_name(self.store.collection(collection)
                                                      .embedder_name)
        return self._embedders[collection]

    def ingest(self, collection: str, items: Iterable[Mapping[str, object]], *,
               replace_documents: bool = False) -> IngestReport:
        """Add or replace items, as one all-or-nothing batch.

        An item identical to its live version (same text fields, declared fields,
        ``created_at``, ``entity``, ``doc_id``, ``position`` and vector — or no vector, when the
        collection embeds) is left alone: not re-embedded, not re-indexed (`unchanged`).

        Args:
            collection: collection name.
            items: dicts with ``id`` (str or int), the text fields, ``created_at`` (datetime,
                ISO-8601 str or epoch seconds; naive = UTC), ``entity``, ``doc_id``,
                ``position``, ``vector`` (optional) and the declared fields.
            replace_documents: for every ``doc_id`` in the batch (an item without one is its
                own document), also delete the document's live chunks whose id is not in the
                batch, in the same batch: re-ingesting a file that shrank from 100 chunks to 1
                leaves 1 (`removed`).

        Returns:
            The `IngestReport` (added, replaced, unchanged, removed, embedded).

        Raises:
            IngestError: an invalid item (names the item and field); nothing was written.
            StoreError: unknown collection, read-only database.
        """
        return self.store.ingest(collection, items, self.embedder(collection),
                                 replace_documents=replace_documents)

    def delete(self, collection: str, ids: Iterable[str | int] | None = None, *,
               doc_ids: Iterable[str | int] | None = None) -> DeleteReport:
        """Delete items by id and/or whole documents by ``doc_id``, as one all-or-nothing batch.

        Statements stop returning the rows once the batch commits (in this process and in
        readers); unknown ids are counted in `missing`, not an error.

        Args:
            collection: collection name.
            ids: item ids (a list; str or int, as at ingest).
            doc_ids: document ids: every live chunk of each document is deleted.

        Returns:
            The `DeleteReport` (deleted, missing; batch 0 when nothing matched).

        Raises:
            IngestError: neither `ids` nor `doc_ids`, a bare string instead of a list, or an id
                that ingest would refuse (names its position); nothing was written.
            StoreError: unknown collection, read-only database.
        """
        return self.store.delete(collection, ids, doc_ids)

    def reindex(self, collections: Sequence[str] | None = None, *, only_needed: bool = False,
                progress: Callable[[str, int, int], None] | None = None
                ) -> list[ReindexReport]:
        """Rebuild collections' text indexes from their stored texts with the current analyser.

        This migrates an index built by an older analyser and makes BM25's statistics exact:
        after deletes and replacements tantivy keeps counting the removed rows (N, document
        frequencies, average length) until their segments merge, as Lucene does; a rebuilt
        index counts the live rows only. Results of a collection change only through those
        statistics and the analyser.

        Args:
            collections: names (default: every collection).
            only_needed: skip collections already on the current analyser whose statistics
                count no removed row (``recallql optimize``).
            progress: called with (collection, rows done, rows total).

        Returns:
            One `ReindexReport` per rebuilt collection.

        Raises:
            StoreError: an unknown collection; read-only database.
        """
        names = list(collections) if collections is not None else [
            c.name for c in self.collections()]
        reports = []
        for name in names:
            snap = self.snapshot(name)
            counted = snap.bm25_documents()
            exact = counted is not None and counted == int(snap.live.sum())
            if only_needed and exact:
                continue
            tick = None if progress is None else functools.partial(progress, name)
            reports.append(self.store.reindex(name, tick))
        return reports

    def collections(self) -> list[CollectionInfo]:
        """All collections."""
        return self.store.collections()

    def snapshot(self, collection: str) -> CollectionSnapshot:
        """The collection's snapshot at the last committed batch (see `Store.snapshot`)."""
        return self.store.snapshot(collection)

    # -- statements ------------------------------------------------------------------------------

    def execute(self, text: str, /, *args: object, **params: object) -> Result | Explain:
        """Run one statement; values travel as parameters (`:name` / `?`), never inside the text.

        `text` is positional-only, so any name (``text``, ``q``, ...) can be a parameter. A parsed
        statement (from `recallql.grammar.parse_script`) is accepted too.

        Returns:
            A `Result` (an `Explain` for EXPLAIN statements).

        Raises:
            QuerySyntaxError, QuerySemanticError, ParameterError: a mistake in the statement
                (`str(err)` shows a caret under the offending token).
            StoreError: the database is closed.
        """
        self.store.check_open()
        return self._engine.execute(text, *args, **params)

    query = execute

    def explain(self, text: str, /, *args: object, analyze: bool = False,
                verbose: bool = False, **params: object) -> Explain:
        """EXPLAIN a SEARCH or RETRIEVE statement: the plan, and every row's score arithmetic.

        Raises:
            QueryError: as `execute`; also when `text` is not a SEARCH or RETRIEVE.
            StoreError: the database is closed.
        """
        self.store.check_open()
        from recallql.grammar import bind, parse
        from recallql.grammar import statements as st
        from recallql.grammar.errors import QuerySemanticError

        stmt = bind(parse(text), *args, **params)
        if isinstance(stmt, st.Explain):
            return self._engine.explain(stmt, analyze=analyze or stmt.analyze,
                                        verbose=verbose or stmt.verbose)
        if not isinstance(stmt, st.Search | st.Retrieve):
            raise QuerySemanticError("EXPLAIN applies to SEARCH and RETRIEVE statements",
                                     text=stmt.source, span=(0, len(stmt.source)))
        return self._engine.explain(stmt, analyze=analyze, verbose=verbose)

    def plan(self, text: str, /, *args: object, **params: object) -> QueryPlan:
        """Plan a SEARCH, RETRIEVE or EXPLAIN statement without running it.

        The plan is plain data (`QueryPlan`, pydantic: `plan.model_dump_json()` and
        `QueryPlan.model_validate_json(...)` round-trip it): `now` (read once, here), the
        candidate window, the legs with their terms, query vector (the MATCHING text is embedded
        here) and filter, and the operators above them. Run it with
        ``recallql.merge(plan, db.run_legs(plan), db)``, which is what `execute` does.

        Raises:
            QueryError: as `execute`; also when `text` is not a SEARCH, RETRIEVE or EXPLAIN.
            StoreError: the database is closed.
        """
        self.store.check_open()
        return self._engine.plan(text, *args, **params)

    def run_legs(self, plan: QueryPlan) -> LegBatches:
        """Run a plan's retrieval legs on the collection's current snapshot.

        Returns:
            `LegBatches`: per leg the item ids, rowids, exact float64 raw scores and ranks of
            its candidates; the features the operators above the legs read for them; the
            snapshot's batch number. `to_json()` / `LegBatches.from_json()` round-trip them.

        Raises:
            QuerySemanticError: a filter that cannot be evaluated.
            ExecutionError: a leg failed (names the operator).
            StoreError: the database is closed, or the collection is unknown.
        """
        self.store.check_open()
        return self._engine.run_legs(plan)

    def leg_pool(self) -> ThreadPoolExecutor:
        """The threads that run a statement's legs concurrently (created on first use, shut
        down by `close`)."""
        pool = self._pool
        if pool is not None:
            return pool
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recallql-leg")
            return self._pool

    # -- what merge reads (recallql.engine.merging.MergeSource) ----------------------------------

    def session_state(self, session_id: str, now_ts: float
                      ) -> tuple[SessionState, SessionSnapshot] | None:
        """A session's boost inputs and snapshot at `now_ts` (None: no such session)."""
        return self.sessions.state(session_id, now_ts)

    def entity_sums(self, entities: list[str], names: list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        """Cross-session decayed signal sums `{name: {entity: sum}}` at `now_ts`."""
        return self.sessions.entity_sums(entities, names, now_ts)

    @contextlib.contextmanager
    def lineage_rows(self) -> Iterator[Callable[[str], SessionRow | None]]:
        """Session rows for one statement's lineage walk, in one read transaction."""
        with self.read_transaction() as conn:
            yield self.sessions.fetcher(conn)

    def fetch_rows(self, collection: str, rowids: np.ndarray, batch: int
                   ) -> list[dict[str, Any]]:
        """The stored fields of rows by rowid (rows never change once written, and rowids are
        never reused, so any snapshot at or after `batch` gives the same values)."""
        return self.snapshot(collection).fetch(rowids)

    def bm25_explanation(self, collection: str, terms: list[str], rowid: int, batch: int) -> str:
        """tantivy's BM25 explanation of `terms` for one row, as JSON text."""
        return self.snapshot(collection).explain_bm25(terms, rowid)

    def surrounding_rows(self, collection: str, rowids: np.ndarray, before: int, after: int,
                         filter_expr: Any, batch: int) -> list[Surrounding]:
        """`WITH CONTEXT`: the eligible items around each row in its document (the current
        snapshot: rows never change, so it holds every row of `batch`; later rows may appear)."""
        return surrounding(self.snapshot(collection), rowids, before, after, filter_expr)

    def read_transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """A consistent read view of the metadata store (sessions, signals)."""
        return self.store.meta.read_transaction()

    def import_hermes(self, path: str | os.PathLike,
                      progress: Callable[[int, int], None] | None = None,
                      batch_size: int = 2000) -> ImportReport:
        """Import a Hermes Agent `state.db` (read-only; never written) into sessions and
        messages. Re-importing the same file adds nothing twice. `progress(done, total)` is
        called with message items written (a progress-bar hook); each batch of about
        `batch_size` messages (whole sessions) is all-or-nothing. See `recallql.importers.hermes`.

        Raises:
            HermesFormatError: not a Hermes store. HermesStoreBusy: it kept changing.
            StoreError: the database is closed.
        """
        from recallql.importers.hermes import import_hermes

        self.store.check_open()
        return import_hermes(self, path, progress=progress, batch_size=batch_size)

    def close(self) -> None:
        """Close the database (releases the writer lock; stops the leg threads)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self.store.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
