"""Scoring formulas (SPEC §4), as pure numpy functions shared by the operators and the tests.

All functions return new float64 arrays and never produce NaN or inf for finite inputs.
"""

from __future__ import annotations

import math
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
    share[present] = (weight / (k + rank[present].astype(np.float64))) / (total / (k + 1.0))
    return share


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


def context_credit(weight: float, before: np.ndarray, after: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Context credit of ordered items: `weight · max(rel(before), rel(after))`.

    The credit is added to the item's own relevance: a neighbour's match is a second piece of
    evidence, counted at `weight` (default 0.5: credit halves per step away from a match) of
    the same match made directly; it comes from the better neighbour only. The alternatives
    measured against it (dis_max, credit to the weaker item of a pair only, both neighbours
    summed, the item before only) are in benchmarks/FINDINGS.md ("Session 3").

    Args:
        weight: the context leg's weight, in [0, 1] (below a direct match).
        before, after: float64[m] the fused relevance of each row's previous / next item (NaN
            where there is none among the candidates).

    Returns:
        `(credit float64[m], side int8[m])`: the credit and which neighbour gave it (−1 before,
        +1 after, 0 none); ties go to the item before.
    """
    b = np.where(np.isnan(before), -np.inf, before)
    a = np.where(np.isnan(after), -np.inf, after)
    side = np.where(a > b, 1, -1).astype(np.int8)
    best = np.maximum(a, b)
    side[~np.isfinite(best)] = 0
    return np.where(np.isfinite(best), weight * best, 0.0), side


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
