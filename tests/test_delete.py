"""`Database.delete`: one all-or-nothing batch of tombstones, on real tantivy + SQLite + .npy."""

from __future__ import annotations

import json
import subprocess
import threading

import numpy as np
import pytest

import recallql
from recallql import IngestError, StoreError
from recallql.index import DeleteReport
from recallql.index.embedders import HashEmbedder
from tests.test_store_concurrency import _run

FIELDS = {"team": str}


def item(id, title, v, doc_id=None, position=0, team="ops"):
    out = {"id": id, "title": title, "body": "shared words", "team": team, "vector": v,
           "position": position, "created_at": "2025-01-01"}
    if doc_id is not None:
        out["doc_id"] = doc_id
    return out


ITEMS = [
    item("a", "alpha apple", [1, 0, 0, 0]),
    item("b", "alpha banana", [0.9, 0.1, 0, 0], team="dev"),
    item("d0", "alpha guide part zero", [0.8, 0.2, 0, 0], "D", 0),
    item("d1", "alpha guide part one", [0.7, 0.3, 0, 0], "D", 1),
    item("d2", "alpha guide part two", [0.6, 0.4, 0, 0], "D", 2),
    item("e", "alpha extra", [0, 1, 0, 0], "E"),
]


def open_db(path=None) -> recallql.Database:
    db = recallql.connect(path, embedder=None)
    db.create_collection("kb", ("title", "body"), FIELDS, dim=4, embedder=None)
    return db


@pytest.fixture
def db(tmp_path):
    database = open_db(tmp_path / "db")
    database.ingest("kb", ITEMS)
    yield database
    database.close()


def live_ids(db, collection="kb") -> list[str]:
    snap = db.snapshot(collection)
    return sorted(snap.ids[r] for r in np.flatnonzero(snap.live))


def test_delete_by_id_and_doc_id(db):
    before = db.store.committed_batch()
    report = db.delete("kb", ["a", "nope", "a"], doc_ids=["D", "no-doc"])
    assert isinstance(report, DeleteReport)
    assert (report.collection, report.batch, report.deleted, report.missing) == \
        ("kb", before + 1, 4, 2)
    assert live_ids(db) == ["b", "e"]
    assert db.store.committed_batch() == before + 1


def test_an_item_without_doc_id_is_its_own_document(db):
    assert db.delete("kb", doc_ids=["b"]).deleted == 1
    assert db.delete("kb", doc_ids=["e"]).missing == 1  # its document is "E"
    assert db.delete("kb", doc_ids=["E"]).deleted == 1
    assert live_ids(db) == ["a", "d0", "d1", "d2"]


def test_int_ids_are_deleted_as_stored(db):
    db.ingest("kb", [item(7, "seven", [0, 0, 1, 0])])
    report = db.delete("kb", [7, "7"])
    assert (report.deleted, report.missing) == (1, 0)
    assert "7" not in live_ids(db)


