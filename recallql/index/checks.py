"""`recallql check`: the typed report, and the agreement checks of one collection.

The three stores of a collection agree when

* SQLite's rows are dense (``0 … next_row-1``) and no row, tombstone or manifest entry names a
  batch after the committed one;
* tantivy holds exactly one document, with the row's batch number, for every row that is live
  or tombstoned after the retention horizon (`CollectionRow.horizon`: what a snapshot, AS OF
  included, may return), and no document of a row that carries another batch (what
  re-creating a store did: old documents for new rows); the document of a row tombstoned at or
  before the horizon may be there or not: the next batch purges it, and a batch that failed or
  was killed after its tantivy commit (or a rebuild of the text index interrupted before its
  purge mark, `CollectionRow.purged_batch`, was recorded) may have purged it already;
  documents of rowids SQLite does not have are an unfinished batch's (a warning: the next write
  to the collection removes them);
* the vector segments named by the manifest exist, have the manifest's shape, hold only finite
  values, and hold each row that SQLite says has a vector (live, or tombstoned after the
  retention horizon) exactly once, and no row that has none.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from recallql.index import graphs
from recallql.index.ann import AnnGraph
from recallql.index.errors import StoreError
from recallql.index.metadata import CollectionRow, SegmentRow
from recallql.index.quantized import copy_name, open_copy, pack, quantize
from recallql.index.text import META_JSON, TextIndex
from recallql.index.vectors import open_segment

if TYPE_CHECKING:
    from recallql.index.store import Store


@dataclass(frozen=True)
class Problem:
    """One finding.

    Attributes:
        file: the file or directory concerned.
        severity: ``error`` (damage: the store cannot be trusted) or ``warning`` (leftovers a
            writer cleans up, or an ANN graph not built yet: nothing lost).
        kind: a short tag: ``sqlite``, ``rows``, ``text``, ``vectors``, ``non-finite``,
            ``uncommitted``, ``orphan``, ``unknown-collection``, ``missing``, ``ann-index``
            (a graph that disagrees with its segment), ``no-ann-index``, ``lineage`` (a
            stored conversation root, checked by `recallql.api.check_database`).
        detail: what was found.
    """

    file: str
    severity: str
    kind: str
    detail: str


@dataclass(frozen=True)
class CollectionCheck:
    """What was counted in one collection.

    Attributes:
        name: the collection.
        rows: SQLite rows (live and tombstoned).
        live: live rows.
        documents: tantivy documents.
        vectors: vectors in the manifest's segments.
        segments: segment files.
    """

    name: str
    rows: int
    live: int
    documents: int
    vectors: int
    segments: int


@dataclass(frozen=True)
class CheckReport:
    """The result of `Store.check` / ``recallql check``.

    Attributes:
        path: the database.
        committed_batch: the last committed batch.
        collections: per-collection counts.
        problems: every finding, errors first.
    """

    path: str
    committed_batch: int
    collections: list[CollectionCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no error was found (warnings allowed)."""
        return not any(p.severity == "error" for p in self.problems)

    def to_text(self) -> str:
        """The report as lines of text (what ``recallql check`` prints)."""
        lines = [f"database {self.path}: committed batch {self.committed_batch}"]
        for c in self.collections:
            lines.append(f"  {c.name}: {_count(c.rows, 'row')} ({c.live} live), "
                         f"{_count(c.documents, 'text document')}, "
                         f"{_count(c.vectors, 'vector')} in {_count(c.segments, 'segment')}")
        for p in sorted(self.problems, key=lambda p: p.severity != "error"):
            lines.append(f"{p.severity}: {p.file}: [{p.kind}] {p.detail}")
        errors = sum(p.severity == "error" for p in self.problems)
        lines.append("ok: the stores agree" if self.ok else f"DAMAGED: {errors} error(s)")
        return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    """``1 row``, ``0 rows``, ``2 rows``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def collection_dirs(path: Path) -> Iterator[tuple[str, Path]]:
    """(name, directory) of every collection directory under `path`."""
    root = path / "collections"
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir():
                yield child.name, child


def check_collection(store: Store, row: CollectionRow, committed: int
                     ) -> tuple[CollectionCheck, list[Problem]]:
    """Check one collection's agreement (see the module docstring)."""
    base = store._collection_dir(row.info.name)  # noqa: SLF001 - the store's own layout
    problems: list[Problem] = []
    with store.meta.read_transaction() as conn:
        items = np.array(conn.execute(
            "SELECT row, batch, COALESCE(dead_batch, 0), has_vector FROM items "
            "WHERE collection_id = ? ORDER BY row", (row.id,)).fetchall(), np.int64
            ).reshape(-1, 4)
        segments = store.meta.segments(row.id, conn)
        blobs = {s.file: store.meta.segment_rowids(row.id, s.file, conn) for s in segments}
    where = str(base or row.info.name)
    rows, batch, dead, has_vec = items.T if len(items) else (np.zeros(0, np.int64),) * 4
    if not np.array_equal(rows, np.arange(len(rows))) or len(rows) != row.next_row:
        problems.append(Problem(where, "error", "rows", f"rowids are not dense "
                                f"0..{row.next_row - 1} ({len(rows)} rows)"))
    late = int(((batch > committed) | (dead > committed)).sum())
    if late:
        problems.append(Problem(where, "error", "rows", f"{late} rows name a batch after the "
                                f"committed one ({committed})"))
    live = dead == 0
    indexed = live | (dead > row.horizon)  # a row purgeable now may have lost its document
    documents = _check_text(store, row, rows, batch, indexed, committed, problems)
    kept = has_vec.astype(bool) & (live | (dead > row.horizon))
    vectors = _check_vectors(base, row, segments, blobs, kept, has_vec.astype(bool), problems)
    report = CollectionCheck(row.info.name, len(rows), int(live.sum()), documents, vectors,
                             len(segments))
    return report, problems


