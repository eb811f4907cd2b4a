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
import dataclasses
import functools
import math
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recallql.engine.analyzer import BUILTIN_FIELDS
from recallql.engine.engine import QueryEngine
from recallql.engine.legs import LegBatches
from recallql.engine.models import Explain, Result
from recallql.engine.plan import QueryPlan
from recallql.engine.surrounding import Surrounding, surrounding
from recallql.grammar.errors import ParameterError, QueryError
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
    IdempotencyKeyReused,
    IngestError,
    SignalRejected,
    StoreError,
)
from recallql.index.integrity import CheckReport, Problem
from recallql.index.keyterms import keyword_fields
from recallql.index.lock import DEFAULT_LOCK_TIMEOUT
from recallql.index.optimize import OptimizeReport
from recallql.index.reindex import ReindexReport
from recallql.index.schema import (
    BUILTIN_COLLECTIONS,
    CollectionInfo,
    FieldType,
    check_same,
    check_same_embedder,
    make_info,
)
from recallql.index.snapshot import CollectionSnapshot
from recallql.index.store import META_FILE, Store, check_directory
from recallql.index.timestamps import (
    microsecond_clock,
    parse_timestamp,  # noqa: F401  (the CLI's --param)
    to_epoch,
)
from recallql.sessions.input import SessionError, many
from recallql.sessions.lifecycle import Sessions
from recallql.sessions.lineage import LineageReport
from recallql.sessions.messages import COLLECTION as MESSAGES
from recallql.sessions.messages import (
    SESSION_FIELDS,
    Messages,
    last_message_time,
    message_activity,
    message_place,
    session_fields_filler,
    session_item_ids,
)
from recallql.sessions.models import SessionSnapshot, SessionState
from recallql.sessions.raw_messages import (
    check_raw_messages,
    with_numbering,
    with_session_fields,
)
from recallql.sessions.signals import SignalPolicy
from recallql.sessions.stored import RootResolver

if TYPE_CHECKING:
    from recallql.importers.hermes import ImportReport

__all__ = ["BUILTIN_FIELDS", "USER_ERRORS", "Database", "DeleteReport", "Embedder", "FieldType",
           "HashEmbedder", "IngestReport", "MiniLMEmbedder", "connect", "is_database",
           "resolve_embedder", "stored_embedder"]

#: Exceptions that are the user's or the data's fault (a message, no traceback, exit 1 in the CLI).
USER_ERRORS: tuple[type[BaseException], ...] = (
    QueryError, IngestError, SignalRejected, DatabaseLocked, StoreError, SessionError, FilterError,
    IdempotencyKeyReused, HermesFormatError, HermesStoreBusy, OSError)


def lineage_problems(report: LineageReport, file: str) -> list[Problem]:
    """The lineage section of a store check as problems: a stored root that disagrees with
    the walk is an error (GROUP BY CONVERSATION reads the stored roots); sessions without a
    stored root are a warning (statements walk lineage for them, within the budget)."""
    problems = [Problem(file, "error", "lineage",
                        f"session '{m.session_id}': stored conversation root {m.stored}, the "
                        f"lineage walk gives {m.walked}")
                for m in report.mismatches]
    if report.unmaintained:
        listed = ", ".join(f"'{s}'" for s in report.unmaintained[:5])
        more = "" if len(report.unmaintained) <= 5 else f" and {len(report.unmaintained) - 5} more"
        problems.append(Problem(file, "warning", "lineage", (
            f"{len(report.unmaintained)} session(s) have no stored conversation root ({listed}"
            f"{more}); open the database as a writer once to store them")))
    return problems


