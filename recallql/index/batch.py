"""Batches: one `ingest` or `delete` call is one all-or-nothing write across SQLite, tantivy
and vectors.

A batch writes new rows and tombstones live ones (`recallql.index.changes.Plan`): an ingest
writes its changed items and tombstones their earlier versions (and, with
``replace_documents``, the stale chunks of its documents); a delete only tombstones. Rows are
never updated in place: a tombstoned row keeps its data and gets ``dead_batch``.

Commit protocol for batch ``S`` (``S`` = committed batch + 1) of a collection, under the writer
lock, with rowids ``next_row … next_row+n-1`` (dense; ``n`` may be 0):

1. Validate every item, leave out those identical to their live version (same fingerprint,
   `recallql.index.fingerprint`), find the rows to tombstone and embed the items without a
   vector, in memory. Validated texts are already handed to the tantivy writer (documents carry
   their rowid and batch ``S``) so that tantivy indexes them on its own thread meanwhile; they
   are queued, not committed (`PrefixIndexer`: only the prefix before the first live id streams,
   since an unchanged item drops out and shifts the rowids after it). Any problem raises
   `IngestError` and the queued documents are rolled back: nothing has been written.
2. Write the batch's vectors to a new segment file ``b<S>.npy`` (temp file, fsync, rename, fsync
   directory). Files are never overwritten in place.
3. tantivy: queue the deletion of the documents of rows tombstoned at or before the retention
   horizon recorded by batch ``S-1`` (and not deleted yet), then ``commit()``.
4. One SQLite transaction (WAL, ``synchronous=FULL``): tombstones (``dead_batch = S``) of the
   replaced, deleted and stale rows, item rows (with their fingerprints), the manifest entry of
   the segment, the collection's ``next_row``, its purge mark (the horizon just purged to) and
   its new horizon (the last batch committed at least `Store.retention` seconds before ``S``),
   the batch's commit time (``batches.committed_at``, for ``AS OF``), the caller's
   `extra_sql`, and ``state.committed_batch = S``. Its COMMIT is the commit point.
5. On any failure after step 1 (and whenever a writer opens): recovery deletes tantivy documents
   whose batch is greater than the committed one and removes segment files the manifest does not
   name. Until then they are invisible anyway: readers only return rows that SQLite says are
   committed and live. A failed batch's rowids and number are reused by the next batch, which
   is safe because recovery runs first.

Documents of tombstoned rows (replaced, deleted or stale) are deleted from tantivy only by a
*later* batch's commit (step 3), and only once the retention window has passed (`AS OF` may show
them until then: `recallql.index.history`); the purge lags the horizon by one batch, so a reader
of batch ``S`` — whose searcher may already hold batch ``S+1``'s commit — never loses a row it
can see. A crash between the tantivy commit and the SQLite commit can never remove a committed
row; until the purge the `live` mask hides them.

A call that changes nothing (every item unchanged, every id to delete missing, no `extra_sql`)
writes no batch and reports batch 0.

After the commit, small vector segments may be merged (`merge_segments`); a merge writes a new
file (never over an existing one), swaps the manifest rows in one transaction, then unlinks the
inputs, so a crash at any point leaves either the old or the new segments listed, and the other
files are orphans. A merge keeps the vectors of live rows and of rows tombstoned after the
horizon. Every step runs under the writer lock (`recallql.index.lock`), and recovery of a
collection runs first in each hold of it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recallql.index import changes
from recallql.index.changes import Plan
from recallql.index.errors import IngestError, StoreError
from recallql.index.fingerprint import fingerprints
from recallql.index.indexer import clear_building
from recallql.index.items import ItemBatch, check_vectors, validate
from recallql.index.metadata import ITEM_INSERT, ExtraSql, MetadataStore
from recallql.index.vectors import (
    NotRealNumbers,
    Segment,
    merged_parts,
    plan_merge,
    real_float32,
)

if TYPE_CHECKING:
    from recallql.index.embedders import Embedder
    from recallql.index.schema import CollectionInfo
    from recallql.index.snapshot import CollectionState


@dataclass(frozen=True)
class IngestReport:
    """What one `ingest` call committed.

    Attributes:
        collection: collection name.
        batch: the batch sequence number (0 when nothing was written: no batch).
        added: items whose id was new.
        replaced: items that replaced a live item with the same id.
        embedded: items whose vector came from the collection's embedder.
        first_rowid: rowid of the batch's first written item (rowids are consecutive).
        seconds: wall-clock duration of the call, in seconds.
        unchanged: items identical to their live version, skipped (not re-embedded, not
            re-indexed; they keep their rowid).
        removed: stale chunks tombstoned (``replace_documents=True``).
    """

    collection: str
    batch: int
    added: int
    replaced: int
    embedded: int
    first_rowid: int
    seconds: float
    unchanged: int = 0
    removed: int = 0

    @property
    def count(self) -> int:
        """Items written."""
        return self.added + self.replaced


@dataclass(frozen=True)
class DeleteReport:
    """What one `delete` call committed.

    Attributes:
        collection: collection name.
        batch: the batch sequence number (0 when nothing was deleted: no batch).
        deleted: live rows tombstoned.
        missing: requested ids and doc ids that matched no live row (not an error).
        seconds: wall-clock duration of the call, in seconds.
    """

    collection: str
    batch: int
    deleted: int
    missing: int
    seconds: float


class PrefixIndexer:
    """The validation sink of `prepare`: queues validated texts in tantivy (rowids from
    ``state.size``, batch `seq`) while validation goes on, so that tantivy indexes them on its own
    thread meanwhile.

    It queues only the prefix of the batch before the first item whose id is live: such an item
    may turn out unchanged and be left out, which shifts the rowids of the items after it.
    `finish` queues the rest once the written batch is known. On a fresh collection everything
    streams.
    """

    def __init__(self, state: CollectionState, seq: int):
        self.state, self.seq = state, seq
        self.sent = 0
        self.streaming = True

    def __call__(self, first: int, ids: list[str], texts: list[str],
                 fields: list[dict[str, object] | None]) -> None:
        if not self.streaming:
            return
        assert first == self.sent, "validated chunks arrive in order"
        live = self.state.live_rows(ids)
        stop = next(i for i, item in enumerate(ids) if item in live) if live else len(ids)
        self._add(texts[:stop], fields[:stop])
        self.streaming = not live

    def finish(self, written: ItemBatch) -> None:
        """Queue the texts of `written` (the batch minus its unchanged items) not queued yet."""
        self._add(written.texts[self.sent:], written.fields[self.sent:])

    def _add(self, texts: list[str], fields: list[dict[str, object] | None]) -> None:
        if texts:
            start = self.state.size + self.sent
            self.state.text.add(range(start, start + len(texts)), self.seq, texts, fields)
            self.sent += len(texts)


def prepare(state: CollectionState, items: Iterable[object], embedder: Embedder | None,
            sink: PrefixIndexer, replace_documents: bool = False) -> Plan:
    """Validate `items`, leave out the unchanged ones, find the rows to tombstone, queue the
    texts and embed the items without a vector (step 1 of the protocol).

    Args:
        state: the collection (current).
        items: raw items.
        embedder: the attached embedder, or None.
        sink: queues texts in tantivy (on failure the caller rolls the queue back).
        replace_documents: also tombstone the live chunks of the batch's documents whose id is
            not in the batch.

    Returns:
        The plan of the batch.

    Raises:
        IngestError: invalid item, missing embedder, bad embedder output.
    """
    info = state.info
    batch = validate(info, items, sink)
    hashes = fingerprints(batch, info.embedder_name is not None)
    keep, replaced = changes.split_unchanged(state, batch, hashes)
    written = batch if keep is None else batch.select(keep)
    plan = changes.Plan(written, hashes if keep is None else [hashes[i] for i in keep],
                        replaced, unchanged=len(batch) - len(written))
    if replace_documents:
        plan.removed = changes.stale_rows(state, batch)
    sink.finish(written)
    plan.embedded = _embed(written, info, embedder)
    return plan


def _embed(batch: ItemBatch, info: CollectionInfo, embedder: Embedder | None) -> int:
    """Embed the items of `batch` without a vector (in place); returns how many.

    Raises:
        IngestError: the collection embeds but its embedder is not attached, or the embedder
            raised, or returned the wrong shape or an unusable vector.
    """
    missing = np.flatnonzero(~batch.has_vector)
    if len(missing) == 0 or (embedder is None and info.embedder_name is None):
        return 0
    if embedder is None:
        first = batch.ids[int(missing[0])]
        raise IngestError(
            f"no vector given and the collection's embedder {info.embedder_name!r} is not "
            "attached (pass vectors, or attach it with set_embedder)",
            item=repr(first), field="vector")
    texts = [batch.texts[i] for i in missing]
    try:  # NotRealNumbers comes from a conversion only, never from the embedder's own code
        vectors = real_float32(embedder(texts))
    except NotRealNumbers as exc:
        raise IngestError(f"embedder {embedder.name!r} returned unusable vectors ({exc})",
                          field="vector") from None
    except Exception as exc:  # the embedder's own code (a model, a user's callable) failed
        raise IngestError(f"embedder {embedder.name!r} failed: {type(exc).__name__}: {exc}; "
                          "nothing was written", field="vector") from exc
    if vectors.shape != (len(texts), info.dim):
        raise IngestError(f"embedder {embedder.name!r} returned shape {vectors.shape}, "
                          f"expected ({len(texts)}, {info.dim})", field="vector")
    batch.vectors[missing] = check_vectors(vectors, info.dim, lambda i: repr(
        batch.ids[int(missing[i])]), f"embedder {embedder.name!r}")
    batch.has_vector[missing] = True
    return len(missing)


def _segment(batch: ItemBatch, start: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(vectors, rowids) of the batch rows that have a vector, or None."""
    rows = np.flatnonzero(batch.has_vector)
    if len(rows) == 0:
        return None
    vectors = batch.vectors if len(rows) == len(batch) else batch.vectors[rows]
    return vectors, rows.astype(np.int64) + start


