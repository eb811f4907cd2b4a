"""Open a recallql database in a fresh process, run one hybrid query, then one write.

    python -m benchmarks.open_probe <database> <vector .npy> <query text> [--write]

Prints one JSON object: seconds for the imports, `connect`, the first query and (with
``--write``) the first one-item ingest and its delete, each wall-clock and CPU; RSS in MiB
after the query.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _Clock:
    def __init__(self) -> None:
        self.out: dict[str, float] = {}

    def step(self, name: str, fn):
        wall, cpu = time.perf_counter(), time.process_time()
        value = fn()
        self.out[f"{name}_s"] = time.perf_counter() - wall
        self.out[f"{name}_cpu_s"] = time.process_time() - cpu
        return value


def _import():
    import recallql
    import recallql.api  # the modules `connect` loads (tantivy, the engine, the grammar)
    import recallql.engine.engine  # noqa: F401

    return recallql


def main(argv: list[str]) -> None:
    path, vec, text = Path(argv[1]), np.load(argv[2]), argv[3]
    clock = _Clock()
    recallql = clock.step("import", _import)
    db = clock.step("connect", lambda: recallql.connect(path, embedder=None))
    clock.step("first_query", lambda: db.execute(
        "SEARCH chunks MATCHING :q NEAR :v LIMIT 10", q=text, v=vec))
    clock.out["rss_mib"] = _rss_mib()
    if "--write" in argv:
        item = {"id": f"probe-{time.time_ns()}", "body": text, "vector": vec}
        clock.step("first_write", lambda: db.ingest("chunks", [item]))
        clock.step("delete", lambda: db.delete("chunks", [item["id"]]))
    db.close()
    print(json.dumps(clock.out))


if __name__ == "__main__":
    main(sys.argv)