def check_database(path: str | os.PathLike) -> CheckReport:
    """Check the database at `path` without refusing it for damage (``recallql check``):
    the stores are checked read-only and unvalidated; when they agree, the sessions' stored
    conversation roots are checked against the lineage walk too.

    Returns:
        The `CheckReport` (a store whose ``meta.sqlite`` cannot be opened gives a report
        holding that one error).
    """
    report = check_directory(path)
    if not report.ok:
        return report
    try:
        with connect(path, readonly=True, embedder=None) as db:
            lineage = db.sessions.verify_lineage()
    except StoreError as exc:  # e.g. a store too old to read: the store check stands
        return dataclasses.replace(report, problems=[*report.problems, Problem(
            str(Path(path) / META_FILE), "warning", "lineage", f"lineage not checked: {exc}")])
    return dataclasses.replace(report, problems=[
        *report.problems, *lineage_problems(lineage, str(Path(path) / META_FILE))])


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

    def message_activity(self) -> dict[str, tuple[float | None, int]]:
        if MESSAGES not in {c.name for c in self._store.collections()}:
            return {}
        return message_activity(self._store.snapshot(MESSAGES))

    def last_message_at(self, session_id: str) -> float | None:
        if MESSAGES not in {c.name for c in self._store.collections()}:
            return None
        return last_message_time(self._store.snapshot(MESSAGES), session_id)


def _older_builtin(stored: CollectionInfo, wanted: CollectionInfo) -> bool:
    """Whether `stored` is a built-in collection as an earlier version wrote it: the same text
    fields, a subset of today's fields (a reader cannot upgrade it; a writer does on open)."""
    return (stored.text_fields == wanted.text_fields
            and all(wanted.fields.get(k) == v for k, v in stored.fields.items()))


