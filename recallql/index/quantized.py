"""Int8 copies of vector rows for an exact pre-scan: bounded scores, then exact re-scoring.

An exact scan over a filter's rows (a tenant's 10,000 rows of a million) is bound by memory:
gathering float32 rows moves 1,536 bytes a 384-d row. An int8 copy moves 384. Each row ``x``
(L2-normalised float32) is stored as ``codes = round(x / s)`` with its own scale
``s = max|x| / 127`` and the norm of its rounding error ``e = ‖x − s·codes‖`` (float32). The
query is quantised the same way, ``q = t·q8 + ρ``. Then for every row

    |q·x − s·t·(codes·q8)|  ≤  ‖q‖·e + ‖ρ‖·‖s·codes‖  ≤  e + ‖ρ‖·(1 + e)

(Cauchy–Schwarz, ‖q‖ = 1, ‖s·codes‖ ≤ ‖x‖ + e = 1 + e). With that bound per row,
`candidates` returns a set that provably contains the exact top-n: every row whose upper bound
reaches the n-th largest lower bound. Re-scoring those rows from the float32 vectors gives the
same rows and the same cosines as a full float32 scan — the pre-scan changes the cost, never
the answer. The integer dot products run in NumKong's SIMD kernels (a dependency of usearch),
exact in float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Added to every bound: float64 rounding of the scores and of the exact re-score.
SLACK = 1e-6


@dataclass(frozen=True)
class Quantized:
    """Int8 rows with their scales and rounding errors.

    Attributes:
        codes: int8[m, d].
        scale: float32[m], ``max|x| / 127`` per row (0 for a zero row).
        error: float32[m], ``‖x − scale·codes‖`` per row, rounded up.
        packed: the int8[m, d + 8] array the three are views of (`unpack`), if any: `take`
            then gathers each row once (392 bytes a 384-d row) instead of three times.
    """

    codes: np.ndarray
    scale: np.ndarray
    error: np.ndarray
    packed: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, rows: np.ndarray) -> Quantized:
        """The rows at `rows` (int64[k] positions)."""
        if self.packed is not None:
            return unpack(np.take(self.packed, rows, axis=0))
        return Quantized(self.codes[rows], self.scale[rows], self.error[rows])


def quantize(vectors: np.ndarray, block: int = 65_536) -> Quantized:
    """Quantise float32[m, d] rows (see the module docstring), `block` rows at a time (the
    float64 residual of a block is the working memory).

    A row with a non-finite component (a damaged segment) gets codes 0, scale 0 and an
    infinite error: it is then a candidate of every pre-scan, so the float32 re-score meets
    it and reports it, as a plain scan would."""
    x = np.asarray(vectors)
    m, d = x.shape
    out = Quantized(np.zeros((m, d), np.int8), np.zeros(m, np.float32), np.zeros(m, np.float32))
    for start in range(0, m, block):
        part = np.asarray(x[start:start + block], np.float32)
        codes, scale, error = _quantize_block(part)
        out.codes[start:start + block] = codes
        out.scale[start:start + block] = scale
        out.error[start:start + block] = error
    return out


def _quantize_block(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        x = np.where(finite[:, None], x, 0.0).astype(np.float32)
    peak = np.abs(x).max(axis=1) if x.size else np.zeros(len(x), np.float32)
    scale = (peak / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    codes = np.clip(np.rint(x / safe[:, None]), -127, 127).astype(np.int8)
    residual = x.astype(np.float64) - codes * scale.astype(np.float64)[:, None]
    error = np.nextafter(np.sqrt(np.einsum("ij,ij->i", residual, residual)).astype(np.float32),
                         np.float32(np.inf))
    error[~finite] = np.inf
    return codes, scale, error


#: Bytes after a row's codes in a packed copy: its scale and its error, float32 each.
TAIL = 8


def pack(q: Quantized) -> np.ndarray:
    """int8[m, d + 8]: each row's codes, then its scale and error as little-endian float32
    bytes — the layout of a segment's stored int8 copy (one ``.npy`` file, `unpack`)."""
    m, d = q.codes.shape
    out = np.empty((m, d + TAIL), np.int8)
    out[:, :d] = q.codes
    out[:, d:d + 4] = q.scale.astype("<f4").view(np.int8).reshape(m, 4)
    out[:, d + 4:] = q.error.astype("<f4").view(np.int8).reshape(m, 4)
    return out


