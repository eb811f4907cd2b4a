"""`Store.optimize_vectors` / ``recallql optimize``: every vector segment merged into one whose
ANN graph is built before the manifest names it (the largest input graph reused), answers equal
the exact scan's, deleted rows gone, a failed optimize changes nothing, and the per-graph split
of the semantic leg's window over several graphs (n_g, re-asked when a graph's worst candidate
still reaches the top-n)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recallql.index import graphs, semantic
from recallql.index.ann import AnnGraph
from recallql.index.errors import StoreError
from recallql.index.filters import Cmp
from recallql.index.semantic import VectorPart, graph_share, search
from recallql.index.store import Store
from recallql.index.vectors import Segment

DIM = 16
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def small_graphs(monkeypatch):
    monkeypatch.setattr(graphs, "GRAPH_MIN_ROWS", 64)
    monkeypatch.setattr(semantic, "EXACT_MAX_ROWS", 50)


def unit_rows(n: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def fill(store: Store, sizes=(150, 100, 100, 50)) -> np.ndarray:
    store.create_collection("docs", ("body",), {"tenant": str}, dim=DIM)
    vecs = unit_rows(sum(sizes), 1)
    start = 0
    for size in sizes:
        store.ingest("docs", [{"id": f"i{j}", "body": f"row {j}", "tenant": f"t{j % 4}",
                               "vector": vecs[j]} for j in range(start, start + size)])
        start += size
    return vecs


def open_store(path: Path | None) -> Store:
    store = Store.open(path)
    store.background_graphs = False
    return store


def answers(store: Store, queries: np.ndarray, method: str = "auto") -> list:
    snap = store.snapshot("docs")
    out = []
    for q in queries:
        rowids, cos, _ = snap.semantic_search(q, 10, method=method)
        out.append(([snap.ids[r] for r in rowids], cos.tolist()))
    return out


def vector_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "collections" / "docs" / "vectors").iterdir())


@pytest.mark.parametrize("in_memory", [False, True], ids=["disk", "memory"])
def test_optimize_merges_into_one_segment_reusing_the_largest_graph(tmp_path, in_memory):
    path = None if in_memory else tmp_path / "db"
    with open_store(path) as store:
        fill(store)
        assert store.build_graphs() == 3  # 150, 100, 100 rows; the 50-row segment has none
        store.delete("docs", ["i3", "i7", "i200"])  # kept for AS OF (retention), masked
        queries = unit_rows(12, 9)
        exact_before = answers(store, queries, "exact")
        report = store.optimize_vectors("docs", threads=1)
        assert (report.segments_before, report.rows) == (4, 400)
        assert (report.graph_reused, report.graph_added) == (150, 250)  # the 150-row graph
        assert report.int8_rows == 400
        segs = store.snapshot("docs").state.segments
        assert len(segs) == 1 and segs[0].file.startswith("o") and segs[0].graph is not None
        assert segs[0].quantized is not None and len(segs[0].quantized) == 400
        assert sorted(segs[0].graph.keys().tolist()) == segs[0].rowids.tolist()
        got = answers(store, queries)
        assert got == exact_before and answers(store, queries, "exact") == exact_before
        assert all("i3" not in ids and "i200" not in ids for ids, _ in got)
        stats = store.snapshot("docs").semantic_search(queries[0], 10)[2]
        assert stats.method == "ann" and stats.why.endswith(
            "n = 10 over 1 graph: 1 × (n_g 10, k 53, ef 128) [n_g = min(n, ⌈n·s + 3·√(n·s·(1 − "
            "s))⌉), s = the graph's share of the eligible rows; k = ⌈2·(n_g + 16) / f⌉, f = "
            "the eligible fraction of the graph, at most its rows and max(n_g, min(8192, 0.25 "
            "of its rows)); ef = max(128, k)]")  # k = ⌈2·(10 + 16) / (397/400)⌉ = 53
        assert store.check().ok
        again = store.optimize_vectors("docs")  # one segment with its graph: nothing to do
        assert (again.segments_before, again.graph_added, again.graph_reused) == (1, 0, 0)
    if path is not None:
        assert [f[-5:] for f in vector_files(path)] == [".hnsw", "-0.i8", "0.npy"]
        with Store.open(path, readonly=True) as reader:
            assert answers(reader, queries) == exact_before


def test_the_merged_graph_drops_rows_no_merge_keeps():
    from recallql.index.optimize import merged_graph

    vecs = unit_rows(300, 2)
    big = Segment("a", 0, 200, vecs[:200], graph=AnnGraph.build(np.arange(200), vecs[:200]))
    small = Segment("b", 200, 300, vecs[200:])
    keep = np.ones(300, bool)
    keep[[5, 6, 250]] = False
    graph, reused, added = merged_graph([big, small], keep, DIM)
    assert (reused, added, len(graph)) == (198, 99, 297)
    assert sorted(graph.keys().tolist()) == np.flatnonzero(keep).tolist()
    assert len(big.graph) == 200  # the input graph (a segment's, immutable) is not changed


def test_optimize_without_graphs_builds_one_from_scratch(tmp_path):
    with open_store(tmp_path / "db") as store:
        fill(store, sizes=(40, 40, 40))  # 3 segments below GRAPH_MIN_ROWS: no graphs
        # one insertion thread: the graph is the same every run (with two it differs, and one
        # build in a full-suite run left a row unreachable, so ANN missed it)
        report = store.optimize_vectors("docs", threads=1)
        assert (report.graph_reused, report.graph_added, report.rows) == (0, 120, 120)
        queries = unit_rows(8, 4)
        assert answers(store, queries) == answers(store, queries, "exact")
        assert store.snapshot("docs").semantic_search(queries[0], 5)[2].method == "ann"


def test_a_failed_optimize_changes_nothing_and_its_files_are_removed(tmp_path, monkeypatch):
    path = tmp_path / "db"
    with open_store(path) as store:
        fill(store)
        store.build_graphs()
        queries = unit_rows(6, 5)
        before, files = answers(store, queries), vector_files(path)

        def full_disk(self, target):
            Path(str(target) + ".tmp").write_bytes(b"partial")
            raise OSError(28, "No space left on device", str(target))

        monkeypatch.setattr(AnnGraph, "save", full_disk)
        with pytest.raises(StoreError, match="No space left"):
            store.optimize_vectors("docs")
        monkeypatch.undo()
        assert answers(store, queries) == before
        assert len(store.snapshot("docs").state.segments) == 4
        assert vector_files(path) == files  # the merged file was removed at once
    with Store.open(path) as writer:
        assert answers(writer, queries) == before


def test_files_of_an_optimize_killed_before_its_commit_are_orphans(tmp_path):
    """Killed between writing the merged segment and its graph and the manifest commit: both
    are orphans that the next writer removes; the old segments answer."""
    from recallql.index import optimize

    path = tmp_path / "db"
    with open_store(path) as store:
        fill(store)
        store.build_graphs()
        queries = unit_rows(6, 5)
        before, files = answers(store, queries), vector_files(path)
        state = store._state("docs")
        inputs = list(state.segments)
        keep = np.ones(state.size, bool)
        parts, _ = optimize.merged_parts(inputs, keep)
        state.files.write("o9-0.npy", parts)  # what optimize writes before its commit
        state.files.put_graph("o9-0.npy", optimize.merged_graph(inputs, keep, DIM)[0])
        state.files.put_copy("o9-0.npy", state.files.open_vectors("o9-0.npy", 400))
    assert sorted(set(vector_files(path)) - set(files)) == ["o9-0.hnsw", "o9-0.i8", "o9-0.npy"]
    with Store.open(path) as writer:
        writer.recover()
        assert vector_files(path) == files and answers(writer, queries) == before


def tenant_answers(store: Store, queries: np.ndarray) -> list:
    """(ids, cosines, why) of `WHERE tenant = 't1'` semantic searches (a sparse posting
    set: gathered, scanned exactly)."""
    snap = store.snapshot("docs")
    rows = snap.filter_rows(Cmp("tenant", "=", "t1"))
    out = []
    for q in queries:
        rowids, cos, stats = snap.semantic_search(q, 5, rows)
        out.append(([snap.ids[r] for r in rowids], cos.tolist(), stats.why))
    return out


def test_a_store_without_int8_copies_gets_them_from_optimize_only(tmp_path, monkeypatch):
    """A store written before int8 copies (a segment with its graph, no copy) keeps
    answering (scanned in float32), `check` warns, and `optimize` writes the copy beside the
    same segment without a merge; the answers are the same with the copy."""
    monkeypatch.setattr(semantic, "EXACT_MAX_ROWS", 500)
    path = tmp_path / "db"
    with open_store(path) as store:
        fill(store)
        store.optimize_vectors("docs", threads=1)
        (seg,) = store.snapshot("docs").state.segments
        with_copy = tenant_answers(store, unit_rows(6, 8))
    assert all("int8 pre-scan of 100 rows" in why for _, _, why in with_copy)
    (path / "collections" / "docs" / "vectors" / seg.file.replace(".npy", ".i8")).unlink()
    with open_store(path) as store:
        assert store.snapshot("docs").state.segments[0].quantized is None  # not rebuilt
        plain = tenant_answers(store, unit_rows(6, 8))
        assert [a[:2] for a in plain] == [a[:2] for a in with_copy]
        assert all("int8" not in why for _, _, why in plain)
        kinds = [p.kind for p in store.check().problems]
        assert kinds == ["no-int8-copy"]
        report = store.optimize_vectors("docs", threads=1)
        assert (report.segments_before, report.int8_rows, report.graph_added) == (1, 400, 0)
        (after,) = store.snapshot("docs").state.segments
        assert after.file == seg.file and after.quantized is not None  # no merge
        assert tenant_answers(store, unit_rows(6, 8)) == with_copy
        assert store.check().ok
        again = store.optimize_vectors("docs")
        assert (again.int8_rows, again.graph_added) == (0, 0)


def test_a_reader_open_before_the_copy_was_written_uses_it_after_the_next_batch(
        tmp_path, monkeypatch):
    monkeypatch.setattr(semantic, "EXACT_MAX_ROWS", 500)
    path = tmp_path / "db"
    with open_store(path) as store:
        fill(store)
        store.optimize_vectors("docs", threads=1)
        (seg,) = store.snapshot("docs").state.segments
    (path / "collections" / "docs" / "vectors" / seg.file.replace(".npy", ".i8")).unlink()
    with open_store(path) as writer, Store.open(path, readonly=True) as reader:
        assert reader.snapshot("docs").state.segments[0].quantized is None
        writer.optimize_vectors("docs", threads=1)  # the copy only: no batch
        writer.ingest("docs", [{"id": "late", "body": "late", "tenant": "t1",
                                "vector": unit_rows(1, 30)[0]}])
        assert reader.snapshot("docs").state.segments[0].quantized is not None
        assert "int8 pre-scan" in tenant_answers(reader, unit_rows(2, 8))[0][2]


def test_a_damaged_int8_copy_is_not_used_and_check_reports_it(tmp_path, monkeypatch):
    monkeypatch.setattr(semantic, "EXACT_MAX_ROWS", 500)
    path = tmp_path / "db"
    with open_store(path) as store:
        fill(store)
        store.optimize_vectors("docs", threads=1)
        (seg,) = store.snapshot("docs").state.segments
        want = tenant_answers(store, unit_rows(4, 8))
    copy = path / "collections" / "docs" / "vectors" / seg.file.replace(".npy", ".i8")
    data = bytearray(copy.read_bytes())
    copy.write_bytes(bytes(data[:-10]))  # truncated
    with open_store(path) as store:
        assert [a[:2] for a in tenant_answers(store, unit_rows(4, 8))] == [
            a[:2] for a in want]
        problems = store.check().problems
        assert [p.kind for p in problems] == ["int8-copy"] and "damaged" in problems[0].detail
    data[-(DIM + 8) * 3] ^= 0x7F  # a code of row 397 changed
    copy.write_bytes(bytes(data))
    with open_store(path) as store:
        problems = store.check().problems
        assert [p.kind for p in problems] == ["int8-copy"]
        assert "does not match" in problems[0].detail


def test_cli_optimize_reports_the_merge(tmp_path):
    path = tmp_path / "db"
    with open_store(path) as store:
        fill(store, sizes=(30, 30))
    run = subprocess.run([sys.executable, "-m", "recallql.cli", "optimize", "--db", str(path)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "docs: 2 vector segments merged into one (60 rows;" in run.stdout
    assert run.stderr == ""  # no progress bar (it printed an empty line) when not a terminal


def test_cli_optimize_writes_a_missing_int8_copy(tmp_path):
    path = tmp_path / "db"
    with open_store(path) as store:
        fill(store, sizes=(4100,))  # the subprocess has the real GRAPH_MIN_ROWS (4,096)
        assert store.build_graphs() == 1
        (seg,) = store.snapshot("docs").state.segments
    copy = path / "collections" / "docs" / "vectors" / seg.file.replace(".npy", ".i8")
    copy.unlink()
    run = subprocess.run([sys.executable, "-m", "recallql.cli", "optimize", "--db", str(path)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    assert copy.exists() and "docs: int8 copy of 4,100 vectors written" in run.stdout


def test_graph_share_arithmetic():
    assert graph_share(100, 160_000, 1_000_000) == 27  # ⌈16 + 3·√13.44⌉ = ⌈26.998⌉
    assert graph_share(100, 20_000, 1_000_000) == 7  # ⌈2 + 3·√1.96⌉ = ⌈6.2⌉
    assert graph_share(100, 1_000_000, 1_000_000) == 100
    assert graph_share(100, 5, 1_000_000) == 1 and graph_share(3, 900, 1_000) == 3
    assert graph_share(10, 0, 10) == 0


def test_a_graph_holding_more_than_its_share_is_asked_again():
    """Segments in time order are not exchangeable: every row like the query sits in one
    segment. Its first n_g (its share: 19 of n = 100, so k = 70 candidates) all reach the
    top-100, so it is asked again (n_g 38, k 108): without that, at most 70 of the exact
    top-100 could be found."""
    base = unit_rows(1, 3)[0]
    near = unit_rows(1000, 11) * 0.3 + base
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    far = -np.abs(unit_rows(9000, 12)) * np.sign(base)
    vecs = np.concatenate([near, far]).astype(np.float32)  # rows 0-999: one segment
    segs = []
    for lo in range(0, 10_000, 1000):
        rows = np.arange(lo, lo + 1000)
        segs.append(VectorPart(Segment(f"s{lo}", lo, lo + 1000, vecs[lo:lo + 1000]),
                               AnnGraph.build(rows, vecs[lo:lo + 1000])))
    ids = [f"r{j:05d}" for j in range(10_000)]
    eligible = np.ones(10_000, bool)
    query = base.astype(np.float64) / np.linalg.norm(base)
    rowids, cos, stats = search(segs, query, 100, eligible, ids)
    exact, exact_cos, _ = search(segs, query, 100, eligible, ids, "exact")
    assert len(set(rowids.tolist()) & set(exact.tolist())) >= 95  # ANN recall, int8 graph
    assert np.array_equal(cos, (vecs[rowids].astype(np.float64) @ query).astype(np.float32))
    assert set(rowids.tolist()) <= set(range(1000))
    assert graph_share(100, 1000, 10_000) == 19  # ⌈10 + 3·3⌉
    assert stats.graphs["s0"] == (38, 108, 128)  # k = 2·(38 + 16)
    assert stats.graphs["s1000"] == (19, 70, 128)  # asked once: its worst is below the top-100
    assert stats.rescored == 70 + 108 + 9 * 70
