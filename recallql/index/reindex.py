"""Rebuilding a collection's text index from its live rows (``recallql reindex`` / ``optimize``).

Texts live in SQLite, so the tantivy index can always be rebuilt: with the current analyser
(an index written by an older analyser is migrated) and from the live rows only (BM25's
statistics — N, n(t), average length — then count no deleted or replaced row: they are exact,
equal to those of an index built from the live rows; see `recallql.index.text`).

Crash safety: the new index is built beside the old one in ``text.rebuild/``, committed, then
swapped in by two renames (``text`` → ``text.old``, ``text.rebuild`` → ``text``) and the old one
removed. `recallql.index.text.recover_rebuild` (run by a writer when it takes the writer lock)
finishes or discards what a crash left: ``text`` missing with ``text.rebuild`` present means the
build was complete (the renames come after its commit), so it is moved into place;
``text.rebuild`` beside ``text`` is an unfinished build and is deleted; ``text.old`` is
deleted. SQLite is not written: the rebuild changes no row and no batch, only the BM25
statistics and the analyser.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recallql.index.connections import fsync_dir
from recallql.index.keyterms import keyword_fields
from recallql.index.snapshot import CollectionState
from recallql.index.text import TextIndex, siblings

#: Rows read from SQLite and queued in tantivy at a time.
CHUNK_ROWS = 2048
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ReindexReport:
    """What one rebuild did.

    Attributes:
        collection: the collection.
        rows: live rows indexed.
        old_version, new_version: analyser versions before and after.
        counted_before: documents BM25's statistics counted before (live rows plus deleted or
            replaced ones still in a segment; None for an analyser-1 index, which does not
            count them).
        seconds: wall time.
    """

    collection: str
    rows: int
    old_version: int
    new_version: int
    counted_before: int | None
    seconds: float


Stored = Mapping[int, tuple[str, str | None, int]]  # texts JSON, fields JSON, batch by rowid


def _index_texts(stored: Stored, rows: Sequence[int]) -> list[str]:
    """The text ingest gave tantivy for each row: its stored text fields joined by a newline
    (empty fields are not stored)."""
    return ["\n".join(json.loads(stored[row][0]).values()) for row in rows]


def _index_fields(stored: Stored, rows: Sequence[int]) -> list[dict | None]:
    """The declared field values of each row (its ``keys`` terms)."""
    return [json.loads(fields) if (fields := stored[row][1]) else None for row in rows]


def build(target: Path | None, live: np.ndarray, seq: int,
          fetch: Callable[[list[int]], Stored],
          progress: Progress | None = None, keywords: Sequence[str] = ()) -> TextIndex:
    """A new text index (current analyser) holding the live rows, committed, with ``keys``
    terms for the `keywords` fields (`recallql.index.keyterms`).

    Args:
        target: an empty directory to build in, or None (in memory).
        live: bool[size] rows to index.
        seq: the committed batch number. A document carries its row's batch (never above
            `seq`, so batch recovery keeps it; as ingest wrote it, so `check` agrees).
        fetch: stored (texts JSON, fields JSON, batch) by rowid (`MetadataStore.fetch`).
        progress: called with (rows done, rows total).
    """
    rows = np.flatnonzero(live).tolist()
    index = TextIndex(target, create=True, keywords=keywords)
    try:
        for start in range(0, len(rows), CHUNK_ROWS):
            chunk = rows[start:start + CHUNK_ROWS]
            stored = fetch(chunk)
            batches = [min(stored[row][2], seq) for row in chunk]
            for batch, same in itertools.groupby(zip(chunk, batches, strict=True),
                                                 lambda pair: pair[1]):
                part = [row for row, _ in same]
                index.add(part, batch, _index_texts(stored, part), _index_fields(stored, part))
            if progress is not None:
                progress(start + len(chunk), len(rows))
        index.commit()
        if target is not None:
            index.close()
    except BaseException:
        index.close()
        raise
    return index


def swap(path: Path) -> None:
    """Move the built ``text.rebuild`` into place of `path` and remove the old index."""
    building, old = siblings(path)
    os.replace(path, old)
    os.replace(building, path)
    fsync_dir(path.parent)
    shutil.rmtree(old)


def rebuild(state: CollectionState, path: Path | None, seq: int,
            progress: Progress | None = None) -> ReindexReport:
    """Rebuild the text index of `state` (the caller holds the writer's mutex and brought
    `state` to the committed batch `seq`), swap it in and give `state` a new snapshot.

    Args:
        state: the collection's in-memory state.
        path: its text index directory, or None in memory.
        seq: the committed batch number.
        progress: called with (rows done, rows total).

    Raises:
        OSError, ValueError: the build failed; the old index is untouched (a failure during the
            swap is finished or undone by the next open, see the module docstring).
    """
    started = time.perf_counter()
    snap = state.current(seq)
    old_version, counted = state.text.version, snap.bm25_documents()
    target = None if path is None else siblings(path)[0]
    if target is not None and target.exists():
        shutil.rmtree(target)
    built = build(target, snap.live, max(seq, 0),
                  lambda rows: state.meta.fetch(state.id, rows), progress,
                  keyword_fields(state.info.fields))
    state.text.close()
    if path is not None:
        swap(path)
        built = TextIndex(path)
    state.text = built
    state.refresh_segments()
    return ReindexReport(state.info.name, int(np.count_nonzero(snap.live)), old_version,
                         built.version, counted, time.perf_counter() - started)
