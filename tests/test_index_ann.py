"""recallql.index.ann: the HNSW graph (usearch) and its exactly re-scored candidates."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index.ann import (
    MAX_CANDIDATES,
    AnnGraph,
    AnnParams,
    ann_candidates,
    exact_cosines,
)
from recallql.index.errors import StoreError

DIM = 16


def unit_rows(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def exact_top(vectors: np.ndarray, query: np.ndarray, n: int) -> list[int]:
    return np.argsort(-(vectors.astype(np.float64) @ query), kind="stable")[:n].tolist()


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    return unit_rows(2000)


@pytest.fixture(scope="module")
def graph(rows) -> AnnGraph:
    return AnnGraph.build(np.arange(len(rows)), rows, AnnParams(dtype="f32"))


def query_near(rows: np.ndarray, row: int, seed: int = 1) -> np.ndarray:
    q = rows[row].astype(np.float64) + 0.3 * unit_rows(1, seed)[0]
    return q / np.linalg.norm(q)


def test_search_returns_rowids_nearest_first(rows, graph):
    q = query_near(rows, 7)
    found = graph.search(q.astype(np.float32), 10, ef=256)
    assert found.tolist() == exact_top(rows, q, 10)


def test_keys_are_rowids_not_positions():
    vecs = unit_rows(50, seed=3)
    rowids = np.arange(50, dtype=np.int64) * 7 + 1000
    g = AnnGraph.build(rowids, vecs, AnnParams(dtype="f32"))
    assert g.search(vecs[5], 1).tolist() == [1035]
    assert 1035 in g and 1036 not in g
    assert len(g) == 50


def test_each_dtype_finds_the_query_row_itself(rows):
    for dtype in ("f32", "f16", "i8"):
        g = AnnGraph.build(np.arange(500), rows[:500], AnnParams(dtype=dtype))
        assert g.params.dtype == dtype
        assert g.search(rows[42], 1, ef=200).tolist() == [42], dtype


def test_incremental_add_equals_one_build(rows):
    g = AnnGraph.new(DIM, AnnParams(dtype="f32"))
    for start in range(0, 1000, 250):
        g.add(np.arange(start, start + 250), rows[start:start + 250])
    assert len(g) == 1000
    q = query_near(rows, 500)
    assert g.search(q.astype(np.float32), 10, ef=256).tolist() == exact_top(rows[:1000], q, 10)


def test_save_then_open_as_view_searches_the_same(tmp_path, rows, graph):
    path = tmp_path / "g.usearch"
    graph.save(path)
    assert not path.with_name("g.usearch.tmp").exists()
    view = AnnGraph.open(path)
    assert not view.writable and len(view) == len(graph)
    q = query_near(rows, 11).astype(np.float32)
    assert view.search(q, 20, ef=128).tolist() == graph.search(q, 20, ef=128).tolist()
    assert view.params.dtype == "f32" and view.params.connectivity == 16


def test_a_view_is_read_only_and_its_copy_is_writable(tmp_path, rows, graph):
    path = tmp_path / "g.usearch"
    graph.save(path)
    view = AnnGraph.open(path)
    extra = unit_rows(1, seed=9)
    with pytest.raises(StoreError, match="read-only"):
        view.add(np.array([5000]), extra)
    with pytest.raises(StoreError, match="read-only"):
        view.remove(np.array([1]))
    writable = view.copy()
    writable.add(np.array([5000]), extra)
    assert writable.search(extra[0], 1).tolist() == [5000]
    assert len(view) == len(graph)  # the view and its file are unchanged
    assert len(AnnGraph.open(path)) == len(graph)


def test_open_for_writing_then_add(tmp_path, rows, graph):
    path = tmp_path / "g.usearch"
    graph.save(path)
    loaded = AnnGraph.open(path, view=False)
    assert loaded.writable
    loaded.add(np.arange(2000, 2010), unit_rows(10, seed=4))
    assert len(loaded) == 2010


def test_removed_rows_are_never_returned(rows):
    g = AnnGraph.build(np.arange(300), rows[:300], AnnParams(dtype="f32"))
    assert g.remove(np.array([42, 43, 99999])) == 2
    assert len(g) == 298
    assert 42 not in g
    assert 42 not in g.search(rows[42], 20).tolist()


def test_bad_rows_are_refused(graph):
    g = AnnGraph.new(DIM)
    with pytest.raises(ValueError, match=r"float32\[m, 16\]"):
        g.add(np.arange(3), unit_rows(3, dim=8))
    with pytest.raises(ValueError, match="non-negative"):
        g.add(np.array([-1]), unit_rows(1))
    with pytest.raises(ValueError, match="given twice"):
        g.add(np.array([4, 4]), unit_rows(2))
    g.add(np.array([4]), unit_rows(1))
    with pytest.raises(ValueError, match="already in the ANN index"):
        g.add(np.array([4]), unit_rows(1, seed=5))
    assert len(g) == 1


@pytest.mark.parametrize("kwargs", [{"dtype": "f64"}, {"connectivity": 1}, {"expansion_search": 0}])
def test_bad_params_are_refused(kwargs):
    with pytest.raises(ValueError):
        AnnParams(**kwargs)


def test_unreadable_files_raise_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot open the ANN index"):
        AnnGraph.open(tmp_path / "missing.usearch")
    junk = tmp_path / "junk.usearch"
    junk.write_bytes(b"not an index")
    with pytest.raises(StoreError, match="cannot open the ANN index"):
        AnnGraph.open(junk)


def test_candidates_carry_the_exact_cosine(rows, graph):
    q = query_near(rows, 3)
    eligible = np.ones(len(rows), bool)
    rowids, cos, stats = ann_candidates(graph, q, 10, eligible, lambda r: rows[r], len(rows))
    assert cos.dtype == np.float32
    expected = (rows[rowids].astype(np.float64) @ q).astype(np.float32)
    assert np.array_equal(cos, expected)
    assert np.array_equal(exact_cosines(q, rows[rowids]), expected)
    top = rowids[np.argsort(-cos, kind="stable")[:10]].tolist()
    assert top == exact_top(rows, q, 10)
    assert stats.rounds == 1 and stats.asked == (10 + 16) * 2 and stats.eligible == len(rowids)


def test_candidates_respect_the_filter(rows, graph):
    q = query_near(rows, 3)
    eligible = np.zeros(len(rows), bool)
    eligible[::2] = True
    rowids, cos, _ = ann_candidates(graph, q, 10, eligible, lambda r: rows[r],
                                    int(eligible.sum()))
    assert len(rowids) >= 10 and eligible[rowids].all()
    top = rowids[np.argsort(-cos, kind="stable")[:10]].tolist()
    assert top == [r for r in exact_top(rows, q, 40) if r % 2 == 0][:10]


def test_a_filtered_search_that_under_fills_gives_up():
    vecs = unit_rows(4000, seed=6)
    g = AnnGraph.build(np.arange(4000), vecs, AnnParams(dtype="f32"))
    q = vecs[0].astype(np.float64)
    far = np.argsort(vecs.astype(np.float64) @ q)[:3]  # the three rows least like the query
    eligible = np.zeros(4000, bool)
    eligible[far] = True
    assert ann_candidates(g, q, 10, eligible, lambda r: vecs[r], 3) is None


def test_candidates_double_until_enough_are_eligible(rows, graph):
    q = query_near(rows, 3)
    eligible = np.zeros(len(rows), bool)
    order = exact_top(rows, q, len(rows))
    eligible[order[200:]] = True  # the 200 rows nearest the query are filtered out
    got = ann_candidates(graph, q, 10, eligible, lambda r: rows[r], int(eligible.sum()))
    assert got is not None
    rowids, cos, stats = got
    assert stats.rounds > 1 and stats.asked <= MAX_CANDIDATES
    assert rowids[np.argsort(-cos, kind="stable")[:10]].tolist() == order[200:210]


def test_rowids_beyond_the_eligible_mask_are_dropped(rows, graph):
    q = query_near(rows, 3)
    eligible = np.ones(1000, bool)  # a snapshot that ends at rowid 999
    rowids, _, _ = ann_candidates(graph, q, 10, eligible, lambda r: rows[r], 1000)
    assert len(rowids) >= 10 and rowids.max() < 1000


def test_nothing_wanted_or_nothing_eligible_gives_nothing(rows, graph):
    q = query_near(rows, 3)
    for n, count in ((0, len(rows)), (10, 0)):
        rowids, cos, stats = ann_candidates(graph, q, n, np.ones(len(rows), bool),
                                            lambda r: rows[r], count)
        assert len(rowids) == 0 and len(cos) == 0 and stats.rounds == 0


def test_opening_graphs_before_the_embedder_does_not_crash_the_process():
    """`import usearch.index; import onnxruntime` segfaults (onnxruntime 1.32, usearch 2.26.6):
    a database with graphs opened before the first text query is embedded did that."""
    import subprocess
    import sys

    pytest.importorskip("onnxruntime")
    code = ("import numpy as np\n"
            "from recallql.index.ann import AnnGraph\n"
            "g = AnnGraph.build(np.arange(4), np.eye(4, 8, dtype=np.float32))\n"
            "import onnxruntime\n"
            "print(len(g))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "4", run.stderr[-500:]
