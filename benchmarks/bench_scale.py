"""Scaling: recallql against LanceDB as its users run it, from 10k to 3M chunks.

    nice -n 10 python -m benchmarks.bench_scale --sizes 10000,100000,1000000 [--rounds 2]

Data: `benchmarks.scale_data` (100k real chunks with real all-MiniLM-L6-v2 vectors; beyond
that, MiniLM-derived vectors with their parent chunk's text), fields ``tenant`` (1% of the
rows each) and ``session`` (0.01% each). Queries: the 277 judged CACM and Cranfield queries
(text and real MiniLM vector); filtered queries take tenant ``t<i mod 100>`` and session
``s<37·i mod sessions>`` for query i.

Per size, every system answers every query in the same process run, interleaved in blocks of
10 queries (the order rotates), after a warm-up pass. CPU is `time.process_time` (summed over
the process's threads, so LanceDB's worker threads count) per call; wall is per call too.

- recallql: ``SEARCH chunks MATCHING :q NEAR :v [WHERE ...] LIMIT 10`` (default recency on);
  semantic recall from ``SEARCH chunks USING SEMANTIC NEAR :v WITHOUT RECENCY FUSE CONVEX
  (weights = (context = 0)) LIMIT 10`` (the semantic leg alone: the context leg is off).
- LanceDB (`benchmarks.scale_peers.LanceScale`): the kinds given by ``--lance`` (default:
  exact at ≤ 10k rows, ``ivf_pq`` and ``ivf_hnsw_sq`` from 100k), hybrid limit 10, filters
  as ``where(..., prefilter=True)`` over scalar indexes.
- recall@10: the semantic top-10 against the exact cosine top-10 (numpy over all rows, or
  over the filtered rows), mean over queries.
- open: a fresh process (`benchmarks.open_probe`) connects, runs one hybrid query and one
  one-item write; run twice, the second (warm page cache) reported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks import scale_data, stats
from benchmarks.bench_ann import exact_top, recall
from benchmarks.latency import load_queries
from benchmarks.scale_peers import LanceScale, RecallqlScale

K, BLOCK = 10, 10
HYBRID = "SEARCH chunks MATCHING :q NEAR :v{where} LIMIT 10"
#: The semantic leg alone: without recency and without the context leg (on by default, it
#: credits a row's document neighbours, which is not the leg's recall).
SEMANTIC = ("SEARCH chunks USING SEMANTIC NEAR :v{where} WITHOUT RECENCY "
            "FUSE CONVEX (weights = (context = 0)) LIMIT 10")
WHERES = {"": "", "tenant": " WHERE tenant = :t", "session": " WHERE session = :s"}
Call = Callable[[int], list[str]]


class Workload:
    """The queries at one size: text, vector, tenant and session of query i."""

    def __init__(self, n: int):
        pairs = load_queries()
        self.texts = [t for t, _ in pairs]
        self.vecs = np.stack([v for _, v in pairs]).astype(np.float32)
        self.tenant_of, self.session_of = scale_data.labels(n)
        sessions = int(self.session_of[-1]) + 1
        self.tenants = [f"t{i % scale_data.TENANTS}" for i in range(len(pairs))]
        self.sessions = [f"s{37 * i % sessions}" for i in range(len(pairs))]

    def __len__(self) -> int:
        return len(self.texts)

    def mask(self, field: str, i: int) -> np.ndarray | None:
        """bool[n] rows of query i's filter value (None: no filter)."""
        if field == "tenant":
            return self.tenant_of == int(self.tenants[i][1:])
        if field == "session":
            return self.session_of == int(self.sessions[i][1:])
        return None

    def params(self, field: str, i: int, text: bool = True) -> dict[str, object]:
        """The statement parameters of query i with `field`'s filter."""
        out: dict[str, object] = {"v": self.vecs[i]}
        if text:
            out["q"] = self.texts[i]
        if field:
            out[field[0]] = self.tenants[i] if field == "tenant" else self.sessions[i]
        return out

    def lance_where(self, field: str, i: int) -> str | None:
        value = {"tenant": self.tenants, "session": self.sessions}.get(field)
        return None if value is None else f"{field} = '{value[i]}'"


def recallql_calls(rq: RecallqlScale, w: Workload) -> dict[str, Call]:
    """The timed recallql statements (hybrid, hybrid with each filter)."""
    def make(field: str) -> Call:
        statement = HYBRID.format(where=WHERES[field])
        return lambda i: rq.ids(statement, **w.params(field, i))
    return {f"recallql hybrid{' WHERE ' + f if f else ''}": make(f) for f in WHERES}


