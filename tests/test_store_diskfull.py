"""Storage errors surface as `StoreError` with the cause and the file; the store stays at its
last committed batch (SPEC §7, issue 13).

Found by trials on a small tmpfs: the data stayed intact, but callers got raw `ValueError`
(tantivy), `sqlite3.OperationalError` or `OSError`, once "cannot rollback - no transaction is
active", which hid the cause.

The disk is filled for real: a small tmpfs is mounted (the tests run as root); where mounting is
not allowed, the same scenario runs in a subprocess whose file size is capped with
``RLIMIT_FSIZE`` (writes past it fail with ``EFBIG``). Run as a script, this module is that
subprocess: ``python test_store_diskfull.py DB KIND LIMIT_BYTES``.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve()
CAUSES = ("No space left on device", "ENOSPC", "database or disk is full", "File too large",
          "EFBIG", "SQLITE_FULL", "disk I/O error")


def items(kind: str, k: int) -> list[dict]:
    """Batch k: 20 items, heavy on vectors or on text."""
    rng = np.random.default_rng(k)
    if kind == "vectors":
        return [{"id": f"b{k}-{j}", "text": f"tok{k} row", "vector": rng.standard_normal(256)}
                for j in range(20)]
    words = " ".join(f"w{k}x{j}" for j in range(400))
    return [{"id": f"b{k}-{j}", "text": f"tok{k} {words} {j}"} for j in range(20)]


def open_db(path: Path, readonly: bool = False):
    import recallql

    db = recallql.connect(path, embedder=None, readonly=readonly)
    if not readonly:
        db.create_collection("c", ("text",), dim=256, embedder=None)
    return db


def fill(path: Path, kind: str) -> dict:
    """Ingest batches until a write fails; the committed batches and the error."""
    import recallql

    committed, error = 0, None
    db = open_db(path)
    try:
        for k in range(1, 10_000):
            try:
                db.ingest("c", items(kind, k))
            except recallql.StoreError as exc:
                error = {"type": type(exc).__name__, "message": str(exc),
                         "cause": repr(exc.__cause__)}
                break
            except Exception as exc:  # noqa: BLE001 - reported: the test fails on it
                error = {"type": type(exc).__name__, "message": str(exc), "cause": None}
                break
            committed = k
    finally:
        with contextlib.suppress(Exception):
            db.close()
    return {"committed": committed, "error": error}


def verify(path: Path, committed: int) -> None:
    """The store opens, shows exactly batches 1..committed on every leg, and checks ok."""
    db = open_db(path, readonly=True)
    try:
        snap = db.snapshot("c")
        ids = {snap.ids[r] for r in np.flatnonzero(snap.live)}
        assert ids == {f"b{k}-{j}" for k in range(1, committed + 1) for j in range(20)}
        for k in (1, committed, committed + 1):
            got, _ = snap.lexical_topn([f"tok{k}"], 50)
            assert len(got) == (20 if 1 <= k <= committed else 0), k
        report = db.check()
        assert report.ok, report.to_text()
    finally:
        db.close()


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs, or None when mounting is not allowed here."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        yield None
        return
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _run_capped(path: Path, kind: str, limit: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    done = subprocess.run([sys.executable, str(HERE), str(path), kind, str(limit)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["vectors", "text"])
def test_disk_full_is_a_store_error_and_the_last_batch_stays(tmp_path, small_disk, kind):
    if small_disk is not None:
        path = small_disk / "db"
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * 256 * 1024)  # freed afterwards, to write again
        outcome = fill(path, kind)
    else:  # no mount here: cap the file size of a writer process instead
        path, filler = tmp_path / "db", None
        outcome = _run_capped(path, kind, 1_500_000)
    error = outcome["error"]
    assert error is not None and outcome["committed"] >= 1, outcome
    assert error["type"] == "StoreError", error
    message = error["message"]
    assert any(cause in message for cause in CAUSES), message
    assert str(path) in message  # names the file (or the directory holding it)
    assert "last committed batch" in message
    assert "cannot rollback" not in message
    verify(path, outcome["committed"])
    if filler is not None:  # space again: the next writer writes, nothing was lost
        filler.unlink()
        db = open_db(path)
        db.ingest("c", items(kind, 9999)[:1])
        db.close()
        db = open_db(path, readonly=True)
        assert len(np.flatnonzero(db.snapshot("c").live)) == 20 * outcome["committed"] + 1
        assert db.check().ok
        db.close()


if __name__ == "__main__":
    db_dir, what, cap = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    open_db(db_dir).close()  # created before the cap
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
    print(json.dumps(fill(db_dir, what)))
