"""A collection's in-memory state and the read-only `CollectionSnapshot` the engine queries.

`CollectionState` grows incrementally: a refresh reads, in one SQLite read transaction, the rows
added since the last refresh, the rows tombstoned since, and the vector-segment manifest; then
reloads the tantivy searcher. Because tantivy commits before SQLite (see `recallql.index.batch`),
a searcher opened after the SQLite read holds every document of the batches it saw; documents of
later or unfinished batches are excluded by the `live` mask, which comes from SQLite only.

**One batch on every leg.** A batch's tantivy commit deletes the documents of rows tombstoned at
or before the horizon recorded by the batch before it, which a reader of an older batch may still
see live. So a refresh that read batch ``S`` re-reads the committed batch after opening its
searcher: if it is still ``S``, the searcher holds at most the commit of batch ``S+1``, which
purges nothing a reader of ``S`` can see; otherwise the refresh is repeated (incrementally) until
it is. The vector segments come from the manifest read in the same SQLite transaction as the rows,
so they are pinned to ``S`` already.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tantivy

from recallql.index import checkpoint, semantic
from recallql.index import text as text_index
from recallql.index.columns import (
    SAME,
    Buffer,
    Column,
    DerivedStrColumn,
    NumberColumn,
    StrArray,
    StrColumn,
    StrView,
    make_column,
)
from recallql.index.errors import FilterError, StoreError
from recallql.index.filters import filter_mask, posting_rows
from recallql.index.gather import gathered_topn
from recallql.index.history import RetentionLoss
from recallql.index.items import ItemBatch
from recallql.index.keyterms import filter_query
from recallql.index.metadata import NEW_ROWS_SQL, CollectionRow, MetadataStore
from recallql.index.neighbours import Neighbours
from recallql.index.rowsets import RowSet
from recallql.index.schema import CollectionInfo, FieldType
from recallql.index.semantic import SemanticStats
from recallql.index.text import TextIndex
from recallql.index.vectors import Segment, SegmentFiles, normalise_query

REFRESH_ATTEMPTS = 8
#: Refreshes tried before giving up on a batch-consistent searcher (a writer committing faster
#: than a refresh completes); with the backoff below this is about two seconds.
PIN_ATTEMPTS = 60
#: A writer looks ids up in SQLite while they are fewer than 1/LOOKUP_SHARE of the rows;
#: more, and it builds the id → rowid map of every row once (1 s at 1M rows).
LOOKUP_SHARE = 8
#: After loading this many rows at once, freed heap memory is handed back to the OS.
BULK_ROWS = 50_000


@functools.cache
def _libc_trim():
    """glibc's ``malloc_trim``, or None elsewhere."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _trim_heap() -> None:
    """Return the free heap left by a bulk load (Python's chunked reads) to the OS."""
    trim = _libc_trim()
    if trim is not None:
        trim(0)


@dataclass
class _Head:
    """The committed state to advance to: batch number, row count, rowids tombstoned since the
    last refresh, and the whole segment list."""

    seq: int
    size: int
    dead: list[int]
    segments: list[Segment]


_COLUMNS = ("id", "doc_id", "entity", "position", "created_at")