def lance_calls(lance: LanceScale, w: Workload) -> dict[str, Call]:
    """The timed LanceDB queries (hybrid, hybrid with each filter)."""
    def make(field: str) -> Call:
        return lambda i: lance.hybrid(w.texts[i], w.vecs[i], K, w.lance_where(field, i))
    return {f"LanceDB {lance.kind} hybrid{' WHERE ' + f if f else ''}": make(f) for f in WHERES}


def measure(calls: dict[str, Call], n_queries: int, rounds: int
            ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(wall s, CPU s) per call, float64[rounds·queries] each, interleaved in rotating blocks."""
    names = list(calls)
    for i in range(min(20, n_queries)):
        for name in names:
            calls[name](i)
    out = {name: (np.zeros((rounds, n_queries)), np.zeros((rounds, n_queries))) for name in names}
    for r in range(rounds):
        for b, first in enumerate(range(0, n_queries, BLOCK)):
            shift = (b + r) % len(names)
            for name in names[shift:] + names[:shift]:
                for i in range(first, min(first + BLOCK, n_queries)):
                    wall, cpu = time.perf_counter(), time.process_time()
                    calls[name](i)
                    out[name][0][r, i] = time.perf_counter() - wall
                    out[name][1][r, i] = time.process_time() - cpu
    return {name: (wall.ravel(), cpu.ravel()) for name, (wall, cpu) in out.items()}


def recall_rows(n: int, w: Workload, rq: RecallqlScale, lances: list[LanceScale],
                rowid_of: dict[str, int]) -> dict[str, float]:
    """recall@10 of each system's semantic top-10 against the exact one, per filter."""
    vecs = scale_data.vectors(n)
    out: dict[str, float] = {}
    for field in WHERES:
        truth = _truth(vecs, w, field)
        statement = SEMANTIC.format(where=WHERES[field])
        found = {"recallql": [rq.ids(statement, **w.params(field, i, text=False))
                              for i in range(len(w))]}
        for lance in lances:
            found[f"LanceDB {lance.kind}"] = [lance.vector(w.vecs[i], K, w.lance_where(field, i))
                                              for i in range(len(w))]
        for name, ids in found.items():
            rows = [np.array([rowid_of[x] for x in row], np.int64) for row in ids]
            key = f"{name} semantic{' WHERE ' + field if field else ''}"
            out[key] = _recall(rows, truth, vecs, w.vecs)
    return out


def _recall(found: list[np.ndarray], truth: list[list[int]], vecs: np.ndarray,
            queries: np.ndarray) -> float:
    """Tie-aware recall@10 (`benchmarks.bench_ann.recall`); a filter with fewer than 10 rows
    counts against its row count (recall@min(10, rows))."""
    per = []
    for f, t, q in zip(found, truth, queries, strict=True):
        if not t:
            per.append(1.0 if len(f) == 0 else 0.0)
            continue
        per.append(recall([f], np.array([t]), vecs, q[None, :]))
    return float(np.mean(per))


def _truth(vecs: np.ndarray, w: Workload, field: str) -> list[list[int]]:
    """Exact cosine top-10 row numbers of each query (among its filter's rows)."""
    if not field:
        return exact_top(vecs, w.vecs, K).tolist()
    out = []
    for i in range(len(w)):
        rows = np.flatnonzero(w.mask(field, i))
        sims = np.asarray(vecs[rows]) @ w.vecs[i]
        out.append(rows[np.argsort(-sims, kind="stable")[:K]].tolist())
    return out


def open_probe(path: Path, w: Workload) -> dict:
    """The second of two fresh-process runs of `benchmarks.open_probe` (warm page cache)."""
    vec = path.parent / "probe-vector.npy"
    np.save(vec, w.vecs[0])
    cmd = [sys.executable, "-m", "benchmarks.open_probe", str(path), str(vec), w.texts[0],
           "--write"]
    for _ in range(2):
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def lance_kinds(n: int, chosen: str | None) -> list[str]:
    if chosen:
        return chosen.split(",")
    return ["exact"] if n <= 10_000 else ["ivf_pq", "ivf_hnsw_sq"]


def run_size(n: int, rounds: int, lance_kind: str | None, probe: bool) -> dict:
    """Every figure at one size (a dict, also printed as a table)."""
    load_before = _load()
    rq = RecallqlScale(n)
    lances = [LanceScale(n, kind) for kind in lance_kinds(n, lance_kind)]
    w = Workload(n)
    calls = recallql_calls(rq, w)
    for lance in lances:
        calls.update(lance_calls(lance, w))
    times = measure(calls, len(w), rounds)
    rowid_of = {item["id"]: j for j, item in enumerate(scale_data.items(n))}
    recalls = recall_rows(n, w, rq, lances, rowid_of)
    rq.close()
    result = {"n": n, "load_before": load_before, "load_after": _load(), "rounds": rounds,
              "built_s": {"recallql": rq.built_s, **{f"LanceDB {x.kind}": x.built_s
                                                     for x in lances}},
              "systems": {name: {"cpu_ms": float(np.mean(cpu)) * 1e3,
                                 "cpu_p50_ms": float(np.median(cpu)) * 1e3,
                                 "wall_p50_ms": float(np.median(wall)) * 1e3,
                                 "wall_p95_ms": stats.percentile(wall, 95) * 1e3}
                          for name, (wall, cpu) in times.items()},
              "recall": recalls}
    result["recallql_build"] = rq.build_info()
    if probe:
        result["open"] = open_probe(rq.path, w)
    return result


def table(res: dict) -> str:
    """Markdown table of one size's query figures."""
    rows = [[name, f"{s['cpu_ms']:.2f}", f"{s['wall_p50_ms']:.2f}", f"{s['wall_p95_ms']:.2f}"]
            for name, s in res["systems"].items()]
    text = stats.table(["system", "CPU ms/query (mean)", "wall p50 ms", "wall p95 ms"], rows)
    rec = stats.table(["semantic top-10", "recall@10 vs exact"],
                      [[k, f"{v:.4f}"] for k, v in res["recall"].items()])
    return (f"### {res['n']:,} chunks (load average {res['load_before']} → "
            f"{res['load_after']}; built: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in res["built_s"].items() if v)
            + ")\n\n" + text + "\n\n" + rec + "\n" + (
                f"\nrecallql build: {json.dumps(res['recallql_build'])}\n"
                if res.get("recallql_build") else "") + (
                f"\nopen: {json.dumps(res['open'])}\n" if "open" in res else ""))


def target_lines(res: dict) -> list[str]:
    """The issue-16 acceptance figures of one size, one line each (parsed by
    `benchmarks.targets.from_script_output`): hybrid CPU against LanceDB IVF_PQ with recallql's
    semantic recall@10, the filtered costs, and open + first query (CPU and wall)."""
    n, systems, rec = res["n"], res["systems"], res["recall"]
    ours = systems.get("recallql hybrid", {}).get("cpu_ms")
    lines = []
    lance = systems.get("LanceDB ivf_pq hybrid", {}).get("cpu_ms")
    if ours and lance:
        lines.append(f"target {n} hybrid CPU: {ours:.2f} ms vs LanceDB ivf_pq {lance:.2f} ms = "
                     f"{ours / lance:.2f}x, semantic recall@10 {rec['recallql semantic']:.4f}")
    for field in ("tenant", "session"):
        cpu = systems.get(f"recallql hybrid WHERE {field}", {}).get("cpu_ms")
        if cpu and ours:
            lines.append(f"target {n} WHERE {field}: {cpu:.2f} ms = {cpu / ours:.2f}x unfiltered")
    probe = res.get("open")
    if probe:
        cpu = probe["connect_cpu_s"] + probe["first_query_cpu_s"]
        wall = probe["connect_s"] + probe["first_query_s"]
        lines.append(f"target {n} open + first query: {cpu:.3f} s CPU, {wall:.3f} s wall; "
                     f"first write {probe.get('first_write_cpu_s', 0):.3f} s CPU, "
                     f"{probe.get('first_write_s', 0):.3f} s wall")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lance", default=None, help="LanceDB kinds (default by size)")
    parser.add_argument("--no-probe", action="store_true", help="skip the open probe")
    parser.add_argument("--out", type=Path, default=scale_data.cache_dir() / "scale.jsonl")
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        started = time.perf_counter()
        res = run_size(n, args.rounds, args.lance, not args.no_probe)
        res["seconds"] = time.perf_counter() - started
        res["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with open(args.out, "a") as out:
            out.write(json.dumps(res) + "\n")
        print(table(res), flush=True)
        print("\n".join(target_lines(res)) + f"\n(load {_load()})", flush=True)


if __name__ == "__main__":
    main()
