"""Top-n ordering by (−score, item id) that reads item ids for ties only.

Both legs order their hits by score, ties broken by item id (SPEC §4.1). Reading an item id
decodes it from the id column (a few µs each); sorting every hit with an ``(−score, id)`` key
read ~200 ids per lexical leg and ~100 per semantic leg on every query. Here the hits are sorted
by score alone (stable), and only runs of equal scores look their ids up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
    if n <= 0 or len(scores) == 0:
        return []
    values = np.asarray(scores)
    order = np.argsort(-values, kind="stable")  # score descending, equal scores in input order
    ranked = values[order]
    if ranked.shape[0] > n:  # keep every hit tied with the n-th
        tail = np.flatnonzero(ranked[n:] != ranked[n - 1])
        end = n + (int(tail[0]) if tail.shape[0] else ranked.shape[0] - n)
        order, ranked = order[:end], ranked[:end]
    tied = np.flatnonzero(ranked[1:] == ranked[:-1])
    out = order.tolist()
    if tied.shape[0]:
        _break_ties(out, tied, tie_key)
    return out[:n]


def _break_ties(out: list[int], tied: np.ndarray, tie_key: Callable[[int], str]) -> None:
    """Sort each run of equal scores in `out` by `tie_key` (in place); `tied`: the positions
    i whose score equals the one at i + 1."""
    starts = tied[np.concatenate(([True], tied[1:] != tied[:-1] + 1))].tolist()
    ends = (tied[np.concatenate((tied[1:] != tied[:-1] + 1, [True]))] + 2).tolist()
    for a, b in zip(starts, ends, strict=True):
        out[a:b] = sorted(out[a:b], key=tie_key)
