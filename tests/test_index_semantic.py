"""recallql.index.semantic: exact or ANN per statement, the same cosines either way."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index import semantic
from recallql.index.ann import AnnGraph, AnnParams
from recallql.index.quantized import quantize
from recallql.index.semantic import VectorPart, choose, search
from recallql.index.vectors import Segment, semantic_topn

DIM = 16


def unit_rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


SIZES = (1500, 1200, 300)  # rows of three contiguous segments


@pytest.fixture(scope="module")
def data():
    vecs = unit_rows(sum(SIZES), 0)
    segs, lo = [], 0
    for k, size in enumerate(SIZES):
        segs.append(Segment(f"s{k}.npy", lo, lo + size, vecs[lo:lo + size]))
        lo += size
    graphs = [AnnGraph.build(s.rowids, s.vecs, AnnParams(dtype="i8")) for s in segs[:2]]
    ids = [f"id{r:05d}" for r in range(len(vecs))]
    return vecs, segs, graphs, ids


def parts(data, graphs=True, quantized=False):
    vecs, segs, gs, _ = data
    return [VectorPart(s, gs[k] if graphs and k < len(gs) else None,
                       quantize(s.vecs) if quantized else None) for k, s in enumerate(segs)]


def reference(data, query, n, eligible):
    _, segs, _, ids = data
    return semantic_topn(segs, query, n, eligible, ids)


@pytest.mark.parametrize("quantized", [False, True])
def test_exact_equals_the_full_scan(data, quantized):
    vecs, _, _, ids = data
    eligible = np.ones(len(vecs), bool)
    eligible[::3] = False
    for seed in range(5):
        query = unit(unit_rows(1, 10 + seed)[0])
        rowids, cos, stats = search(parts(data, quantized=quantized), query, 50, eligible, ids,
                                    "exact")
        want_rows, want_cos = reference(data, query, 50, eligible)
        assert rowids.tolist() == want_rows.tolist()
        assert np.array_equal(cos, want_cos)
        assert stats.method == "exact" and stats.scanned == int(eligible.sum())
        if quantized:
            assert 50 <= stats.rescored < stats.scanned


def test_auto_scans_a_selective_filter_exactly(data):
    vecs, _, _, ids = data
    eligible = np.zeros(len(vecs), bool)
    eligible[100:400] = True
    query = unit(vecs[250])
    rowids, cos, stats = search(parts(data), query, 10, eligible, ids)
    assert stats.method == "exact" and "300 eligible rows" in stats.why
    assert rowids.tolist() == reference(data, query, 10, eligible)[0].tolist()


def test_ann_returns_exact_cosines_and_finds_the_top(data, monkeypatch):
    monkeypatch.setattr(semantic, "EXACT_MAX_ROWS", 100)
    vecs, _, _, ids = data
    eligible = np.ones(len(vecs), bool)
    hits = 0
    for seed in range(10):
        query = unit(vecs[seed * 250] + 0.3 * unit_rows(1, 40 + seed)[0])
        rowids, cos, stats = search(parts(data), query, 10, eligible, ids)
        assert stats.method == "ann+exact"  # the third segment has no graph
        assert np.array_equal(cos, (vecs[rowids].astype(np.float64) @ query).astype(np.float32))
        assert (np.diff(cos) <= 0).all()
        hits += len(set(rowids.tolist()) & set(reference(data, query, 10, eligible)[0].tolist()))
    assert hits >= 95  # recall@10 over 10 queries


def test_a_filtered_ann_search_that_under_fills_scans_instead(data):
    vecs, _, _, ids = data
    query = unit(vecs[0])
    far = np.argsort(vecs.astype(np.float64) @ query)[:5]  # least like the query
    eligible = np.zeros(len(vecs), bool)
    eligible[far] = True
    rowids, cos, stats = search(parts(data), query, 10, eligible, ids, "ann")
    assert rowids.tolist() == reference(data, query, 10, eligible)[0].tolist()
    assert stats.fallbacks >= 1 and stats.method == "ann+exact"


def test_ties_across_segments_are_broken_by_item_id():
    v = unit_rows(1, 7)
    segs = [Segment("a", 0, 3, np.repeat(v, 3, axis=0)), Segment("b", 3, 6, np.repeat(v, 3, 0))]
    ids = ["f", "e", "d", "c", "b", "a"]
    rowids, _, _ = search([VectorPart(s) for s in segs], unit(v[0]), 4, np.ones(6, bool), ids)
    assert rowids.tolist() == [5, 4, 3, 2]


def test_choose_explains_itself():
    assert choose(10, 0) == ("exact", "no segment has an ANN index (too few rows)")
    assert choose(5000, 10**6) == ("exact", "5,000 eligible rows ≤ 20,000: scanned exactly")
    assert choose(10**6, 10**6)[0] == "ann"
    assert choose(10**6, 10**6, "exact") == ("exact", "USING SEMANTIC (exact)")
    with pytest.raises(ValueError, match="method must be one of"):
        choose(1, 1, "fast")
