"""Approximate nearest neighbours: an HNSW graph (usearch) over vector rows, keyed by rowid.

The graph only proposes candidates. Every row it returns is re-scored exactly — the cosine of
the stored float32 vector and the float64 query, rounded to float32, the number the exact scan
gives for the same row (`recallql.index.vectors.semantic_topn`) — so a row's score, its rank
and its reason codes do not depend on how it was found. The graph may therefore store its own
copy of the vectors in a smaller type (``i8`` by default: 384 bytes a 384-d row instead of
1,536) while the float32 vectors stay in the memory-mapped segment files.

Why usearch (measured against hnswlib and faiss-cpu in ``benchmarks/FINDINGS.md``): it opens a
saved graph by memory-mapping it (`AnnGraph.open` with ``view=True``: O(1), no read of the
file), stores ``f16`` / ``i8`` vectors inside the graph, adds to and removes from a loaded
graph, and its Python wheel has no OpenMP thread pool that busy-waits on a shared machine.

HNSW: Malkov & Yashunin, "Efficient and robust approximate nearest neighbor search using
Hierarchical Navigable Small World graphs", IEEE TPAMI 42(4), 2020. Parameters use its names:
M (``connectivity``), ef_construction (``expansion_add``), ef (``expansion_search``).
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recallql.index.errors import StoreError

#: Storage types of the vectors inside the graph.
DTYPES = ("f32", "f16", "i8")
#: ANN candidates asked per row wanted, before dividing by the eligible share.
OVERSAMPLE = 2.0
#: Extra candidates asked on top (small n: the graph's first hits are the least reliable).
PAD = 16
#: A filtered search gives up (the caller scans exactly) once it would ask for more than this
#: many candidates, or more than `MAX_SHARE` of the graph: a filter that selective is cheaper
#: to gather and scan than to walk the graph for.
MAX_CANDIDATES = 8192
MAX_SHARE = 0.25
#: usearch's key type is uint64: rowids must be in [0, 2**63).
_MAX_KEY = 2**63 - 1


@dataclass(frozen=True)
class AnnParams:
    """HNSW parameters.

    Attributes:
        connectivity: M, links per node and layer (usearch doubles it on layer 0).
        expansion_add: ef_construction, the candidate list while inserting.
        expansion_search: ef, the candidate list while searching (raised to the number of
            candidates asked when that is larger).
        dtype: how the graph stores vectors: ``"f32"``, ``"f16"`` or ``"i8"`` (scalar
            quantisation to [−127, 127]; candidates are re-scored exactly anyway).
    """

    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 128
    dtype: str = "i8"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        for name in ("connectivity", "expansion_add", "expansion_search"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be at least 2, got {getattr(self, name)}")


@dataclass(frozen=True)
class AnnStats:
    """What one `ann_candidates` call did (for EXPLAIN).

    Attributes:
        asked: candidates asked of the graph in the last round.
        ef: the search breadth used in the last round.
        rounds: graph searches made (each doubles `asked`).
        found: candidates returned by the graph in the last round.
        eligible: of those, rows the filter allows.
    """

    asked: int
    ef: int
    rounds: int
    found: int
    eligible: int


def usearch_index() -> Any:
    """usearch's ``Index`` class, imported on first use.

    onnxruntime (the MiniLM embedder, `recallql.index.embedders`, also imported on first use)
    crashes the process with a segmentation fault when its extension loads after usearch's:
    with onnxruntime 1.32 and usearch 2.26.6, ``import usearch.index; import onnxruntime``
    dies, the other order works. A database with ANN graphs opened before the first query
    text is embedded did exactly that, so onnxruntime, when installed, is imported first
    (about 0.14 s of CPU, once per process).
    """
    if "usearch.index" not in sys.modules and "onnxruntime" not in sys.modules \
            and importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401

    from usearch.index import Index

    return Index


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_rows(rowids: np.ndarray, vectors: np.ndarray, dim: int) -> tuple[np.ndarray,
                                                                            np.ndarray]:
    rowids = np.asarray(rowids, np.int64)
    vectors = np.asarray(vectors, np.float32)
    if rowids.ndim != 1 or vectors.shape != (len(rowids), dim):
        raise ValueError(f"expected rowids int64[m] and vectors float32[m, {dim}], got "
                         f"{list(rowids.shape)} and {list(vectors.shape)}")
    if len(rowids) and (int(rowids.min()) < 0 or int(rowids.max()) > _MAX_KEY):
        raise ValueError("rowids must be non-negative int64")
    return rowids, np.ascontiguousarray(vectors)


class AnnGraph:
    """An HNSW graph over rows' L2-normalised vectors, keyed by rowid (cosine similarity).

    Create one with `AnnGraph.new` or `AnnGraph.build`, or open a saved one with `AnnGraph.open`.
    A graph opened with ``view=True`` is read-only (memory-mapped); `copy` gives a writable one.
    """

    def __init__(self, index: Any, dim: int, params: AnnParams, *, writable: bool):
        self._index = index
        self.dim = dim
        self.params = params
        self.writable = writable

    @classmethod
    def new(cls, dim: int, params: AnnParams | None = None) -> AnnGraph:
        """An empty, writable graph for `dim`-dimensional vectors."""
        Index = usearch_index()  # noqa: N806
        params = params or AnnParams()
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        index = Index(ndim=dim, metric="cos", dtype=params.dtype,
                      connectivity=params.connectivity, expansion_add=params.expansion_add,
                      expansion_search=params.expansion_search)
        return cls(index, dim, params, writable=True)

    @classmethod
    def build(cls, rowids: np.ndarray, vectors: np.ndarray, params: AnnParams | None = None,
              *, threads: int = 1, progress: Callable[[int, int], object] | None = None
              ) -> AnnGraph:
        """A new graph holding the given rows.

        Args:
            rowids: int64[m], distinct.
            vectors: float32[m, dim], L2-normalised.
            params: HNSW parameters (defaults: `AnnParams()`).
            threads: insertion threads (the graph differs run to run when > 1).
            progress: called with (rows added, rows in all) after each block of rows.
        """
        vectors = np.asarray(vectors)
        graph = cls.new(vectors.shape[1] if vectors.ndim == 2 else 0, params)
        graph.add(rowids, vectors, threads=threads, progress=progress)
        return graph

    @classmethod
    def open(cls, path: Path, params: AnnParams | None = None, *, view: bool = True
             ) -> AnnGraph:
        """Open a graph saved by `save`.

        Args:
            path: the file.
            params: search parameters to use (the stored graph keeps its own M and dtype).
            view: memory-map the file read-only (O(1): nothing is read until a search touches
                it) instead of loading a writable copy into memory.

        Raises:
            StoreError: the file is missing, truncated or not a usearch graph.
        """
        Index = usearch_index()  # noqa: N806
        try:
            meta = Index.metadata(str(path))
            if meta is None:
                raise ValueError("not a usearch index")
            index = Index.restore(str(path), view=view)
        except (OSError, ValueError, RuntimeError) as exc:
            raise StoreError(f"cannot open the ANN index {path}: {exc}") from exc
        if index is None:
            raise StoreError(f"cannot open the ANN index {path}: not a usearch index")
        dtype = str(index.dtype).rsplit(".", 1)[-1].lower()
        base = params or AnnParams()
        stored = AnnParams(index.connectivity, base.expansion_add, base.expansion_search,
                           dtype if dtype in DTYPES else base.dtype)
        return cls(index, int(index.ndim), stored, writable=not view)

    def __len__(self) -> int:
        return int(len(self._index))

    def __contains__(self, rowid: object) -> bool:
        if not isinstance(rowid, int | np.integer):
            return False
        return bool(self._index.contains(int(rowid)))

    def keys(self) -> np.ndarray:
        """int64[m]: the rowids in the graph (unordered)."""
        if len(self) == 0:
            return np.zeros(0, np.int64)
        return np.asarray(self._index.keys, np.int64)

    def memory_bytes(self) -> int:
        """Bytes the graph holds in memory (usearch's own count; a view maps its file)."""
        return int(self._index.memory_usage)

    def _writable(self) -> Any:
        if not self.writable:
            raise StoreError("the ANN index is open read-only (a memory-mapped view); "
                             "use copy() for a writable graph")
        return self._index

    def add(self, rowids: np.ndarray, vectors: np.ndarray, *, threads: int = 1,
            progress: Callable[[int, int], object] | None = None, block: int = 10_000) -> None:
        """Insert rows (rowids not already in the graph).

        Raises:
            ValueError: wrong shapes, negative rowids, or a rowid already in the graph.
            StoreError: the graph is a read-only view.
        """
        index = self._writable()
        rowids, vectors = _check_rows(rowids, vectors, self.dim)
        if len(np.unique(rowids)) != len(rowids) or (
                len(self) and bool(np.any(index.contains(rowids)))):
            raise ValueError("a rowid is already in the ANN index, or given twice")
        for start in range(0, len(rowids), block):
            stop = min(len(rowids), start + block)
            index.add(rowids[start:stop], vectors[start:stop],
                      threads=max(1, threads))
            if progress is not None:
                progress(stop, len(rowids))

    def remove(self, rowids: np.ndarray) -> int:
        """Remove rows (absent rowids are ignored); returns how many were removed."""
        index = self._writable()
        rowids = np.asarray(rowids, np.int64)
        present = rowids[np.asarray(index.contains(rowids), bool)] if len(rowids) else rowids
        if len(present):
            index.remove(present)
        return len(present)

    def copy(self) -> AnnGraph:
        """A writable in-memory copy (of a view too)."""
        return AnnGraph(self._index.copy(), self.dim, self.params,
                        writable=True)

    def save(self, path: Path) -> None:
        """Write the graph to `path` atomically and durably (temporary file, fsync, rename,
        fsync of the directory)."""
        tmp = path.with_name(path.name + ".tmp")
        self._index.save(str(tmp))
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)

    def search(self, query: np.ndarray, k: int, ef: int | None = None) -> np.ndarray:
        """Rowids of (about) the `k` nearest rows to `query` (float32[dim], normalised), in the
        graph's order (nearest first by the graph's stored vectors); fewer when the graph is
        smaller. One thread."""
        if k <= 0 or len(self) == 0:
            return np.zeros(0, np.int64)
        index = self._index
        index.expansion_search = max(ef or self.params.expansion_search, k)
        found = index.search(np.asarray(query, np.float32), k, threads=1)
        return np.asarray(found.keys, np.int64)