def manifest_values(collection_id: int, file: str, rowids: np.ndarray) -> tuple:
    """Manifest row for a segment: explicit rowids (in row order of the file, not necessarily
    sorted) unless they are exactly the range ``lo..hi-1``."""
    lo, hi = int(rowids.min()), int(rowids.max()) + 1
    contiguous = hi - lo == len(rowids) and bool((np.diff(rowids) == 1).all())
    blob = None if contiguous else rowids.astype("<i8").tobytes()
    return (collection_id, file, lo, hi, len(rowids), blob)


@dataclass(frozen=True)
class Stamp:
    """When batch `seq` commits and the retention horizon it records.

    Attributes:
        seq: the batch number.
        at: its commit time, epoch seconds UTC (never earlier than the previous batch's).
        horizon: the last batch whose tombstoned rows may be purged from now on (the last
            batch committed at or before ``at`` minus the retention window).
    """

    seq: int
    at: float
    horizon: int


def commit(state: CollectionState, plan: Plan, extra_sql: ExtraSql | None, stamp: Stamp
           ) -> None:
    """Write a prepared plan whose texts were already queued in tantivy as batch ``stamp.seq``
    from rowid ``state.size`` (steps 2–4 of the protocol); the caller recovers on failure.

    Tantivy documents of rows tombstoned at or before the horizon recorded by the *previous*
    batch are deleted here, so a reader of the previous batch (which may open this commit's
    searcher) never loses a row it can still see, live or within its AS OF retention."""
    meta, text, batch, seq = state.meta, state.text, plan.batch, stamp.seq
    row = meta.collection(state.info.name, meta.write)
    assert row is not None and row.id == state.id and row.next_row == state.size
    assert seq == meta.committed_batch(meta.write) + 1
    start, n = row.next_row, len(batch)
    text.delete_rows(meta.pending_purge(row, row.horizon))
    segment = _segment(batch, start)
    if segment is not None:  # written while tantivy indexes in the background
        state.files.write(f"b{seq}.npy", [segment[0]])
    text.commit()
    with meta.transaction() as conn:
        conn.executemany("UPDATE items SET dead_batch = ? WHERE collection_id = ? AND row = ?",
                         [(seq, row.id, r) for r in plan.dead])
        conn.executemany(ITEM_INSERT, _item_rows(row.id, start, seq, batch, plan.hashes))
        if segment is not None:
            conn.execute("INSERT INTO segments VALUES (?,?,?,?,?,?)",
                         manifest_values(row.id, f"b{seq}.npy", segment[1]))
        conn.execute("UPDATE collections SET next_row = ?, purged_batch = ?, horizon = ? "
                     "WHERE id = ?", (start + n, max(row.purged_batch, row.horizon),
                                      max(row.horizon, stamp.horizon), row.id))
        conn.execute("INSERT INTO batches VALUES (?,?,?,?)", (seq, row.id, n, stamp.at))
        if extra_sql is not None:
            extra_sql(conn)
        conn.execute("UPDATE state SET value = ? WHERE key = 'committed_batch'", (seq,))


