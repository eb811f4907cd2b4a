"""Damage: refused on open (`validate`), reported on demand (`check`, ``recallql check``).

`validate` runs whenever a database is opened, before anything is written: every collection
SQLite records must have its tantivy index (``text/meta.json``) and every vector segment its
manifest names, each of the right size and shape, each ANN graph with a header of its
segment's row count and dimension. A missing or damaged file is a `StoreError` naming it; the
store is never repaired by re-creating a part of it (that handed old documents to new rows).

Finite values (no NaN or infinity) are checked on open for the segments that are scanned
exactly, those without an ANN graph: the small, recent ones (below
`recallql.index.graphs.GRAPH_MIN_ROWS` rows, or not indexed yet), whose pass the first exact
scan would make anyway. A segment with a graph is not read on open — at 1M rows that pass read
1.5 GB and cost 0.25 s of CPU, more than the rest of the open, and at 3M rows 4.6 GB — its
values are checked where they are used instead: every row the graph proposes is re-scored
from its float32 vector, and any scan of it (a filter, ``USING SEMANTIC (exact)``) scores
every row; a row whose stored vector is not finite is then never ranked, and the result
carries the warning ``VECTORS_NOT_FINITE`` naming its segment file (`recallql.index.semantic`,
`CollectionSnapshot.skipped_vectors`). `check` (``recallql check``) reads every row.

`check` verifies more and raises nothing for damage: SQLite's ``PRAGMA integrity_check``, that
the three stores agree (every row SQLite expects in tantivy is there with its batch, no document
of an unknown row or a later batch, every vector where SQLite says one is and nowhere else), and
vector finiteness. It returns a `CheckReport` (`recallql.index.checks`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from recallql.index.checks import (
    CheckReport,
    CollectionCheck,
    Problem,
    check_collection,
    collection_dirs,
)
from recallql.index.errors import StoreError
from recallql.index.graphs import check_header, graph_name
from recallql.index.metadata import CollectionRow, SegmentRow
from recallql.index.text import TextIndex, siblings
from recallql.index.vectors import open_segment

if TYPE_CHECKING:
    from recallql.index.store import Store

#: Rows checked for finiteness at a time (bounded memory on large segments).
FINITE_CHUNK = 65536
_VALIDATE_ATTEMPTS = 4

__all__ = ["CheckReport", "CollectionCheck", "Problem", "check", "validate"]


def validate(store: Store) -> None:
    """Refuse a damaged store on open (nothing is written).

    Raises:
        StoreError: naming the first missing or damaged file.
    """
    if store.path is None:
        return
    meta = store.meta
    missing: Path | None = None
    for _ in range(_VALIDATE_ATTEMPTS):  # a concurrent merge may replace a segment meanwhile
        with meta.read_transaction() as conn:
            rows = meta.collections(conn)
            manifests = {row.id: meta.segments(row.id, conn) for row in rows}
        try:
            for row in rows:
                _validate_collection(store.path, row, manifests[row.id])
            return
        except FileNotFoundError as exc:
            missing = Path(str(exc.filename))
    raise StoreError(f"the vector segment {missing} is missing: the database is damaged (the "
                     "manifest in meta.sqlite names it; restore the database from a backup)")


def _validate_collection(path: Path, row: CollectionRow, segments: list[SegmentRow]) -> None:
    base = path / "collections" / row.info.name
    text = base / "text"
    if not _text_present(text):
        raise StoreError(f"the text index {text} of collection {row.info.name!r} is missing: "
                         "the database is damaged (restore it from a backup)")
    TextIndex(text, readonly=True)  # refuses a missing meta.json or an unreadable index
    for seg in segments:
        file = base / "vectors" / seg.file
        vecs = open_segment(file, seg.n, row.info.dim)
        graph = file.with_name(graph_name(seg.file))
        if graph.exists():  # values checked where scored (see the module docstring)
            check_header(graph, seg.n, row.info.dim)
            continue
        bad = first_non_finite(vecs)
        if bad is not None:
            raise StoreError(f"the vector segment {file} is damaged: row {bad} of the file "
                             "holds a non-finite value (NaN or infinity); run `recallql check`")


def _text_present(text: Path) -> bool:
    """Whether the text index directory `text` is there, or ``text.rebuild`` while another
    process's rebuild is between its two renames (``text`` → ``text.old``, ``text.rebuild``
    → ``text``). `text` is looked at again after ``text.rebuild``: the second rename may land
    between the first two looks, and neither name is there for either of them."""
    return text.is_dir() or siblings(text)[0].is_dir() or text.is_dir()


def first_non_finite(vecs: np.ndarray) -> int | None:
    """The index of the first row of float32[n, dim] `vecs` with a NaN or infinite component,
    or None."""
    for start in range(0, len(vecs), FINITE_CHUNK):
        ok = np.isfinite(vecs[start:start + FINITE_CHUNK]).all(axis=1)
        if not ok.all():
            return start + int(np.flatnonzero(~ok)[0])
    return None


def check(store: Store) -> CheckReport:
    """Verify a store (see the module docstring); damage is reported, never raised.

    Returns:
        The report: `ok` when no problem of severity ``error`` was found.

    Raises:
        StoreError: the store is closed.
    """
    problems: list[Problem] = []
    meta_file = "meta.sqlite" if store.path is None else str(store.path / "meta.sqlite")
    conn = store.meta.read
    try:
        found = [r for (r,) in conn.execute("PRAGMA integrity_check")]
    except sqlite3.Error as exc:
        found = [f"{exc} ({type(exc).__name__})"]
    if found != ["ok"]:
        problems += [Problem(meta_file, "error", "sqlite", line) for line in found[:20]]
    committed = store.meta.committed_batch()
    collections = []
    for row in store.meta.collections():
        report, found_problems = check_collection(store, row, committed)
        collections.append(report)
        problems += found_problems
    if store.path is not None:
        known = {row.info.name for row in store.meta.collections()}
        for name, where in collection_dirs(store.path):
            if name not in known:
                problems.append(Problem(str(where), "warning", "unknown-collection",
                                        "a collection directory meta.sqlite does not record "
                                        "(left by an interrupted create_collection?)"))
    return CheckReport(str(store.path or "(in memory)"), committed, collections, problems)
