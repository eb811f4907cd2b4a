"""Column checkpoints: a reopened collection restores its columns from the newest checkpoint
and reads only later rows from SQLite, with exactly the values a full read gives; a partial,
stale or foreign checkpoint is ignored."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from recallql.index import checkpoint
from recallql.index import snapshot as snapshot_module
from recallql.index.filters import Cmp, Contains, IsNull
from recallql.index.store import Store

FIELDS = {"tenant": "str", "never": "str", "n": "int", "score": "float", "ok": "bool",
          "at": "timestamp", "tags": "list[str]"}


@pytest.fixture(autouse=True)
def small_checkpoints(monkeypatch):
    monkeypatch.setattr(checkpoint, "CHECKPOINT_ROWS", 100)


def item(j: int) -> dict:
    fields = {"tenant": f"t{j % 5}", "n": j, "score": j / 7, "ok": j % 2 == 0,
              "at": 1_700_000_000 + j, "tags": [f"g{j % 3}", "x"] if j % 4 else None}
    if j % 6 == 0:
        fields = {k: None for k in fields}
    return {"id": f"i{j}", "body": f"row {j}", "doc_id": f"d{j // 3}" if j % 2 else None,
            "entity": "e1" if j % 5 == 0 else None, "position": j % 3,
            "created_at": 1_600_000_000 + j, "vector": [1.0, j % 7 + 1.0], **fields}


def fill(path, rows=range(0, 350)) -> Store:
    store = Store.open(path)
    store.background_graphs = False
    store.create_collection("docs", ("body",), FIELDS, dim=2)
    batch = list(rows)
    for start in range(0, len(batch), 70):
        store.ingest("docs", [item(j) for j in batch[start:start + 70]])
    return store


def summary(snap) -> dict:
    size = snap.size
    every = np.arange(size)
    out = {"size": size, "live": snap.live.tolist(), "ids": list(snap.ids),
           "doc": list(snap.doc_ids), "entity": list(snap.entities),
           "pos": snap.positions.tolist(), "created": snap.created_at.tolist(),
           "vec": snap.has_vector.tolist()}
    for name in FIELDS:
        out[name] = snap.values(name, every)
    for expr in (Cmp("tenant", "=", "t3"), Cmp("n", ">", 200), Contains("tags", "g1"),
                 IsNull("at", False), Cmp("ok", "=", True), Cmp("doc_id", "=", "d7")):
        out[repr(expr)] = snap.filter_mask(expr).tolist()
    return out


def test_reopen_restores_columns_from_the_checkpoint(tmp_path, monkeypatch):
    store = fill(tmp_path / "db")
    store.build_graphs()  # writes the due checkpoint
    assert checkpoint.newest(store._state("docs")) == 350
    store.ingest("docs", [item(j) for j in range(350, 380)])
    store.delete("docs", ["i3", "i351"])
    store.ingest("docs", [dict(item(10), body="changed")])  # replaces row 10
    expected = summary(store.snapshot("docs"))
    store.close()
    read = []
    real = snapshot_module.CollectionState._read_rows

    def spy(self, conn, size):
        read.append((self.size, size))
        return real(self, conn, size)

    monkeypatch.setattr(snapshot_module.CollectionState, "_read_rows", spy)
    with Store.open(tmp_path / "db", readonly=True) as reader:
        assert summary(reader.snapshot("docs")) == expected
    assert read == [(350, 381)]  # only the rows after the checkpoint came from SQLite
    folder = tmp_path / "db" / "collections" / "docs"
    shutil.rmtree(folder / "columns-350")
    read.clear()
    with Store.open(tmp_path / "db", readonly=True) as reader:
        assert summary(reader.snapshot("docs")) == expected
    assert read == [(0, 381)]


def test_the_next_write_removes_a_checkpoint_a_killed_writer_left_half_written(tmp_path):
    """Found by crash trials (SIGKILL while the builder saved a checkpoint): its temporary
    directory stayed for good. The next write's recovery of the collection removes it."""
    store = fill(tmp_path / "db")
    store.close()
    base = tmp_path / "db" / "collections" / "docs"
    leftover = base / "columns-350.999999999-0a1b2c3d.tmp"  # pid of no running process
    leftover.mkdir()
    (leftover / "c.id.offsets.npy").write_bytes(b"\x93NUMPY half-written")
    with Store.open(tmp_path / "db") as writer:
        assert leftover.exists()  # opening writes nothing
        writer.background_graphs = False
        writer.ingest("docs", [item(400)])
    assert not leftover.exists()
    assert not [p.name for p in base.iterdir() if p.name.endswith(".tmp")]


def test_a_partial_or_foreign_checkpoint_is_ignored(tmp_path):
    store = fill(tmp_path / "db")
    store.build_graphs()
    expected = summary(store.snapshot("docs"))
    store.close()
    folder = tmp_path / "db" / "collections" / "docs" / "columns-350"
    (folder / "c.id._ends.npy").write_bytes(b"garbage")
    with Store.open(tmp_path / "db", readonly=True) as reader:
        assert summary(reader.snapshot("docs")) == expected
    (folder / "manifest.json").unlink()  # not complete: not a checkpoint
    assert checkpoint.newest(Store.open(tmp_path / "db", readonly=True)._state("docs")) == 0


def test_a_checkpoint_of_another_field_schema_is_ignored(tmp_path):
    store = fill(tmp_path / "db")
    store.build_graphs()
    store.add_fields("docs", {"extra": "str"}, fill=lambda f: {"extra": "v"})
    expected = summary(store.snapshot("docs"))
    assert store.snapshot("docs").values("extra", [0]) == ["v"]
    store.close()
    with Store.open(tmp_path / "db", readonly=True) as reader:
        snap = reader.snapshot("docs")
        assert summary(snap) == expected and snap.values("extra", [0]) == ["v"]


def test_the_first_write_looks_a_few_ids_up_in_sqlite(tmp_path):
    store = fill(tmp_path / "db")
    store.close()
    with Store.open(tmp_path / "db") as store:
        report = store.ingest("docs", [dict(item(5), body="new"), item(999)])
        assert (report.added, report.replaced) == (1, 1)
        state = store._state("docs")
        assert state._id_rows is None  # no map of every id was built
        assert store.ingest("docs", [dict(item(5), body="new")]).unchanged == 1
        assert state.live_rows(["i5", "i3", "nope"]) == {"i5": 350, "i3": 3}


@pytest.mark.parametrize("values", [["a", "", "b"], ["", ""], ["é日本", "x\x00y", ""],
                                    ["only"], [], ["", "z"]])
def test_a_vocabulary_splits_back_into_its_strings(values):
    from recallql.index.checkpoint import split_vocab

    raw = [v.encode() for v in values]
    ends = np.cumsum([len(r) for r in raw], dtype=np.int64)
    assert split_vocab(b"".join(raw), ends) == values
