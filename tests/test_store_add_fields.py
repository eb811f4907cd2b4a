"""`add_fields` seen by every open process: a committed schema change starts no batch, so a
process holding a collection's state compares the schema version (`MetadataStore.
committed_head`) and rebuilds the state when it moved — the new field is filterable at once,
with the values the change gave stored rows. Real SQLite files, two connections and two
processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import recallql

DIM = 4
REPO = Path(__file__).resolve().parents[1]


def make(path: Path) -> recallql.Database:
    db = recallql.connect(path, embedder=None)
    db.create_collection("c", text_fields=("body",), fields={"tenant": "str"}, dim=DIM,
                         embedder=None)
    db.ingest("c", [{"id": f"i{j:02d}", "body": f"backup row {j}", "tenant": f"t{j % 2}",
                     "vector": np.eye(DIM, dtype=np.float32)[j % DIM]} for j in range(20)])
    return db


TEAM_X = "SEARCH c MATCHING 'backup' WHERE team = 'x' LIMIT 30"


def test_a_field_added_through_another_connection_is_seen_at_once(tmp_path):
    path = tmp_path / "db"
    with make(path) as a, recallql.connect(path, embedder=None) as b:
        b.execute("SEARCH c MATCHING 'backup' WHERE tenant = 't1' LIMIT 3")  # b holds a state
        held = b.store.snapshot("c")
        assert b.store.snapshot("c") is held  # nothing changed: the snapshot is reused
        batch = a.store.committed_batch()
        a.store.add_fields("c", {"team": "str"},
                           fill=lambda f: {"team": "x" if f.get("tenant") == "t1" else "y"})
        assert b.store.committed_batch() == batch  # no new batch ...
        got = sorted(b.execute(TEAM_X).ids())  # ... and yet b sees the field and its values
        assert got == [f"i{j:02d}" for j in range(1, 20, 2)]
        assert "team" in b.store.snapshot("c").info.fields
        b.ingest("c", [{"id": "late", "body": "backup late", "team": "x", "tenant": "t0",
                        "vector": np.ones(DIM, np.float32)}])  # and can write it
        assert "late" in a.execute(TEAM_X).ids()


def test_a_field_added_by_another_process_is_seen_at_once(tmp_path):
    path = tmp_path / "db"
    make(path).close()
    with recallql.connect(path, embedder=None) as db:
        before = db.execute("SEARCH c MATCHING 'backup' WHERE tenant = 't0' LIMIT 20").ids()
        script = textwrap.dedent(f"""
            import recallql
            with recallql.connect({str(path)!r}, embedder=None) as db:
                db.store.add_fields("c", {{"team": "str"}}, fill=lambda f: {{
                    "team": "x" if f.get("tenant") == "t0" else "y"}})
        """)
        run = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert sorted(db.execute(TEAM_X).ids()) == sorted(before)
        assert db.snapshot("c").values("team", [0, 1]) == ["x", "y"]


def test_add_fields_works_on_an_in_memory_database():
    """Newcomer: on an in-memory database `add_fields` broke the collection with a raw
    KeyError ('b1.npy'): rebuilding the collection's state for the new schema re-opened its
    text index and vector files, which in memory live only in that state. They are kept now."""
    db = make(None)
    db.store.add_fields("c", {"team": "str"}, lambda row: {"team": "x"} if row["tenant"] == "t1"
                        else {})
    db.ingest("c", [{"id": "new", "body": "backup new", "team": "x",
                     "vector": np.eye(DIM, dtype=np.float32)[0]}])
    found = db.execute(TEAM_X)
    assert sorted(found.ids()) == sorted([f"i{j:02d}" for j in range(1, 20, 2)] + ["new"])
    near = db.execute("SEARCH c USING SEMANTIC NEAR :v WHERE team = 'x' LIMIT 3",
                      v=np.eye(DIM, dtype=np.float32)[1])
    assert near.ids() == ["i01", "i05", "i09"]  # cosine 1 each: ties by id