def _check_text(store: Store, row: CollectionRow, rows: np.ndarray, batch: np.ndarray,
                indexed: np.ndarray, committed: int, problems: list[Problem]) -> int:
    path = store._text_dir(row.info.name)  # noqa: SLF001
    where = str(path or row.info.name)
    try:
        text = TextIndex(path, readonly=True) if path is not None else store._state(  # noqa: SLF001
            row.info.name).text
        doc_rows, doc_batches = text.documents()
    except StoreError as exc:
        problems.append(Problem(where if path is None else str(path / META_JSON), "error",
                                "missing", str(exc)))
        return 0
    doc_rows, doc_batches = doc_rows.astype(np.int64), doc_batches.astype(np.int64)
    later = doc_rows >= len(rows)  # new rows of a batch that never committed
    if later.any():
        problems.append(Problem(where, "warning", "uncommitted",
                                f"{int(later.sum())} documents of an unfinished batch, for rowids "
                                "SQLite does not have (the next write removes them)"))
    doc_rows, doc_batches = doc_rows[~later], doc_batches[~later]
    counts = np.bincount(doc_rows, minlength=len(rows))
    if (counts > 1).any():
        problems.append(Problem(where, "error", "text", f"{int((counts > 1).sum())} rows have "
                                "more than one document"))
    missing = indexed & (counts == 0)
    if missing.any():
        first = int(np.flatnonzero(missing)[0])
        problems.append(Problem(where, "error", "text", f"{int(missing.sum())} rows SQLite "
                                f"expects in the text index are not there (first: rowid {first})"))
    wrong = doc_batches != batch[doc_rows]
    if wrong.any():
        rebuilt = bool(((doc_batches > batch[doc_rows]) | ~wrong).all()
                       and doc_batches.max() <= committed)
        problems.append(Problem(where, "error", "text", f"{int(wrong.sum())} documents carry "
                                "another batch than their SQLite row" + (
                                    " (each a later one: what a reindex or optimize of an "
                                    "earlier recallql wrote; `recallql reindex` rewrites them)"
                                    if rebuilt else "")))
    return int(len(doc_rows) + later.sum())


