"""Exact cosine top-n over a few given rows: the semantic leg of a selective filter.

When a statement's filter resolves through postings (`recallql.index.rowsets.RowSet`, sparse)
to few enough rows to be scanned exactly (`recallql.index.semantic.EXACT_MAX_ROWS`), only those
rows are read: each segment's share of them is found by binary search over the ascending rowids
(O(m log m), no mask over every row), gathered from the memory-mapped float32 file and scored.
The arithmetic is that of `recallql.index.vectors.semantic_topn` — a float32 pass, the rows
within `REFINE_MARGIN` of the n-th re-scored in float64 and rounded to float32, exact ties by
item id — so the rows and cosines are the same as a scan of the same rows through a mask.

A segment with an int8 copy (`recallql.index.quantized`) is pre-scanned through it first:
gathering a row's 392 bytes instead of its 1,536, the bounded int8 scores keep only the rows
that may be in the exact top-n (a superset of it, ties included), and only those are read
in float32 and go through the same float32 pass and re-score — the same rows and cosines,
at about a third of the memory traffic for a tenant's scattered rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from recallql.index.quantized import candidates
from recallql.index.vectors import Segment, _candidates, matvec, refine


def segment_share(seg: Segment, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(local positions int64[k], rowids int64[k]) of the rows of ascending `rows` that
    segment `seg` holds."""
    a, b = np.searchsorted(rows, (seg.lo, seg.hi))
    inside = rows[a:b]
    if seg.explicit is None or not len(inside):
        return inside - seg.lo, inside
    pos = seg.positions(inside)
    held = (pos < len(seg.explicit))
    held[held] = seg.explicit[pos[held]] == inside[held]
    return pos[held], inside[held]


#: A segment's share of the rows is pre-scanned through its int8 copy when it holds more
#: than this many times the rows wanted (below, the candidates would be most of them).
PRESCAN_FACTOR = 4

#: Rows that lie in runs of consecutive rows at least this long on average (a session's rows,
#: written in order) are scored run by run on views of the file; shorter runs are gathered
#: into one array first (one copy, then one product).
RUN_ROWS = 32


def _scores(vecs: np.ndarray, local: np.ndarray, q32: np.ndarray) -> np.ndarray:
    """float32 ``vecs[local] @ q32`` for ascending positions `local`."""
    breaks = np.flatnonzero(np.diff(local) != 1) + 1
    if len(local) < RUN_ROWS * (len(breaks) + 1):
        return matvec(vecs[local], q32)
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [len(local)]])
    return np.concatenate([matvec(vecs[local[a]:local[b - 1] + 1], q32)
                           for a, b in zip(starts.tolist(), ends.tolist(), strict=True)])


def gathered_topn(segments: Sequence[Segment], query: np.ndarray, n: int, rows: np.ndarray,
                  ids: Sequence[str], skip: Callable[[str, np.ndarray], None] | None = None,
                  prescan: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-n over `rows`, ordered by (−cosine, item id).

    Args:
        segments: loaded segments.
        query: float64[dim], L2-normalised.
        n: rows wanted.
        rows: int64[m] ascending rowids (live, allowed, with a vector).
        ids: item id per rowid.
        skip: told ``(file, rowids)`` of rows whose stored vector is not finite (never
            returned).
        prescan: when given, ``[rows pre-scanned in int8, of them read in float32]`` is
            added to (for EXPLAIN).

    Returns:
        (rowids int64[k], cosine float32[k]), k = min(n, rows with a finite vector).
    """
    q32 = query.astype(np.float32)
    found: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    for no, seg in enumerate(segments):
        local, rowids = segment_share(seg, rows)
        if not len(local) or n <= 0:
            continue
        if seg.quantized is not None and len(local) > PRESCAN_FACTOR * n:
            pick = candidates(seg.quantized, query, n, local)
            if prescan is not None:
                prescan[0] += len(local)
                prescan[1] += len(pick)
            local, rowids = local[pick], rowids[pick]
        score = _scores(seg.vecs, local, q32)
        finite = np.isfinite(score)
        if not finite.all():
            if skip is not None:
                skip(seg.file, rowids[~finite])
            local, rowids, score = local[finite], rowids[finite], score[finite]
        keep = _candidates(score, n)
        found.append((no, local[keep], rowids[keep], score[keep]))
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    scores = np.concatenate([f[3] for f in found])
    seg_no = np.concatenate([np.full(len(f[1]), f[0], np.int32) for f in found])
    local = np.concatenate([f[1] for f in found])
    rowids = np.concatenate([f[2] for f in found])
    return refine(segments, query, n, ids, seg_no, local, rowids, scores)
