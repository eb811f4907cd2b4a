"""Small statistics for the benchmark tables: percentiles and paired per-query comparisons.

The paired tests compare two systems on the same queries:

- wins / ties / losses of system A against B on a per-query metric (ties: |a − b| ≤ 1e-9);
- the exact two-sided sign test over the non-tied queries (binomial, p = 0.5);
- a two-sided paired randomisation test of the mean difference (Smucker, Allan & Carterette,
  CIKM 2007): each query's difference has its sign flipped at random, `PERMUTATIONS` times,
  with a fixed seed so the tables are reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PERMUTATIONS = 20_000
TIE = 1e-9


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) of `samples`, linear interpolation (numpy's default)."""
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q))


@dataclass(frozen=True)
class Paired:
    """A paired comparison of A against B on one metric.

    Attributes:
        wins, ties, losses: queries where A is above, equal to, below B.
        mean_diff: mean of (A − B).
        p_sign: two-sided exact sign-test p-value (1.0 when every query ties).
        p_rand: two-sided paired randomisation-test p-value.
    """

    wins: int
    ties: int
    losses: int
    mean_diff: float
    p_sign: float
    p_rand: float

    def wtl(self) -> str:
        """``"wins/ties/losses"``."""
        return f"{self.wins}/{self.ties}/{self.losses}"


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial sign test of `wins` against `losses` (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def randomisation_test(diffs: np.ndarray, permutations: int = PERMUTATIONS,
                       seed: int = 8) -> float:
    """Two-sided p-value of the mean paired difference under random sign flips.

    Counts the observed assignment among the permutations ((hits + 1) / (n + 1)).
    """
    if not diffs.any():
        return 1.0
    rng = np.random.default_rng(seed)
    observed = abs(diffs.mean())
    signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, len(diffs)))
    means = np.abs((signs * diffs).mean(axis=1))
    hits = int(np.count_nonzero(means >= observed - 1e-12))
    return (hits + 1) / (permutations + 1)


def paired(a: Sequence[float], b: Sequence[float]) -> Paired:
    """Compare per-query scores `a` and `b` (same queries, same order).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(a) != len(b) or not a:
        raise ValueError("paired comparison needs two non-empty sequences of equal length")
    diffs = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    wins = int(np.count_nonzero(diffs > TIE))
    losses = int(np.count_nonzero(diffs < -TIE))
    diffs[np.abs(diffs) <= TIE] = 0.0
    return Paired(wins, len(diffs) - wins - losses, losses, float(diffs.mean()),
                  sign_test(wins, losses), randomisation_test(diffs))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (right-aligned numbers as given)."""
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
