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
