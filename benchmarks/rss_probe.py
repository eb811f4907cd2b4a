"""RSS of a fresh process that opens a database and runs one hybrid query (used by latency).

    python -m benchmarks.rss_probe recallql|lance <database path> <vector .npy> <query text>

Prints two integers: RSS in bytes after the imports, then after opening the database and
running the query.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np


def rss() -> int:
    """Resident set size of this process, in bytes (Linux ``/proc``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def probe_recallql(path: Path, text: str, vec: np.ndarray) -> tuple[int, int]:
    """RSS before and after a reader opens `path` and runs one hybrid SEARCH."""
    import recallql

    base = rss()
    db = recallql.connect(path, embedder=None, readonly=True)
    db.execute("SEARCH docs MATCHING :q NEAR :v LIMIT 10", q=text, v=vec)
    return base, rss()


def probe_lance(path: Path, text: str, vec: np.ndarray) -> tuple[int, int]:
    """RSS before and after LanceDB opens `path` and runs one hybrid query."""
    os.environ.setdefault("LANCEDB_LOG", "error")
    import lancedb
    from lancedb.rerankers import RRFReranker

    base = rss()
    table = lancedb.connect(path).open_table("items")
    (table.search(query_type="hybrid").vector(vec).text(text).distance_type("cosine")
     .rerank(RRFReranker(K=60)).limit(10).select(["id"]).to_arrow())
    return base, rss()


def main(argv: list[str]) -> None:
    """Run the probe named by ``argv[1]``."""
    kind, path, text = argv[1], Path(argv[2]), argv[4]
    vec = np.load(argv[3])
    probe = probe_recallql if kind == "recallql" else probe_lance
    base, loaded = probe(path, text, vec)
    print(base, loaded)


if __name__ == "__main__":
    main(sys.argv)
