"""Vector segments: append-only float32 ``.npy`` files, an exact cosine scan, and merges.

Each batch writes one new segment file ``b<seq>.npy`` (float32[m, dim], rows L2-normalised) with
its rowids recorded in the SQLite manifest (a ``lo..hi`` range, or explicit int64 rowids when the
rows are not contiguous). Files are written to a temporary name, fsynced, renamed and the directory
fsynced before the manifest entry commits; files are never modified afterwards, and opened with
``np.load(mmap_mode="r")``. A merge writes ``m<seq>-<k>.npy`` from several segments (dropping
tombstoned rows), commits the manifest swap in one SQLite transaction, then unlinks the inputs.
Files that the manifest does not name are orphans of an interrupted batch or merge and are removed
when the writer opens.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recallql.index import graphs
from recallql.index.ann import AnnGraph
from recallql.index.connections import fsync_dir
from recallql.index.errors import StoreError
from recallql.index.metadata import SegmentRow
from recallql.index.quantized import TAIL, Quantized, copy_name, open_copy, pack, quantize
from recallql.index.ranking import top_by_score
from recallql.index.storage import storage_errors

#: A tier holds segments of factor**t … factor**(t+1)-1 rows; `factor` segments of a tier merge.
MERGE_FACTOR = 8
#: Segments above this tier (≥ 8**7 ≈ 2.1M rows) are never merged, so a merge rewrites at most
#: 8 segments of tier 6 (up to ~2M rows); below it the file count is bounded by 7 segments a
#: tier: at most 7 · 7 + n / 2.1M segments (about 54 at 10M rows; before, appends left a
#: 4,096-row segment per 4,096 rows without bound). Merged segments get their ANN graph
#: afterwards (`recallql.index.indexer`).
MAX_MERGE_TIER = 6
#: Candidates within this much (absolute cosine) of the coarse n-th score are re-scored exactly.
REFINE_MARGIN = 1e-4
#: Smallest accepted vector norm: float32's smallest normal number. Below it every component is a
#: float32 subnormal (precision already lost) and ``1 / norm`` overflows float32.
MIN_NORM = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class Segment:
    """A loaded segment: rowids int64[m] and vectors float32[m, dim] (memory-mapped on disk),
    and its ANN graph and int8 copy when it has them (`recallql.index.graphs`,
    `recallql.index.quantized`; memory-mapped on disk)."""

    file: str
    lo: int
    hi: int
    vecs: np.ndarray
    explicit: np.ndarray | None = None
    graph: AnnGraph | None = None
    quantized: Quantized | None = None

    @property
    def rowids(self) -> np.ndarray:
        """int64[m]."""
        if self.explicit is not None:
            return self.explicit
        return np.arange(self.lo, self.hi, dtype=np.int64)

    def rowids_at(self, local: np.ndarray) -> np.ndarray:
        """int64 rowids of the rows at positions `local` of this segment."""
        return self.lo + local.astype(np.int64) if self.explicit is None else self.explicit[local]

    @functools.cached_property
    def _order(self) -> np.ndarray:
        assert self.explicit is not None
        return np.argsort(self.explicit, kind="stable")

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        """Positions in this segment of `rowids`, which it holds (int64[k])."""
        rowids = np.asarray(rowids, np.int64)
        if self.explicit is None:
            return rowids - self.lo
        order = self._order
        return order[np.searchsorted(self.explicit, rowids, sorter=order)]

    def eligible(self, mask: np.ndarray) -> np.ndarray:
        """bool[m]: `mask` at this segment's rowids."""
        return mask[self.lo:self.hi] if self.explicit is None else mask[self.explicit]


