"""HNSW libraries side by side: hnswlib, usearch and faiss-cpu on MiniLM(-derived) vectors.

    nice -n 10 python -m benchmarks.bench_ann --rows 100000 [--libs hnswlib,usearch,faiss]

Every library gets the same vectors (`benchmarks.scale_data`: real all-MiniLM-L6-v2 vectors up
to 100k rows, MiniLM-derived beyond), the same graph parameters (M = 16 links per node,
ef_construction = 128, inner product on L2-normalised vectors = cosine) and the same 277 real
query vectors (the judged CACM and Cranfield queries). Measured per library, in one process:

- build: the first `rows` vectors added in batches of 10,000 (an incremental build), CPU time
  summed over threads and wall time, with `--threads` build threads;
- persistence: save time and file size, load time (and usearch's memory-mapped ``view``);
- incremental add: 1,000 further vectors added one call each to the loaded index (µs a row);
- query: top-100 per query, one thread, at several ef (search breadth): CPU µs per query and
  recall@10 against the exact top-10 (numpy, float64), and recall@10 after exact re-scoring of
  the top-100 with the float32 vectors (what `recallql.index.ann` does).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks import scale_data
from benchmarks.latency import load_queries

M, EF_CONSTRUCTION, K, WINDOW = 16, 128, 10, 100
EFS = (64, 128, 256)
ADD_BATCH, EXTRA = 10_000, 1_000


class Lib:
    """One library behind the same calls."""

    name = ""

    def __init__(self, dim: int, capacity: int, threads: int):
        self.dim, self.capacity, self.threads = dim, capacity, threads

    def add(self, vecs: np.ndarray, first: int) -> None: ...
    def save(self, path: Path) -> None: ...
    def load(self, path: Path) -> None: ...
    def search(self, q: np.ndarray, k: int, ef: int) -> np.ndarray: ...


class Hnswlib(Lib):
    name = "hnswlib"

    def __init__(self, dim: int, capacity: int, threads: int):
        import hnswlib

        super().__init__(dim, capacity, threads)
        self._mod = hnswlib
        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.init_index(max_elements=capacity, ef_construction=EF_CONSTRUCTION, M=M,
                              random_seed=100)

    def add(self, vecs, first):
        self.index.add_items(vecs, np.arange(first, first + len(vecs)), num_threads=self.threads)

    def save(self, path):
        self.index.save_index(str(path))

    def load(self, path):
        self.index = self._mod.Index(space="ip", dim=self.dim)
        self.index.load_index(str(path), max_elements=self.capacity)

    def search(self, q, k, ef):
        self.index.set_ef(ef)
        labels, _ = self.index.knn_query(q, k=k, num_threads=1)
        return labels[0].astype(np.int64)


class Usearch(Lib):
    name = "usearch"
    dtype = "f32"

    def __init__(self, dim: int, capacity: int, threads: int):
        from usearch.index import Index

        super().__init__(dim, capacity, threads)
        self._cls = Index
        self.index = Index(ndim=dim, metric="ip", dtype=self.dtype, connectivity=M,
                           expansion_add=EF_CONSTRUCTION)

    def add(self, vecs, first):
        self.index.add(np.arange(first, first + len(vecs)), vecs, threads=self.threads)

    def save(self, path):
        self.index.save(str(path))

    def load(self, path):
        self.index = self._cls.restore(str(path))

    def view(self, path):
        self.index = self._cls.restore(str(path), view=True)

    def search(self, q, k, ef):
        self.index.expansion_search = ef
        return self.index.search(q, k, threads=1).keys.astype(np.int64)


class UsearchF16(Usearch):
    name = "usearch f16"
    dtype = "f16"


class UsearchI8(Usearch):
    name = "usearch i8"
    dtype = "i8"


class Faiss(Lib):
    name = "faiss"

    def __init__(self, dim: int, capacity: int, threads: int):
        import faiss

        super().__init__(dim, capacity, threads)
        self._faiss = faiss
        self.index = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = EF_CONSTRUCTION

    def add(self, vecs, first):
        self._faiss.omp_set_num_threads(self.threads)
        self.index.add(np.ascontiguousarray(vecs, np.float32))

    def save(self, path):
        self._faiss.write_index(self.index, str(path))

    def load(self, path):
        self.index = self._faiss.read_index(str(path))

    def view(self, path):
        self.index = self._faiss.read_index(str(path), self._faiss.IO_FLAG_MMAP)

    def search(self, q, k, ef):
        self._faiss.omp_set_num_threads(1)
        params = self._faiss.SearchParametersHNSW(efSearch=ef)
        _, labels = self.index.search(q, k, params=params)
        return labels[0].astype(np.int64)


LIBS: dict[str, type[Lib]] = {c.name: c for c in (Hnswlib, Usearch, UsearchF16, UsearchI8, Faiss)}


def rss_mib() -> float:
    """Resident set size of this process now, in MiB (Linux ``/proc``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall s, CPU s summed over the process's threads) of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def exact_top(vecs: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """int64[q, k]: the exact cosine top-k of each query (float32 scan in blocks)."""
    best_s = np.full((len(queries), 0), -np.inf, np.float32)
    best_i = np.zeros((len(queries), 0), np.int64)
    for start in range(0, len(vecs), 262_144):
        block = np.asarray(vecs[start:start + 262_144])
        sims = queries @ block.T
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        best_s = np.concatenate([best_s, np.take_along_axis(sims, top, 1)], 1)
        best_i = np.concatenate([best_i, top + start], 1)
        keep = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(best_s, keep, 1), np.take_along_axis(best_i, keep, 1)
    return best_i


def rescore(vecs: np.ndarray, q: np.ndarray, rowids: np.ndarray, k: int) -> np.ndarray:
    """The top-k of `rowids` by exact cosine (float64 over the float32 vectors)."""
    rowids = rowids[rowids >= 0]
    exact = np.asarray(vecs[np.sort(rowids)], np.float64) @ q.astype(np.float64)
    return np.sort(rowids)[np.argsort(-exact, kind="stable")[:k]]


def recall(found: list[np.ndarray], truth: np.ndarray, vecs: np.ndarray,
           queries: np.ndarray) -> float:
    """Mean recall@k of found rows against the exact top-k rows, ties counted: a found row
    is a hit when its exact cosine (float64) reaches the k-th exact one (within 1e-6), so two
    rows with equal vectors are interchangeable."""
    k = truth.shape[1]
    hits = []
    for f, t, q in zip(found, truth, queries.astype(np.float64), strict=True):
        f = np.asarray(f[:k], np.int64)
        f = f[f >= 0]
        kth = float(np.min(np.asarray(vecs[np.sort(t)], np.float64) @ q))
        cos = np.asarray(vecs[np.sort(f)], np.float64) @ q if len(f) else np.zeros(0)
        hits.append(min(k, int(np.count_nonzero(cos >= kth - 1e-6))) / k)
    return float(np.mean(hits))


def interleaved_queries(libs: list[Lib], vecs, queries, truth, ef: int) -> list[dict]:
    """CPU µs per query, wall p50, recall@10 raw and after exact re-scoring at one ef, per
    library; the libraries answer blocks of 10 queries in turn (the order rotating), so each
    sees the same machine load."""
    cpu = [0.0] * len(libs)
    walls: list[list[float]] = [[] for _ in libs]
    found: list[list[np.ndarray]] = [[None] * len(queries) for _ in libs]  # type: ignore[list-item]
    for b, first in enumerate(range(0, len(queries), 10)):
        for k in [(j + b) % len(libs) for j in range(len(libs))]:
            for i in range(first, min(first + 10, len(queries))):
                w, c = time.perf_counter(), time.process_time()
                found[k][i] = libs[k].search(queries[i][None, :], WINDOW, ef)
                cpu[k] += time.process_time() - c
                walls[k].append(time.perf_counter() - w)
    out = []
    for k in range(len(libs)):
        rescored = [rescore(vecs, q, f, K) for q, f in zip(queries, found[k], strict=True)]
        out.append({"ef": ef, "cpu_us": cpu[k] / len(queries) * 1e6,
                    "wall_p50_us": statistics.median(walls[k]) * 1e6,
                    "recall": recall(found[k], truth, vecs, queries),
                    "recall_rescored": recall(rescored, truth, vecs, queries)})
    return out


def build(cls: type[Lib], vecs: np.ndarray, rows: int, threads: int, tmp: Path
          ) -> tuple[Lib, Path, dict]:
    """Build one library's index incrementally and save it."""
    lib = cls(vecs.shape[1], rows + EXTRA, threads)
    out: dict = {"lib": cls.name, "queries": [], "load_build": os.getloadavg()[0]}
    out["build_wall"], out["build_cpu"] = timed(lambda: [
        lib.add(np.asarray(vecs[s:min(rows, s + ADD_BATCH)]), s)
        for s in range(0, rows, ADD_BATCH)])
    path = tmp / f"{cls.name.replace(' ', '_')}.idx"
    out["save_wall"], _ = timed(lambda: lib.save(path))
    out["file_mb"] = path.stat().st_size / 2**20
    return lib, path, out


def reopen(lib: Lib, path: Path, vecs, rows: int, queries, out: dict) -> None:
    """Load, add after load, and the memory-mapped view (where the library has one)."""
    del lib.index
    before = rss_mib()
    out["load_wall"], _ = timed(lambda: lib.load(path))
    out["load_rss_mib"] = rss_mib() - before
    extra = np.asarray(vecs[rows:rows + EXTRA])
    w, c = timed(lambda: [lib.add(extra[i:i + 1], rows + i) for i in range(len(extra))])
    out["add_one_us"] = c / len(extra) * 1e6
    if hasattr(lib, "view"):
        del lib.index
        before = rss_mib()
        out["view_wall"], _ = timed(lambda: lib.view(path))
        q = queries[0][None, :]
        out["view_first_query_ms"] = timed(lambda: lib.search(q, WINDOW, EFS[1]))[0] * 1e3
        for q in queries:
            lib.search(q[None, :], WINDOW, EFS[1])
        out["view_rss_mib"] = rss_mib() - before
    del lib.index
    path.unlink()


def measure_all(classes: list[type[Lib]], vecs, rows: int, queries, truth, threads: int,
                tmp: Path) -> list[dict]:
    """Every figure of every library (see the module docstring)."""
    built = [build(cls, vecs, rows, threads, tmp) for cls in classes]
    libs = [lib for lib, _, _ in built]
    for ef in EFS:
        for (_, _, out), res in zip(built, interleaved_queries(libs, vecs, queries, truth, ef),
                                    strict=True):
            out["queries"].append(res)
    for lib, path, out in built:
        reopen(lib, path, vecs, rows, queries, out)
    return [out for _, _, out in built]


def report(res: dict, rows: int, threads: int) -> str:
    """Printable lines for one library's figures."""
    lines = [f"{res['lib']:12s} build {rows:,} rows ({threads} thr): "
             f"wall {res['build_wall']:.1f} s,"
             f" CPU {res['build_cpu']:.1f} s ({res['build_cpu'] / rows * 1e6:.0f} µs CPU/row);"
             f" save {res['save_wall']:.2f} s, file {res['file_mb']:.0f} MiB;"
             f" load {res['load_wall']:.2f} s (+{res['load_rss_mib']:.0f} MiB RSS)"
             + (f"; mmap view {res['view_wall'] * 1e3:.1f} ms + first query "
                f"{res['view_first_query_ms']:.1f} ms (+{res['view_rss_mib']:.0f} MiB RSS "
                f"after {EFS[1]}-ef queries)" if "view_wall" in res else "")
             + f"; add after load {res['add_one_us']:.0f} µs CPU/row (1 row per call)"]
    for q in res["queries"]:
        lines.append(f"{'':12s} top-{WINDOW} ef {q['ef']:3d}: CPU {q['cpu_us']:7.0f} µs/query, "
                     f"wall p50 {q['wall_p50_us']:7.0f} µs, recall@10 {q['recall']:.4f}, "
                     f"after exact re-scoring {q['recall_rescored']:.4f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--libs", default="hnswlib,usearch,faiss")
    parser.add_argument("--threads", type=int, default=2, help="build threads")
    args = parser.parse_args()
    vecs = scale_data.vectors(args.rows + EXTRA)
    queries = np.stack([v for _, v in load_queries()]).astype(np.float32)
    truth = exact_top(vecs[:args.rows], queries, K)
    kind = "real MiniLM" if args.rows <= scale_data.BASE_ROWS else "MiniLM + MiniLM-derived"
    load = _load()
    print(f"{args.rows:,} rows x {vecs.shape[1]}-d ({kind}), {len(queries)} real query vectors; "
          f"M={M}, ef_construction={EF_CONSTRUCTION}; load average {load}", flush=True)
    with tempfile.TemporaryDirectory(dir=scale_data.cache_dir()) as tmp:
        classes = [LIBS[name] for name in args.libs.split(",")]
        for res in measure_all(classes, vecs, args.rows, queries, truth, args.threads, Path(tmp)):
            print(report(res, args.rows, args.threads) + f"\n{'':12s} (load average during "
                  f"its build {res['load_build']:.2f})", flush=True)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"process peak RSS {rss:.0f} MiB; load average at the end {_load()}")


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
