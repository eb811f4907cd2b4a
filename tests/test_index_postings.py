"""recallql.index.postings: rowids by value of a dictionary-encoded column."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index import postings
from recallql.index.postings import ColumnPostings, Postings


def random_codes(n: int, n_codes: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_codes, n).astype(np.int32)
    codes[rng.random(n) < 0.1] = -1  # missing
    codes[rng.random(n) < 0.05] = -2  # "same as the base column" (derived columns)
    return codes


def test_rows_of_a_code_are_its_rowids_ascending():
    codes = np.array([2, 0, 2, -1, 1, 2, -2, 0], np.int32)
    p = Postings(codes, 3)
    assert p.rows(0).tolist() == [1, 7]
    assert p.rows(1).tolist() == [4]
    assert p.rows(2).tolist() == [0, 2, 5]
    assert [p.count(c) for c in range(3)] == [2, 1, 3]


def test_unknown_and_negative_codes_match_nothing():
    p = Postings(np.array([0, 0, 1], np.int32), 2)
    for code in (-1, -2, 2, 99):
        assert p.rows(code).tolist() == []
        assert p.count(code) == 0


def test_column_postings_equal_a_full_comparison():
    codes = random_codes(5000, 40)
    cp = ColumnPostings()
    for wanted in ([3], [0, 39], [5, 6, 7, 8], [], [40], [-1]):
        got = cp.rows(codes, 40, wanted)
        expected = np.flatnonzero(np.isin(codes, [w for w in wanted if w >= 0]))
        assert got.tolist() == expected.tolist(), wanted
        assert got.dtype == np.int64


def test_appended_rows_are_found_in_the_tail_and_after_a_rebuild(monkeypatch):
    monkeypatch.setattr(postings, "TAIL_ROWS", 100)
    codes = random_codes(3000, 12, seed=1)
    codes[:1000] %= 10  # the dictionary grows: codes 10 and 11 appear after row 1,000
    codes[:1000][codes[:1000] == 8] = -1
    cp = ColumnPostings()
    cp.rows(codes[:1000], 10, [1])
    base = cp._base
    assert base is not None and base.size == 1000
    # 200 more rows (tail ≤ max(100, 250)): the base is kept, the tail compared
    got = cp.rows(codes[:1200], 12, [1, 11])
    assert cp._base is base
    assert got.tolist() == np.flatnonzero(np.isin(codes[:1200], [1, 11])).tolist()
    # 2,000 more (tail > a quarter of the base): rebuilt over all rows
    got = cp.rows(codes, 12, [11])
    assert cp._base is not base and cp._base.size == 3000
    assert got.tolist() == np.flatnonzero(codes == 11).tolist()


def test_an_older_snapshot_sees_only_its_rows():
    codes = random_codes(2000, 5, seed=2)
    cp = ColumnPostings()
    cp.rows(codes, 5, [0])  # base over all 2,000 rows
    got = cp.rows(codes[:500], 5, [0])  # a snapshot taken earlier: 500 rows
    assert got.tolist() == np.flatnonzero(codes[:500] == 0).tolist()


@pytest.mark.parametrize("seed", range(5))
def test_random_growth_matches_comparison(seed, monkeypatch):
    monkeypatch.setattr(postings, "TAIL_ROWS", 50)
    rng = np.random.default_rng(seed)
    codes = random_codes(4000, 30, seed=seed)
    cp = ColumnPostings()
    size = 0
    while size < len(codes):
        size = min(len(codes), size + int(rng.integers(1, 400)))
        wanted = rng.choice(30, int(rng.integers(1, 4)), replace=False).tolist()
        got = cp.rows(codes[:size], 30, wanted)
        assert got.tolist() == np.flatnonzero(np.isin(codes[:size], wanted)).tolist()


def test_equality_and_in_filters_go_through_the_columns_postings():
    from recallql.index.columns import StrColumn
    from recallql.index.filters import Cmp, In, Not, filter_mask

    rng = np.random.default_rng(5)
    values = [None if x == 0 else f"t{x}" for x in rng.integers(0, 30, 5000)]
    column = StrColumn()
    column.extend(values[:4000])
    lookup = {"tenant": column}.__getitem__
    truth = np.array([v == "t7" for v in values[:4000]])
    assert np.array_equal(filter_mask(Cmp("tenant", "=", "t7"), lookup, 4000), truth)
    assert column.postings._base is not None and column.postings._base.size == 4000
    column.extend(values[4000:])  # the rows appended since are the tail
    for expr, want in [(Cmp("tenant", "=", "t7"), lambda v: v == "t7"),
                       (In("tenant", ("t3", "t29", "nope")), lambda v: v in ("t3", "t29")),
                       (Cmp("tenant", "=", "nope"), lambda v: False),
                       (Not(In("tenant", ("t3",))), lambda v: v is not None and v != "t3")]:
        mask = filter_mask(expr, lookup, 5000)
        assert np.array_equal(mask, np.array([bool(want(v)) for v in values])), expr
