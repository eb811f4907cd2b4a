"""A database on a read-only file system (a mounted backup, a snapshot): even a reader writes
lock files (SQLite's ``-shm`` of WAL mode; tantivy creates ``.tantivy-meta.lock`` to read an
index), so it cannot be opened in place. Readers and writers must say that in words, not pass
on ``unable to open database file`` or tantivy's ``Failed to acquire Lockfile: IoError(Os {
code: 30, kind: ReadOnlyFilesystem ... }). None``.

The file system is made read-only for real: a read-only bind mount in a private mount namespace
(`unshare -m`), which needs root; elsewhere the test skips, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import recallql
from recallql.index.embedders import HashEmbedder

REPO = Path(__file__).resolve().parents[1]

READER = """
import sys
import recallql
from recallql.index.embedders import HashEmbedder
try:
    recallql.connect(sys.argv[1], embedder=HashEmbedder(16), readonly=sys.argv[2] == "r")
except recallql.StoreError as exc:
    print(exc)
else:
    print("opened")
"""


def _read_only_namespace() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _read_only_namespace(), reason="needs root and `unshare -m` to mount a "
                    "directory read-only")
@pytest.mark.parametrize("mode", ["r", "w"])
@pytest.mark.parametrize("wal_files", [False, True], ids=["closed", "wal-files-left"])
def test_database_on_a_read_only_file_system_names_the_cause(tmp_path, mode, wal_files):
    ro = tmp_path / "ro"
    db = ro / "db"
    with recallql.connect(db, embedder=HashEmbedder(16)) as conn:
        conn.ingest("docs", [{"id": "a", "title": "backup policy"}])
    if wal_files:  # as a database copied while open leaves them: SQLite then reads, tantivy not
        (db / "meta.sqlite-wal").touch()
        (db / "meta.sqlite-shm").write_bytes(b"")
    script = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && "
              f'exec "{sys.executable}" -c "$0" {db} {mode}')
    run = subprocess.run(["unshare", "-m", "sh", "-c", script, READER], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    message = run.stdout.strip()
    assert f"the database directory {db} is not writable (it is on a read-only file system)" in (
        message)
    assert "copy the database to a writable directory" in message
    assert "IoError" not in message and "None" not in message
