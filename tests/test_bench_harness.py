"""Smoke tests of the benchmark harness on toy data (nothing here is timed or asserts speed)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import stats, targets
from benchmarks.__main__ import _script, _scripts
from benchmarks.corpus import joined_text, windows
from benchmarks.latency import FLOOR, OLD_NAME, latency_table
from benchmarks.quality import HYBRID, metrics_table, paired_table


@pytest.mark.parametrize(
    ("wins", "losses", "expected"),
    [(0, 0, 1.0), (5, 5, 1.0), (10, 0, 2 / 1024), (0, 10, 2 / 1024), (9, 1, 22 / 1024)],
    ids=["none", "balanced", "all-wins", "all-losses", "nine-one"],
)
def test_sign_test_exact_binomial(wins, losses, expected):
    assert stats.sign_test(wins, losses) == pytest.approx(expected)


def test_paired_counts_wins_ties_losses_and_mean():
    result = stats.paired([0.5, 0.2, 0.3, 0.9], [0.4, 0.2, 0.6, 0.1])
    assert (result.wins, result.ties, result.losses) == (2, 1, 1)
    assert result.wtl() == "2/1/1"
    assert result.mean_diff == pytest.approx((0.1 + 0.0 - 0.3 + 0.8) / 4)
    assert 0.0 < result.p_rand <= 1.0


def test_paired_identical_runs_are_not_significant():
    result = stats.paired([0.1, 0.2, 0.3], [0.1, 0.2, 0.3])
    assert (result.ties, result.p_sign, result.p_rand) == (3, 1.0, 1.0)


def test_randomisation_test_detects_a_consistent_difference():
    diffs = np.full(30, 0.1)
    assert stats.randomisation_test(diffs) < 0.001


def test_paired_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        stats.paired([0.1], [0.1, 0.2])


def test_table_renders_markdown():
    text = stats.table(["a", "b"], [["x", 1], ["y", 2]])
    assert text.splitlines() == ["| a | b |", "|---|---:|", "| x | 1 |", "| y | 2 |"]


@pytest.mark.parametrize(
    ("text", "size", "stride", "expected"),
    [
        ("", 10, 5, []),
        ("one", 10, 5, ["one"]),
        ("aa bb cc dd", 5, 3, ["aa bb", "bb cc", "cc dd"]),
        ("aa bb cc dd", 5, 6, ["aa bb", "cc dd"]),
        ("averyveryverylongword x", 5, 3, ["averyveryverylongword", "x"]),
    ],
    ids=["empty", "short", "overlap", "no-overlap", "long-word"],
)
def test_windows(text, size, stride, expected):
    assert windows(text, size, stride) == expected


def test_joined_text_skips_empty_fields():
    assert joined_text({"title": "T", "body": ""}) == "T"
    assert joined_text({"title": "T", "body": "B"}) == "T\nB"


def test_quality_tables_on_toy_runs():
    qrels = {"1": {"a"}, "2": {"b", "c"}}
    runs = {HYBRID: {"1": ["a", "x"], "2": ["b", "c"]},
            "peer": {"1": ["x", "a"], "2": ["c", "z"]}}
    metrics = metrics_table(runs, qrels)
    assert "| recallql hybrid (default) | 1.0000 | 1.0000 | 1.0000 | 1.000 |" in metrics
    paired = paired_table(runs, qrels)
    assert "hybrid vs peer | ndcg@10" in paired and "| 2/0/0 |" in paired


def test_latency_table_ratios():
    ones = np.ones((1, 4))
    times = {"recallql hybrid": ones * 0.002, "LanceDB hybrid": ones * 0.008,
             "raw tantivy top-100": ones * 0.0005, "raw numpy top-100": ones * 0.001,
             FLOOR: ones * 0.0016}
    text, ratios = latency_table(times)
    assert "| recallql hybrid | 2.00 |" in text
    assert ratios["recallql / LanceDB hybrid (p50)"] == pytest.approx(0.25)
    assert ratios["overhead (median per query)"] == pytest.approx(2.0 / 1.6)
    assert ratios["recallql / (raw tantivy p50 + raw numpy @ p50), legs timed apart"] == (
        pytest.approx(2.0 / 1.5))
    assert not any(k.startswith("default (convex") for k in ratios)
    _, with_old = latency_table({**times, OLD_NAME: ones * 0.0016})
    assert with_old["default (convex + context) / FUSE RRF without context (median per query)"] \
        == pytest.approx(2.0 / 1.6)


def test_missing_script_is_reported_pending():
    assert _script("bench_does_not_exist") is None
    assert "**pending**" in _scripts("X", [("bench_does_not_exist", "thing", ())])


def test_targets_read_script_output():
    targets.clear()
    targets.from_script_output("bench_ingest", (
        "ingest, vectors supplied: 100,000 chunks x 384-d in batches of 10,000: 3.62 s = "
        "27,594 chunks/s (target >= 20,000)\nreader RSS ...; ratio 1.40x (target <= 1.3x)"))
    targets.from_script_output("bench_lineage", None)
    targets.from_script_output("bench_sessions", (
        "search    wall with_session 3.042 ms  without_session 2.435 ms  overhead  +0.607 ms\n"
        "retrieve  wall with_session 3.595 ms  without_session 2.791 ms  overhead  +1.804 ms"))
    table = targets.summary()
    assert "(SEARCH) | 0.61 ms | met |" in table and "(RETRIEVE) | 1.80 ms | **missed** |" in table
    assert "| ingest without embedding ≥ 20,000 chunks/s | 27,594 chunks/s | met |" in table
    assert "| 1.40× | **missed** |" in table
    assert table.count("see the section") == 5  # bench_lineage printed nothing
    targets.clear()


def test_targets_read_the_conversation_and_root_figures():
    targets.clear()
    targets.from_script_output("bench_conversations", (
        "             LIMIT 10: e2e p50 plain  7.20 ms, grouped  7.38 ms (1.03x, target <= 1.1x)\n"
        "            LIMIT 100: e2e p50 plain 11.02 ms, grouped 12.60 ms (1.14x, target <= 1.1x)\n"
        "FOR SESSION, LIMIT 10: e2e p50 plain  9.29 ms, grouped  8.00 ms (0.86x, target)"))
    targets.from_script_output("bench_lineage", (
        "engine     depth=10000  resolve cold=   61.20 ms  ( 6.12 µs/session)  (recallql ...)\n"
        "stored     depth=10000  resolve cold=    0.044 ms  (recallql database, ...)\n"
        "roots      root update depth=10000     61.50 ms for 10,000 roots"))
    table = targets.summary()
    assert "(engine walk, where no root is stored) | 61.2 ms | **missed** |" in table
    assert "(a statement's path: the stored root) | 0.04 ms | met |" in table
    assert "(LIMIT 10, 10k-deep chain) | 1.03× | met |" in table
    assert "(LIMIT 100, 10k-deep chain) | 1.14× | **missed** |" in table
    assert "updated in one batch ≤ 100 ms | 61.5 ms | met |" in table
    targets.clear()


def test_targets_read_the_scale_figures():
    from benchmarks.bench_scale import target_lines

    res = {"n": 1_000_000, "recall": {"recallql semantic": 0.9978},
           "systems": {"recallql hybrid": {"cpu_ms": 8.0},
                       "recallql hybrid WHERE tenant": {"cpu_ms": 4.0},
                       "LanceDB ivf_pq hybrid": {"cpu_ms": 20.0}},
           "open": {"connect_cpu_s": 0.05, "first_query_cpu_s": 0.55, "connect_s": 0.1,
                    "first_query_s": 1.2, "first_write_cpu_s": 0.01, "first_write_s": 0.02}}
    lines = target_lines(res)
    assert lines[0] == ("target 1000000 hybrid CPU: 8.00 ms vs LanceDB ivf_pq 20.00 ms = 0.40x, "
                        "semantic recall@10 0.9978")
    assert lines[1] == "target 1000000 WHERE tenant: 4.00 ms = 0.50x unfiltered"
    targets.clear()
    targets.from_script_output("bench_scale", "\n".join(lines))
    table = targets.summary()
    assert "| 0.40× (8.00 vs 20.00 ms), recall 0.9978 | met |" in table
    assert "| 1M open + first query ≤ 1 s warm | 0.60 s CPU, 1.30 s wall | **missed** |" in table
    targets.clear()


def test_targets_read_the_cluster_rows_with_cpu_and_load():
    targets.clear()
    targets.from_script_output("bench_cluster", "\n".join([
        "scatter-gather, 1 shard            5.86 ms (+3.26 ms)       3.90 ms (+2.37 ms)    "
        "331.3 st/s    4.79 ms     6.08 ms (2.64 coord + 3.44 shards)   8.2",
        "scatter-gather, 4 shards          12.25 ms (+9.68 ms)       7.80 ms (+6.24 ms)    "
        "106.9 st/s   14.98 ms   15.49 ms (4.36 coord + 11.13 shards)  10.8",
        "tenant-routed, 4 shards            3.50 ms (+1.55 ms)       2.87 ms (+1.40 ms)    "
        "268.1 st/s    4.09 ms     3.78 ms (0.89 coord + 2.89 shards)  11.9"]))
    table = targets.summary()
    assert ("(scatter-gather, hybrid) | +9.68 ms | **missed** | CPU 15.49 ms/statement, "
            "load 10.8 |") in table
    assert "(tenant-routed, hybrid) | +1.55 ms | met | CPU 3.78 ms/statement, load 11.9 |" \
        in table
    assert "| 331.3 st/s (1) / 106.9 st/s (4) | met |" in table
    targets.clear()


def test_ann_recall_counts_exact_ties_as_hits():
    from benchmarks.bench_ann import recall

    vecs = np.array([[1, 0], [1, 0], [0.6, 0.8], [0, 1]], np.float32)
    query = np.array([[1.0, 0.0]], np.float32)
    truth = np.array([[0, 2]])
    assert recall([np.array([1, 2])], truth, vecs, query) == 1.0  # row 1 ties row 0
    assert recall([np.array([1, 3])], truth, vecs, query) == 0.5
    assert recall([np.array([3, -1])], truth, vecs, query) == 0.0  # -1: no hit returned


def test_derived_rows_are_deterministic_unit_vectors():
    from benchmarks import scale_data

    rng = np.random.default_rng(0)
    base_vecs = rng.normal(size=(50, 8)).astype(np.float32)
    base_vecs /= np.linalg.norm(base_vecs, axis=1, keepdims=True)
    base = scale_data.Base([], base_vecs, "toy")
    nn = np.argsort(-(base_vecs @ base_vecs.T), axis=1)[:, 1:11].astype(np.int32)
    rows = np.arange(100, 100 + scale_data.DERIVE_BLOCK)
    block = scale_data._derive(base, nn, rows, 0.03, 1)
    again = scale_data._derive(base, nn, rows, 0.03, 1)
    assert np.array_equal(block, again)
    assert np.allclose(np.linalg.norm(block[:100], axis=1), 1.0, atol=1e-6)


def test_merge_targets_replaces_a_row_in_place_and_appends_new_ones():
    from benchmarks.__main__ import _merge_targets

    old = ("# Results\n\n## Targets in this run\n\n"
           "| target | this run | verdict | note |\n|---|---|---|---|\n"
           "| a | 1 | met |  |\n| b | 2 | met |  |\n| c | 3 | met |  |\n\n## Next\n")
    targets.clear()
    try:
        targets.record("b", "9", False)
        targets.record("d", "4", True)
        merged = _merge_targets(old)
    finally:
        targets.clear()
    rows = merged.split("## Targets in this run\n\n")[1].split("\n\n")[0].splitlines()
    assert [r.split("|")[1].strip() for r in rows[2:]] == ["a", "b", "c", "d"]
    assert rows[3].split("|")[2].strip() == "9"
    assert merged.endswith("\n\n## Next\n")