def exact_cosines(query: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """float32[m]: cosines of float32[m, d] stored (normalised) vectors with a float64[d]
    normalised query, computed in float64 and rounded: the exact scan's refined score."""
    if len(vectors) == 0:
        return np.zeros(0, np.float32)
    return np.einsum("ij,j->i", np.asarray(vectors, np.float64), query).astype(np.float32)


def ann_candidates(graph: AnnGraph, query: np.ndarray, n: int, eligible: np.ndarray,
                   gather: Callable[[np.ndarray], np.ndarray], eligible_count: int, *,
                   oversample: float | None = None, ef: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray, AnnStats] | None:
    """Candidates for the top-n among eligible rows, from the graph, re-scored exactly.

    Asks the graph for ``k = ceil((n + PAD) · oversample / share)`` rows (``share`` = the
    eligible share of the graph's rows), keeps the eligible ones, and doubles `k` until
    ``min(n, eligible_count)`` are eligible; `k` never passes the larger of `n` and the
    smaller of `MAX_CANDIDATES` and `MAX_SHARE` of the graph. Gives up (returns None: the
    caller scans the eligible rows exactly) when that many are still not eligible at the
    largest `k`: a filtered ANN search that under-fills is never returned.

    Args:
        graph: the graph.
        query: float64[dim], L2-normalised.
        n: rows wanted (≥ 1).
        eligible: bool[size]; rowids outside it or ≥ size are dropped.
        gather: float32[m, dim] stored vectors of int64[m] rowids (for the exact re-score).
        eligible_count: how many of the graph's rows are eligible.
        oversample: candidates asked per row wanted (before dividing by `share`; default
            `OVERSAMPLE`).
        ef: search breadth (default: the graph's; always ≥ k).

    Returns:
        (rowids int64[m], exact cosine float32[m], stats): the candidates, in the graph's
        order, m ≥ min(n, eligible_count); or None on under-fill.
    """
    size = len(graph)
    oversample = OVERSAMPLE if oversample is None else oversample
    want = min(n, eligible_count)
    if want <= 0 or size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32), AnnStats(0, 0, 0, 0, 0)
    limit = max(n, min(MAX_CANDIDATES, math.ceil(size * MAX_SHARE)))
    share = min(1.0, eligible_count / size)
    k = min(size, limit, math.ceil((n + PAD) * oversample / share))
    q32, rounds = query.astype(np.float32), 0
    while True:
        rounds += 1
        hits = graph.search(q32, k, ef)
        hits = hits[hits < len(eligible)]
        keep = hits[eligible[hits]]
        if len(keep) >= want:
            break
        if k >= size or k >= limit:
            return None
        k = min(size, limit, k * 2)
    stats = AnnStats(k, max(ef or graph.params.expansion_search, k), rounds, len(hits),
                     len(keep))
    return keep, exact_cosines(query, gather(keep)), stats
