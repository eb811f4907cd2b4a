"""Small writes per second: one process and three processes on one database, one message per
call (`db.messages.append`) against bulk calls (`db.messages.extend` of 20 messages), and the
signals of one call (`signal` against `signal_many`). SPEC §9 target: ≥ 200 small writes/s
from 3 processes together with bulk calls, on the 2-core reference machine.

    python -m benchmarks.bench_writes [--seconds 8] [--bulk 20]

Every write is durable when it returns (WAL ``synchronous=FULL``, fsynced segment files and
tantivy commits). Messages carry no vector (``embedder=None``): embedding is a separate cost
(`bench_ingest`). Each process holds its own connection open for the whole run; the writer lock
is taken per write, so a write waits while another process writes (``lock_timeout``, 5 s) and
the worst wait is reported. A run as ``python -m benchmarks.bench_writes worker DB MODE SECONDS
BULK START`` is one writer process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import recallql  # noqa: E402

MODES = ("append", "extend", "signal", "signal_many")
TARGET = 200.0


def worker(path: str, mode: str, seconds: float, bulk: int, start_at: float) -> dict:
    """Write for `seconds` from `start_at` (a shared wall-clock start); the writes made and the
    call latencies (ms)."""
    db = recallql.connect(path, embedder=None)
    session = f"w{os.getpid()}"
    db.sessions.create(session, "bench")
    time.sleep(max(0.0, start_at - time.time()))
    writes, latencies = 0, []
    end = time.perf_counter() + seconds
    k = 0
    while time.perf_counter() < end:
        began = time.perf_counter()
        writes += _call(db, mode, session, k, bulk)
        latencies.append((time.perf_counter() - began) * 1000.0)
        k += 1
    elapsed = seconds + max(0.0, time.perf_counter() - end)
    db.close()
    return {"writes": writes, "seconds": elapsed, "latencies": latencies}


def _call(db: recallql.Database, mode: str, session: str, k: int, bulk: int) -> int:
    if mode == "append":
        db.messages.append(session, "user", f"message {k} of a small conversation turn")
        return 1
    if mode == "extend":
        db.messages.extend([{"session_id": session, "role": "user",
                             "content": f"message {k}.{j} of a small conversation turn"}
                            for j in range(bulk)])
        return bulk
    if mode == "signal":
        db.sessions.signal(session, "reward", 0.5, entity=f"doc:{k}")
        return 1
    db.sessions.signal_many([{"session_id": session, "name": "reward", "value": 0.5,
                              "entity": f"doc:{k}.{j}"} for j in range(bulk)])
    return bulk


def run(processes: int, mode: str, seconds: float, bulk: int) -> dict:
    """`processes` writer processes on one fresh database, started together."""
    with tempfile.TemporaryDirectory(prefix="recallql-writes-") as tmp:
        path = str(Path(tmp) / "db")
        recallql.connect(path, embedder=None).close()
        start_at = time.time() + 1.5  # time for every process to import and open
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.bench_writes", "worker",
                                   path, mode, str(seconds), str(bulk), str(start_at)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env, cwd=Path(__file__).resolve().parents[1])
                 for _ in range(processes)]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=seconds + 120)
            if proc.returncode != 0:
                raise RuntimeError(f"writer process failed: {err[-2000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    latencies = [ms for r in results for ms in r["latencies"]]
    writes = sum(r["writes"] for r in results)
    elapsed = max(r["seconds"] for r in results)
    return {"writes": writes, "rate": writes / elapsed, "calls": len(latencies),
            "p50": statistics.median(latencies), "worst": max(latencies)}


def main() -> None:
    """Run every mode with 1 and 3 processes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per run")
    parser.add_argument("--bulk", type=int, default=20, help="messages or signals per bulk call")
    args = parser.parse_args(sys.argv[1:])
    print(f"small writes/s (durable; {args.seconds:g} s per run; bulk calls of {args.bulk})")
    print(f"{'mode':>12} {'procs':>5} {'writes/s':>9} {'calls':>6} {'p50 ms':>8} {'worst ms':>9}")
    rates = {}
    for mode in MODES:
        for processes in (1, 3):
            r = run(processes, mode, args.seconds, 1 if mode in ("append", "signal")
                    else args.bulk)
            rates[mode, processes] = r["rate"]
            print(f"{mode:>12} {processes:>5} {r['rate']:9.1f} {r['calls']:6d} {r['p50']:8.1f} "
                  f"{r['worst']:9.1f}", flush=True)
    bulk = rates["extend", 3]
    print(f"3 processes with bulk calls (extend): {bulk:.0f} writes/s, "
          f"{bulk / rates['append', 3]:.1f}x one message per call; target >= {TARGET:g}/s: "
          + ("ok" if bulk >= TARGET else "MISSED"))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        db_path, what, secs, size, start = sys.argv[2:7]
        print(json.dumps(worker(db_path, what, float(secs), int(size), float(start))))
    else:
        main()