def _check_vectors(base: Path | None, row: CollectionRow, segments: list, blobs: dict,
                   kept: np.ndarray, has_vec: np.ndarray, problems: list[Problem]) -> int:
    seen = np.zeros(len(kept), np.int64)
    total = 0
    for seg in segments:
        file = f"{base / 'vectors' / seg.file}" if base is not None else seg.file
        blob = blobs[seg.file]
        rowids = (np.arange(seg.lo, seg.hi, dtype=np.int64) if blob is None
                  else np.frombuffer(blob, np.int64))
        if base is not None:
            try:
                vecs = open_segment(base / "vectors" / seg.file, seg.n, row.info.dim)
            except (FileNotFoundError, StoreError) as exc:
                problems.append(Problem(file, "error", "vectors", str(exc) if isinstance(
                    exc, StoreError) else "the segment file is missing"))
                continue
            bad = ~np.isfinite(vecs).all(axis=1)
            if bad.any():
                first = int(np.flatnonzero(bad)[0])
                problems.append(Problem(file, "error", "non-finite", f"{int(bad.sum())} vectors "
                                        f"hold NaN or infinity (first: row {first} of the "
                                        "file); the semantic leg skips them"))
            _check_copy(base / "vectors" / seg.file, seg, vecs, problems)
        if base is not None:
            _check_graph(base / "vectors" / seg.file, seg, rowids, row.info.dim, problems)
        total += len(rowids)
        inside = rowids[(rowids >= 0) & (rowids < len(kept))]
        if len(inside) != len(rowids) or not has_vec[inside].all():
            problems.append(Problem(file, "error", "vectors", "the segment holds rows that have "
                                    "no vector in SQLite"))
        np.add.at(seen, inside, 1)
    missing = kept & (seen == 0)
    if missing.any() or (seen > 1).any():
        problems.append(Problem(str(base or row.info.name), "error", "vectors",
                                f"{int(missing.sum())} rows with a vector are in no segment, "
                                f"{int((seen > 1).sum())} in several"))
    _check_orphans(base, segments, problems)
    return total


def _check_graph(segment: Path, seg: SegmentRow, rowids: np.ndarray, dim: int,
                 problems: list[Problem]) -> None:
    """The segment's ANN graph, when it has one, holds exactly its rowids."""
    path = segment.with_name(graphs.graph_name(seg.file))
    if not path.exists():
        if graphs.wants_graph(seg.n):
            problems.append(Problem(str(segment), "warning", "no-ann-index", f"{seg.n} rows "
                                    "without an ANN graph yet (scanned exactly; a writer builds "
                                    "it in the background after writes)"))
        return
    try:
        graphs.check_header(path, seg.n, dim)
        keys = np.sort(AnnGraph.open(path, view=True).keys())
    except StoreError as exc:
        problems.append(Problem(str(path), "error", "ann-index", str(exc)))
        return
    if not np.array_equal(keys, np.sort(rowids)):
        problems.append(Problem(str(path), "error", "ann-index", "the ANN graph's rowids "
                                f"differ from its segment's ({len(keys)} against {len(rowids)})"))


def _check_copy(segment: Path, seg: SegmentRow, vecs: np.ndarray,
                problems: list[Problem]) -> None:
    """The segment's int8 copy, when it has one, is the quantisation of its rows (the
    pre-scan's bound holds only for the rows it was computed from)."""
    path = segment.with_name(copy_name(seg.file))
    if not path.exists():
        if graphs.wants_graph(seg.n) and segment.with_name(graphs.graph_name(seg.file)).exists():
            problems.append(Problem(str(segment), "warning", "no-int8-copy", f"{seg.n} rows "
                                    "without an int8 copy (filtered queries scan them in "
                                    "float32; `recallql optimize` writes it)"))
        return
    copy = open_copy(path, seg.n, vecs.shape[1])
    if copy is None:
        problems.append(Problem(str(path), "error", "int8-copy", "the int8 copy is damaged "
                                "(unreadable, or not int8 of its segment's shape; it is not "
                                "used, and `recallql optimize` rewrites it)"))
        return
    if not all(np.array_equal(pack(quantize(vecs[a:a + BLOCK])), pack(copy.take(np.arange(
            a, min(seg.n, a + BLOCK))))) for a in range(0, seg.n, BLOCK)):
        problems.append(Problem(str(path), "error", "int8-copy", "the int8 copy does not "
                                "match its segment's vectors (filtered queries could miss "
                                "rows): delete the file and run `recallql optimize`"))


BLOCK = 65_536


def _check_orphans(base: Path | None, segments: list, problems: list[Problem]) -> None:
    vectors = None if base is None else base / "vectors"
    if vectors is None or not vectors.is_dir():
        return
    known = {s.file for s in segments}
    known |= {graphs.graph_name(name) for name in known} | {copy_name(n) for n in known}
    for orphan in sorted(p.name for p in vectors.iterdir() if p.name not in known):
        problems.append(Problem(str(vectors / orphan), "warning", "orphan",
                                "a file the manifest does not name (left by an unfinished "
                                "batch or merge; the next writer removes it)"))
