"""Ingest and memory benchmarks of the storage layer (SPEC §9). Prints figures; asserts nothing.

    python -m benchmarks.bench_ingest [--items 100000] [--batch 10000] [--embed 2000]

1. Ingest without embedding: real text (CACM, Cranfield, Debian changelog entries, repeated to
   reach --items chunks) with random 384-d unit vectors supplied; target ≥ 20k chunks/s.
2. Small batches: single-item batches (the message-append workload), items/s.
3. Ingest with the default embedder (all-MiniLM-L6-v2 int8) on --embed CACM documents.
4. RSS of a fresh reader process after loading the 100k × 384 vectors (one semantic and one
   lexical query touch every page) vs raw vector bytes + text index size; target ≤ 1.3×.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA_CANDIDATES = (REPO / ".." / "shared" / "data", REPO / ".." / ".." / "shared" / "data")
DIM = 384


def shared_ir() -> Path | None:
    """The shared IR data folder, if present beside the repository."""
    return next((p / "ir" for p in DATA_CANDIDATES if (p / "ir").is_dir()), None)


def real_texts() -> list[dict]:
    """Title/body/date/source of every real document available here."""
    from recallql.datasets import corpora

    keep = ("title", "body", "created_at", "source", "id")
    docs: list[dict] = []
    ir = shared_ir()
    if ir is not None:
        docs += corpora.load_cacm(ir / "cacm")
        docs += corpora.load_cranfield(ir / "cranfield")
    docs += corpora.load_debian()
    if not docs:
        sys.exit("no real text found (shared data or /usr/share/doc changelogs)")
    return [{k: d[k] for k in keep if k in d} for d in docs]


def corpus(n: int, seed: int = 0) -> list[dict]:
    """n chunks of real text, repeated with distinct ids, each with a random unit vector."""
    base = real_texts()
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    items = []
    for i, doc in zip(range(n), itertools.cycle(base), strict=False):
        item = dict(doc, id=f"{doc['id']}~{i // len(base)}", vector=vecs[i])
        items.append(item)
    return items


def bench_bulk(path: Path, items: list[dict], batch: int) -> float:
    import recallql

    with recallql.connect(path, embedder=None) as db:
        started = time.perf_counter()
        for start in range(0, len(items), batch):
            db.ingest("docs", items[start:start + batch])
        seconds = time.perf_counter() - started
    rate = len(items) / seconds
    print(f"ingest, vectors supplied: {len(items):,} chunks x {DIM}-d in batches of {batch:,}: "
          f"{seconds:.2f} s = {rate:,.0f} chunks/s (target >= 20,000)")
    return rate


def bench_small_batches(items: list[dict], count: int = 300) -> None:
    import recallql

    with tempfile.TemporaryDirectory() as tmp, recallql.connect(tmp, embedder=None) as db:
        started = time.perf_counter()
        for item in items[:count]:
            db.ingest("docs", [item])
        seconds = time.perf_counter() - started
        segments = len(db.snapshot("docs")._segments)
    print(f"ingest, one item per batch: {count} batches in {seconds:.2f} s = "
          f"{count / seconds:,.0f} batches/s ({1000 * seconds / count:.1f} ms each, "
          f"{segments} vector segments after merges)")


def bench_embed(count: int) -> None:
    import recallql
    from recallql.datasets import corpora

    ir = shared_ir()
    if ir is None:
        print("ingest with the default embedder: skipped (no shared CACM data)")
        return
    docs = [{k: d[k] for k in ("id", "title", "body", "created_at") if k in d}
            for d in itertools.islice(corpora.load_cacm(ir / "cacm"), count)]
    with tempfile.TemporaryDirectory() as tmp, recallql.connect(tmp) as db:
        db.embedder("docs")(["warm up"])  # model load is a one-off per process
        started = time.perf_counter()
        report = db.ingest("docs", docs)
        seconds = time.perf_counter() - started
    chars = sum(len(d.get("title", "")) + len(d.get("body", "")) for d in docs) / len(docs)
    print(f"ingest with the default embedder: {report.embedded:,} CACM docs (mean "
          f"{chars:.0f} chars) in {seconds:.1f} s = {report.embedded / seconds:,.0f} chunks/s")


RSS_PROBE = """
import sys, numpy as np
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
import recallql
base = rss()
db = recallql.connect(sys.argv[1], embedder=None, readonly=True)
snap = db.snapshot('docs')
rows, _ = snap.semantic_topn(np.ones(%d, np.float32), 10)
rows, _ = snap.lexical_topn(snap.analyze('memory allocation algorithm'), 10)
print(base, rss())
"""


def bench_rss(path: Path, items: int) -> None:
    probe = subprocess.run([sys.executable, "-c", RSS_PROBE % DIM, str(path)], check=True,
                           capture_output=True, text=True, cwd=REPO)
    base, loaded = map(int, probe.stdout.split())
    raw = items * DIM * 4
    text = sum(p.stat().st_size for p in (path / "collections" / "docs" / "text").rglob("*")
               if p.is_file())
    target = raw + text
    print(f"reader RSS after loading {items:,} x {DIM}-d: {loaded / 2**20:.0f} MiB "
          f"(interpreter + imports {base / 2**20:.0f} MiB); raw vectors {raw / 2**20:.0f} MiB "
          f"+ text index {text / 2**20:.0f} MiB = {target / 2**20:.0f} MiB; ratio "
          f"{loaded / target:.2f}x (target <= 1.3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--embed", type=int, default=2_000)
    args = parser.parse_args()
    items = corpus(args.items)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "db"
        bench_bulk(path, items, args.batch)
        bench_rss(path, args.items)
    bench_small_batches(items)
    if args.embed > 0:
        bench_embed(args.embed)


if __name__ == "__main__":
    main()
