"""recall@10 of a stored HNSW graph by search breadth ef, measured on the graph directly.

    nice -n 10 python -m benchmarks.bench_ef --db ~/.cache/recallql-bench/db/<copy> \
        --ef 232,400,600,900

Opens the largest vector segment of the database's ``chunks`` collection and its graph
(read-only, memory-mapped: no recallql statement, nothing written), answers the 277 real CACM +
Cranfield query vectors with k = 232 candidates (what the semantic leg asks for the default
window of 100: 2·(100 + 16)) at each ef, re-scores the candidates exactly and reports the
tie-aware recall@10 against the exact cosine top-10 (`benchmarks.bench_ann.recall`) and the
graph search's CPU µs per query. The exact top-10 is a float32 scan of every row (about 10 s
CPU a million rows). A `USING SEMANTIC (ann, ef = N)` statement searches with max(N, k).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_ann import exact_top, recall, rescore
from benchmarks.latency import load_queries
from recallql.index.ann import AnnGraph
from recallql.index.graphs import PARAMS, graph_name

#: Candidates asked of the graph: the semantic leg's k for the default window of 100.
K = 232


def largest_segment(db: Path) -> tuple[np.ndarray, AnnGraph]:
    """The float32 rows (memory-mapped) and graph of the collection's largest segment."""
    folder = db / "collections" / "chunks" / "vectors"
    name = max((p for p in folder.iterdir() if p.suffix == ".npy"), key=lambda p: p.stat().st_size)
    vecs = np.load(name, mmap_mode="r")
    graph = AnnGraph.open(folder / graph_name(name.name), PARAMS, view=True)
    if len(graph) != len(vecs):
        raise SystemExit(f"{name}: the graph holds {len(graph)} rows, the segment {len(vecs)}")
    return vecs, graph


def by_ef(vecs: np.ndarray, graph: AnnGraph, queries: np.ndarray, efs: list[int]
          ) -> list[tuple[int, float, float]]:
    """(ef, recall@10, search µs CPU per query) for each ef (rowids must be positions: a
    segment whose rows are 0 … m-1, as a benchmark database's optimized one)."""
    truth = exact_top(vecs, queries, 10)
    out = []
    for ef in efs:
        found, cpu = [], 0.0
        for q in queries:
            start = time.process_time()
            hits = graph.search(q, K, ef)
            cpu += time.process_time() - start
            found.append(rescore(vecs, q, hits, 10))
        out.append((ef, recall(found, truth, vecs, queries), cpu / len(queries) * 1e6))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="a benchmark database (a copy)")
    parser.add_argument("--ef", default="232,300,400,600,900", help="breadths, comma-separated")
    args = parser.parse_args()
    vecs, graph = largest_segment(args.db)
    queries = np.stack([v for _, v in load_queries()]).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    print(f"{len(vecs):,} rows, {len(queries)} queries, k = {K}, load {os.getloadavg()}")
    for ef, rec, cpu in by_ef(vecs, graph, queries, [int(x) for x in args.ef.split(",")]):
        print(f"ef {ef}: recall@10 {rec:.4f}, search {cpu:.0f} µs CPU/query")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