def unpack(packed: np.ndarray) -> Quantized:
    """The `Quantized` rows of a packed int8[m, d + 8] array (views, no copy: a
    memory-mapped file stays on disk until rows are taken)."""
    d = packed.shape[1] - TAIL
    return Quantized(packed[:, :d], packed[:, d:d + 4].view("<f4")[:, 0],
                     packed[:, d + 4:].view("<f4")[:, 0], packed)


def _query(query: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(int8 codes, scale, ‖residual‖) of a float64 normalised query."""
    peak = float(np.abs(query).max())
    scale = peak / 127.0 if peak > 0 else 1.0
    codes = np.clip(np.rint(query / scale), -127, 127).astype(np.int8)
    residual = query - codes.astype(np.float64) * scale
    return codes, scale, float(np.sqrt(residual @ residual))


def approximate_scores(q: Quantized, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores float64[m], bounds float64[m]): ``|true cosine − score| ≤ bound`` per row.

    Args:
        q: the quantised rows.
        query: float64[d], L2-normalised.
    """
    import numkong

    if len(q) == 0:
        return np.zeros(0), np.zeros(0)
    q8, t, rho = _query(query)
    dots = np.asarray(numkong.cdist(q8[None, :], q.codes, metric="dot"), np.float64)[0]
    scores = dots * q.scale.astype(np.float64) * t
    error = q.error.astype(np.float64)
    return scores, error + rho * (1.0 + error) + SLACK


def candidates(q: Quantized, query: np.ndarray, n: int, rows: np.ndarray | None = None,
               block: int = 65_536) -> np.ndarray:
    """Positions (int64, ascending) of the rows that may be in the exact cosine top-n: a
    superset of it, ties at the n-th score included.

    Args:
        q: the quantised rows.
        query: float64[d], L2-normalised.
        n: rows wanted.
        rows: when given, only the rows at these ascending positions of `q` take part (the
            result is then positions into `rows`); they are gathered `block` at a time, so a
            scan of a million eligible rows never copies all their codes at once.
    """
    m = len(q) if rows is None else len(rows)
    if n <= 0 or m == 0:
        return np.zeros(0, np.int64)
    if n >= m:
        return np.arange(m, dtype=np.int64)
    if rows is None:
        scores, bounds = approximate_scores(q, query)
    else:
        parts = [approximate_scores(q.take(rows[a:a + block]), query)
                 for a in range(0, m, block)]
        scores = np.concatenate([s for s, _ in parts])
        bounds = np.concatenate([b for _, b in parts])
    lower = scores - bounds
    tau = np.partition(lower, m - n)[m - n]
    return np.flatnonzero(scores + bounds >= tau).astype(np.int64)


#: A segment's stored int8 copy: the file of the segment's stem with this suffix
#: (``o7-0.npy`` → ``o7-0.i8``), a ``.npy`` of int8[m, d + 8] (`pack`).
SUFFIX = ".i8"


def copy_name(segment_file: str) -> str:
    """The int8 copy file of a segment file (``b12.npy`` → ``b12.i8``)."""
    stem = segment_file[:-4] if segment_file.endswith(".npy") else segment_file
    return stem + SUFFIX


def open_copy(path: Path, rows: int, dim: int) -> Quantized | None:
    """Memory-map a stored int8 copy of `rows` rows of `dim` dimensions; None when the file
    is missing or is not what it should be (wrong dtype, shape or size: the segment is then
    scanned in float32, and `recallql check` reports the file)."""
    try:
        packed = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    if packed.dtype != np.int8 or packed.shape != (rows, dim + TAIL):
        return None
    return unpack(packed)
