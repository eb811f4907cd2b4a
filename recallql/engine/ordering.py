"""The total order of result rows (SPEC §4.7).

`(−score, −best_cosine, −best_bm25, doc_id, position, item id)`: a row absent from a leg sorts
after rows present in it at equal score. Pagination slices this order after fusion, boosts and
grouping, so concatenating pages gives the unpaged list.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recallql.engine.candidates import Candidates


def _neg_or_inf(values: np.ndarray) -> np.ndarray:
    """−x, with NaN (absent) mapped to +inf so absent sorts last."""
    return np.where(np.isnan(values), np.inf, -values)


def total_order(
    cands: Candidates,
    score: np.ndarray,
    doc_ids: Sequence[str],
    positions: np.ndarray,
    ids: Sequence[str],
    need: int | None = None,
) -> np.ndarray:
    """Positions of `cands` in the total order, best first.

    Item ids are ranked among the rows being ordered only (their relative order is all the
    sort needs): ranking every id of the collection cost ~60 ms at 100k rows on the first query
    after each ingest, since every batch makes a new snapshot.

    Args:
        cands: the candidates.
        score: float64[m], their scores.
        doc_ids: the collection's doc ids indexed by rowid.
        positions: int64[size], chunk positions indexed by rowid.
        ids: the collection's item ids indexed by rowid.
        need: when given, only the first `need` positions must be exact; rows that cannot reach
            the head (strictly below the `need`-th best score) are left out, which keeps large
            candidate sets cheap. Ties at the cut are kept and ordered.

    Returns:
        int64[m'] positions into `cands`.
    """
    m = len(cands)
    idx = np.arange(m)
    if need is not None and m > 4 * max(need, 1):
        kth = np.partition(score, m - need)[m - need]
        idx = np.flatnonzero(score >= kth)
    rowids = cands.rowid[idx]
    doc_rank = _doc_rank([doc_ids[r] for r in rowids])
    keys = (
        _id_rank([ids[r] for r in rowids]),
        positions[rowids],
        doc_rank,
        _neg_or_inf(cands.bm25[idx]),
        _neg_or_inf(cands.cosine[idx]),
        -score[idx],
    )
    return idx[np.lexsort(keys)]


def _doc_rank(doc_ids: list[str]) -> np.ndarray:
    """int64 ranks of strings in code-point order (equal strings share a rank)."""
    if not doc_ids:
        return np.zeros(0, dtype=np.int64)
    _, inverse = np.unique(np.asarray(doc_ids, dtype=object).astype(str), return_inverse=True)
    return inverse.astype(np.int64)


def _id_rank(ids: list[str]) -> np.ndarray:
    """int64 ranks of item ids in Python string (code-point) order, equal ids sharing a rank,
    as `CollectionSnapshot.id_rank` ranks them."""
    rank = {v: i for i, v in enumerate(sorted(set(ids)))}
    return np.fromiter((rank[v] for v in ids), np.int64, len(ids))