def _item_rows(collection_id: int, start: int, seq: int, b: ItemBatch, hashes: list[int]
               ) -> Iterable[tuple]:
    has_vector = b.has_vector.tolist()
    return zip([collection_id] * len(b), range(start, start + len(b)), b.ids, b.doc_ids,
               b.entities, b.positions, b.created_at, [seq] * len(b), has_vector, b.text_json,
               b.fields_json, hashes, strict=True)


def no_sql(conn: object) -> None:
    """An `extra_sql` that adds nothing: it makes a batch that changes no row commit anyway
    (`Store.vacuum`)."""


def request_parts(state: CollectionState, items: list[object], replace_documents: bool
                  ) -> list[object]:
    """What identifies an ingest request for its idempotency key: the options, and each
    item's id and fingerprint (validated here without indexing anything).

    Raises:
        IngestError: an invalid item.
    """
    batch = validate(state.info, items)
    hashes = fingerprints(batch, state.info.embedder_name is not None)
    return [replace_documents, *zip(batch.ids, hashes, strict=True)]


def recover(state: CollectionState, committed: int) -> None:
    """Undo what an unfinished batch or merge left: tantivy documents of batches after
    `committed` or of rowids SQLite does not have (batch numbers are global: a batch of another
    collection may have committed the unfinished batch's number since), and segment files the
    manifest does not name."""
    state.text.rollback()
    state.text.collect_garbage()
    row = state.meta.collection(state.info.name, state.meta.write)
    first = state.size if row is None else row.next_row
    if state.text.batches_after(committed) or state.text.rows_from(first):
        state.text.delete_uncommitted(committed, first)
        state.text.commit()
    known = {s.file for s in state.meta.segments(state.id, state.meta.write)}
    state.files.remove_orphans(known)
    if state.files.directory is not None:  # graph temporaries of a killed builder
        clear_building(state.files.directory.parent)


