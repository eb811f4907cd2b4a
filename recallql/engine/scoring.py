"""Scoring formulas (SPEC §4), as pure numpy functions shared by the operators and the tests.

All functions return new float64 arrays and never produce NaN or inf for finite inputs.
"""

from __future__ import annotations

import math
import sys
from enum import StrEnum

import numpy as np

from recallql.index.timestamps import SECONDS_PER_DAY


class DecayShape(StrEnum):
    """Decay function shapes, as Elasticsearch's `exp`, `gauss` and `linear` decay functions with
    `offset = 0`, `scale = half_life` and `decay = 0.5` (Elasticsearch reference, "Function score
    query: decay functions")."""

    EXP = "exp"
    GAUSS = "gauss"
    LINEAR = "linear"


def rrf_share(rank: np.ndarray, k: float, total: float = 1.0, weight: float = 1.0
              ) -> np.ndarray:
    """A leg's share of the normalised, weighted RRF relevance.

    RRF (Cormack, Clarke & Büttcher, SIGIR 2009): `rrf(d) = Σ_legs w_leg/(k + rank_leg(d))` with
    1-based ranks and weights `w ≥ 0` (default 1). recallql normalises by the best possible sum,
    `W/(k + 1)` with `W = Σ_legs w_leg`, so a row ranked first by every leg has relevance exactly
    1.0 (SPEC §4.2). The share of one leg is `(w/(k + rank)) / (W/(k + 1))`; a rank of 0 means
    "absent from this leg" and gives 0. With every weight 1, `W = L` (the number of legs) and
    the share is `(1/(k + rank)) / (L/(k + 1))`, bit for bit. When `W = 0` every share is 0.
    When `W/(k + 1)` or a numerator `w/(k + rank)` is below the smallest normal float (a tiny
    weight such as 5e-324, or a tiny weight over a huge k) the quotient would be 0/0 or lose
    its digits; the share is then computed as `(w/W) · ((k + 1)/(k + rank))`, the same number
    in exact arithmetic, whose factors are both in [0, 1].

    Args:
        rank: int[m], 1-based ranks, 0 where the row is absent from the leg.
        k: the RRF constant, > 0.
        total: W, the sum of the weights of the plan's legs (L, the number of legs, with unit
            weights).
        weight: this leg's weight w, ≥ 0.

    Returns:
        float64[m] in [0, w/W].
    """
    rank = np.asarray(rank)
    share = np.zeros(rank.shape, dtype=np.float64)
    if total <= 0.0:
        return share
    present = rank > 0
    ranks = rank[present].astype(np.float64)
    scale = total / (k + 1.0)
    if scale < _SMALLEST_NORMAL or (ranks.size and 0.0 < weight / (k + float(ranks.max()))
                                    < _SMALLEST_NORMAL):
        share[present] = (weight / total) * ((k + 1.0) / (k + ranks))
    else:
        share[present] = (weight / (k + ranks)) / scale
    return share


#: The smallest positive normal float64; below it a quotient loses digits (or is 0).
_SMALLEST_NORMAL = sys.float_info.min


#: Theoretical minimum of a leg's raw score, by leg kind (Bruch et al.'s TMM normalisation):
#: BM25 is ≥ 0, cosine similarity ≥ −1.
THEORETICAL_MIN = {"lexical": 0.0, "semantic": -1.0}
#: The raw score of an eligible row that a leg kind does not match, where there is one: BM25 of
#: a row holding no query term is 0. (Every eligible row has a cosine, so a semantic leg with
#: fewer rows than its window holds them all and its lowest score is already theirs.)
NO_MATCH_SCORE = {"lexical": 0.0}


def score_bounds(scores: np.ndarray, theoretical_min: float | None = None) -> tuple[float, float]:
    """`(lo, hi)` of a leg's raw scores for min-max normalisation: the lowest and highest score
    in its window, or, with `theoretical_min` (TMM), that minimum and the highest score.

    Args:
        scores: float64[m], the leg's raw scores (m ≥ 0).
        theoretical_min: the leg kind's lowest possible score (TMM), or the score of the
            non-matching rows that fill the rest of a window the leg did not fill (min-max of
            a lexical leg holding every match: 0), or None for min-max over the scores.

    Returns:
        `(lo, hi)`; `(nan, nan)` for an empty leg.
    """
    if scores.shape[0] == 0:
        return math.nan, math.nan
    hi = float(scores.max())
    lo = float(scores.min()) if theoretical_min is None else min(theoretical_min, hi)
    return lo, hi


