"""Re-ingest: unchanged items are skipped, `replace_documents` drops stale chunks (real stores)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

import recallql
from recallql import IngestError
from recallql.index.embedders import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """The 16-d hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(16)
        self.texts: list[str] = []

    def __call__(self, texts):
        self.texts += list(texts)
        return super().__call__(texts)


def chunks(doc: str, n: int, word: str = "alpha") -> list[dict]:
    return [{"id": f"{doc}#{i}", "doc_id": doc, "position": i, "title": f"{word} {doc} part {i}",
             "body": "chunk body", "created_at": 1700000000 + i} for i in range(n)]


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def db(tmp_path, embedder):
    database = recallql.connect(tmp_path / "db", embedder=embedder)
    yield database
    database.close()


def live_ids(db, collection="docs") -> list[str]:
    snap = db.snapshot(collection)
    return sorted(snap.ids[r] for r in np.flatnonzero(snap.live))


def id_rows(db, collection="docs") -> dict[str, int]:
    snap = db.snapshot(collection)
    return {snap.ids[r]: int(r) for r in np.flatnonzero(snap.live)}


# -- replace_documents -----------------------------------------------------------------------


def test_a_shrunk_document_keeps_exactly_its_new_chunks(db):
    db.ingest("docs", chunks("guide", 5) + chunks("other", 3))
    smaller = [dict(c, title=f"alpha guide rewritten {i}") for i, c in
               enumerate(chunks("guide", 2))]
    report = db.ingest("docs", smaller, replace_documents=True)
    assert (report.added, report.replaced, report.unchanged, report.removed) == (0, 2, 0, 3)
    assert live_ids(db) == ["guide#0", "guide#1", "other#0", "other#1", "other#2"]
    found = db.execute("SEARCH docs MATCHING 'alpha guide part' LIMIT 20").ids()
    assert not {"guide#2", "guide#3", "guide#4"} & set(found)
    vector = db.embedder("docs")(["alpha guide part 4\nchunk body"])[0]
    assert "guide#4" not in db.execute("SEARCH docs NEAR :v LIMIT 20", v=vector).ids()


def test_unchanged_chunks_stay_and_stale_ones_go(db, embedder):
    db.ingest("docs", chunks("guide", 5))
    embedder.texts.clear()
    rows = id_rows(db)
    report = db.ingest("docs", chunks("guide", 3), replace_documents=True)
    assert (report.unchanged, report.removed, report.count, report.embedded) == (3, 2, 0, 0)
    assert report.batch > 0 and embedder.texts == []
    assert id_rows(db) == {k: v for k, v in rows.items() if k in ("guide#0", "guide#1", "guide#2")}


def test_renamed_chunks_replace_the_whole_document(db):
    db.ingest("docs", chunks("guide", 4))
    renamed = [dict(c, id=f"guide-v2#{i}") for i, c in enumerate(chunks("guide", 2))]
    report = db.ingest("docs", renamed, replace_documents=True)
    assert (report.added, report.removed) == (2, 4)
    assert live_ids(db) == ["guide-v2#0", "guide-v2#1"]


def test_an_item_without_doc_id_is_its_own_document(db):
    db.ingest("docs", [{"id": "solo", "title": "solo"}, {"id": "part", "doc_id": "solo",
                                                         "title": "a chunk of solo"}])
    report = db.ingest("docs", [{"id": "solo", "title": "solo v2"}], replace_documents=True)
    assert (report.replaced, report.removed) == (1, 1)
    assert live_ids(db) == ["solo"]


def test_without_replace_documents_stale_chunks_stay(db):
    db.ingest("docs", chunks("guide", 5))
    report = db.ingest("docs", [dict(c, title="changed") for c in chunks("guide", 2)])
    assert (report.replaced, report.removed) == (2, 0)
    assert len(live_ids(db)) == 5


# -- unchanged items ---------------------------------------------------------------------------


def test_reingesting_the_same_items_writes_nothing(db, embedder):
    items = chunks("guide", 4) + [{"id": 7, "title": "seven", "tags": ["x"], "source": "s",
                                   "entity": "E7"}]
    db.ingest("docs", items)
    embedder.texts.clear()
    rows, batch = id_rows(db), db.store.committed_batch()
    report = db.ingest("docs", items)
    assert (report.batch, report.unchanged, report.count, report.embedded) == (0, 5, 0, 0)
    assert embedder.texts == [] and db.store.committed_batch() == batch
    assert id_rows(db) == rows


CHANGES = [
    pytest.param({"title": "alpha guide part 0 edited"}, id="text"),
    pytest.param({"body": ""}, id="text-removed"),
    pytest.param({"source": "wiki"}, id="declared-field"),
    pytest.param({"tags": ["a", "b"]}, id="list-field"),
    pytest.param({"created_at": 1700000099}, id="created_at"),
    pytest.param({"entity": "someone"}, id="entity"),
    pytest.param({"doc_id": "elsewhere"}, id="doc_id"),
    pytest.param({"position": 9}, id="position"),
    pytest.param({"vector": np.ones(16, np.float32)}, id="vector-supplied"),
]


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_item_is_replaced(db, embedder, change):
    items = chunks("guide", 3)
    db.ingest("docs", items)
    embedder.texts.clear()
    report = db.ingest("docs", [dict(items[0], **change), *items[1:]])
    assert (report.replaced, report.unchanged, report.added) == (1, 2, 0)
    assert report.embedded == (0 if "vector" in change else 1)
    assert len(embedder.texts) == report.embedded
    assert db.snapshot("docs").fetch([report.first_rowid])[0]["id"] == "guide#0"


