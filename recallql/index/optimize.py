"""A forced merge of a collection's vector segments into one, with its ANN graph
(``recallql optimize``, `Store.optimize_vectors`).

Tiered merging (`recallql.index.vectors.plan_merge`) keeps up to 7 segments a tier, so a
collection of 1M rows written in batches holds 6–8 segments and the ANN leg searches a graph
per segment: eight searches of a 160,000-row graph cost about six times one search of a
1,000,000-row graph at the same breadth (HNSW's cost grows with log n, not n). `optimize` merges
every segment into one, whatever its tier (Lucene's ``forceMerge(1)``; Qdrant's optimizer
does the same for its segments), dropping the rows no merge keeps, and builds that segment's
graph and its int8 copy (`recallql.index.quantized`, the exact pre-scan of filtered queries)
before the manifest names it, so the new segment is never scanned exactly in float32 alone.
A single segment that has its graph but no int8 copy (a store written before int8 copies) is
not merged: only its copy is written beside it (atomically: a temporary file renamed), which
is how an existing database gets it — `recallql optimize`, never a rebuild on open.

Graph reuse: the graph of the largest input that has one is copied (usearch restores a saved
graph as a writable index), its tombstoned rows removed, and the other inputs' rows added;
only when no input has a graph is it built from scratch. Rows are re-scored exactly whatever
graph proposed them, so a reused graph changes what is found only within ANN recall.

Crash safety, as for a merge: the merged file and its graph are written (fsynced, renamed) in
the vector directory before one SQLite transaction swaps the manifest; killed before that
commit, both are orphans that the next writer removes (`SegmentFiles.remove_orphans`) and the
old segments are untouched; after it, the inputs are unlinked (or removed as orphans next time).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recallql.index import graphs
from recallql.index.ann import AnnGraph
from recallql.index.batch import new_segment_name, swap_segments
from recallql.index.vectors import Segment, merged_parts

if TYPE_CHECKING:
    from recallql.index.metadata import MetadataStore
    from recallql.index.snapshot import CollectionState

#: Rows added to a graph between two progress calls.
ADD_BLOCK = 10_000
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class OptimizeReport:
    """What one forced merge did.

    Attributes:
        collection: the collection.
        segments_before: vector segments before (0 or 1 with nothing to do: then nothing is
            written).
        rows: rows of the merged segment.
        graph_reused: rows the merged graph took from an input's graph (not re-inserted).
        graph_added: rows inserted into the merged graph.
        int8_rows: rows given an int8 copy (`recallql.index.quantized`: the exact pre-scan of
            filtered queries); a store written before int8 copies gets them this way.
    """

    collection: str
    segments_before: int
    rows: int
    graph_reused: int
    graph_added: int
    int8_rows: int = 0


def needed(segments: Sequence[Segment], keep: np.ndarray) -> bool:
    """Whether a forced merge changes anything: more than one segment, a segment holding rows
    no merge keeps, or a single large segment without its graph or its int8 copy."""
    if len(segments) > 1:
        return True
    return any(not s.eligible(keep).all() or (s.graph is None and graphs.wants_graph(
        len(s.vecs))) for s in segments) or copy_only(segments, keep)


def copy_only(segments: Sequence[Segment], keep: np.ndarray) -> bool:
    """Whether the one thing to do is to give a single large segment, complete and with its
    graph, its int8 copy (a store written before int8 copies)."""
    return (len(segments) == 1 and segments[0].graph is not None
            and segments[0].quantized is None and graphs.wants_graph(len(segments[0].vecs))
            and bool(segments[0].eligible(keep).all()))


def merged_graph(inputs: Sequence[Segment], keep: np.ndarray, dim: int, *, threads: int = 1,
                 progress: Progress | None = None) -> tuple[AnnGraph, int, int]:
    """The graph of the merge of `inputs` (their rows kept by `keep`, bool[size]): a writable
    copy of the largest input graph without its dropped rows, plus every other kept row.

    Returns:
        (graph, rows reused from an input graph, rows inserted).
    """
    with_graph = [s for s in inputs if s.graph is not None]
    base = max(with_graph, key=lambda s: len(s.vecs), default=None)
    if base is not None and base.graph is not None:
        graph = base.graph.copy()
        graph.remove(base.rowids[~base.eligible(keep)])
        reused = len(graph)
    else:
        graph, reused = AnnGraph.new(dim, graphs.PARAMS), 0
    todo = [s for s in inputs if s is not base]
    total = sum(int(np.count_nonzero(s.eligible(keep))) for s in todo)
    done = 0
    for seg in todo:
        local = np.flatnonzero(seg.eligible(keep))
        for start in range(0, len(local), ADD_BLOCK):
            pick = local[start:start + ADD_BLOCK]
            graph.add(seg.rowids_at(pick), np.asarray(seg.vecs[pick]), threads=threads)
            done += len(pick)
            if progress is not None:
                progress(done, total)
    return graph, reused, done


def optimize_vectors(state: CollectionState, meta: MetadataStore, keep: np.ndarray, *,
                     threads: int = 1, progress: Progress | None = None) -> OptimizeReport:
    """Merge every segment of `state` into one with its graph (the caller holds the writer
    lock and mutex; `keep` is `recallql.index.batch.kept_rows`).

    Raises:
        StoreError: a file cannot be written (disk full, I/O), naming it; the manifest and the
            old segments are unchanged (the new files are orphans, removed on the next open).
    """
    inputs = list(state.segments)
    if not needed(inputs, keep):
        rows = sum(len(s.vecs) for s in inputs)
        return OptimizeReport(state.info.name, len(inputs), rows, 0, 0)
    if copy_only(inputs, keep):  # no merge: the segment stays, its copy is added beside it
        seg = inputs[0]
        state.files.put_copy(seg.file, seg.vecs)
        state.attach_graph(seg.file)
        return OptimizeReport(state.info.name, 1, len(seg.vecs), 0, 0, len(seg.vecs))
    parts, rowids = merged_parts(inputs, keep)
    name = new_segment_name(state, meta, "o")
    reused = added = 0
    if len(rowids):
        state.files.write(name, parts)
        if graphs.wants_graph(len(rowids)):
            graph, reused, added = merged_graph(inputs, keep, state.info.dim, threads=threads,
                                                progress=progress)
            state.files.put_graph(name, graph)
            state.files.put_copy(name, state.files.open_vectors(name, len(rowids)))
    swap_segments(state, meta, [s.file for s in inputs], name, rowids)
    copied = len(rowids) if graphs.wants_graph(len(rowids)) else 0
    return OptimizeReport(state.info.name, len(inputs), len(rowids), reused, added, copied)
