"""The ANN graph of a vector segment: one immutable HNSW file beside each large segment.

A segment of at least `GRAPH_MIN_ROWS` rows gets a graph (`recallql.index.ann.AnnGraph`,
usearch, int8, keyed by rowid) in the file of the same stem with the suffix ``.hnsw``
(``b12.npy`` → ``b12.hnsw``), built after the segment committed (`recallql.index.indexer`) and
never changed afterwards; it is removed with its segment (a merge, recovery of orphans). A
segment's graph holds exactly the segment's rowids; tombstoned rows stay in it (as in the
segment) and are dropped by the eligible mask of each query, until a merge rewrites the segment
without them. A segment without its graph (not built yet, or a store of an earlier version) is
scanned exactly; a graph that disagrees with its segment is damage (`recallql check`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from recallql.index.ann import AnnGraph, AnnParams, usearch_index
from recallql.index.errors import StoreError

#: Segments of at least this many rows (merge tier 4, `recallql.index.vectors.tier`) get a
#: graph: smaller ones cost less to scan exactly (4,096 × 384 float32 in about 0.3 ms) than a
#: graph search, and their merges stay cheap.
GRAPH_MIN_ROWS = 4096
SUFFIX = ".hnsw"
#: The graph parameters of every stored graph (`AnnParams` defaults: M 16, ef_construction
#: 128, int8 vectors).
PARAMS = AnnParams()


def graph_name(segment_file: str) -> str:
    """The graph file of a segment file (``b12.npy`` → ``b12.hnsw``)."""
    return Path(segment_file).stem + SUFFIX


def wants_graph(rows: int) -> bool:
    """Whether a segment of `rows` rows is given a graph."""
    return rows >= GRAPH_MIN_ROWS


def build(rowids: np.ndarray, vectors: np.ndarray, stop: Callable[[], bool] | None = None,
          block: int = 2048) -> AnnGraph | None:
    """A new graph over a segment's rows (int64[m], float32[m, dim] L2-normalised; one
    thread), inserted in blocks; None when `stop()` turned true between two blocks."""
    graph = AnnGraph.new(vectors.shape[1], PARAMS)
    for start in range(0, len(rowids), block):
        if stop is not None and stop():
            return None
        graph.add(rowids[start:start + block], np.asarray(vectors[start:start + block]))
    return graph


def check_header(path: Path, rows: int, dim: int) -> None:
    """Refuse a graph file whose header does not describe `rows` rows of `dim` dimensions (a
    cheap check on open: the header only).

    Raises:
        StoreError: unreadable header, or other counts (naming the file and both counts).
    """
    Index = usearch_index()  # noqa: N806
    try:
        meta = Index.metadata(str(path))
    except (OSError, ValueError, RuntimeError) as exc:
        raise StoreError(f"the ANN index {path} is damaged (unreadable header: {exc})") from exc
    if meta is None:
        raise StoreError(f"the ANN index {path} is damaged (not a usearch index)")
    present, dims = int(meta["count_present"]), int(meta["dimensions"])
    if present != rows or dims != dim:
        raise StoreError(f"the ANN index {path} is damaged: it holds {present} rows of {dims} "
                         f"dimensions, its segment {rows} rows of {dim}")