def test_supplied_vectors_are_compared(tmp_path):
    db = recallql.connect(tmp_path / "db", embedder=None)
    db.create_collection("kb", ("title",), dim=3, embedder=None)
    items = [{"id": "a", "title": "x", "vector": [1.0, 2.0, 3.0]},
             {"id": "b", "title": "y"}]
    db.ingest("kb", items)
    assert db.ingest("kb", items).unchanged == 2
    same = [{"id": "a", "title": "x", "vector": np.array([1, 2, 3], np.float64)}]
    assert db.ingest("kb", same).unchanged == 1  # the stored (normalised float32) vector
    moved = [{"id": "a", "title": "x", "vector": [1.0, 2.0, 3.5]}]
    assert db.ingest("kb", moved).replaced == 1
    added = [{"id": "b", "title": "y", "vector": [0.0, 0.0, 1.0]}]
    assert db.ingest("kb", added).replaced == 1
    db.close()


def test_an_embedded_item_that_now_supplies_its_vector_is_replaced(db, embedder):
    item = {"id": "a", "title": "alpha"}
    db.ingest("docs", [item])
    same_vector = embedder(["alpha"])[0]
    report = db.ingest("docs", [dict(item, vector=same_vector)])
    assert report.replaced == 1  # supplied and embedded vectors are never taken as equal
    assert db.ingest("docs", [item]).replaced == 1


@pytest.mark.parametrize("fresh", [0, 1500], ids=["interleaved", "after-a-fresh-prefix"])
def test_a_mixed_batch_keeps_rowids_and_texts_together(db, fresh):
    """New, unchanged and changed items interleaved (after `fresh` new items, which stream to
    tantivy during validation): the written rows stay dense, in input order, and every tantivy
    document carries the rowid of its own text."""
    db.ingest("docs", [{"id": f"old{i}", "title": f"oldtok{i}"} for i in range(3000)])
    items = [{"id": f"pre{i}", "title": f"pretok{i}"} for i in range(fresh)]
    for i in range(3000):  # new, unchanged and changed items across several sink chunks
        items.append({"id": f"new{i}", "title": f"newtok{i}"})
        items.append({"id": f"old{i}", "title": f"oldtok{i}" if i % 3 else f"changedtok{i}"})
    report = db.ingest("docs", items)
    assert (report.added, report.replaced, report.unchanged) == (3000 + fresh, 1000, 2000)
    snap = db.snapshot("docs")
    written = [snap.ids[r] for r in range(report.first_rowid, snap.size)]
    assert written == [it["id"] for it in items if not it["title"].startswith("oldtok")]
    probes = ["newtok0", "newtok2999", "changedtok0", "changedtok2997", "oldtok1", "oldtok2998"]
    for probe in probes + (["pretok0", "pretok1499"] if fresh else []):
        rows, _ = snap.lexical_topn([probe], 5)
        want = probe.replace("tok", "").replace("changed", "old")
        assert [snap.ids[r] for r in rows] == [want], probe
        assert snap.fetch(rows)[0]["title"] == probe
    assert "oldtok0" not in {snap.fetch([r])[0]["title"] for r in np.flatnonzero(snap.live)}


def test_unchanged_items_need_no_attached_embedder(tmp_path):
    def embed(texts):
        return HashEmbedder(8)(texts)

    embed.name, embed.dim = "mine", 8
    db = recallql.connect(tmp_path / "db", embedder=None)
    db.create_collection("kb", ("title",), embedder=embed)
    items = [{"id": "a", "title": "alpha"}, {"id": "b", "title": "beta"}]
    db.ingest("kb", items)
    db.close()
    db = recallql.connect(tmp_path / "db", embedder=None)  # "mine" is not re-attached
    assert db.ingest("kb", items).unchanged == 2
    with pytest.raises(IngestError, match="not attached"):
        db.ingest("kb", [items[0], {"id": "b", "title": "beta v2"}])
    db.close()


def test_rows_stored_before_fingerprints_are_rewritten_once(tmp_path, embedder):
    path = tmp_path / "db"
    items = chunks("guide", 3)
    with recallql.connect(path, embedder=embedder) as db:
        db.ingest("docs", items)
    with sqlite3.connect(path / "meta.sqlite") as conn:  # a store from before the column
        conn.execute("ALTER TABLE items DROP COLUMN content_hash")
    with recallql.connect(path, embedder=embedder) as db:  # migrates
        assert db.ingest("docs", items).replaced == 3
        assert db.ingest("docs", items).unchanged == 3
    with sqlite3.connect(path / "meta.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM items WHERE content_hash IS NULL").fetchone() \
            == (3,)  # the tombstoned pre-migration rows


def test_unchanged_messages_from_a_reimport_keep_their_ids(db):
    db.sessions.create("s1", "agent")
    db.messages.append("s1", "user", "hello there")
    snap = db.snapshot("messages")
    item = snap.fetch([0])[0]
    stored = {k: v for k, v in item.items() if k != "rowid"}
    assert db.ingest("messages", [stored]).unchanged == 1