def normalised(scores: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """`φ(s) = (s − lo)/(hi − lo)` in [0, 1] (Bruch, Gai & Ingber, TOIS 2023); when every score
    of the leg is equal (`hi = lo`) each is the leg's best and `φ = 1`; NaN (absent) stays NaN.

    Args:
        scores: float64[m] raw scores, NaN where the row is absent from the leg.
        lo, hi: the bounds (`score_bounds`).

    Returns:
        float64[m].
    """
    scores = np.asarray(scores, dtype=np.float64)
    if not hi > lo:
        return np.where(np.isnan(scores), np.nan, 1.0)
    return (scores - lo) / (hi - lo)


def convex_share(norm: np.ndarray, total: float, weight: float = 1.0) -> np.ndarray:
    """A leg's share of the convex combination `Σ_legs w·φ / W` (W = Σ w over the direct legs;
    with two legs of weights 1 − α and α this is Bruch et al.'s `α·φ_sem + (1 − α)·φ_lex`).

    The share is `(w / W) · φ`; an absent row (NaN) gets 0; when `W = 0` every share is 0. A row
    at the top of every leg has relevance `Σ w/W = 1` (up to rounding of the division).

    Args:
        norm: float64[m] normalised scores φ, NaN where absent.
        total: W.
        weight: this leg's w ≥ 0.

    Returns:
        float64[m] in [0, w/W].
    """
    norm = np.asarray(norm, dtype=np.float64)
    if total <= 0.0:
        return np.zeros(norm.shape, dtype=np.float64)
    return np.where(np.isnan(norm), 0.0, (weight / total) * norm)


def context_credit(weight: float, doc: np.ndarray, place: np.ndarray, relevance: np.ndarray,
                   giver: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Context credit of ordered items: `max over candidates c of weight^d(c) · rel(c)`.

    Credit halves per step away from a match (weight 0.5): an item gets `weight^d` of the fused
    relevance of a direct candidate `d` eligible items away in its document, from the candidate
    for which that is largest — an exponential kernel over the distance in the document, as in
    proximity models of passage retrieval. The credit is added to the item's own relevance: a
    neighbour's match is a second piece of evidence, counted at `weight^d` of the same match
    made directly. The alternatives measured (dis_max, credit to the weaker item of a pair only,
    both neighbours summed, the item before only, the nearest item only) are in
    benchmarks/FINDINGS.md ("Session 3").

    Args:
        weight: the context leg's weight, in [0, 1] (below a direct match).
        doc, place: int64[m] each row's document code (−1: none) and place among the eligible
            items in document order (`Neighbours.places`).
        relevance: float64[m] the rows' fused relevance (without boosts or credit).
        giver: bool[m] the rows that are direct candidates (only they give credit).

    Returns:
        `(credit float64[m], source int64[m], distance int64[m])`: the credit, the row that gave
        it (−1: none) and its distance d (0: none). Ties go to the nearer item, then to the
        item before.
    """
    m = doc.shape[0]
    credit, source, distance = np.zeros(m), np.full(m, -1, np.int64), np.zeros(m, np.int64)
    order = np.lexsort((place, doc))
    order = order[doc[order] >= 0]
    if not order.shape[0]:
        return credit, source, distance
    at, rel, gives = place[order], relevance[order], giver[order]
    lo, hi = _documents(doc[order])
    rows = np.arange(order.shape[0])
    if 0.0 <= weight < 1.0 and int((hi - lo).sum()) > 2 * (2 * BAND + 1) * rows.shape[0]:
        first, last = np.maximum(lo, rows - BAND), np.minimum(hi, rows + BAND + 1)
        i, j, value, d = _best_givers(float(weight), rows, first, last, at, rel, gives)
        again = _beyond(float(weight), (first > lo) | (last < hi), i, value, doc[order], at,
                        rel[gives])
        if again.shape[0]:  # these rows' best giver may lie beyond the band: every pair
            held = ~np.isin(i, again)
            more = _best_givers(float(weight), again, lo[again], hi[again], at, rel, gives)
            i, j, value, d = (np.concatenate([x[held], y]) for x, y in
                              zip((i, j, value, d), more, strict=True))
    else:
        i, j, value, d = _best_givers(float(weight), rows, lo, hi, at, rel, gives)
    a, b = order[i], order[j]
    credit[a], source[a], distance[a] = value, b, d
    return credit, source, distance


#: When a statement's candidates make more than twice as many same-document pairs as pairs
#: with the `BAND` rows on each side of each row (in place order), `context_credit` pairs
#: each row with those first: a document of m candidates has m² pairs (10,000 for a session's
#: 100 rows in one document), and a row's best giver is nearly always one of the nearest.
BAND = 8


def _documents(doc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int64[m] each: each position's document as the range `[lo, hi)` of the sorted `doc`."""
    m = doc.shape[0]
    starts = np.flatnonzero(_starts(doc))
    sizes = np.empty_like(starts)
    sizes[:-1] = starts[1:] - starts[:-1]
    sizes[-1] = m - starts[-1]
    lo = np.repeat(starts, sizes)
    return lo, lo + np.repeat(sizes, sizes)


def _best_givers(weight: float, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 at: np.ndarray, rel: np.ndarray, gives: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each of the ascending positions `rows` that has a giver among positions `[lo, hi)`
    (its own excluded), the best one (`_best_pairs`): positions `(i, j)`, value and distance."""
    width = hi - lo
    i = np.repeat(rows, width)
    j = np.repeat(lo - np.cumsum(width) + width, width) + np.arange(i.shape[0])
    keep = (i != j) & gives[j]
    i, j = i[keep], j[keep]
    if not i.shape[0]:
        return i, j, rel[:0], i
    pi, pj = at[i], at[j]
    d = np.abs(pi - pj)
    value = _powers(weight, d) * rel[j]
    first = _best_pairs(i, value, d, pj > pi)
    return i[first], j[first], value[first], d[first]


def _beyond(weight: float, partial: np.ndarray, i: np.ndarray, value: np.ndarray,
            doc: np.ndarray, at: np.ndarray, given: np.ndarray) -> np.ndarray:
    """The positions of `partial` rows (not paired with their whole document) whose best pair
    within the band (`i`, `value`) may be beaten or tied beyond it: every pair beyond is at
    least `BAND + 1` places away (places strictly increase in a document), so its value is at
    most `weight^(BAND+1)` times the largest relevance a candidate gives (`given`)."""
    if not partial.any():
        return np.zeros(0, np.int64)
    if (np.diff(at)[doc[1:] == doc[:-1]] <= 0).any():  # the distance bound does not hold
        return np.flatnonzero(partial)
    top = max(float(given.max()), 0.0) if given.shape[0] else 0.0  # NaN: no bound
    bound = float(np.power(weight, BAND + 1)) * top * (1.0 + 1e-9)
    partial = partial.copy()
    partial[i[value > bound]] = False
    return np.flatnonzero(partial)


def _powers(base: float, exponent: np.ndarray) -> np.ndarray:
    """`np.power(base, exponent)` for int64 exponents ≥ 0, read from a table of the powers up to
    the largest exponent when that is shorter (the same ufunc call on an array, so the same
    values bit for bit; pow is the costly part of many pairs at few distances)."""
    top = int(exponent.max())
    if top + 1 >= exponent.shape[0]:
        return np.power(base, exponent)
    return np.power(base, np.arange(top + 1, dtype=np.int64))[exponent]


def _starts(keys: np.ndarray) -> np.ndarray:
    """bool[n]: where a run of equal values of the grouped `keys` starts (n ≥ 1)."""
    start = np.empty(keys.shape[0], dtype=bool)
    start[0] = True
    np.not_equal(keys[1:], keys[:-1], out=start[1:])
    return start


def _best_pairs(a: np.ndarray, value: np.ndarray, d: np.ndarray, after: np.ndarray
                ) -> np.ndarray:
    """For each row of `a` (pairs grouped by row, n ≥ 1), the position of its best pair: the
    largest `value` (NaN below every number), then the smallest distance `d` (≥ 0), then the
    giver before the row (`after` False), then the first such pair — the head of each row's
    group in a stable sort by `(a, −value, d, after)`, found by per-group reductions instead
    of a sort."""
    start = _starts(a)
    starts = np.flatnonzero(start)
    group = np.cumsum(start) - 1
    best = np.fmax.reduceat(value, starts)[group]  # NaN only where a group is all NaN
    tie = value == best
    if np.isnan(best).any():
        tie |= np.isnan(value) & np.isnan(best)
    key = np.where(tie, 2 * d + after, _NO_KEY)  # (d, after) in one integer: d ≥ 0
    hits = np.flatnonzero(key == np.minimum.reduceat(key, starts)[group])
    return hits[_starts(group[hits])]


_NO_KEY = np.iinfo(np.int64).max


def decay(age_days: np.ndarray, half_life_days: float, shape: DecayShape) -> np.ndarray:
    """The decay factor `f(age)` in [0, 1], with `f(0) = 1` and `f(half_life) = 0.5`.

    - EXP: `0.5^(age/half_life)` — a true half-life.
    - GAUSS: `0.5^((age/half_life)^2)` — Elasticsearch's `exp(-age²/(2σ²))` with
      `σ² = -half_life²/(2·ln 0.5)`.
    - LINEAR: `max(0, 1 - age/(2·half_life))` — Elasticsearch's `(s - age)/s` with
      `s = half_life/(1 - 0.5)`.

    Args:
        age_days: float64[m], ages in days, ≥ 0 (callers clamp future dates to 0).
        half_life_days: > 0, in days.
        shape: the decay shape.

    Returns:
        float64[m].
    """
    with np.errstate(over="ignore"):  # a tiny half-life: x = inf, whose limits are exact (0)
        x = np.asarray(age_days, dtype=np.float64) / half_life_days
        if shape is DecayShape.EXP:
            return np.exp2(-x)
        if shape is DecayShape.GAUSS:
            return np.exp2(-(x * x))
        return np.maximum(0.0, 1.0 - x / 2.0)


def saturate(x: np.ndarray | float) -> np.ndarray | float:
    """`x/(x+1)` for `x ≥ 0`; negative, NaN or missing values count as 0 (SPEC §4.3, §4.4).

    `+inf` (a sum that overflowed) gives the limit, 1.0: the most-signalled entity must not
    count as unsignalled.
    """
    if isinstance(x, np.ndarray):
        positive = ~np.isnan(x) & (x > 0)
        finite = np.where(positive & np.isfinite(x), x, 0.0)
        return np.where(np.isposinf(x), 1.0, finite / (finite + 1.0))
    if x is None or math.isnan(x) or x <= 0:
        return 0.0
    if math.isinf(x):
        return 1.0
    return x / (x + 1.0)


def recency_boost(
    created_at: np.ndarray,
    now_ts: float,
    weight: float,
    half_life_days: float,
    shape: DecayShape,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The recency boost `weight · f(age)` with `age = max(0, now − field)` in days (SPEC §4.5).

    Args:
        created_at: float64[m], epoch seconds UTC; NaN where the date is missing.
        now_ts: "now" in epoch seconds UTC.
        weight: ≥ 0; 0 gives exact zeros (the kill switch).
        half_life_days: > 0.
        shape: decay shape.

    Returns:
        `(boost, age_days, future, missing)`: float64[m] boosts (0 for missing dates), float64[m]
        ages in days (NaN for missing), bool[m] future dates clamped to age 0, bool[m] missing.
    """
    created_at = np.asarray(created_at, dtype=np.float64)
    missing = ~np.isfinite(created_at)
    raw_age = (now_ts - np.where(missing, now_ts, created_at)) / SECONDS_PER_DAY
    future = (raw_age < 0) & ~missing
    age = np.maximum(raw_age, 0.0)
    boost = np.where(missing, 0.0, weight * decay(age, half_life_days, shape))
    return boost, np.where(missing, np.nan, age), future, missing
