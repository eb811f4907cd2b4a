"""A reader's statement sees one committed batch on every leg, while a writer purges
(SPEC §7, issue 13).

Found by trials: a reader refreshing to batch S while the writer commits S+1 (deleting rows live
at S) and S+2 (whose tantivy commit purged them) found those rows live in its snapshot but absent
from the lexical leg (`LEG_ABSENT`): 4–15 torn statements per few thousand.

The writer process runs with ``retention=0`` (tombstoned rows purged as early as the protocol
allows) and cycles: ingest a large batch (20,000 rows, so a reader's refresh to it takes long)
holding one probe row with its own word and vector, delete the previous cycle's probe, ingest
two unrelated rows (before the fix, the first one's tantivy commit purged the deleted probe;
with the fix the purge lags one batch more, so the second one's does) — all while a reader may
still be refreshing to the large batch. Reader
processes run statements; each checks that both legs find exactly the probe rows the snapshot
says are live. Run as a script, this
module is a helper: ``python test_store_purge_race.py writer|reader DB [STATEMENTS]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve()
DIM = 8
STATEMENTS = 5_000  # at least, per reader (two readers), and for as long as the writer writes
ROWS = 40_000
TICKS = 2
CYCLES = 20  # then the writer stops (the database stays a few hundred MB)


PROBE = np.eye(DIM, dtype=np.float32)[0]


def _writer(path: str) -> None:
    import recallql

    db = recallql.connect(path, embedder=None, retention=0)
    db.create_collection("c", ("text",), dim=DIM, embedder=None)
    rng = np.random.default_rng(7)
    print("ready", flush=True)
    for k in range(1, CYCLES + 1):
        rows = [{"id": f"r{k}-{j}", "text": f"common row {k}", "vector": rng.standard_normal(DIM)}
                for j in range(ROWS)]
        rows.append({"id": f"probe{k}", "text": f"probe{k} common", "vector": PROBE})
        db.ingest("c", rows)  # batch S: a reader's refresh to it reads 20,000 rows
        if k > 1:
            db.delete("c", [f"probe{k - 1}"])  # S+1: quick, while readers still refresh to S
        for t in range(TICKS):  # S+2, S+3: with retention 0, S+3's tantivy commit purges it
            db.ingest("c", [{"id": f"tick{k}-{t}", "text": "other",
                             "vector": rng.standard_normal(DIM)}])
    Path(path).with_name("writer-done").touch()
    print("done", flush=True)
    sys.stdin.read()  # stay until the test ends


def _reader(path: str, statements: str) -> None:
    import recallql

    db = recallql.connect(path, embedder=None, readonly=True)
    torn = checked = 0
    batches = set()
    done = Path(path).with_name("writer-done")
    while checked < int(statements) or not done.exists():  # for as long as the writer writes
        snap = db.snapshot("c")
        if snap.size == 0:
            continue
        probes = _probes(snap)
        lexical = {r for r, name in probes.items()
                   if r in snap.lexical_topn([name], 3)[0].tolist()}
        semantic = set(snap.semantic_topn(PROBE, len(probes) or 1)[0].tolist()) & set(probes)
        if lexical != set(probes) or semantic != set(probes):
            torn += 1
        checked += 1
        batches.add(snap.seq)
    print(json.dumps({"checked": checked, "torn": torn, "batches": len(batches)}), flush=True)


def _probes(snap) -> dict[int, str]:
    """The live probe rows of a snapshot: cycle k's rows are ``(k-1)·(ROWS+1+TICKS) …``, its
    probe the last row of its ingest batch (then the tick rows)."""
    stride = ROWS + 1 + TICKS
    first = max(ROWS, (snap.size // stride - 3) * stride + ROWS)
    rows = [r for r in range(first, snap.size, stride) if snap.live[r]]
    found = {r: snap.ids[r] for r in rows}
    assert all(name.startswith("probe") for name in found.values()), found
    return found


def _spawn(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    return subprocess.Popen([sys.executable, str(HERE), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_no_torn_statement_while_a_writer_purges(tmp_path):
    path = tmp_path / "db"
    writer = _spawn("writer", str(path))
    try:
        assert writer.stdout.readline() == "ready\n", writer.stderr.read()
        time.sleep(0.5)
        readers = [_spawn("reader", str(path), str(STATEMENTS)) for _ in range(2)]
        results = []
        for reader in readers:
            out, err = reader.communicate(timeout=1800)
            assert reader.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        assert writer.poll() is None, writer.stderr.read()  # the writer did not fail
    finally:
        writer.kill()
        writer.wait()
    checked = sum(r["checked"] for r in results)
    assert checked >= 10_000
    assert sum(r["batches"] for r in results) > 20  # the readers saw the writer move on
    assert sum(r["torn"] for r in results) == 0, results


if __name__ == "__main__":
    {"writer": _writer, "reader": _reader}[sys.argv[1]](*sys.argv[2:])