QUERIES = {
    "lexical": ("SEARCH kb MATCHING 'alpha' USING LEXICAL LIMIT 10", {}),
    "semantic": ("SEARCH kb NEAR :v LIMIT 10", {"v": np.array([1, 0, 0, 0], np.float32)}),
    "hybrid": ("SEARCH kb MATCHING 'alpha' NEAR :v LIMIT 10",
               {"v": np.array([1, 0, 0, 0], np.float32)}),
    "filter": ("SEARCH kb MATCHING 'alpha' WHERE team = 'ops' LIMIT 10", {}),
    "retrieve": ("RETRIEVE 10 FROM kb", {}),
    "group": ("SEARCH kb MATCHING 'alpha guide' GROUP BY DOCUMENT LIMIT 10", {}),
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_deleted_rows_leave_every_kind_of_statement(db, name):
    text, params = QUERIES[name]
    before = set(db.execute(text, **params).ids())
    assert {"a", "d0"} & before
    db.delete("kb", ["a"], doc_ids=["D"])
    after = set(db.execute(text, **params).ids())
    assert not after & {"a", "d0", "d1", "d2"}
    assert after == before - {"a", "d0", "d1", "d2"}


def test_group_by_document_falls_back_to_a_live_chunk(db):
    query = "SEARCH kb MATCHING 'zero' GROUP BY DOCUMENT LIMIT 5"
    assert db.execute(query).ids() == ["d0"]
    db.delete("kb", ["d0"])
    assert db.execute(query).ids() == []
    assert db.execute("SEARCH kb MATCHING 'guide' GROUP BY DOCUMENT LIMIT 5").ids() == ["d1"]


def test_deletion_survives_reopen(tmp_path):
    path = tmp_path / "db"
    with open_db(path) as db:
        db.ingest("kb", ITEMS)
        db.delete("kb", ["b"], doc_ids=["D"])
    with open_db(path) as db:
        assert live_ids(db) == ["a", "e"]
        assert db.execute("SEARCH kb MATCHING 'banana'").ids() == []
        db.ingest("kb", [item("b", "alpha banana again", [0, 0, 0, 1])])  # the id is free
        assert db.execute("SEARCH kb MATCHING 'banana'").ids() == ["b"]


def test_in_memory_database():
    with open_db() as db:
        db.ingest("kb", ITEMS)
        assert db.delete("kb", doc_ids=["D"]).deleted == 3
        assert live_ids(db) == ["a", "b", "e"]


def test_deleting_nothing_writes_no_batch(db):
    before = db.store.committed_batch()
    assert db.delete("kb", ["nope"]).batch == 0
    assert db.delete("kb", [], doc_ids=[]).batch == 0
    report = db.delete("kb", ["a"])
    assert db.delete("kb", ["a"]).missing == 1  # already deleted
    assert db.store.committed_batch() == before + 1 == report.batch


def test_reingesting_a_deleted_id_adds_it(db):
    db.delete("kb", ["a"])
    report = db.ingest("kb", [ITEMS[0]])
    assert (report.added, report.replaced, report.unchanged) == (1, 0, 0)
    assert db.execute("SEARCH kb MATCHING 'apple'").ids() == ["a"]


def test_tantivy_documents_are_kept_for_as_of_then_purged_by_vacuum(db):
    searcher = db.store._state("kb").text.searcher
    db.delete("kb", doc_ids=["D"])
    assert searcher().num_docs == 6  # hidden by the live mask
    db.ingest("kb", [item("f", "fresh", [0, 0, 1, 0])])
    db.ingest("kb", [item("g", "fresh", [0, 0, 1, 0])])
    assert searcher().num_docs == 8  # kept within the AS OF retention window
    db.vacuum()
    assert searcher().num_docs == int(db.snapshot("kb").live.sum())  # only live rows are left


BAD = [
    pytest.param({}, "needs ids, doc_ids or both", id="no-argument"),
    pytest.param({"ids": "abc"}, "ids must be a list of ids", id="bare-string"),
    pytest.param({"doc_ids": "D"}, "doc_ids must be a list of ids", id="bare-doc-string"),
    pytest.param({"ids": 5}, "ids must be a list", id="bare-int"),
    pytest.param({"ids": ["a", True]}, r"item #1, field 'ids': id must be a string or an int",
                 id="bool"),
    pytest.param({"ids": [1.5]}, "id must be a string or an integer", id="float"),
    pytest.param({"ids": [""]}, "id must not be empty", id="empty"),
    pytest.param({"ids": ["x" * 1025]}, "longer than 1024", id="too-long"),
    pytest.param({"ids": [10**5000]}, "longer than 1024", id="huge-int"),
    pytest.param({"ids": ["a\ud800"]}, "lone surrogate", id="surrogate"),
    pytest.param({"doc_ids": ["D", None]}, r"item #1, field 'doc_ids'", id="none-doc"),
    pytest.param({"doc_ids": ["\udfff"]}, "lone surrogate", id="surrogate-doc"),
    pytest.param({"ids": ["a"], "doc_ids": [" "]}, "non-empty string", id="blank-doc"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD)
def test_bad_arguments_write_nothing(db, kwargs, message):
    before = (db.store.committed_batch(), live_ids(db))
    with pytest.raises(IngestError, match=message):
        db.delete("kb", **kwargs)
    assert (db.store.committed_batch(), live_ids(db)) == before


def test_unknown_collection_and_read_only(tmp_path, db):
    with pytest.raises(StoreError, match="no collection 'nope'"):
        db.delete("nope", ["a"])
    db.close()
    reader = recallql.connect(tmp_path / "db", embedder=None, readonly=True)
    with pytest.raises(StoreError, match="read-only"):
        reader.delete("kb", ["a"])
    assert live_ids(reader) == ["a", "b", "d0", "d1", "d2", "e"]
    reader.close()


def test_a_failed_batch_deletes_nothing(db):
    def fail(conn):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        db.store.delete("kb", ["a"], ["D"], extra_sql=fail)
    assert live_ids(db) == ["a", "b", "d0", "d1", "d2", "e"]
    assert db.execute("SEARCH kb MATCHING 'apple'").ids() == ["a"]
    assert db.delete("kb", ["a"]).deleted == 1  # the store still writes


def test_reader_process_sees_the_delete_only_after_commit(tmp_path):
    path = tmp_path / "db"
    db = recallql.connect(path, embedder=HashEmbedder(16))
    db.ingest("docs", [{"id": f"a{i}", "title": f"token {i}"} for i in range(3)])
    reader = _run("reader", str(path), stdin=subprocess.PIPE)
    assert reader.stdout.readline() == "ready\n", reader.stderr.read()

    def ask() -> dict:
        reader.stdin.write("?\n")
        reader.stdin.flush()
        return json.loads(reader.stdout.readline())

    first = ask()
    assert first["live"] == first["lex"] == first["sem"] == ["a0", "a1", "a2"]
    inside, release = threading.Event(), threading.Event()

    def hold(conn) -> None:  # inside the batch's SQLite transaction, after the tantivy commit
        inside.set()
        release.wait(timeout=60)

    writer = threading.Thread(target=lambda: db.store.delete("docs", ["a1"], extra_sql=hold))
    writer.start()
    assert inside.wait(timeout=60)
    assert ask() == first
    release.set()
    writer.join(timeout=60)
    second = ask()
    assert second["seq"] == first["seq"] + 1
    assert second["live"] == second["lex"] == second["sem"] == ["a0", "a2"]
    db.close()
    reader.stdin.close()
    assert reader.wait(timeout=60) == 0
