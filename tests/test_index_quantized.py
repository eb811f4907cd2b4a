"""recallql.index.quantized: an int8 pre-scan whose candidates always hold the exact top-n."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index.quantized import approximate_scores, candidates, pack, quantize, unpack


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


def test_gathered_scan_through_int8_copies_equals_the_float32_scan():
    """`gather.gathered_topn` pre-scanning each segment through its int8 copy returns the
    same rows and cosines as without the copies, on scattered rows (a tenant's)."""
    from recallql.index.gather import gathered_topn
    from recallql.index.vectors import Segment

    x = unit_rows(6000, 24, 9)
    x[4000:] = x[:2000] * 0.5 + x[4000:] * 0.5  # near-duplicates: a dense top
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    plain = [Segment("a", 0, 3500, x[:3500]), Segment("b", 3500, 6000, x[3500:])]
    copied = [Segment(s.file, s.lo, s.hi, s.vecs, quantized=quantize(s.vecs)) for s in plain]
    ids = [f"r{j:05d}" for j in range(6000)]
    rows = np.arange(3, 6000, 7, dtype=np.int64)
    for seed in range(6):
        query = unit(x[rows[seed * 50]] + 0.3 * unit_rows(1, 24, 70 + seed)[0])
        for n in (1, 10, 100):
            want = gathered_topn(plain, query, n, rows, ids)
            counts = [0, 0]
            got = gathered_topn(copied, query, n, rows, ids, prescan=counts)
            assert got[0].tolist() == want[0].tolist()
            assert got[1].tolist() == want[1].tolist()
            shares = [500, 357]  # rows of `rows` in a and b; pre-scanned above 4·n rows
            assert counts[0] == sum(m for m in shares if m > 4 * n)
            assert n <= counts[1] < counts[0] // 2


def test_a_damaged_row_meets_the_gathered_pre_scan_and_is_reported():
    """A row whose float32 vector turned non-finite after its copy was written is still a
    candidate where its copy says so, and the float32 re-score reports it; a row non-finite
    when quantised is a candidate of every pre-scan."""
    from recallql.index.gather import gathered_topn
    from recallql.index.vectors import Segment

    x = unit_rows(2000, 16, 11)
    damaged = x.copy()
    damaged[10, 0] = np.nan
    bad_at_build = x.copy()
    bad_at_build[20, 3] = np.inf
    ids = [f"r{j:05d}" for j in range(2000)]
    rows = np.arange(2000, dtype=np.int64)
    for vecs, copy_of, bad in ((damaged, x, 10), (bad_at_build, bad_at_build, 20)):
        seg = Segment("s", 0, 2000, vecs, quantized=quantize(copy_of))
        told: list = []
        query = unit(x[bad])
        got = gathered_topn([seg], query, 5, rows, ids, skip=lambda f, r, told=told: told.append(r))
        assert bad not in got[0].tolist() and len(got[0]) == 5
        assert [r.tolist() for r in told] == [[bad]]
        assert np.isinf(quantize(bad_at_build).error[20])


def test_candidates_of_some_rows_in_blocks_equal_those_of_the_gathered_rows():
    x = unit_rows(3000, 32, 12)
    q = unpack(pack(quantize(x)))  # as stored: views of one packed array
    rows = np.arange(1, 3000, 3, dtype=np.int64)
    query = unit(x[100] + 0.2 * unit_rows(1, 32, 13)[0])
    want = candidates(quantize(x[rows]), query, 20)
    assert candidates(q, query, 20, rows, block=64).tolist() == want.tolist()
    assert candidates(q, query, 2000, rows).tolist() == list(range(len(rows)))