def kept_rows(state: CollectionState, meta: MetadataStore) -> np.ndarray:
    """bool[size]: the rows whose vectors a merge keeps: live ones, and rows tombstoned after
    the retention horizon (`AS OF` may still show them)."""
    row = meta.collection(state.info.name, meta.write)
    horizon = row.horizon if row is not None else 0
    keep = state.live.copy()
    retained = [r for (r,) in meta.write.execute(
        "SELECT row FROM items WHERE collection_id = ? AND dead_batch > ? AND row < ?",
        (state.id, horizon, state.size))]
    keep[np.asarray(retained, np.int64)] = True
    return keep


def merge_segments(state: CollectionState, meta: MetadataStore) -> int:
    """Merge vector segments while a tier holds too many (see `recallql.index.vectors`).

    Returns:
        Number of merges done. A failed merge is reported as a warning (the batch that triggered
        it is already committed); its leftovers are removed by the next recovery.
    """
    done = 0
    while True:
        rows = plan_merge(meta.segments(state.id, meta.write))
        if not rows:
            return done
        try:
            _merge_once(state, meta, rows, done)
        except (OSError, StoreError) as exc:  # disk full and the like
            warnings.warn(f"vector segment merge failed: {exc}", RuntimeWarning, stacklevel=2)
            return done
        done += 1


def compact_segments(state: CollectionState, meta: MetadataStore) -> int:
    """Rewrite every segment that holds vectors no merge keeps any more (`Store.vacuum`), one
    segment at a time; returns how many were rewritten."""
    keep = kept_rows(state, meta)
    done = 0
    for seg in list(state.segments):
        if not seg.eligible(keep).all():
            row = next(r for r in meta.segments(state.id, meta.write) if r.file == seg.file)
            _merge_once(state, meta, [row], done, keep)
            done += 1
    return done


def _merge_once(state: CollectionState, meta: MetadataStore, rows: list, k: int,
                keep: np.ndarray | None = None) -> None:
    by_file = {s.file: s for s in state.segments}
    inputs: list[Segment] = [by_file[r.file] for r in rows]
    parts, rowids = merged_parts(inputs, kept_rows(state, meta) if keep is None else keep)
    name = new_segment_name(state, meta, "m", k)
    if len(rowids):
        state.files.write(name, parts)
    swap_segments(state, meta, [r.file for r in rows], name, rowids)


def new_segment_name(state: CollectionState, meta: MetadataStore, prefix: str, k: int = 0
                     ) -> str:
    """``<prefix><batch>-<k>.npy`` with the first k from `k` that no manifest entry or file
    has: never overwrite a file, a reader or the manifest may still name it."""
    seq = meta.committed_batch(meta.write)
    taken = {r.file for r in meta.segments(state.id, meta.write)}
    while (name := f"{prefix}{seq}-{k}.npy") in taken or state.files.exists(name):
        k += 1
    return name


def swap_segments(state: CollectionState, meta: MetadataStore, old: list[str], name: str,
                  rowids: np.ndarray) -> None:
    """Replace the manifest entries of the segment files `old` by `name` (already written,
    with its graph if any; no entry when `rowids` is empty) in one transaction, then remove
    the old files and reload the collection's segments."""
    with meta.transaction() as conn:
        conn.executemany("DELETE FROM segments WHERE collection_id = ? AND file = ?",
                         [(state.id, file) for file in old])
        if len(rowids):
            conn.execute("INSERT INTO segments VALUES (?,?,?,?,?,?)",
                         manifest_values(state.id, name, rowids))
    state.files.remove(old)
    state.refresh_segments()
