"""Exact scans through an int8 copy (`recallql.index.quantized`) against float32 scans.

    nice -n 10 python -m benchmarks.bench_quantized --rows 1000000

On `benchmarks.scale_data` vectors, for each of the 277 real query vectors and for three
eligible sets — every row, a tenant's rows (1%, scattered) and a session's rows (0.01%,
consecutive) — the exact top-100 by:

- float32: gather the eligible rows (when filtered) and score them all (`vectors.matvec`, one
  thread), the partition of the top 100;
- int8: the pre-scan's candidates (a provable superset of the top 100), then their float32
  rows re-scored in float64.

Both must return the same rows (checked on every query); CPU µs per query, the candidates
re-scored, and the bytes each keeps in memory are printed.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks import scale_data
from benchmarks.latency import load_queries
from recallql.index.quantized import candidates, quantize
from recallql.index.vectors import matvec

N = 100


def f32_top(vecs: np.ndarray, rows: np.ndarray | None, q: np.ndarray) -> np.ndarray:
    """Exact top-N positions (into `rows`, or all rows) by a float32 scan + float64 refine."""
    block = vecs if rows is None else vecs[rows]
    scores = matvec(block, q.astype(np.float32))
    top = np.argpartition(-scores, N)[:N * 2] if len(scores) > N * 2 else np.arange(len(scores))
    exact = np.asarray(block[top], np.float64) @ q
    return np.sort(top[np.argsort(-exact, kind="stable")[:N]])


def i8_top(vecs: np.ndarray, quant, rows: np.ndarray | None, q: np.ndarray
           ) -> tuple[np.ndarray, int]:
    """Exact top-N positions through the int8 pre-scan, and the candidates re-scored."""
    part = quant if rows is None else quant.take(rows)
    cand = candidates(part, q, N)
    src = cand if rows is None else rows[cand]
    exact = np.asarray(vecs[src], np.float64) @ q
    return np.sort(cand[np.argsort(-exact, kind="stable")[:N]]), len(cand)


def run(vecs: np.ndarray, quant, queries: np.ndarray, pick) -> str:
    """One eligible set: CPU per query for both scans; rows must agree."""
    cpu = {"f32": 0.0, "i8": 0.0}
    rescored, agree = [], 0
    for i, q in enumerate(queries):
        rows = pick(i)
        t = time.process_time()
        a = f32_top(vecs, rows, q)
        cpu["f32"] += time.process_time() - t
        t = time.process_time()
        b, c = i8_top(vecs, quant, rows, q)
        cpu["i8"] += time.process_time() - t
        rescored.append(c)
        agree += bool(np.array_equal(a, b))
    k = len(queries)
    return (f"f32 {cpu['f32'] / k * 1e6:8.0f} µs CPU/query | int8 pre-scan "
            f"{cpu['i8'] / k * 1e6:8.0f} µs ({cpu['i8'] / cpu['f32']:.2f}×), candidates "
            f"re-scored median {int(np.median(rescored))} | same top-{N}: {agree}/{k}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    vecs = np.ascontiguousarray(scale_data.vectors(args.rows))
    t = time.perf_counter()
    quant = quantize(vecs)
    built = time.perf_counter() - t
    queries = np.stack([v for _, v in load_queries()]).astype(np.float64)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    tenant, session = scale_data.labels(args.rows)
    by_tenant = [np.flatnonzero(tenant == t) for t in range(scale_data.TENANTS)]
    sessions = int(session[-1]) + 1
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.rows:,} rows x {vecs.shape[1]}; float32 {vecs.nbytes / 2**20:.0f} MiB, int8 "
          f"copy {(quant.codes.nbytes + 8 * len(quant)) / 2**20:.0f} MiB (quantised in "
          f"{built:.1f} s); {len(queries)} queries, top-{N}; load {load}")
    sets = {"all rows": lambda i: None,
            "tenant (1%)": lambda i: by_tenant[i % scale_data.TENANTS],
            "session (0.01%)": lambda i: np.flatnonzero(session == (37 * i) % sessions)}
    for name, pick in sets.items():
        print(f"{name:16s} {run(vecs, quant, queries, pick)}", flush=True)


if __name__ == "__main__":
    main()
