"""Top-n ordering by (−score, item id) that reads item ids for ties only.

Both legs order their hits by score, ties broken by item id (SPEC §4.1). Reading an item id
decodes it from the id column (a few µs each); sorting every hit with an ``(−score, id)`` key
read ~200 ids per lexical leg and ~100 per semantic leg on every query. Here the hits are sorted
by score alone (stable), and only runs of equal scores look their ids up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import groupby

import numpy as np


def top_by_score(scores: Sequence[float] | np.ndarray, n: int,
                 tie_key: Callable[[int], str]) -> list[int]:
    """Positions of the `n` best scores, ordered by (−score, ``tie_key(position)``).

    Equal to ``sorted(range(len(scores)), key=lambda i: (-scores[i], tie_key(i)))[:n]`` for
    scores without NaN, calling `tie_key` only for positions whose score equals another's among
    the first `n` (and those tied with the n-th).

    Args:
        scores: one score per hit.
        n: positions wanted (≥ 0).
        tie_key: the tie-break key of a position (its item id).
    """
    values = scores.tolist() if isinstance(scores, np.ndarray) else list(scores)
    if n <= 0 or not values:
        return []
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    if len(order) > n:
        end, cut = n, values[order[n - 1]]
        while end < len(order) and values[order[end]] == cut:
            end += 1
        order = order[:end]
    out: list[int] = []
    for _, run in groupby(order, key=values.__getitem__):
        tied = list(run)
        if len(tied) > 1:
            tied.sort(key=tie_key)
        out.extend(tied)
    return out[:n]
