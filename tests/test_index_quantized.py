"""recallql.index.quantized: an int8 pre-scan whose candidates always hold the exact top-n."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index.quantized import approximate_scores, candidates, quantize


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


def exact(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    return (vectors.astype(np.float64) @ query).astype(np.float32)


def test_quantised_rows_reconstruct_within_their_error():
    x = unit_rows(200, 32, 0)
    q = quantize(x)
    assert q.codes.dtype == np.int8 and q.codes.shape == x.shape
    back = q.codes * q.scale.astype(np.float64)[:, None]
    err = np.linalg.norm(x - back, axis=1)
    assert (err <= q.error).all()
    assert np.abs(q.codes).max() == 127  # each row uses its whole range


def test_the_bound_holds_for_every_row():
    x = unit_rows(3000, 64, 1)
    q = quantize(x)
    for seed in range(5):
        query = unit(unit_rows(1, 64, 100 + seed)[0])
        scores, bounds = approximate_scores(q, query)
        assert (np.abs(x.astype(np.float64) @ query - scores) <= bounds).all()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n", [1, 10, 100])
def test_candidates_hold_the_exact_top_n(seed, n):
    x = unit_rows(2000, 48, seed)
    # a query near one row, so that the top is dense with near-equal scores
    query = unit(x[seed] + 0.4 * unit_rows(1, 48, 50 + seed)[0])
    got = candidates(quantize(x), query, n)
    cos = exact(x, query)
    nth = np.sort(cos)[::-1][n - 1]
    must = np.flatnonzero(cos >= nth)  # the top-n and every row tied with the n-th
    assert set(must.tolist()) <= set(got.tolist())
    assert len(got) < len(x) // 2  # and it prunes


def test_ties_with_the_nth_score_are_all_candidates():
    base = unit_rows(1, 16, 3)[0]
    x = np.vstack([np.tile(base, (5, 1)), unit_rows(300, 16, 4)])
    got = candidates(quantize(x), base.astype(np.float64), 2)
    assert set(range(5)) <= set(got.tolist())


def test_small_and_empty_inputs():
    x = unit_rows(5, 8, 5)
    query = unit(x[0])
    assert candidates(quantize(x), query, 10).tolist() == [0, 1, 2, 3, 4]
    assert candidates(quantize(x), query, 0).tolist() == []
    empty = quantize(np.zeros((0, 8), np.float32))
    assert len(empty) == 0 and candidates(empty, query, 3).tolist() == []


def test_a_zero_row_is_scored_zero_within_bounds():
    x = np.vstack([np.zeros((1, 8), np.float32), unit_rows(3, 8, 6)])
    q = quantize(x)
    scores, bounds = approximate_scores(q, unit(x[1]))
    assert scores[0] == 0.0 and bounds[0] >= 0.0