class CollectionState:
    """Append-only columns of one collection plus its current snapshot.

    Args:
        row: the collection as stored.
        meta: the metadata store.
        text: the collection's text index.
        files: the collection's vector segment files.
    """

    def __init__(self, row: CollectionRow, meta: MetadataStore, text: TextIndex,
                 files: SegmentFiles):
        self.id, self.info = row.id, row.info
        self.meta, self.text, self.files = meta, text, files
        ids = StrArray()
        doc_ids = DerivedStrColumn(ids)
        self.columns: dict[str, Column] = {
            "id": ids, "doc_id": doc_ids, "entity": DerivedStrColumn(doc_ids),
            "position": NumberColumn(FieldType.INT),
            "created_at": NumberColumn(FieldType.TIMESTAMP),
        }
        self.fields = {name: make_column(kind) for name, kind in row.info.fields.items()}
        self.has_vector = Buffer(np.bool_)
        self.live = np.zeros(0, bool)
        self.size, self.seq = 0, -1
        self.segments: list[Segment] = []
        self.snapshot: CollectionSnapshot | None = None
        self._id_rows: dict[str, int] | None = None  # writer only, built on first use
        self.broken = False
        self.schema = 0  # the schema version it was built at (`MetadataStore.committed_head`)
        self.skipped: dict[str, set[int]] = {}  # segment file -> rows with non-finite vectors

    def current(self, seq: int) -> CollectionSnapshot:
        """The snapshot at committed batch `seq`, refreshing when it changed."""
        if self.snapshot is None or self.seq != seq:
            self.refresh()
        assert self.snapshot is not None
        return self.snapshot

    def refresh(self) -> CollectionSnapshot:
        """Catch up with the last committed batch, with a searcher pinned to it (see the
        module docstring).

        Raises:
            StoreError: the state could not be read consistently (the state is then `broken`
                and must be rebuilt), or a writer kept committing for about two seconds.
        """
        for attempt in range(PIN_ATTEMPTS):
            snap = self._refresh_once()
            if self.meta.committed_batch() == snap.seq:
                self.snapshot = snap
                return snap
            time.sleep(min(0.001 * 2 ** attempt, 0.05) if attempt else 0.0)
        raise StoreError(f"collection {self.info.name!r}: could not open a text index searcher "
                         "consistent with one committed batch (the writer kept committing); "
                         "retry")

    def _refresh_once(self) -> CollectionSnapshot:
        for _ in range(REFRESH_ATTEMPTS):
            try:
                with self.meta.read_transaction() as conn:
                    head = self._read_head(conn)
                    if self.size == 0 and self.seq < 0:  # first load: columns from a file
                        self._restore(head.size)
                    self._read_rows(conn, head.size)
                break
            except FileNotFoundError:
                if self.broken:
                    raise
        else:
            raise StoreError(f"collection {self.info.name!r}: could not read a consistent state")
        if head.size - self.size >= BULK_ROWS:
            _trim_heap()
        return self._finish(head)

    def _read_head(self, conn) -> _Head:
        seq = self.meta.committed_batch(conn)
        row = self.meta.collection(self.info.name, conn)
        if row is None or row.id != self.id:
            raise StoreError(f"collection {self.info.name!r} disappeared from the store")
        dead = [r for (r,) in conn.execute(
            "SELECT row FROM items WHERE collection_id = ? AND dead_batch > ?",
            (self.id, max(self.seq, 0)))]
        return _Head(seq, row.next_row, dead, self._segments(conn))

    def _restore(self, committed_rows: int) -> None:
        """Load the newest column checkpoint (`recallql.index.checkpoint`): rows
        ``0 … R-1`` without reading them from SQLite (their tombstones come with the head)."""
        rows = checkpoint.restore(self, committed_rows)
        if rows:
            self.size, self.live = rows, np.ones(rows, bool)

    def _read_rows(self, conn, size: int) -> None:
        """Append rows ``self.size … size-1`` from SQLite, in chunks (bounded memory)."""
        cursor = conn.execute(NEW_ROWS_SQL, (self.id, self.size, size))
        first = self.size
        try:
            while chunk := cursor.fetchmany(2048):
                rowids, ids, doc_ids, entities, positions, created, has_vec, fields = zip(
                    *chunk, strict=True)
                if rowids[0] != first or rowids[-1] != first + len(chunk) - 1:
                    raise StoreError(f"collection {self.info.name!r}: rowids are not dense")
                parsed = [json.loads(f) if f else None for f in fields] if self.fields else []
                self._append(first, (ids, doc_ids, entities, positions, created), has_vec,
                             parsed)
                first += len(chunk)
            if first != size:
                raise StoreError(f"collection {self.info.name!r}: rows missing")
        except BaseException:
            self.broken = True
            raise

    def _segments(self, conn) -> list[Segment]:
        return [self.files.load(s, functools.partial(self.meta.segment_rowids, self.id, s.file,
                                                     conn))
                for s in self.meta.segments(self.id, conn)]

    def apply_local(self, seq: int, batch: ItemBatch, dead: list[int]) -> CollectionSnapshot:
        """Advance to batch `seq`, which this process just committed, from its in-memory copy
        (instead of reading the rows back); falls back to `refresh` when out of step."""
        if self.seq != seq - 1 or self.snapshot is None:
            return self.refresh()
        with self.meta.read_transaction() as conn:
            segments = self._segments(conn)
        try:
            self._append(self.size, (batch.ids, batch.doc_ids, batch.entities, batch.positions,
                                     batch.created_at), batch.has_vector, batch.fields)
        except BaseException:
            self.broken = True
            raise
        self.snapshot = self._finish(_Head(seq, self.size + len(batch), dead, segments))
        return self.snapshot

    def refresh_segments(self) -> CollectionSnapshot:
        """Re-read the segment manifest (after a merge); rows are unchanged."""
        with self.meta.read_transaction() as conn:
            self.segments = self._segments(conn)
        self.snapshot = CollectionSnapshot(self, self.text.searcher())
        return self.snapshot

    def attach_graph(self, file: str) -> None:
        """Give segment `file` the ANN graph and int8 copy just published for it
        (`recallql.index.indexer`, `recallql.index.optimize`); rows and batch are unchanged."""
        self.segments = [self.files.with_graph(s) if s.file == file else s
                         for s in self.segments]
        if self.snapshot is not None:
            self.snapshot = CollectionSnapshot(self, self.snapshot.searcher)

    def _append(self, first: int, values: tuple, has_vector: Sequence[bool] | np.ndarray,
                fields: Sequence[dict | None]) -> None:
        """Append rows ``first …`` to every column (rows past `size` stay invisible until
        `_finish`). `values`: ids, doc_ids and entities (None: same as id / doc_id),
        positions, created_at."""
        for name, column in zip(_COLUMNS, values, strict=True):
            self.columns[name].extend(list(column))
        self.has_vector.extend(has_vector)
        for name, column in self.fields.items():
            column.extend([f.get(name) if f else None for f in fields])
        self._track_ids(first, values[0])

    def _finish(self, head: _Head) -> CollectionSnapshot:
        """Advance the columns' bounds to `head` and return its snapshot (the caller publishes
        it as `snapshot`)."""
        live = np.ones(head.size, bool)
        live[: self.size] = self.live
        live[np.asarray(head.dead, np.int64)] = False
        live.flags.writeable = False
        self.live, self.size, self.seq, self.segments = live, head.size, head.seq, head.segments
        return CollectionSnapshot(self, self.text.searcher())

    def note_skipped(self, file: str, rowids: np.ndarray) -> None:
        """Record rows of segment `file` whose stored vector is not finite (the semantic leg
        skipped them)."""
        self.skipped.setdefault(file, set()).update(int(r) for r in rowids)

    def _track_ids(self, first: int, ids: Sequence[object]) -> None:
        """Keep the writer's id → newest rowid map (if built) up to date with the ids just
        appended at rows ``first …`` (as the id column stores them: ``str(id)``)."""
        if self._id_rows is not None:
            self._id_rows.update((str(item), row) for row, item in enumerate(ids, first))

    def live_rows(self, ids: Sequence[str]) -> dict[str, int]:
        """The live rowid of each of `ids` that has one (state must be current: the writer's,
        under the writer lock). A few ids are looked up in SQLite's ``items_live_id`` index;
        many, in an id → rowid map of every row built on first use and kept up to date."""
        if self._id_rows is None and len(ids) * LOOKUP_SHARE < self.size:
            return self.meta.live_rows(self.id, ids, self.size)
        if self._id_rows is None:
            values = self.columns["id"].values(self.size)  # type: ignore[attr-defined]
            self._id_rows = dict(zip(values, range(self.size), strict=True))
        found = {}
        rows, live = self._id_rows, self.live
        for item in ids:
            row = rows.get(item)
            if row is not None and row < len(live) and live[row]:
                found[item] = row
        return found


