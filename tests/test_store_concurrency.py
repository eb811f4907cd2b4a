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

import recallql
from recallql.index.embedders import HashEmbedder

HERE = Path(__file__).resolve()


def _run(*args: str, stdin=None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    return subprocess.Popen([sys.executable, str(HERE), *args], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _helper_writer(path: str, timeout: str = "5") -> None:
    db = recallql.connect(path, embedder=HashEmbedder(16), lock_timeout=float(timeout))
    print("opened", flush=True)
    try:
        db.ingest("docs", [{"id": f"w{os.getpid()}", "title": "token from the helper"}])
    except recallql.DatabaseLocked as exc:
        print(f"DatabaseLocked: {exc} pid={exc.pid}", flush=True)
        return
    print("written", flush=True)


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


def test_writers_of_two_processes_take_turns(tmp_path):
    """Each write takes the lock for its own duration: a second process opens the database for
    writing while the first has it open, and writes as soon as the first one's write ends."""
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.ingest("docs", [{"id": "a", "title": "token"}])
        proc = _run("writer", str(path))
        out, err = proc.communicate(timeout=60)
        assert (proc.returncode, out) == (0, "opened\nwritten\n"), err
        assert sorted(db.snapshot("docs").ids) == ["a", f"w{proc.pid}"]


def test_a_write_waits_for_the_lock_then_names_its_holder(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        with db.store.writing():  # a long write of this process
            proc = _run("writer", str(path), "0.3")
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.startswith("opened\nDatabaseLocked: the database ") and str(path) in out
        assert f"process {os.getpid()}" in out and f"pid={os.getpid()}" in out
        assert "waited 0.3 s" in out
        with db.store.writing():  # released within the wait: the helper writes
            proc = _run("writer", str(path), "30")
            assert proc.stdout.readline() == "opened\n"
        out, err = proc.communicate(timeout=60)
        assert out == "written\n", err
        assert f"w{proc.pid}" in list(db.snapshot("docs").ids)


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
    {"writer": _helper_writer, "reader": _helper_reader}[sys.argv[1]](*sys.argv[2:])


def test_a_database_another_process_is_creating_is_not_refused(tmp_path):
    """Processes opening one new path at once: one saw the creator's SQLite rollback journal
    (``meta.sqlite.creating-journal``) and refused the directory as "not empty and not a
    recallql database". What a creation leaves (here: killed mid-way) is a new database."""
    path = tmp_path / "fresh"
    path.mkdir()
    for name in ("LOCK", "LOCK.wait", "meta.sqlite.creating", "meta.sqlite.creating-journal"):
        (path / name).write_bytes(b"")
    with recallql.connect(path, embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "a", "title": "first"}])
        assert db.check().problems == []
    assert not (path / "meta.sqlite.creating-journal").exists()
