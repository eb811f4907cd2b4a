"""Crash safety: a writer process is SIGKILLed at random moments (and at chosen points of the
commit protocol); afterwards the database opens, shows only whole batches in SQLite, tantivy
results and vectors, and the next writer can ingest again.

Run as a script, this module is the writer: ``python test_store_crash.py DB START SEED [POINT N]``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve()
SEED = 20240601


def batch_items(seed: int, k: int) -> list[dict]:
    """Logical batch k: 1–12 fresh items with supplied vectors, plus the shared item 'shared'
    (re-ingested by every batch, embedded by the collection's embedder)."""
    rng = np.random.default_rng([seed, k])
    size = int(rng.integers(1, 13))
    vecs = rng.standard_normal((size, 16)).astype(np.float32)
    items = [{"id": f"b{k}-{j}", "title": f"batchtok{k} item {j}", "body": "crash test body",
              "source": f"batch-{k}", "vector": vecs[j]} for j in range(size)]
    items.append({"id": "shared", "title": f"shared batchtok{k}", "source": f"batch-{k}"})
    return items


def _install_crash(point: str, after: int) -> None:
    """Make this process SIGKILL itself at the `after`-th time it passes `point`."""
    from recallql.index import batch, store, text, vectors

    seen = {"n": 0}

    def hit():
        seen["n"] += 1
        if seen["n"] >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(owner, name, before=False, when=lambda *a, **k: True):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if before and when(*args, **kwargs):
                hit()
            result = original(*args, **kwargs)
            if not before and when(*args, **kwargs):
                hit()
            return result

        setattr(owner, name, wrapper)

    if point == "segment-written":
        wrap(vectors.SegmentFiles, "write", when=lambda self, name, parts: name[0] == "b")
    elif point == "text-committed":
        wrap(text.TextIndex, "commit")
    elif point == "sqlite-committed":
        wrap(store.batches, "commit")
    elif point == "merge-written":
        wrap(vectors.SegmentFiles, "write", when=lambda self, name, parts: name[0] == "m")
    elif point == "merge-committed":
        wrap(vectors.SegmentFiles, "remove", before=True)
    else:
        raise ValueError(point)
    assert batch  # imported for its side effects on `store.batches`


def _writer(path: str, start: int, seed: int, point: str | None, after: int) -> None:
    import recallql
    from recallql.index.embedders import HashEmbedder

    db = recallql.connect(path, embedder=HashEmbedder(16))
    if point:
        _install_crash(point, after)
    print("ready", flush=True)
    k = start
    while True:
        db.ingest("docs", batch_items(seed, k))
        k += 1


def _spawn(path: Path, start: int, point: str | None = None, after: int = 0):
    args = [sys.executable, str(HERE), str(path), str(start), str(SEED)]
    if point:
        args += [point, str(after)]
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True)
    line = proc.stdout.readline()
    assert line == "ready\n", proc.stderr.read()
    return proc


def _check(path: Path, started_from: int) -> int:
    """Open as the next writer, verify whole batches everywhere, ingest the next logical batch;
    returns the next logical batch number."""
    import recallql
    from recallql.index.embedders import HashEmbedder

    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        snap = db.snapshot("docs")
        live = np.flatnonzero(snap.live)
        rows = snap.fetch(live)
        sizes = Counter(r["source"] for r in rows if r["id"] != "shared")
        done = sorted(int(s.split("-")[1]) for s in sizes)
        last = len(done)
        assert done == list(range(1, last + 1)), "committed batches are not a prefix"
        assert last >= started_from - 1, "a committed batch disappeared"
        for k in done:  # SQLite: each batch whole
            assert sizes[f"batch-{k}"] == len(batch_items(SEED, k)) - 1, k
        shared = [r for r in rows if r["id"] == "shared"]
        assert [r["source"] for r in shared] == ([f"batch-{last}"] if last else [])
        for k in range(max(1, last - 3), last + 4):  # tantivy: whole batches only
            got, _ = snap.lexical_topn([f"batchtok{k}"], 100)
            want = {it["id"] for it in batch_items(SEED, k)} if k <= last else set()
            if k != last:
                want.discard("shared")
            assert {snap.ids[r] for r in got} == want, k
        for k in done[-3:]:  # vectors: whole batches only, exact vectors
            items = batch_items(SEED, k)
            got, cos = snap.semantic_topn(items[0]["vector"], 1)
            assert snap.ids[got[0]] == items[0]["id"] and cos[0] == pytest.approx(1.0)
        assert int((snap.live & snap.has_vector).sum()) == len(live)
        state = db.store._state("docs")
        assert state.text.batches_after(db.store.committed_batch()) == 0
        manifest = {s.file for s in db.store.meta.segments(state.id)}
        assert {p.name for p in state.files.directory.iterdir()} == manifest
        db.ingest("docs", batch_items(SEED, last + 1))
        return last + 2


@pytest.mark.slow
def test_sigkill_at_random_moments(tmp_path):
    path = tmp_path / "db"
    rng = random.Random(SEED)
    start, trials = 1, 20
    for _ in range(trials):
        proc = _spawn(path, start)
        time.sleep(rng.uniform(0.0, 0.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        start = _check(path, start)
    assert start > trials  # batches were written in between


@pytest.mark.slow
@pytest.mark.parametrize("point", ["segment-written", "text-committed", "sqlite-committed",
                                   "merge-written", "merge-committed"])
def test_sigkill_at_protocol_points(tmp_path, point):
    path = tmp_path / "db"
    start = 1
    for after in (1, 3):
        proc = _spawn(path, start, point, after)
        assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read()
        start = _check(path, start)


if __name__ == "__main__":
    db_path, first, seed_arg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    crash_point = sys.argv[4] if len(sys.argv) > 4 else None
    crash_after = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    _writer(db_path, first, seed_arg, crash_point, crash_after)