class CollectionSnapshot:
    """A consistent, read-only view of a collection at one committed batch.

    The members are the contract of `docs/architecture.md`: `info`, `size`, `live`, `id_rank`,
    `ids`, `doc_ids`, `entities`, `positions`, `created_at`, `analyze`, `lexical_topn`,
    `semantic_topn`, `has_vectors`, `filter_mask`, `fetch`, `explain_bm25`. Extras: `seq` (the
    committed batch number), `has_vector` (bool[size]), `column(name)`, `retention_loss`
    (a `recallql.index.history.RetentionLoss` of an ``AS OF`` snapshot, or None),
    `skipped_vectors()` and `derived(...)` (`AS OF`, `recallql.index.history`).
    """

    def __init__(self, state: CollectionState, searcher: tantivy.Searcher, *,
                 seq: int | None = None, size: int | None = None, live: np.ndarray | None = None,
                 retention_loss: RetentionLoss | None = None):
        self._state = state
        self._searcher = searcher
        self._segments = state.segments
        self._span = state.size  # the rows the segments may hold (AS OF: more than `size`)
        self.info: CollectionInfo = state.info
        self.seq: int = state.seq if seq is None else seq
        self.size: int = state.size if size is None else size
        self.live: np.ndarray = state.live if live is None else live
        self.retention_loss = retention_loss
        cols = state.columns
        self.ids = _str_view(cols["id"], self.size)
        self.doc_ids = _str_view(cols["doc_id"], self.size)
        self.entities = _str_view(cols["entity"], self.size)
        self.positions: np.ndarray = cols["position"].values(self.size)  # type: ignore[attr-defined]
        self.created_at: np.ndarray = cols["created_at"].values(self.size)  # type: ignore[attr-defined]
        self.has_vector: np.ndarray = state.has_vector.view(self.size)
        self._tokens: int | None = None

    @property
    def searcher(self) -> tantivy.Searcher:
        """The tantivy searcher this snapshot is pinned to."""
        return self._searcher

    @property
    def state(self) -> CollectionState:
        """The collection state this snapshot views."""
        return self._state

    def derived(self, *, seq: int, size: int, live: np.ndarray,
                retention_loss: RetentionLoss | None = None) -> CollectionSnapshot:
        """A snapshot of an earlier batch (`AS OF`) sharing this one's searcher and segments:
        its first `size` rows, with liveness `live` (bool[size])."""
        snap = CollectionSnapshot(self._state, self._searcher, seq=seq, size=size, live=live,
                                  retention_loss=retention_loss)
        snap._segments, snap._span = self._segments, self._span
        return snap

    def skipped_vectors(self) -> dict[str, int]:
        """Rows per segment file whose stored vector was found not finite (NaN or infinite) by
        a semantic scan in this process; they are never ranked. Empty when none."""
        return {file: len(rows) for file, rows in sorted(self._state.skipped.items())}

    @functools.cached_property
    def id_rank(self) -> np.ndarray:
        """int64[size]: rank of each row's item id in code-point order (equal ids, i.e. an id
        and its tombstoned versions, have equal ranks). Computed on first use."""
        values = list(self.ids)
        rank = {v: i for i, v in enumerate(sorted(set(values)))}
        return np.fromiter((rank[v] for v in values), np.int64, len(values))

    @functools.cached_property
    def neighbours(self) -> Neighbours:
        """The live rows in document order (`recallql.index.neighbours`): messages by seq in
        their session, chunks by position in their document, ties by rowid. Built on first use
        (one sort of the rows that share a document; the ids of rows whose document is their
        own id are read only when some other row names a document)."""
        column = self._state.columns["doc_id"]
        codes = np.array(column.codes(self.size), dtype=np.int64)  # type: ignore[attr-defined]
        same = np.flatnonzero(codes == SAME)
        index = column.pool.index  # type: ignore[attr-defined]
        if same.shape[0] and index:  # a row whose doc id is its own id, named by others
            ids = self._state.columns["id"].take(same, self.size)  # type: ignore[attr-defined]
            codes[same] = np.fromiter((index.get(i, -1) for i in ids), np.int64, len(ids))
        else:
            codes[same] = -1
        return Neighbours(codes, np.asarray(self.positions, np.int64),
                          np.arange(self.size, dtype=np.int64), self.live)

    def analyze(self, text: str) -> list[str]:
        """The index analyser, in the version the collection's index was built with (see
        `recallql.index.analysis.analyze`)."""
        return self._state.text.analyze(text)

    @property
    def analyzer_version(self) -> int:
        """The analyser version the collection's text index was built with (`analyze`)."""
        return int(self._state.text.version)

    def bm25_documents(self) -> int | None:
        """Documents BM25's statistics count (N): the live rows plus deleted or replaced ones
        whose documents are still in a tantivy segment (the Lucene rule, see
        `recallql.index.text`); None for an index of analyser 1, which cannot count them."""
        return self._state.text.counted_docs(self._searcher)

    def bm25_statistics(self, terms: Sequence[str]) -> tuple[int | None, int, list[int]]:
        """BM25's corpus statistics in this snapshot: (N as `bm25_documents`, total tokens T,
        document frequency n(t) of each term), so that a coordinator can score shards'
        candidates with the sums over shards (`recallql.cluster.bm25`). T is computed once per
        snapshot."""
        if self._tokens is None:
            self._tokens = text_index.counted_tokens(self._searcher)
        return (self.bm25_documents(), self._tokens,
                [int(self._searcher.doc_freq("text", t)) for t in terms])

    @functools.cached_property
    def _graph_rows(self) -> int:
        """Rows of the segments that have an HNSW graph (the semantic leg's method choice)."""
        return sum(len(s.vecs) for s in self._segments if s.graph is not None)

    @functools.cached_property
    def _live_vectors(self) -> np.ndarray:
        """bool[size]: live rows with a vector (computed once per snapshot; read-only)."""
        mask = self.live & self.has_vector
        mask.flags.writeable = False
        return mask

    def _eligible(self, allowed: np.ndarray | RowSet | None, base: np.ndarray | None = None
                  ) -> RowSet:
        """The rows of `base` (default: live) that `allowed` keeps: O(rows) for a sparse
        `allowed`, a mask operation otherwise."""
        mask = self.live if base is None else base
        if allowed is None:
            return RowSet(self.size, mask=mask)
        return RowSet.of(allowed, self.size).keep(mask)

    def filter_rows(self, expr: object) -> RowSet:
        """The rows for which the `recallql.index.filters` expression is true (liveness not
        applied): sparse when it resolves through postings (`filters.posting_rows`: O(rows
        kept)), a `filter_mask` otherwise.

        Raises:
            FilterError: unknown field or a value of the wrong type.
        """
        rows = posting_rows(expr, self.column, self.size)
        if rows is not None:
            return RowSet(self.size, rows=rows)
        return RowSet(self.size, mask=self.filter_mask(expr))

    def lexical_topn(self, terms: Sequence[str], n: int,
                     allowed: np.ndarray | RowSet | None = None, where: object = None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """BM25 top-n of live, allowed rows (`lexical_search` without the description)."""
        rowids, scores, _ = self.lexical_search(terms, n, allowed, where)
        return rowids, scores

    def lexical_search(self, terms: Sequence[str], n: int,
                       allowed: np.ndarray | RowSet | None = None, where: object = None
                       ) -> tuple[np.ndarray, np.ndarray, str]:
        """BM25 top-n of live, allowed rows, and how the filter was applied.

        Args:
            terms: analysed terms (`analyze`); a term repeated k times is weighted ×k (query
                term frequency).
            n: rows wanted (≥ 0).
            allowed: optional bool[size] filter or `RowSet` (`filter_rows`).
            where: the filter expression `allowed` came from, if any: what the index's
                ``keys`` terms can express of it becomes a term query
                (`recallql.index.keyterms`); hits are still checked against `allowed`.

        Returns:
            (rowids int64[m], bm25 float32[m], how), m ≤ n, ordered by (−bm25, item id);
            `how` as `recallql.index.text.lexical_search` (for EXPLAIN).

        Raises:
            ValueError: `allowed` has the wrong shape or dtype.
        """
        eligible = self._eligible(allowed)
        restrict = None
        keys = self._keywords
        if where is not None and allowed is not None and keys:
            query, exact, fields = filter_query(where, keys, text_index.SCHEMA_KEYED)
            if query is not None:
                restrict = (query, exact, f"terms({','.join(fields)})")
        return text_index.lexical_search(self._searcher, terms, n, eligible, self.ids,
                                         restrict)

    @functools.cached_property
    def _keywords(self) -> dict[str, FieldType]:
        """The declared fields the text index holds ``keys`` terms for, with their types."""
        fields = self.info.fields
        return {name: fields[name] for name in self._state.text.keywords if name in fields}

    def semantic_topn(self, vec: np.ndarray, n: int, allowed: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Exact cosine top-n of live, allowed rows that have a vector.

        Args:
            vec: float32[dim] query vector (normalised here).
            n: rows wanted (≥ 0).
            allowed: optional bool[size] filter.

        Returns:
            (rowids int64[m], cosine float32[m]), m ≤ n, ordered by (−cosine, item id). Rows
            whose stored vector is not finite (a damaged segment) are skipped, never ranked,
            and counted in `skipped_vectors`.

        Raises:
            ValueError: wrong dimension, zero or non-finite query vector, bad `allowed`.
        """
        rowids, cosine, _ = self.semantic_search(vec, n, allowed)
        return rowids, cosine

    def semantic_search(self, vec: np.ndarray, n: int,
                        allowed: np.ndarray | RowSet | None = None,
                        method: str = "auto", ef: int | None = None
                        ) -> tuple[np.ndarray, np.ndarray, SemanticStats]:
        """`semantic_topn` with the method chosen or forced, and how it ran.

        Args:
            vec: float32[dim] query vector (normalised here).
            n: rows wanted (≥ 0).
            allowed: optional bool[size] filter.
            method: ``"auto"`` (exact for at most `recallql.index.semantic.EXACT_MAX_ROWS`
                eligible rows, ANN with oversampling above, exact for a segment whose
                filtered ANN search under-fills), ``"exact"`` or ``"ann"``.
            ef: HNSW search breadth of the graph searches (``USING SEMANTIC (ann, ef = N)``;
                raised to the candidates asked when lower); None: the graphs' default.

        Returns:
            (rowids int64[m], cosine float32[m], `SemanticStats`: method, why, eligible
            rows, rows scanned and re-scored). The cosines are exact whatever the method.

        Raises:
            ValueError: wrong dimension, zero or non-finite query vector, bad `allowed` or
                `method`.
        """
        query = normalise_query(vec, self.info.dim)
        rows = self._eligible(allowed, base=self._live_vectors)
        if rows.sparse:
            gathered = self._gathered(query, n, rows, method)
            if gathered is not None:
                return gathered
        eligible = rows.mask
        if self._span > self.size:  # AS OF: the segments also hold later rows
            eligible = np.concatenate([eligible, np.zeros(self._span - self.size, bool)])
        return semantic.search(self._segments, query, n, eligible, self.ids, method,
                               self._state.note_skipped, ef)

    def _gathered(self, query: np.ndarray, n: int, rows: RowSet, method: str
                  ) -> tuple[np.ndarray, np.ndarray, SemanticStats] | None:
        """The exact scan of a sparse eligible set, gathering just its rows
        (`recallql.index.gather`); None when the method chosen is not exact."""
        chosen, why = semantic.choose(rows.count, self._graph_rows, method)
        if chosen != "exact":
            return None
        prescan = [0, 0]
        rowids, cos = gathered_topn(self._segments, query, n, rows.rows, self.ids,
                                    self._state.note_skipped, prescan)
        if prescan[0]:
            why += (f"; int8 pre-scan of {prescan[0]:,} rows, {prescan[1]:,} re-scored in "
                    "float32")
        return rowids, cos, SemanticStats("exact", why, eligible=rows.count, scanned=rows.count,
                                          rescored=prescan[1])

    def eligible_vectors(self, allowed: np.ndarray | RowSet | None = None) -> int:
        """Live, allowed rows that have a vector: the count the semantic leg's method is
        chosen from (`recallql.index.semantic.choose`)."""
        return self._eligible(allowed, base=self._live_vectors).count

    def has_vectors(self) -> bool:
        """True when some live row has a vector."""
        return bool(self._live_vectors.any())

    def column(self, name: str) -> Column:
        """The column of a filterable field (declared, or id/doc_id/entity/position/created_at).

        Raises:
            FilterError: unknown field.
        """
        column = self._state.fields.get(name) or self._state.columns.get(name)
        if column is None:
            known = sorted(set(self._state.fields) | set(self._state.columns))
            raise FilterError(f"collection {self.info.name!r} has no field {name!r} "
                              f"(fields: {', '.join(known)})")
        return column

    def values(self, name: str, rowids: Sequence[int] | np.ndarray) -> list[object]:
        """The values of one filterable field for the given rows (None where missing), read from
        the in-memory columns: cheaper than `fetch` for a single field.

        Raises:
            FilterError: unknown field.
        """
        column = self.column(name)
        rows = np.asarray(rowids, dtype=np.int64)
        if isinstance(column, NumberColumn):
            present = column.present(self.size)[rows]
            vals = column.values(self.size)[rows].tolist()
            return [v if p else None for v, p in zip(vals, present.tolist(), strict=True)]
        if isinstance(column, StrColumn | StrArray):
            return column.take(rows, self.size)  # type: ignore[return-value]
        return [row.get(name) for row in self.fetch(rows)]

    def filter_mask(self, expr: object) -> np.ndarray:
        """bool[size]: rows for which the `recallql.index.filters` expression is true (missing
        values fail closed; liveness is not applied).

        Raises:
            FilterError: unknown field or a value of the wrong type.
        """
        return filter_mask(expr, self.column, self.size)

    def fetch(self, rowids: Sequence[int] | np.ndarray) -> list[dict]:
        """Stored fields of each row: ``rowid``, ``id``, ``doc_id``, ``entity``, ``position``,
        ``created_at`` (epoch seconds UTC or None), the text fields (``""`` when empty), and
        the declared fields (None when missing; timestamps as epoch seconds)."""
        names = self.field_names
        return [decode_row(names, record) for record in self.fetch_records(rowids)]

    @property
    def field_names(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(text field names, declared field names): what `decode_row` needs of the schema."""
        return tuple(self.info.text_fields), tuple(self.info.fields)

    def fetch_records(self, rowids: Sequence[int] | np.ndarray) -> list[tuple]:
        """Each row's stored record, not decoded: (rowid, id, doc_id, entity, position,
        created_at (NaN when missing), texts JSON, fields JSON or None); `decode_row` turns
        one into `fetch`'s dict (a cluster shard sends records, its coordinator decodes the
        page's).

        Raises:
            IndexError: a rowid out of range.
        """
        rows = [int(r) for r in rowids]
        for r in rows:
            if not 0 <= r < self.size:
                raise IndexError(f"rowid {r} out of range 0..{self.size - 1}")
        stored = self._state.meta.fetch(self._state.id, rows)
        return [(r, item, doc, entity, int(self.positions[r]), float(self.created_at[r]),
                 *stored[r][:2])
                for r, item, doc, entity in zip(rows, self.ids.take(rows), self.doc_ids.take(rows),
                                                self.entities.take(rows), strict=True)]

    def explain_bm25(self, terms: Sequence[str], rowid: int) -> str:
        """tantivy's BM25 explanation of `terms` for one row, as JSON text."""
        return text_index.explain_bm25(self._searcher, terms, rowid)


def decode_row(names: tuple[tuple[str, ...], tuple[str, ...]], record: tuple) -> dict:
    """`CollectionSnapshot.fetch`'s dict of a stored record (`fetch_records`), given the
    collection's (text field names, declared field names) (`field_names`)."""
    rowid, item, doc, entity, position, created, texts, fields = record
    out: dict = {"rowid": rowid, "id": item, "doc_id": doc, "entity": entity,
                 "position": position, "created_at": None if math.isnan(created) else created}
    text_values = json.loads(texts)
    out.update({name: text_values.get(name, "") for name in names[0]})
    field_values = json.loads(fields) if fields else {}
    out.update({name: field_values.get(name) for name in names[1]})
    return out


def _str_view(column: Column, size: int) -> StrView:
    assert isinstance(column, StrArray | StrColumn)
    return StrView(column, size)
