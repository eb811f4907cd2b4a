"""The total order of result rows (SPEC §4.7).

`(−score, −best_cosine, −best_bm25, doc_id, position, item id)`: `best_cosine` is the best cosine
over the plan's semantic-kind legs and `best_bm25` the best BM25 over its lexical-kind legs; a
row absent from every leg of a kind sorts after rows present in one at equal score. Pagination
slices this order after fusion, boosts and grouping, so concatenating pages gives the unpaged
list.
"""

from __future__ import annotations

import numpy as np

from recallql.engine.candidates import Candidates
from recallql.engine.plan import LegKind


def _neg_or_inf(values: np.ndarray) -> np.ndarray:
    """−x, with NaN (absent) mapped to +inf so absent sorts last."""
    return np.where(np.isnan(values), np.inf, -values)


def total_order(cands: Candidates, score: np.ndarray, need: int | None = None) -> np.ndarray:
    """Positions of `cands` in the total order, best first.

    Item ids and doc ids are ranked among the rows being ordered only (their relative order is
    all the sort needs), and only those rows' strings are read.

    Args:
        cands: the candidates (their features give doc ids, positions and item ids).
        score: float64[m], their scores.
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
    numeric = (
        _neg_or_inf(cands.best(LegKind.LEXICAL)[idx]),
        _neg_or_inf(cands.best(LegKind.SEMANTIC)[idx]),
        -score[idx],
    )
    order = np.lexsort(numeric)
    if not _tied(numeric, order):  # the numeric keys alone give the whole order
        return idx[order]
    feat = cands.features
    keys = (
        _str_rank(feat.ids.take(idx).tolist()),
        feat.positions[idx],
        _str_rank(feat.doc_ids.take(idx).tolist()),
        *numeric,
    )
    return idx[np.lexsort(keys)]


def _tied(keys: tuple[np.ndarray, ...], order: np.ndarray) -> bool:
    """Whether two rows, in `order`, are equal on every key (a tie the later keys break)."""
    if order.shape[0] < 2:
        return False
    same = np.ones(order.shape[0] - 1, dtype=bool)
    for key in keys:
        ranked = key[order]
        same &= ranked[1:] == ranked[:-1]
    return bool(same.any())


def _str_rank(values: list[str]) -> np.ndarray:
    """int64 ranks of strings in Python string (code-point) order, equal strings sharing a rank
    (as `CollectionSnapshot.id_rank` ranks item ids)."""
    rank = {v: i for i, v in enumerate(sorted(set(values)))}
    return np.fromiter(map(rank.__getitem__, values), np.int64, len(values))