def connect(path: str | os.PathLike | None = None, *, embedder: object = "default",
            readonly: bool = False, signal_policy: SignalPolicy | None = None,
            clock: Callable[[], float] | None = None,
            lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
            retention: timedelta | float = timedelta(days=7)) -> Database:
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
        clock: "now" in epoch seconds UTC for statements, session writes and the commit time
            of batches (default `time.time`; tests pin it), read to the microsecond (times
            are stored as they are shown).
        lock_timeout: seconds a write waits while another process writes (the writer lock
            is held for each write, not for the connection), like SQLite's busy timeout;
            then `DatabaseLocked` names the holder's pid. Default 5.
        retention: how long deleted and replaced rows stay visible to ``AS OF`` (a timedelta
            or days; default 7 days); `vacuum` purges them at once.

    Raises:
        ValueError: `retention` or `lock_timeout` is not a non-negative number (or timedelta),
            before anything is opened.
        DatabaseLocked: creating the database, or migrating one written by an earlier
            version, waited `lock_timeout` for another writer.
        StoreError: not a recallql database, a missing or damaged file (named; nothing is
            changed), an embedder that does not match (naming the ``embedder=`` that opens
            it: ``None`` always does), or a text index of an analyser version this recallql
            does not know.

    Warns:
        AnalyzerOutdatedWarning: collections indexed by an older text analyser (they keep it
            until `Database.reindex` / ``recallql reindex``).
    """
    seconds = _retention_seconds(retention)
    if not (_is_number(lock_timeout) and lock_timeout >= 0):
        raise ValueError(f"lock_timeout must be a non-negative number of seconds, got "
                         f"{lock_timeout!r}")
    clock = microsecond_clock(clock or time.time)  # times are stored as they are shown
    store = Store.open(path, readonly=readonly, lock_timeout=lock_timeout, retention=seconds,
                       clock=clock)
    try:
        db = Database(store, embedder, signal_policy=signal_policy, clock=clock)
        _warn_outdated(db)
    except BaseException:
        store.close()
        raise
    return db


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _retention_seconds(retention: object) -> float:
    """`connect`'s retention (a timedelta, or days) in seconds.

    Raises:
        ValueError: not a timedelta or a number, negative, or NaN.
    """
    seconds = math.nan
    if isinstance(retention, timedelta):
        seconds = retention.total_seconds()
    elif isinstance(retention, int | float) and not isinstance(retention, bool):
        seconds = float(retention) * 86400.0 if abs(retention) < 1e300 else (
            math.inf if retention > 0 else -math.inf)  # an int beyond float: forever
    if not seconds >= 0:
        raise ValueError("retention must be a non-negative timedelta or number of days, got "
                         f"{retention!r}")
    return seconds


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


#: The flags of a message item that leaves them out (`Database.ingest` into ``messages``).
MESSAGE_FLAGS = {"active": True, "compacted": False}


class Database:
    """A recallql database. Use `connect`. A context manager (closes on exit).

    Attributes:
        sessions: `recallql.sessions.Sessions`: create, annotate, signal, close, archive and
            sweep sessions (``db.sessions.create("s-1", "agent-7")``).
        messages: `recallql.sessions.messages.Messages`: append a session's messages
            (``db.messages.append("s-1", "user", "hello")``, ``extend([...])`` for many).
        store: the underlying `recallql.index.Store`.
    """

    def __init__(self, store: Store, embedder: object = "default", *,
                 signal_policy: SignalPolicy | None = None,
                 clock: Callable[[], float] | None = None):
        self.store = store
        clock = clock or time.time
        self._clock = clock
        self.sessions = Sessions(_SessionStore(store), signal_policy, clock)
        self.sessions.prepare(writable=not store.readonly)
        if not store.readonly:
            self._upgrade_messages()
        self.messages = Messages(self, clock)
        self._engine = QueryEngine(self, clock)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._embedders: dict[str, emb.Embedder | None] = {}
        resolved = emb.resolve(embedder)
        for name, (text_fields, fields) in BUILTIN_COLLECTIONS.items():
            if store.readonly and name not in {c.name for c in store.collections()}:
                continue
            self._check_builtin_embedder(name, resolved, embedder)
            dim = None if resolved is not None else emb.MINILM_DIM
            self._open_collection(name, text_fields, fields, dim, resolved, builtin=True)

    def _check_builtin_embedder(self, name: str, resolved: emb.Embedder | None,
                                spec: object) -> None:
        """Refuse, saying how to open it, a database whose built-in collection `name` was
        created with another embedder than `connect`'s (its ``embedder="default"`` included).

        Raises:
            StoreError: naming both embedders and the ``embedder=`` that opens the database.
        """
        row = self.store.meta.collection(name)
        if row is None or resolved is None:
            return  # new, or embedder=None: attaches nothing
        stored = row.info
        if (stored.embedder_name, stored.dim) == (resolved.name, resolved.dim):
            return
        if stored.embedder_name is None:
            built = f"no embedder (vectors from the caller, dim {stored.dim})"
            fix = "connect(path, embedder=None)"
        elif stored.embedder_name == emb.MINILM_NAME:
            built = f"embedder {emb.MINILM_NAME!r} (dim {stored.dim})"
            fix = 'connect(path) (embedder="default")'
        else:
            built = f"embedder {stored.embedder_name!r} (dim {stored.dim})"
            fix = "connect(path, embedder=...) given that embedder, or embedder=None to attach none"
        asked = f"{resolved.name!r} (dim {resolved.dim})" + (
            ", connect's default" if isinstance(spec, str) else "")
        raise StoreError(f"the database {self.path} was created with {built} for its built-in "
                         f"collection {name!r}, not {asked}: open it with {fix}")

    def _upgrade_messages(self) -> None:
        """Give the `messages` collection of a store an earlier version wrote the fields
        messages now carry from their session (`source`, `agent_id`), filled in from the
        sessions table (one transaction)."""
        wanted = BUILTIN_COLLECTIONS[MESSAGES][1]

        def missing(row: Any) -> dict[str, object]:
            return {} if row is None else {
                k: wanted[k] for k in SESSION_FIELDS if k not in row.info.fields}

        if not missing(self.store.meta.collection(MESSAGES)):
            return  # no write, no lock
        with self.store.writing():  # read again as the writer: another process opening the
            meta = self.store.meta  # store at the same time may have upgraded it meanwhile
            fields = missing(meta.collection(MESSAGES, meta.write))
            if fields:
                with self.read_transaction() as conn:
                    fill = session_fields_filler(conn)
                self.store.add_fields(MESSAGES, fields, fill)

    @property
    def path(self) -> str | None:
        """The database directory, or ``None`` in memory."""
        return None if self.store.path is None else str(self.store.path)

    @property
    def readonly(self) -> bool:
        """Whether the database was opened as a reader (``connect(..., readonly=True)``)."""
        return self.store.readonly

    @property
    def closed(self) -> bool:
        """Whether `close` was called (every call then raises `StoreError`)."""
        return self.store.closed

    def __repr__(self) -> str:
        """``<recallql.Database '/path/mem.db' writer>`` (``reader``, ``closed``; ``in
        memory`` for ``connect()``)."""
        where = "in memory" if self.path is None else repr(self.path)
        state = "closed" if self.closed else "reader" if self.readonly else "writer"
        return f"<recallql.Database {where} {state}>"

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
            wanted = make_info(name, text_fields, fields, dim,
                               embedder.name if embedder is not None else None)
            if builtin and _older_builtin(info, wanted):  # its fields may be older: not its
                check_same_embedder(info, wanted)         # embedder (a reader's query vectors)
            else:
                check_same(info, wanted)
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
               replace_documents: bool = False, key: str | None = None) -> IngestReport:
        """Add or replace items, as one all-or-nothing batch.

        An item identical to its live version (same text fields, declared fields,
        ``created_at``, ``entity``, ``doc_id``, ``position`` and vector — or no vector, when the
        collection embeds) is left alone: not re-embedded, not re-indexed (`unchanged`).

        Args:
            collection: collection name.
            items: dicts with ``id`` (str or int), the text fields, ``created_at`` (datetime,
                ISO-8601 str, epoch seconds or numpy datetime64; naive = UTC), ``entity``,
                ``doc_id``, ``position``, ``vector`` (optional) and the declared fields. An item of
                ``messages`` without ``active`` / ``compacted`` gets True / False, and one
                with a ``session_id`` (and ``seq``) but no ``doc_id`` (``position``) gets
                ``session:<session_id>`` (its seq), as `Messages.append` gives them: left
                NULL the row would never be searchable, and WITH CONTEXT, context credit and
                GROUP BY DOCUMENT would not see its session; its session's ``source`` and
                ``agent_id`` are copied into it (as `Messages.append` copies them); and one
                without ``seq`` / ``message_id`` / ``created_at`` is numbered and dated as
                `Messages.append` would number and date it: the next seq of its session and
                the next message id (in the batch's order, after the live messages and the
                batch's own numbers) and the clock's time, or, replacing a live message of the
                same id and session, that message's (`recallql.sessions.raw_messages`).
            replace_documents: for every ``doc_id`` in the batch (an item without one is its
                own document), also delete the document's live chunks whose id is not in the
                batch, in the same batch: re-ingesting a file that shrank from 100 chunks to 1
                leaves 1 (`removed`).
            key: an idempotency key (≤ 256 characters): a retry with the same key and items
                writes nothing and returns the first call's report; stored durably with the
                batch.

        Returns:
            The `IngestReport` (added, replaced, unchanged, removed, embedded).

        Raises:
            IngestError: an invalid item (names the item and field) or key, or an item of
                ``messages`` that `db.messages.extend` would refuse: no ``session_id``, one
                naming no session or a session that is not open; a ``seq`` below 1 or one
                another live message of the session (or another item) holds; a
                ``created_at`` before the session started or more than 300 s after the
                clock; a ``source`` or ``agent_id`` other than its session's; a
                ``message_id`` below 1 or one another live message (or item) holds
                (`recallql.sessions.raw_messages`); nothing was written.
            IdempotencyKeyReused: `key` was used before for other items.
            StoreError: unknown collection, read-only database, or a storage failure (disk
                full, permissions, I/O; the file and cause are named, nothing was written).
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        items = many(items, "items", IngestError)
        if collection == MESSAGES:
            return self._ingest_messages(items, replace_documents, key)
        return self.store.ingest(collection, items, self.embedder(collection),
                                 replace_documents=replace_documents, key=key)

    def _ingest_messages(self, items: Iterable[Mapping[str, object]], replace_documents: bool,
                         key: str | None) -> IngestReport:
        """`ingest` into ``messages``: items checked as `Messages.extend` checks messages
        (`recallql.sessions.raw_messages`), holding the writer from the check to the commit; a
        flag left out is not 'rewound'; a message left unnumbered is numbered and dated as
        `append` would, its session gives it `source` / `agent_id`, and its session and seq
        `doc_id` / `position`. An idempotency key records the items as given (a retry
        gives them so, and numbering them again would give other numbers)."""
        given: list[object] = [{**MESSAGE_FLAGS, **item} if isinstance(item, Mapping) else item
                               for item in items]
        with self.store.writing():
            if key is not None:  # a retry replays, even if its session has closed since
                done = self.store.ingest_replay(MESSAGES, given, key, replace_documents)
                if done is not None:
                    return done
            # numbered as append numbers, and given its session's fields as append copies them
            snap, now = self.snapshot(MESSAGES), self._clock()  # one state for both steps
            batch = with_numbering(with_session_fields(given, self.sessions.get), snap, now)
            batch = [{**message_place(item), **item} if isinstance(item, Mapping) else item
                     for item in batch]
            check_raw_messages(batch, self.sessions.get, snap, now,
                               replace_documents=replace_documents)
            return self.store.ingest(MESSAGES, batch, self.embedder(MESSAGES),
                                     replace_documents=replace_documents, key=key,
                                     request_items=given)  # what a retry gives

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
                count no removed row and whose index holds the filter terms of every declared
                str field (`recallql.index.keyterms`; an index written before them, or a field
                added after it was created, lacks them) (``recallql optimize``).
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
            terms = set(keyword_fields(snap.info.fields)) <= set(snap.state.text.keywords)
            if only_needed and exact and terms:
                continue
            tick = None if progress is None else functools.partial(progress, name)
            reports.append(self.store.reindex(name, tick))
        return reports

    def optimize_vectors(self, collections: Sequence[str] | None = None, *,
                         threads: int | None = None,
                         progress: Callable[[str, int, int], None] | None = None
                         ) -> list[OptimizeReport]:
        """Merge each collection's vector segments into one, with its ANN graph built before
        the merged segment is published (the largest input's graph is reused): the semantic
        leg then searches one HNSW graph instead of one per segment. Rows, scores and answers
        are unchanged; holds the writer lock meanwhile (minutes at 1M rows).

        Args:
            collections: names (default: every collection).
            threads: graph insertion threads (default: CPUs, at most 4).
            progress: called with (collection, rows added to the graph, rows to add).

        Returns:
            One `OptimizeReport` per collection (``segments_before`` ≤ 1 and no graph
            rows: nothing was needed).

        Raises:
            StoreError: an unknown collection; read-only database; a storage failure (the old
                segments are kept).
        """
        names = list(collections) if collections is not None else [
            c.name for c in self.collections()]
        return [self.store.optimize_vectors(
            name, threads=threads,
            progress=None if progress is None else functools.partial(progress, name))
            for name in names]

    def collections(self) -> list[CollectionInfo]:
        """All collections."""
        return self.store.collections()

    def snapshot(self, collection: str, as_of: datetime | float | None = None
                 ) -> CollectionSnapshot:
        """The collection's snapshot at the last committed batch, or as committed at `as_of`
        (a datetime, naive = UTC, or epoch seconds; see `Store.snapshot`).

        Raises:
            StoreError: unknown collection.
            ValueError: `as_of` is not a time: NaN, an infinity, a bool, a string that is not
                ISO-8601 (NaN gave an empty snapshot, True the one of 1970-01-01T00:00:01Z).
        """
        if as_of is None:
            return self.store.snapshot(collection)
        if isinstance(as_of, bool) or (isinstance(as_of, int | float)
                                       and not math.isfinite(as_of)):
            raise ValueError(f"as_of must be a datetime or finite epoch seconds, got {as_of!r}")
        at = as_of if isinstance(as_of, int | float) else to_epoch(as_of)
        return self.store.snapshot(collection, as_of=at)

    def check(self) -> CheckReport:
        """Verify the database: SQLite integrity, the three stores' agreement on rowids and
        batches, vector finiteness, and every session's stored conversation root against a
        walk of the lineage edges (`Sessions.verify_lineage`). Damage is reported
        (`CheckReport.ok`, `.problems`), never raised or repaired.

        Raises:
            StoreError: the database is closed.
        """
        report = self.store.check()
        if not report.ok:  # the stores disagree: a lineage walk over them proves nothing
            return report
        meta = str(Path(self.path) / META_FILE) if self.path is not None else "meta.sqlite"
        return dataclasses.replace(report, problems=[
            *report.problems, *lineage_problems(self.sessions.verify_lineage(), meta)])

    def vacuum(self) -> list[int]:
        """Purge deleted and replaced rows now (their text-index documents and vectors), so
        they take no more space or search time; ``AS OF`` an earlier time then no longer
        shows them (it says so). Otherwise they are purged once older than the retention
        window.

        Returns:
            The batch numbers written.

        Raises:
            StoreError: read-only database, or a storage failure.
            DatabaseLocked: another process's write held the lock for `lock_timeout`.
        """
        return self.store.vacuum()

    # -- statements ------------------------------------------------------------------------------

    def execute(self, text: str, /, *args: object, **params: object) -> Result | Explain:
        """Run one statement; values travel as parameters (`:name` / `?`), never inside the text.

        `text` is positional-only, so any name (``text``, ``q``, ...) can be a parameter. A parsed
        statement (from `recallql.grammar.parse_script`) is accepted too.

        Args:
            text: one statement (a trailing ``;`` is allowed).
            args: the values of ``?`` parameters, in order.
            params: the values of ``:name`` parameters, by name (a dict: ``**values``). Python
                values map to the language's (docs/language.md, Binding): str, int, float,
                bool, None, datetime / date (naive = UTC), timedelta (``half_life``), a list
                or 1-D numpy array of floats (``NEAR``), a list / tuple / set (``IN``).

        Returns:
            A `Result` (an `Explain` for EXPLAIN statements, which has the `Result`'s
            accessors too: `ids()`, `rows`, `warnings`, ...; `Database.explain` is typed
            `Explain`).

        Raises:
            QuerySyntaxError, QuerySemanticError, ParameterError: a mistake in the statement
                (`str(err)` shows a caret under the offending token).
            StoreError: the database is closed.
        """
        self.store.check_open()
        try:
            return self._engine.execute(text, *args, **params)
        except ParameterError as exc:
            options = sorted(k for k in ("analyze", "verbose") if isinstance(params.get(k), bool))
            if options and any(f":{k}" in exc.message for k in options):
                given = ", ".join(f"{k}={params[k]}" for k in options)
                exc.hint = (f"{given} is an option of db.explain, not a parameter: call "
                            f"db.explain(text, {given}), or write EXPLAIN ANALYZE / EXPLAIN "
                            "VERBOSE before the statement")
            raise

    query = execute

    def explain(self, text: str, /, *args: object, analyze: bool = False,
                verbose: bool = False, **params: object) -> Explain:
        """EXPLAIN a SEARCH or RETRIEVE statement: the plan, and every row's score arithmetic.

        Raises:
            QueryError: as `execute`; also when `text` is not a SEARCH or RETRIEVE.
            TypeError: `analyze` or `verbose` is not a bool.
            StoreError: the database is closed.
        """
        for name, flag in (("analyze", analyze), ("verbose", verbose)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
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
                                     text=stmt.source, span=(0, len(stmt.source)),
                                     hint="SHOW and DESCRIBE have no plan or scores to explain: "
                                          "run them as they are")
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
            TypeError: `plan` is not a `QueryPlan` (a statement's text goes to `plan` first).
        """
        if not isinstance(plan, QueryPlan):
            raise TypeError(f"run_legs takes a QueryPlan (db.plan(text)), not "
                            f"{type(plan).__name__}")
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
    def lineage_resolver(self, budget: int, as_of: float | None = None
                         ) -> Iterator[RootResolver]:
        """One statement's conversation-root resolver (stored roots, or a lineage walk of at
        most `budget` session rows on an older store or `as_of` a past time: see
        `Sessions.resolver`), in one read transaction."""
        with self.read_transaction() as conn:
            yield self.sessions.resolver(conn, budget, as_of)

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
