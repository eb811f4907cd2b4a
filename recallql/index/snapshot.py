"""A collection's in-memory state and the read-only `CollectionSnapshot` the engine queries.

`CollectionState` grows incrementally: a refresh reads, in one SQLite read transaction, the rows
added since the last refresh, the rows tombstoned since, and the vector-segment manifest; then
reloads the tantivy searcher. Because tantivy commits before SQLite (see `recallql.index.batch`),
a searcher opened after the SQLite read holds every document of the batches it saw; documents of
later or unfinished batches are excluded by the `live` mask, which comes from SQLite only.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tantivy

from recallql.index import text as text_index
from recallql.index.analysis import analyze
from recallql.index.columns import (
    Buffer,
    Column,
    NumberColumn,
    StrColumn,
    StrPool,
    StrView,
    make_column,
)
from recallql.index.errors import FilterError, StoreError
from recallql.index.filters import filter_mask
from recallql.index.items import ItemBatch
from recallql.index.metadata import NEW_ROWS_SQL, CollectionRow, MetadataStore
from recallql.index.schema import CollectionInfo, FieldType
from recallql.index.text import TextIndex
from recallql.index.vectors import Segment, SegmentFiles, normalise_query, semantic_topn

REFRESH_ATTEMPTS = 8


@dataclass
class _Delta:
    """What changed since the last refresh: new rows (columnar), tombstoned rowids, and the
    whole segment list."""

    seq: int
    size: int
    columns: dict[str, list]
    has_vector: Sequence[bool]
    fields: list[dict | None]
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
        self.pool = StrPool()
        self.columns: dict[str, Column] = {
            "id": StrColumn(self.pool), "doc_id": StrColumn(self.pool),
            "entity": StrColumn(self.pool), "position": NumberColumn(FieldType.INT),
            "created_at": NumberColumn(FieldType.TIMESTAMP),
        }
        self.fields = {name: make_column(kind) for name, kind in row.info.fields.items()}
        self.has_vector = Buffer(np.bool_)
        self.live = np.zeros(0, bool)
        self.size, self.seq = 0, -1
        self.segments: list[Segment] = []
        self.snapshot: CollectionSnapshot | None = None
        self._ranks: tuple[int, np.ndarray] = (0, np.zeros(0, np.int64))
        self._latest = np.zeros(0, np.int64)

    def current(self, seq: int) -> CollectionSnapshot:
        """The snapshot at committed batch `seq`, refreshing when it changed."""
        if self.snapshot is None or self.seq != seq:
            self.refresh()
        assert self.snapshot is not None
        return self.snapshot

    def refresh(self) -> CollectionSnapshot:
        """Catch up with the last committed batch (retrying if a merge removed a file we were
        about to open).

        Raises:
            StoreError: the state could not be read consistently.
        """
        for _ in range(REFRESH_ATTEMPTS):
            try:
                with self.meta.read_transaction() as conn:
                    delta = self._read(conn)
                searcher = self.text.searcher()
            except FileNotFoundError:
                continue
            self._apply(delta)
            self.snapshot = CollectionSnapshot(self, searcher)
            return self.snapshot
        raise StoreError(f"collection {self.info.name!r}: could not read a consistent state")

    def _read(self, conn) -> _Delta:
        seq = self.meta.committed_batch(conn)
        row = self.meta.collection(self.info.name, conn)
        if row is None or row.id != self.id:
            raise StoreError(f"collection {self.info.name!r} disappeared from the store")
        rows = conn.execute(NEW_ROWS_SQL, (self.id, self.size, row.next_row)).fetchall()
        dead = [r for (r,) in conn.execute(
            "SELECT row FROM items WHERE collection_id = ? AND dead_batch > ?",
            (self.id, max(self.seq, 0)))]
        rowids, ids, doc_ids, entities, positions, created, has_vec, fields = (
            [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(8)])
        if rowids and (rowids[0] != self.size or len(rowids) != row.next_row - self.size):
            raise StoreError(f"collection {self.info.name!r}: rowids are not dense")
        doc_ids = [doc or item for doc, item in zip(doc_ids, ids, strict=True)]
        entities = [ent or doc for ent, doc in zip(entities, doc_ids, strict=True)]
        columns = dict(zip(_COLUMNS, (ids, doc_ids, entities, positions, created), strict=True))
        parsed = [json.loads(f) if f else None for f in fields] if self.fields else []
        return _Delta(seq, row.next_row, columns, has_vec, parsed, dead, self._segments(conn))

    def _segments(self, conn) -> list[Segment]:
        return [self.files.load(s, functools.partial(self.meta.segment_rowids, self.id, s.file,
                                                     conn))
                for s in self.meta.segments(self.id, conn)]

    def apply_local(self, seq: int, batch: ItemBatch, dead: list[int]) -> CollectionSnapshot:
        """Advance to batch `seq`, which this process just committed, from its in-memory copy
        (instead of reading the rows back); falls back to `refresh` when out of step."""
        if self.seq != seq - 1 or self.snapshot is None:
            return self.refresh()
        doc_ids = [d or i for d, i in zip(batch.doc_ids, batch.ids, strict=True)]
        entities = [e or d for e, d in zip(batch.entities, doc_ids, strict=True)]
        columns = dict(zip(_COLUMNS, (batch.ids, doc_ids, entities, batch.positions,
                                      batch.created_at), strict=True))
        with self.meta.read_transaction() as conn:
            segments = self._segments(conn)
        delta = _Delta(seq, self.size + len(batch), columns, batch.has_vector, batch.fields,
                       dead, segments)
        searcher = self.text.searcher()
        self._apply(delta)
        self.snapshot = CollectionSnapshot(self, searcher)
        return self.snapshot

    def refresh_segments(self) -> CollectionSnapshot:
        """Re-read the segment manifest (after a merge); rows are unchanged."""
        with self.meta.read_transaction() as conn:
            self.segments = self._segments(conn)
        self.snapshot = CollectionSnapshot(self, self.text.searcher())
        return self.snapshot

    def _apply(self, d: _Delta) -> None:
        if d.size > self.size:
            for name in _COLUMNS:
                self.columns[name].extend(d.columns[name])
            self.has_vector.extend(d.has_vector)
            for name, column in self.fields.items():
                column.extend([f.get(name) if f else None for f in d.fields])
            self._track_ids(d.size)
        live = np.ones(d.size, bool)
        live[: self.size] = self.live
        live[np.asarray(d.dead, np.int64)] = False
        live.flags.writeable = False
        self.live, self.size, self.seq, self.segments = live, d.size, d.seq, d.segments

    def _track_ids(self, size: int) -> None:
        """Remember the newest rowid of every item id (for replacement lookups)."""
        codes = self.columns["id"].codes(size)[self.size:]  # type: ignore[attr-defined]
        if len(self._latest) < len(self.pool.vocab):
            grown = np.full(max(len(self.pool.vocab), 2 * len(self._latest)), -1, np.int64)
            grown[: len(self._latest)] = self._latest
            self._latest = grown
        self._latest[codes] = np.arange(self.size, size)

    def live_rows(self, ids: Sequence[str]) -> dict[str, int]:
        """The live rowid of each of `ids` that has one (state must be current)."""
        found = {}
        index, latest, live = self.pool.index, self._latest, self.live
        for item in ids:
            code = index.get(item)
            if code is not None and code < len(latest):
                row = int(latest[code])
                if row >= 0 and live[row]:
                    found[item] = row
        return found

    def id_ranks(self) -> np.ndarray:
        """int64 rank of every pooled string in code-point order (cached per pool size)."""
        known, ranks = self._ranks
        if known != len(self.pool.vocab):
            ranks = self.pool.sort_ranks()
            self._ranks = (len(ranks), ranks)
        return ranks


class CollectionSnapshot:
    """A consistent, read-only view of a collection at one committed batch.

    The members are the contract of `docs/architecture.md`: `info`, `size`, `live`, `id_rank`,
    `ids`, `doc_ids`, `entities`, `positions`, `created_at`, `analyze`, `lexical_topn`,
    `semantic_topn`, `has_vectors`, `filter_mask`, `fetch`, `explain_bm25`. Extras: `seq` (the
    committed batch number), `has_vector` (bool[size]) and `column(name)`.
    """

    def __init__(self, state: CollectionState, searcher: tantivy.Searcher):
        self._state = state
        self._searcher = searcher
        self._segments = state.segments
        self.info: CollectionInfo = state.info
        self.seq: int = state.seq
        self.size: int = state.size
        self.live: np.ndarray = state.live
        cols = state.columns
        self.ids = _str_view(cols["id"], self.size)
        self.doc_ids = _str_view(cols["doc_id"], self.size)
        self.entities = _str_view(cols["entity"], self.size)
        self.positions: np.ndarray = cols["position"].values(self.size)  # type: ignore[attr-defined]
        self.created_at: np.ndarray = cols["created_at"].values(self.size)  # type: ignore[attr-defined]
        self.has_vector: np.ndarray = state.has_vector.view(self.size)

    @functools.cached_property
    def id_rank(self) -> np.ndarray:
        """int64[size]: order-preserving rank of each row's item id (code-point order); equal
        ids have equal ranks."""
        codes = self._state.columns["id"].codes(self.size)  # type: ignore[attr-defined]
        return self._state.id_ranks()[codes]

    @staticmethod
    def analyze(text: str) -> list[str]:
        """The index analyser (see `recallql.index.analysis.analyze`)."""
        return analyze(text)

    def _eligible(self, allowed: np.ndarray | None, *extra: np.ndarray) -> np.ndarray:
        mask = self.live
        if allowed is not None:
            allowed = np.asarray(allowed)
            if allowed.dtype != bool or allowed.shape != (self.size,):
                raise ValueError(f"allowed must be bool[{self.size}], got {allowed.dtype}"
                                 f"{list(allowed.shape)}")
            mask = mask & allowed
        for more in extra:
            mask = mask & more
        return mask

    def lexical_topn(self, terms: Sequence[str], n: int, allowed: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """BM25 top-n of live, allowed rows.

        Args:
            terms: analysed terms (`analyze`); duplicates are ignored.
            n: rows wanted (≥ 0).
            allowed: optional bool[size] filter.

        Returns:
            (rowids int64[m], bm25 float32[m]), m ≤ n, ordered by (−bm25, item id).

        Raises:
            ValueError: `allowed` has the wrong shape or dtype.
        """
        eligible = self._eligible(allowed)
        return text_index.lexical_topn(self._searcher, terms, n, eligible, self.ids)

    def semantic_topn(self, vec: np.ndarray, n: int, allowed: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Exact cosine top-n of live, allowed rows that have a vector.

        Args:
            vec: float32[dim] query vector (normalised here).
            n: rows wanted (≥ 0).
            allowed: optional bool[size] filter.

        Returns:
            (rowids int64[m], cosine float32[m]), m ≤ n, ordered by (−cosine, item id).

        Raises:
            ValueError: wrong dimension, zero or non-finite query vector, bad `allowed`.
        """
        query = normalise_query(vec, self.info.dim)
        eligible = self._eligible(allowed, self.has_vector)
        return semantic_topn(self._segments, query, n, eligible, self.ids)

    def has_vectors(self) -> bool:
        """True when some live row has a vector."""
        return bool((self.live & self.has_vector).any())

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

    def filter_mask(self, expr: object) -> np.ndarray:
        """bool[size]: rows for which the `recallql.index.filters` expression is true (missing
        values fail closed; liveness is not applied).

        Raises:
            FilterError: unknown field or a value of the wrong type.
        """
        return filter_mask(expr, self.column, self.size)

    def fetch(self, rowids: Sequence[int]) -> list[dict]:
        """Stored fields of each row: ``rowid``, ``id``, ``doc_id``, ``entity``, ``position``,
        ``created_at`` (epoch seconds UTC or None), the text fields (``""`` when empty), and
        the declared fields (None when missing; timestamps as epoch seconds)."""
        rows = [int(r) for r in rowids]
        for r in rows:
            if not 0 <= r < self.size:
                raise IndexError(f"rowid {r} out of range 0..{self.size - 1}")
        stored = self._state.meta.fetch(self._state.id, rows)
        return [self._row(r, *stored[r]) for r in rows]

    def _row(self, rowid: int, texts: str, fields: str | None) -> dict:
        created = float(self.created_at[rowid])
        out: dict = {"rowid": rowid, "id": self.ids[rowid], "doc_id": self.doc_ids[rowid],
                     "entity": self.entities[rowid], "position": int(self.positions[rowid]),
                     "created_at": None if math.isnan(created) else created}
        text_values = json.loads(texts)
        out.update({name: text_values.get(name, "") for name in self.info.text_fields})
        field_values = json.loads(fields) if fields else {}
        out.update({name: field_values.get(name) for name in self.info.fields})
        return out

    def explain_bm25(self, terms: Sequence[str], rowid: int) -> str:
        """tantivy's BM25 explanation of `terms` for one row, as JSON text."""
        return text_index.explain_bm25(self._searcher, terms, rowid)


def _str_view(column: Column, size: int) -> StrView:
    assert isinstance(column, StrColumn)
    return StrView(column.pool, column.codes(size))