def _write_rows(path: Path, dim: int, parts: Iterable[np.ndarray], descr: str = "<f4",
                rows: int | None = None) -> None:
    """Write float32 rows (or rows of `descr`) in parts as one .npy file, atomically and
    durably (`rows`: their count, when `parts` is an iterator).

    Raises:
        StoreError: the file cannot be written (disk full, permissions, I/O), naming it; the
            temporary file is removed.
    """
    tmp = path.with_name(path.name + ".tmp")
    if rows is None:
        parts = list(parts)
        rows = sum(len(p) for p in parts)
    header = {"descr": descr, "fortran_order": False, "shape": (rows, dim)}
    try:
        with storage_errors(tmp):
            with open(tmp, "wb") as out:
                np.lib.format.write_array_header_1_0(out, header)
                for part in parts:
                    out.write(np.ascontiguousarray(part, dtype=descr).data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
            fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class SegmentFiles:
    """Where a collection's segment files live: a directory, or a dict in memory.

    Args:
        directory: the collection's vector directory, or ``None`` for in-memory.
        dim: vector dimension.
    """

    def __init__(self, directory: Path | None, dim: int):
        self.directory = directory
        self.dim = dim
        self._memory: dict[str, np.ndarray] = {}
        self._graphs: dict[str, AnnGraph] = {}  # in memory: graph file -> graph
        self._copies: dict[str, Quantized] = {}  # in memory: int8 copy file -> copy
        self._loaded: dict[str, Segment] = {}

    def write(self, name: str, parts: Sequence[np.ndarray]) -> None:
        """Persist a new segment file (fsynced before returning)."""
        if self.directory is None:
            self._memory[name] = np.concatenate(parts) if len(parts) != 1 else parts[0].copy()
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_rows(self.directory / name, self.dim, parts)

    def write_graph(self, segment_file: str, graph: AnnGraph, publish: Callable[[], object],
                    vectors: np.ndarray | None = None) -> bool:
        """Persist the graph of segment `segment_file` (and the int8 copy of its `vectors`,
        when given): saved and fsynced to temporary files outside the vector directory
        (recovery never sees them half-written), then, inside ``publish()`` (a context
        manager: the caller's writer mutex), renamed into place if the segment is still in
        the manifest (`publish` returns a true value), the copy first: a segment with a graph
        and no copy is only ever one of an older store.

        Returns:
            Whether the graph was published.

        Raises:
            StoreError: the file cannot be written (disk full, permissions, I/O), naming it.
        """
        name = graphs.graph_name(segment_file)
        if self.directory is None:
            copy = None if vectors is None else quantize(vectors)
            with publish() as wanted:  # type: ignore[attr-defined]
                if wanted:
                    self._graphs[name] = graph
                    if copy is not None:
                        self._copies[copy_name(segment_file)] = copy
                return bool(wanted)
        building = self.directory.parent / "building"
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"  # one per writer
        tmp, tmp_copy = building / f"{name}.{tag}", building / f"{copy_name(segment_file)}.{tag}"
        try:
            with storage_errors(tmp):
                building.mkdir(parents=True, exist_ok=True)
                graph.save(tmp)
                if vectors is not None:
                    _write_copy(tmp_copy, vectors)
                with publish() as wanted:  # type: ignore[attr-defined]
                    if wanted:
                        if vectors is not None:
                            os.replace(tmp_copy, self.directory / copy_name(segment_file))
                        os.replace(tmp, self.directory / name)
                        fsync_dir(self.directory)
                    return bool(wanted)
        finally:
            tmp.unlink(missing_ok=True)
            tmp_copy.unlink(missing_ok=True)

    def put_copy(self, segment_file: str, vectors: np.ndarray) -> None:
        """Persist the int8 copy (`recallql.index.quantized`) of a segment's float32
        `vectors`, atomically (a temporary file fsynced and renamed): for a segment the
        manifest does not name yet (a forced merge) or one that lacks it (a store written
        before int8 copies: `recallql optimize`).

        Raises:
            StoreError: the file cannot be written (disk full, permissions, I/O), naming it.
        """
        if self.directory is None:
            self._copies[copy_name(segment_file)] = quantize(vectors)
            return
        _write_copy(self.directory / copy_name(segment_file), vectors)

    def put_graph(self, segment_file: str, graph: AnnGraph) -> None:
        """Persist the graph of a segment the manifest does not name yet (a forced merge,
        `recallql.index.optimize`): saved beside it atomically and durably, an orphan with it
        until the manifest commits.

        Raises:
            StoreError: the file cannot be written (disk full, permissions, I/O), naming it.
        """
        name = graphs.graph_name(segment_file)
        if self.directory is None:
            self._graphs[name] = graph
            return
        target = self.directory / name
        try:
            with storage_errors(target):
                try:
                    graph.save(target)
                except RuntimeError as exc:  # usearch reports a failed write this way
                    raise StoreError(f"cannot write {target}: {exc}") from exc
        except BaseException:
            target.with_name(target.name + ".tmp").unlink(missing_ok=True)
            raise

    def graph_path(self, segment_file: str) -> Path | None:
        """Where the graph of a segment is (or would be) on disk; None in memory."""
        return None if self.directory is None else self.directory / graphs.graph_name(
            segment_file)

    def _load_graph(self, segment_file: str) -> AnnGraph | None:
        name = graphs.graph_name(segment_file)
        if self.directory is None:
            return self._graphs.get(name)
        path = self.directory / name
        if not path.exists():
            return None
        return AnnGraph.open(path, graphs.PARAMS, view=True)

    def _load_copy(self, segment_file: str, rows: int) -> Quantized | None:
        name = copy_name(segment_file)
        if self.directory is None:
            return self._copies.get(name)
        return open_copy(self.directory / name, rows, self.dim)

    def with_graph(self, seg: Segment) -> Segment:
        """`seg` with its graph and int8 copy, when their files exist now (the cache is
        updated)."""
        graph = seg.graph or self._load_graph(seg.file)
        copy = seg.quantized or self._load_copy(seg.file, len(seg.vecs))
        if graph is seg.graph and copy is seg.quantized:
            return seg
        seg = dataclasses.replace(seg, graph=graph, quantized=copy)
        if seg.file in self._loaded:
            self._loaded[seg.file] = seg
        return seg

    def open_vectors(self, name: str, rows: int) -> np.ndarray:
        """The float32[rows, dim] vectors of a segment file just written (memory-mapped)."""
        if self.directory is None:
            return self._memory[name]
        return open_segment(self.directory / name, rows, self.dim)

    def exists(self, name: str) -> bool:
        """Whether a segment file of that name exists."""
        if self.directory is None:
            return name in self._memory
        return (self.directory / name).exists()

    def remove(self, names: Sequence[str]) -> None:
        """Delete segment files (missing ones are ignored)."""
        for name in names:
            self._loaded.pop(name, None)
            extra = ([graphs.graph_name(name), copy_name(name)] if name.endswith(".npy")
                     else [])
            if self.directory is None:
                self._memory.pop(name, None)
                for other in extra:
                    self._graphs.pop(other, None)
                    self._copies.pop(other, None)
                continue
            (self.directory / name).unlink(missing_ok=True)
            for other in extra:
                (self.directory / other).unlink(missing_ok=True)
        if self.directory is not None and names and self.directory.exists():
            fsync_dir(self.directory)

    def remove_extras(self, segment_file: str) -> None:
        """Delete the graph and int8 copy of segment `segment_file` (missing ones are ignored),
        not the segment itself."""
        names = [graphs.graph_name(segment_file), copy_name(segment_file)]
        if self.directory is None:
            for name in names:
                self._graphs.pop(name, None)
                self._copies.pop(name, None)
            return
        for name in names:
            (self.directory / name).unlink(missing_ok=True)
        fsync_dir(self.directory)

    def remove_orphans(self, known: set[str]) -> list[str]:
        """Delete files (and temporaries) that the manifest does not name (a named segment's
        graph file is named with it); return their names."""
        if self.directory is None or not self.directory.exists():
            return []
        known = known | {graphs.graph_name(name) for name in known} | {
            copy_name(name) for name in known}
        orphans = sorted(p.name for p in self.directory.iterdir() if p.name not in known)
        self.remove(orphans)
        return orphans

    def load(self, row: SegmentRow, rowids: Callable[[], bytes | None]) -> Segment:
        """Open a manifest entry (cached per file; files are immutable)."""
        seg = self._loaded.get(row.file)
        if seg is not None:
            if (seg.graph is None or seg.quantized is None) and graphs.wants_graph(row.n):
                seg = self.with_graph(seg)  # built (or given its copy) since it was loaded?
            return seg
        if self.directory is None:
            vecs = self._memory[row.file]
        else:
            vecs = open_segment(self.directory / row.file, row.n, self.dim)
        blob = rowids()
        explicit = None if blob is None else np.frombuffer(blob, dtype=np.int64)
        seg = Segment(row.file, row.lo, row.hi, vecs, explicit, self._load_graph(row.file),
                      self._load_copy(row.file, row.n))
        self._loaded[row.file] = seg
        return seg


def _write_copy(path: Path, vectors: np.ndarray, block: int = 65_536) -> None:
    """Write the int8 copy of float32[m, d] `vectors` (`recallql.index.quantized.pack`),
    quantised `block` rows at a time, atomically and durably."""
    m, d = vectors.shape
    parts = (pack(quantize(vectors[a:a + block])) for a in range(0, m, block))
    _write_rows(path, d + TAIL, parts, descr="|i1", rows=m)


def open_segment(path: Path, n: int, dim: int) -> np.ndarray:
    """Memory-map a segment file, checking it is what the manifest says: a float32 (little
    endian, C order) ``.npy`` of shape ``(n, dim)`` whose size matches its header exactly.

    Raises:
        FileNotFoundError: the file is missing (a merge may have just replaced it; the caller
            re-reads the manifest).
        StoreError: the file is damaged (truncated, extended, another dtype or shape), naming
            it and what is wrong.
    """
    try:
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read(file)
            offset = file.tell()
        size = path.stat().st_size
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise StoreError(f"the vector segment {path} is damaged (unreadable header: {exc})"
                         ) from exc
    want = offset + n * dim * 4
    if dtype != np.dtype("<f4") or fortran or tuple(shape) != (n, dim) or size != want:
        raise StoreError(f"the vector segment {path} is damaged: {size} bytes holding "
                         f"{dtype}{list(shape)}, the manifest says float32[{n}, {dim}] "
                         f"({want} bytes)")
    if n == 0:
        return np.zeros((0, dim), np.float32)
    return np.memmap(path, dtype="<f4", mode="r", offset=offset, shape=(n, dim))


def tier(rows: int) -> int:
    """Merge tier of a segment with `rows` rows (0 for 1..MERGE_FACTOR-1)."""
    level, limit = 0, MERGE_FACTOR
    while rows >= limit:
        level, limit = level + 1, limit * MERGE_FACTOR
    return level


def plan_merge(rows: Sequence[SegmentRow]) -> list[SegmentRow]:
    """The segments to merge next: all of the lowest tier (≤ MAX_MERGE_TIER) holding at least
    MERGE_FACTOR of them."""
    tiers: dict[int, list[SegmentRow]] = {}
    for row in rows:
        tiers.setdefault(tier(row.n), []).append(row)
    for level in sorted(tiers):
        if level <= MAX_MERGE_TIER and len(tiers[level]) >= MERGE_FACTOR:
            return tiers[level]
    return []


def merged_parts(segments: Sequence[Segment], live: np.ndarray
                 ) -> tuple[list[np.ndarray], np.ndarray]:
    """Rows of `segments` whose rowid is live, in rowid order: (vector parts, rowids int64[m])."""
    order = sorted(segments, key=lambda s: s.lo)
    parts, rowids = [], []
    for seg in order:
        keep = seg.eligible(live)
        if keep.all():
            parts.append(seg.vecs)
            rowids.append(seg.rowids)
        elif keep.any():
            idx = np.flatnonzero(keep)
            parts.append(seg.vecs[idx])
            rowids.append(seg.rowids[idx])
    merged = np.concatenate(rowids) if rowids else np.zeros(0, np.int64)
    return parts, merged


#: numpy dtype kinds that are not real numbers, as a message names them.
_NOT_NUMBERS = {"b": "bool", "c": "complex", "U": "str", "S": "bytes", "M": "datetime",
                "m": "timedelta", "V": "structured"}


class NotRealNumbers(ValueError):
    """What `real_float32` raises: the value is not an array of real numbers."""


def real_float32(raw: object) -> np.ndarray:
    """`raw` (a vector or a matrix: sequences or a numpy array of real numbers) as float32.

    Only real numbers are taken: numpy would parse strings (``"1"``), count bools as 0/1 and
    drop the imaginary part of complex values (with a warning), which a query vector (NEAR)
    refuses. A component beyond float32 becomes inf (refused later as non-finite).

    Raises:
        NotRealNumbers: ragged nesting, values that are not real numbers (the message names
            their type), or a component beyond float64 ("out of range").
    """
    try:
        arr = np.asarray(raw)
    except (ValueError, TypeError):
        raise NotRealNumbers("must be a sequence of numbers (of one length)") from None
    kind = arr.dtype.kind
    if kind in _NOT_NUMBERS:
        raise NotRealNumbers(f"must be a sequence of numbers, got {_NOT_NUMBERS[kind]} values")
    if kind == "O":
        bad = [x for x in arr.flat if isinstance(x, bool | np.bool_)
               or not isinstance(x, numbers.Real)][:1]
        if bad:
            raise NotRealNumbers(f"must be a sequence of numbers, got {type(bad[0]).__name__}")
        try:
            arr = arr.astype(np.float64)
        except OverflowError:  # a Python int beyond float64 (10**400)
            raise NotRealNumbers("component out of range (beyond float32)") from None
    with np.errstate(over="ignore"):  # 1e39 → inf, refused later as non-finite
        return arr.astype(np.float32, copy=False)


def row_norms(matrix: np.ndarray) -> np.ndarray:
    """L2 norms of the rows of a float[n, dim] matrix, computed in float64.

    Squares of float32 components neither overflow nor underflow in float64, so the norm of a
    float32 row is exact to float64 rounding however large or small its components.

    Returns:
        float64[n]; NaN for a row with a non-finite component.
    """
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        norms[~finite] = np.nan
    return norms


def usable_norms(norms: np.ndarray) -> np.ndarray:
    """bool[n]: the norms (from `row_norms`) of vectors that can be normalised: finite and at
    least `MIN_NORM`."""
    return (norms >= MIN_NORM) & (norms < np.inf)


def norm_problem(norm: float) -> str:
    """Why a vector whose norm (from `row_norms`) fails `usable_norms` cannot be normalised, as
    words that follow "vector has"."""
    if math.isnan(norm):
        return "a non-finite component"
    if norm == 0.0:
        return "zero norm"
    if norm < MIN_NORM:
        return (f"norm {norm:.3g}, too small to normalise (below {MIN_NORM:.3g}, the smallest "
                "normal float32)")
    return f"norm {norm:.3g}, too large to normalise"


def normalise_rows(matrix: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Rows divided by their norms in float64, then rounded to float32.

    Args:
        matrix: float[n, dim].
        norms: float64[n] from `row_norms`, all passing `usable_norms` (every component's
            magnitude is then at most its row's norm, so the result is finite).

    Returns:
        float32[n, dim], L2-normalised.
    """
    out = np.empty(matrix.shape, np.float32)
    np.divide(matrix, norms[:, None], out=out, casting="same_kind")
    return out


def normalise_query(vec: object, dim: int) -> np.ndarray:
    """A query vector as float64[dim], L2-normalised (the rule of ingest: finite components and
    a norm of at least `MIN_NORM`).

    Raises:
        ValueError: wrong dimension, a non-finite component, or a zero, too small or too large
            norm (the message says which).
    """
    try:
        q = np.asarray(vec, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("query vector must be a sequence of numbers") from None
    if q.ndim != 1 or q.shape[0] != dim:
        raise ValueError(f"query vector has shape {q.shape}, expected ({dim},)")
    norms = row_norms(q[None, :])
    if not usable_norms(norms)[0]:
        raise ValueError(f"query vector has {norm_problem(float(norms[0]))}")
    return q / norms[0]


def matvec(matrix: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """``matrix @ vec`` on one thread (numpy's einsum SIMD loop instead of a BLAS gemv).

    A threaded BLAS (OpenBLAS starts one thread per core) busy-waits for its threads: on a
    2-core machine whose cores were busy, 100k × 384 float32 took 32–51 ms with ``@`` against
    17 ms with this, and 2,000 × 384 took 11 ms instead of 0.08 ms. The scan is bound by
    memory bandwidth, so one thread loses little on an idle machine.
    """
    return np.einsum("ij,j->i", matrix, vec)


def _candidates(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of `scores` that may be in the top n: all within REFINE_MARGIN of the n-th."""
    if len(scores) <= n:
        return np.arange(len(scores))
    kth = np.partition(scores, len(scores) - n)[len(scores) - n]
    return np.flatnonzero(scores >= kth - REFINE_MARGIN)


def _coarse(segments: Sequence[Segment], q32: np.ndarray, eligible: np.ndarray, n: int,
            skip: Callable[[str, np.ndarray], None] | None = None):
    """Float32 pass: per segment, the eligible rows that may be in the top n, as arrays
    (segment no, local index, rowid, score); None when no row is eligible. Rows whose score is
    not finite (their stored vector is not: a damaged file) are left out and reported to
    `skip(file, rowids)`."""
    segs, locs, scores = [], [], []
    for no, seg in enumerate(segments):
        ok = seg.eligible(eligible)
        hits = int(np.count_nonzero(ok))
        if hits == 0:
            continue
        if hits == len(ok):
            local, score = None, matvec(seg.vecs, q32)
        else:
            local = np.flatnonzero(ok)
            score = (matvec(seg.vecs[local], q32) if hits * 8 < len(ok)
                     else matvec(seg.vecs, q32)[local])
        finite = np.isfinite(score)
        if not finite.all():
            local = np.flatnonzero(finite) if local is None else local[finite]
            bad = np.flatnonzero(~finite) if hits == len(ok) else np.flatnonzero(ok)[~finite]
            if skip is not None:
                skip(seg.file, seg.rowids_at(bad))
            score = score[finite]
            if len(score) == 0:
                continue
        keep = _candidates(score, n)
        locs.append(keep if local is None else local[keep])
        scores.append(score[keep])
        segs.append(np.full(len(keep), no, np.int32))
    if not segs:
        return None
    local = np.concatenate(locs)
    seg_no = np.concatenate(segs)
    rowids = np.concatenate([segments[no].rowids_at(loc) for no, loc in zip(
        (int(s[0]) for s in segs), locs, strict=True)])
    return seg_no, local, rowids, np.concatenate(scores)


def semantic_topn(segments: Sequence[Segment], query: np.ndarray, n: int, eligible: np.ndarray,
                  ids: Sequence[str], skip: Callable[[str, np.ndarray], None] | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-n over eligible rows, ordered by (−cosine, item id).

    A float32 pass finds the candidates (everything within `REFINE_MARGIN` of the n-th score);
    they are re-scored in float64 and rounded to float32, so a row's cosine does not depend on
    where its vector sits in a segment, and exact ties are broken by item id.

    Args:
        segments: loaded segments.
        query: float64[dim], L2-normalised (see `normalise_query`).
        n: rows wanted.
        eligible: bool[size].
        ids: item id per rowid.
        skip: told ``(file, rowids)`` of rows whose stored vector is not finite; they are
            never returned.

    Returns:
        (rowids int64[m], cosine float32[m]), m = min(n, eligible rows with a finite vector).
    """
    empty = (np.zeros(0, np.int64), np.zeros(0, np.float32))
    coarse = _coarse(segments, query.astype(np.float32), eligible, n, skip) if n > 0 else None
    if coarse is None:
        return empty
    seg_no, local, rowids, scores = coarse
    if len(scores) == 0:
        return empty
    return refine(segments, query, n, ids, seg_no, local, rowids, scores)


def refine(segments: Sequence[Segment], query: np.ndarray, n: int, ids: Sequence[str],
           seg_no: np.ndarray, local: np.ndarray, rowids: np.ndarray, scores: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """The exact top-n of coarse float32 candidates: those within `REFINE_MARGIN` of the n-th
    coarse score, re-scored in float64 from their segments (`seg_no`, `local`: int[m] segment
    index and row within it), rounded to float32, ordered by (−cosine, item id).

    Returns:
        (rowids int64[k], cosine float32[k]), k = min(n, m).
    """
    pick = _candidates(scores, n)
    seg_no, local = seg_no[pick], local[pick]
    rowids = rowids[pick].astype(np.int64)
    exact = np.empty(len(rowids), np.float32)
    for no in np.unique(seg_no):
        at = np.flatnonzero(seg_no == no)
        exact[at] = matvec(segments[no].vecs[local[at]].astype(np.float64), query
                           ).astype(np.float32)
    order = np.asarray(top_by_score(exact, n, lambda i: ids[rowids[i]]), np.int64)
    return rowids[order], exact[order]
