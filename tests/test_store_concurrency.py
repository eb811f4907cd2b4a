"""One writer at a time; readers in other processes see committed batches only.

Run as a script, this module is a helper process:
``python test_store_concurrency.py writer DB`` tries to open DB for writing and reports;
``python test_store_concurrency.py reader DB`` answers each stdin line with a JSON view of `docs`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import recallql
from recallql.index.embedders import HashEmbedder

HERE = Path(__file__).resolve()


def _run(*args: str, stdin=None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    return subprocess.Popen([sys.executable, str(HERE), *args], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _helper_writer(path: str) -> None:
    try:
        recallql.connect(path, embedder=HashEmbedder(16))
    except recallql.DatabaseLocked as exc:
        print(f"DatabaseLocked: {exc}")
        return
    print("opened")


def _helper_reader(path: str) -> None:
    db = recallql.connect(path, embedder=HashEmbedder(16), readonly=True)
    print("ready", flush=True)
    query = HashEmbedder(16)(["token"])[0]
    for _ in sys.stdin:
        snap = db.snapshot("docs")
        lex, _ = snap.lexical_topn(["token"], 100)
        sem, _ = snap.semantic_topn(query, 100)
        live = np.flatnonzero(snap.live)
        print(json.dumps({"seq": snap.seq, "size": snap.size,
                          "live": sorted(snap.ids[r] for r in live),
                          "lex": sorted(snap.ids[r] for r in lex),
                          "sem": sorted(snap.ids[r] for r in sem)}), flush=True)


def test_second_writer_is_refused(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)):
        proc = _run("writer", str(path))
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.startswith("DatabaseLocked: the database ") and str(path) in out
        assert "read-only" in out
        with pytest.raises(recallql.DatabaseLocked, match="locked by another writer"):
            recallql.connect(path, embedder=HashEmbedder(16))
    proc = _run("writer", str(path))  # released on close
    assert proc.communicate(timeout=60)[0] == "opened\n"


def test_reader_process_sees_committed_batches_only(tmp_path):
    path = tmp_path / "db"
    db = recallql.connect(path, embedder=HashEmbedder(16))
    db.ingest("docs", [{"id": "a1", "title": "token one"}, {"id": "a2", "title": "token two"}])
    reader = _run("reader", str(path), stdin=subprocess.PIPE)
    assert reader.stdout.readline() == "ready\n", reader.stderr.read()

    def ask() -> dict:
        reader.stdin.write("?\n")
        reader.stdin.flush()
        return json.loads(reader.stdout.readline())

    first = ask()
    assert first["live"] == first["lex"] == first["sem"] == ["a1", "a2"]
    inside, release = threading.Event(), threading.Event()

    def hold(conn) -> None:  # runs inside the batch's SQLite transaction, after tantivy commit
        inside.set()
        release.wait(timeout=60)

    writer = threading.Thread(target=lambda: db.store.ingest(
        "docs", [{"id": "b1", "title": "token three"}, {"id": "a1", "title": "token again"}],
        db.embedder("docs"), extra_sql=hold))
    writer.start()
    assert inside.wait(timeout=60)
    assert db.store._state("docs").text.searcher().num_docs == 4  # tantivy has the batch
    assert ask() == first  # ... but the reader does not see it
    release.set()
    writer.join(timeout=60)
    second = ask()
    assert second["seq"] == first["seq"] + 1
    assert second["live"] == second["lex"] == second["sem"] == ["a1", "a2", "b1"]
    assert second["size"] == 4
    db.close()
    reader.stdin.close()
    assert reader.wait(timeout=60) == 0


if __name__ == "__main__":
    {"writer": _helper_writer, "reader": _helper_reader}[sys.argv[1]](sys.argv[2])
