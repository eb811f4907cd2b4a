"""Store and Database behaviour on real on-disk databases (tantivy + SQLite + .npy files)."""

from __future__ import annotations

import json
import os
import sqlite3

import numpy as np
import pytest

import recallql
from recallql.index import Store, StoreError
from recallql.index.embedders import HashEmbedder
from recallql.index.filters import Cmp
from tests.conftest import index_unit


def _lexical(db, text, n=10):
    snap = db.snapshot("docs")
    rows, scores = snap.lexical_topn(snap.analyze(text), n)
    return [snap.ids[r] for r in rows], scores.tolist()


def _semantic(db, vec, n=10):
    snap = db.snapshot("docs")
    rows, scores = snap.semantic_topn(vec, n)
    return [snap.ids[r] for r in rows], scores.tolist()


def test_round_trip_reopen_gives_same_results(tmp_path, index_embedder, index_docs):
    path = tmp_path / "db"
    query = index_embedder(["backup snapshot"])[0]
    with recallql.connect(path, embedder=index_embedder) as db:
        db.ingest("docs", index_docs)
        db.ingest("docs", [{"id": f"n{i}", "title": f"note {i} backup", "body": "x" * i}
                           for i in range(30)])
        before = (_lexical(db, "backup retention"), _semantic(db, query))
        fetched = db.snapshot("docs").fetch([0, 2])
    with recallql.connect(path, embedder=index_embedder) as db:
        assert (_lexical(db, "backup retention"), _semantic(db, query)) == before
        assert db.snapshot("docs").fetch([0, 2]) == fetched
    assert before[0][0][0] == "backup-1"
    assert len(before[1][0]) == 10


def test_in_memory_database(index_embedder, index_docs):
    db = recallql.connect(embedder=index_embedder)
    assert db.path is None
    report = db.ingest("docs", index_docs)
    assert (report.added, report.replaced, report.embedded, report.batch) == (5, 0, 5, 1)
    assert _lexical(db, "credentials")[0] == ["creds"]
    db.close()
    with pytest.raises(StoreError, match="closed"):
        db.ingest("docs", index_docs)


def test_fetch_returns_stored_fields(index_db, index_docs):
    index_db.ingest("docs", index_docs)
    snap = index_db.snapshot("docs")
    row = snap.fetch([0])[0]
    assert row == {
        "rowid": 0, "id": "backup-1", "doc_id": "backup-1", "entity": "backup-1", "position": 0,
        "created_at": 1709251200.0, "title": "Backup retention policies",
        "body": "Keep daily backups for 30 days and monthly backups for a year.",
        "source": "wiki", "tags": ["ops", "backup"],
    }
    assert snap.fetch([4])[0]["created_at"] is None and snap.fetch([4])[0]["title"] == ""
    assert np.isnan(snap.created_at[3]) and snap.created_at[2] == 1700000000.0
    with pytest.raises(IndexError):
        snap.fetch([5])


def test_snapshot_members(index_db, index_docs):
    index_db.ingest("docs", [dict(d, doc_id="D", position=i, entity=f"e{i % 2}")
                             for i, d in enumerate(index_docs)])
    snap = index_db.snapshot("docs")
    assert snap.size == 5 and snap.live.tolist() == [True] * 5
    assert list(snap.doc_ids) == ["D"] * 5
    assert list(snap.entities) == ["e0", "e1", "e0", "e1", "e0"]
    assert snap.positions.tolist() == [0, 1, 2, 3, 4]
    order = sorted(range(5), key=lambda r: snap.ids[r])
    assert np.argsort(snap.id_rank, kind="stable").tolist() == order
    assert snap.has_vectors() and snap.info.name == "docs"
    assert json.loads(snap.explain_bm25(["backup"], 0))["value"] > 0
    assert snap.explain_bm25(["zzz"], 0).startswith("no match")


def test_replacing_an_id_tombstones_the_old_row(index_db, index_docs):
    index_db.ingest("docs", index_docs)
    report = index_db.ingest("docs", [{"id": "creds", "title": "Rotate secrets quarterly"}])
    assert (report.added, report.replaced, report.first_rowid) == (0, 1, 5)
    snap = index_db.snapshot("docs")
    assert snap.size == 6 and not snap.live[2] and snap.live[5]
    assert _lexical(index_db, "rotate")[0] == ["creds"]
    assert _lexical(index_db, "credentials")[0] == []
    ids, _ = _semantic(index_db, index_db.embedder("docs")(["Rotate credentials"])[0], 10)
    assert ids.count("creds") == 1 and len(ids) == 5
    # the tombstoned document stays in tantivy for AS OF (the retention window) ...
    index_db.ingest("docs", [{"id": "later", "title": "later"}])
    index_db.ingest("docs", [{"id": "later2", "title": "later"}])
    assert index_db.store._state("docs").text.searcher().num_docs == 8
    # ... until vacuum purges it (and its vector)
    index_db.vacuum()
    assert index_db.store._state("docs").text.searcher().num_docs == 7
    assert sum(len(s.rowids) for s in index_db.store._state("docs").segments) == 7


def test_without_retention_a_tombstoned_document_is_purged_two_batches_later(
        tmp_path, index_embedder, index_docs):
    """The purge lags one batch: batch S+1 records the horizon S, batch S+2 deletes the
    documents tombstoned up to S (so a reader of S+1's predecessor never loses a row)."""
    with recallql.connect(tmp_path / "db", embedder=index_embedder, retention=0) as db:
        db.ingest("docs", index_docs)
        db.ingest("docs", [{"id": "creds", "title": "Rotate secrets quarterly"}])  # batch 2
        text = db.store._state("docs").text
        db.ingest("docs", [{"id": "later", "title": "later"}])  # records horizon 2
        assert text.searcher().num_docs == 7
        db.ingest("docs", [{"id": "later2", "title": "later"}])  # purges rows dead at <= 2
        assert text.searcher().num_docs == 7


def test_snapshot_is_stable_and_refreshes_after_commit(index_db, index_docs):
    index_db.ingest("docs", index_docs[:2])
    old = index_db.snapshot("docs")
    assert index_db.snapshot("docs") is old
    index_db.ingest("docs", index_docs[2:])
    new = index_db.snapshot("docs")
    assert new is not old and (old.size, new.size) == (2, 5)
    rows, _ = old.lexical_topn(old.analyze("rotate credentials"), 5)
    assert rows.tolist() == []
    assert len(old.ids) == 2 and old.ids[:] == ["backup-1", "backup-2"]


def test_extra_sql_commits_with_the_batch(index_db):
    def add_session(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO sessions(id, agent_id, started_at) VALUES ('s1', 'a', 0)")

    index_db.store.ingest("messages", [{"id": "m1", "content": "hi", "session_id": "s1",
                                        "seq": 1, "role": "user", "active": True}],
                          index_db.embedder("messages"), extra_sql=add_session)
    assert index_db.store.meta.read.execute("SELECT id FROM sessions").fetchall() == [("s1",)]

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO sessions(id, agent_id, started_at) VALUES ('s2', 'a', 0)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        index_db.store.ingest("messages", [{"id": "m2", "content": "lost"}],
                              index_db.embedder("messages"), extra_sql=broken)
    assert index_db.store.meta.read.execute("SELECT count(*) FROM sessions").fetchone() == (1,)
    snap = index_db.snapshot("messages")
    assert snap.size == 1 and list(snap.ids) == ["m1"]
    assert snap.lexical_topn(["lost"], 5)[0].tolist() == []
    index_db.ingest("messages", [{"id": "m3", "content": "after", "session_id": "s1"}])
    assert list(index_db.snapshot("messages").ids) == ["m1", "m3"]


def test_metadata_tables_for_sessions(index_db):
    conn = index_db.store.meta.read
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"sessions", "annotations", "signals", "items", "collections"} <= tables
    indexes = {r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE type='index'")
               if r[0]}
    assert any("signals(session_id)" in s for s in indexes)
    assert any("sessions(parent_session_id)" in s for s in indexes)
    with index_db.store.transaction() as w:
        w.execute("INSERT INTO sessions(id, agent_id, started_at) VALUES ('s', 'a', 1.5)")
    status = conn.execute("SELECT status, source, metadata FROM sessions").fetchone()
    assert status == ("open", "cli", "{}")
    with pytest.raises(sqlite3.IntegrityError), index_db.store.transaction() as w:
        w.execute("UPDATE sessions SET status = 'bogus'")
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_create_collection_and_embedder_checks(tmp_path):
    path = tmp_path / "db"

    def shout(texts):
        return np.ones((len(texts), 8), np.float32)

    with recallql.connect(path, embedder=None) as db:
        info = db.create_collection("notes", ("text",), {"year": int}, embedder=shout)
        assert (info.dim, info.embedder_name, info.fields["year"].value) == (
            8, "test_create_collection_and_embedder_checks.<locals>.shout", "int")
        assert db.create_collection("notes", ("text",), {"year": int}, embedder=shout) == info
        with pytest.raises(StoreError, match="shout.*_named.<locals>.other"):
            db.create_collection("notes", ("text",), {"year": int}, embedder=_named())
        with pytest.raises(StoreError, match="fields"):
            db.create_collection("notes", ("text",), {"year": str}, embedder=shout)
        with pytest.raises(StoreError, match="dim is required"):
            db.create_collection("raw", ("text",), embedder=None)
        db.create_collection("raw", ("text",), dim=3, embedder=None)
        db.ingest("notes", [{"id": 1, "text": "a", "year": 1999}])
    with recallql.connect(path, embedder=None) as db:
        with pytest.raises(recallql.IngestError, match="not attached"):
            db.ingest("notes", [{"id": 2, "text": "b"}])
        db.ingest("notes", [{"id": 2, "text": "b", "vector": [1.0] * 8}])
        with pytest.raises(StoreError, match=r"shout' \(dim 8\); got 'HashEmbedder.__call__'"):
            db.set_embedder("notes", HashEmbedder(8).__call__)
        db.set_embedder("notes", shout)
        assert db.ingest("notes", [{"id": 3, "text": "c"}]).embedded == 1
        assert db.snapshot("notes").has_vector.tolist() == [True, True, True]
    with pytest.raises(StoreError, match="with no embedder .*not .all-MiniLM.*embedder=None"):
        recallql.connect(path)


def test_a_redefinition_names_both_definitions_readably():
    """The fields were Python reprs: {'source': <FieldType.STR: 'str'>, ...}."""
    with recallql.connect(embedder=None) as db:
        db.create_collection("notes", fields={"source": str, "tags": list[str]}, dim=4,
                             embedder=None)
        with pytest.raises(StoreError) as err:
            db.create_collection("notes", ("body",), {"source": str, "year": int}, dim=4,
                                 embedder=None)
        with pytest.raises(StoreError) as bare:
            db.create_collection("notes", ("body",), dim=4, embedder=None)
    assert str(err.value) == (
        "collection 'notes' exists with text fields title, body and fields source=str, "
        "tags=list[str]; asked for text fields body and fields source=str, year=int")
    assert str(bare.value).endswith("asked for text fields body and fields (none)")


def test_names_with_lone_surrogates_are_store_errors(tmp_path):
    """A name SQLite cannot encode is no collection's name: StoreError, never UnicodeEncodeError;
    nothing is created."""
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        for call in (lambda: db.create_collection("c\ud800", dim=2, embedder=None),
                     lambda: db.create_collection("c", ("t\ud800",), dim=2, embedder=None),
                     lambda: db.create_collection("c", fields={"\ud800": str}, dim=2,
                                                  embedder=None),
                     lambda: db.snapshot("\ud800"), lambda: db.ingest("\ud800", [])):
            with pytest.raises(StoreError):
                call()
        assert {c.name for c in db.collections()} == {"docs", "messages"}


@pytest.mark.parametrize("fields, text_fields", [
    ({"rowid": str}, ("text",)), ({}, ("text", "rowid")), ({"id": str}, ("text",)),
    ({"vector": str}, ("text",)), ({"text": str}, ("text",)),
], ids=["rowid-field", "rowid-text", "id", "vector", "duplicate"])
def test_reserved_or_duplicated_field_names_are_refused(fields, text_fields):
    """`rowid` is reserved beside the core keys: `fetch` returns the internal row number under
    that name, so a field of that name could never be read back."""
    with recallql.connect(embedder=None) as db:
        with pytest.raises(StoreError, match=r"reserved or duplicated \(reserved: .*'rowid'"):
            db.create_collection("x", text_fields, fields, dim=2, embedder=None)
        assert "x" not in {c.name for c in db.collections()}


def test_names_close_to_reserved_ones_are_fields_like_any_other():
    with recallql.connect(embedder=None) as db:
        db.create_collection("x", ("text",), {"ROWID": str, "row_id": int}, dim=2, embedder=None)
        db.ingest("x", [{"id": "a", "text": "alpha", "ROWID": "R", "row_id": 7}])
        (row,) = db.execute("SEARCH x MATCHING 'alpha' WHERE ROWID = 'R'").rows
        assert (row.fields["ROWID"], row.fields["row_id"]) == ("R", 7)


@pytest.mark.parametrize("on_disk", [True, False], ids=["disk", "memory"])
def test_every_database_method_after_close_raises_store_error(tmp_path, on_disk):
    """After close(), reads, statements, writes and session calls all raise StoreError
    ("... is closed"), never sqlite3.ProgrammingError; close() itself may be repeated."""
    db = recallql.connect(tmp_path / "db" if on_disk else None, embedder=None)
    db.create_collection("c", ("text",), dim=2, embedder=None)
    db.ingest("c", [{"id": "a", "text": "alpha", "vector": [1, 0]}])
    db.sessions.create("s1", "agent")
    db.close()
    db.close()
    calls = {
        "execute": lambda: db.execute("SEARCH c MATCHING 'alpha'"),
        "execute-syntax-error": lambda: db.execute("SEARCH"),
        "show": lambda: db.execute("SHOW SESSIONS"),
        "describe": lambda: db.execute("DESCRIBE c"),
        "explain": lambda: db.explain("SEARCH c MATCHING 'alpha'"),
        "snapshot": lambda: db.snapshot("c"),
        "collections": db.collections,
        "create_collection": lambda: db.create_collection("d", ("t",), dim=2, embedder=None),
        "ingest": lambda: db.ingest("c", [{"id": "b", "text": "beta"}]),
        "read_transaction": lambda: db.read_transaction().__enter__(),
        "committed_batch": db.store.committed_batch,
        "session-create": lambda: db.sessions.create("s2", "agent"),
        "session-snapshot": lambda: db.sessions.snapshot("s1"),
        "message-append": lambda: db.messages.append("s1", "user", "hi"),
        "import_hermes": lambda: db.import_hermes(tmp_path / "nope.db"),
    }
    for name, call in calls.items():
        with pytest.raises(StoreError, match="is closed"):
            call()
            pytest.fail(name)


def _named():
    def other(texts):
        return np.ones((len(texts), 8), np.float32)

    return other


def test_builtin_collection_embedder_mismatch_is_named(tmp_path):
    path = tmp_path / "db"
    recallql.connect(path, embedder=HashEmbedder(16)).close()
    with pytest.raises(StoreError, match="hash-blake2b-16.*hash-blake2b-32"):
        recallql.connect(path, embedder=HashEmbedder(32))
    db = recallql.connect(path, embedder=HashEmbedder(16))
    assert {c.name for c in db.collections()} == {"docs", "messages"}
    db.close()


def test_a_reader_with_the_wrong_embedder_is_refused_at_connect(tmp_path):
    """`connect(readonly=True)` skipped the check (a built-in collection's fields may be an
    older version's there), so the first SEARCH crashed: ExecutionError, query vector of shape
    (32,), expected (16,)."""
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.ingest("docs", [{"id": "a", "body": "hello"}])
    with pytest.raises(StoreError, match=r"created with embedder 'hash-blake2b-16' \(dim 16\) "
                                         r"for its built-in collection 'docs', not "
                                         r"'hash-blake2b-32' \(dim 32\)"):
        recallql.connect(path, embedder=HashEmbedder(32), readonly=True)
    with recallql.connect(path, embedder=HashEmbedder(16), readonly=True) as db:
        assert db.execute("SEARCH docs MATCHING 'hello'").ids() == ["a"]


def test_collection_without_embedder_keeps_vectorless_rows(tmp_path):
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.create_collection("raw", ("text",), dim=4, embedder=None)
        db.ingest("raw", [{"id": "a", "text": "alpha", "vector": [1, 0, 0, 0]},
                          {"id": "b", "text": "beta"},
                          {"id": "c", "text": "gamma", "vector": [0, 2, 0, 0]}])
        snap = db.snapshot("raw")
        assert snap.has_vector.tolist() == [True, False, True]
        rows, cos = snap.semantic_topn(np.array([1, 1, 0, 0], np.float32), 10)
        assert rows.tolist() == [0, 2] and np.allclose(cos, [0.70710677] * 2)
        assert snap.lexical_topn(["beta"], 5)[0].tolist() == [1]


def test_open_rejects_foreign_or_missing_directories(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("x")
    with pytest.raises(StoreError, match="not a recallql database"):
        Store.open(tmp_path / "junk")
    with pytest.raises(StoreError, match="not a recallql database"):
        Store.open(tmp_path / "none", readonly=True)
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("content", ["garbage", "foreign", "foreign-state"])
def test_failed_open_leaves_the_directory_as_it_was(tmp_path, content):
    """A meta.sqlite that is not ours: StoreError, the file's bytes unchanged, and no LOCK file
    left behind (nor open); a LOCK that was there before stays."""
    path = tmp_path / "db"
    path.mkdir()
    meta = path / "meta.sqlite"
    if content == "garbage":
        meta.write_bytes(b"not a database" * 100)
    else:
        with sqlite3.connect(meta) as conn:
            conn.execute("CREATE TABLE state(x)" if content == "foreign-state"
                         else "CREATE TABLE notes(id, text)")
        conn.close()
    before = meta.read_bytes()
    with pytest.raises(StoreError, match="meta.sqlite"):
        recallql.connect(path, embedder=None)
    assert sorted(p.name for p in path.iterdir()) == ["meta.sqlite"]
    assert meta.read_bytes() == before
    (path / "LOCK").write_text("123\n")
    with pytest.raises(StoreError):
        Store.open(path)
    assert sorted(p.name for p in path.iterdir()) == ["LOCK", "meta.sqlite"]


def test_lock_taken_on_a_removed_lock_file_is_retaken(tmp_path):
    """A writer that locks a LOCK file which a failed open unlinks meanwhile locks the new file
    instead, so two writers can never both hold a lock."""
    from recallql.index.lock import acquire_lock

    path = tmp_path / "db"
    path.mkdir()
    stale = os.open(path / "LOCK", os.O_RDWR | os.O_CREAT)
    (path / "LOCK").unlink()  # what a failed open does while holding it
    fd, created = acquire_lock(path)
    try:
        assert created and os.path.samestat(os.fstat(fd), os.stat(path / "LOCK"))
        with pytest.raises(recallql.DatabaseLocked):
            acquire_lock(path)
    finally:
        os.close(fd)
        os.close(stale)


def test_readonly_store_refuses_writes(tmp_path, index_embedder, index_docs):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=index_embedder) as db:
        db.ingest("docs", index_docs)
    before = _files(path)
    with recallql.connect(path, embedder=index_embedder, readonly=True) as reader:
        with pytest.raises(StoreError, match="read-only"):
            reader.ingest("docs", index_docs)
        assert reader.snapshot("docs").size == 5
        with pytest.raises(StoreError, match="read-only"):
            reader.create_collection("x", ("t",), dim=2, embedder=None)
    assert _files(path) == before


def _files(root):
    """Every file's bytes, except SQLite's WAL index files (a WAL reader may create them)."""
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_filters_on_a_real_store(index_db, index_docs):
    index_db.ingest("docs", index_docs)
    snap = index_db.snapshot("docs")
    mask = snap.filter_mask(Cmp("source", "=", "wiki"))
    assert [snap.ids[r] for r in np.flatnonzero(mask)] == ["backup-1", "creds"]
    rows, _ = snap.lexical_topn(snap.analyze("backup rotate"), 5, allowed=mask)
    assert {snap.ids[r] for r in rows} == {"backup-1", "creds"}


@pytest.mark.parametrize("on_disk", [True, False], ids=["disk", "memory"])
def test_vector_segments_merge_and_stay_exact(tmp_path, on_disk):
    rng = np.random.default_rng(7)
    vecs = index_unit(rng, 70, 8)
    with recallql.connect(tmp_path / "db" if on_disk else None, embedder=None) as db:
        db.create_collection("v", ("text",), dim=8, embedder=None)
        for i in range(70):
            db.ingest("v", [{"id": f"i{i:03d}", "text": "t", "vector": vecs[i]}])
        db.ingest("v", [{"id": "i005", "text": "t", "vector": vecs[69]}])
        snap = db.snapshot("v")
        rows, cos = snap.semantic_topn(vecs[10], 71)
        if on_disk:
            files = os.listdir(tmp_path / "db" / "collections" / "v" / "vectors")
            assert sorted(files) == sorted(s.file for s in snap._segments)
    assert len(snap._segments) < 20
    assert len(rows) == 70 and snap.ids[rows[0]] == "i010" and cos[0] == pytest.approx(1.0)
    expected = sorted(((-float(v @ vecs[10]), f"i{i:03d}") for i, v in enumerate(vecs)
                       if i != 5))
    expected.append((-float(vecs[69] @ vecs[10]), "i005"))
    assert [snap.ids[r] for r in rows] == [i for _, i in sorted(expected)]


def test_merges_of_interleaved_segments_with_tombstones_keep_rowids(tmp_path):
    """Tier merges combine non-adjacent segments and drop tombstoned rows; every vector must
    still be found at its own rowid. (This workload once produced a merged segment whose
    unsorted rowids were mistaken for a contiguous range.)"""
    from tests.test_store_crash import SEED, batch_items, fresh

    expected = {}
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(16)) as db:
        for k in range(1, 20):  # 1-12 new items, 'shared' (replaced), 'constant' (unchanged)
            db.ingest("docs", batch_items(SEED, k))
            expected.update({it["id"]: it["vector"] for it in fresh(SEED, k)})
        snap = db.snapshot("docs")
        assert any(s.explicit is not None for s in snap._segments)
        for item_id, vec in expected.items():
            rows, cos = snap.semantic_topn(vec, 1)
            assert snap.ids[rows[0]] == item_id and cos[0] == pytest.approx(1.0)
        assert snap.semantic_topn(expected["b1-0"], 10**6)[0].size == len(expected) + 2


def test_a_store_of_the_previous_format_is_read_and_migrated(tmp_path, index_embedder):
    """A store written before AS OF retention and idempotency keys (no `collections.horizon`,
    no `request_keys`, no `batches_time`) is read as it is, and migrated by its first writer."""
    path = tmp_path / "db"
    with recallql.connect(path, embedder=index_embedder) as db:
        db.ingest("docs", [{"id": "a", "title": "alpha"}, {"id": "b", "title": "alpha"}])
        db.delete("docs", ["a"])
    with sqlite3.connect(path / "meta.sqlite") as conn:
        conn.execute("ALTER TABLE collections DROP COLUMN horizon")
        conn.execute("DROP TABLE request_keys")
        conn.execute("DROP INDEX batches_time")
    conn.close()
    reader = recallql.connect(path, embedder=index_embedder, readonly=True)
    assert reader.execute("SEARCH docs MATCHING 'alpha'").ids() == ["b"]
    with recallql.connect(path, embedder=index_embedder) as db:
        db.ingest("docs", [{"id": "c", "title": "alpha"}], key="k")
        assert db.check().ok
        names = {n for (n,) in db.store.meta.read.execute("SELECT name FROM sqlite_master")}
        assert {"request_keys", "batches_time"} <= names
    assert reader.execute("SEARCH docs MATCHING 'alpha'").ids() == ["b", "c"]
    reader.close()


def test_leftovers_of_an_unfinished_batch_are_removed_even_after_its_number_was_reused(
        tmp_path, index_embedder):
    """Batch numbers are global: after a writer died between its tantivy commit and its SQLite
    commit in `docs`, another process may commit a `messages` batch with the same number. The
    dead batch's documents are then not "after the committed batch" any more; recovery still
    removes them (they are of rowids SQLite does not have), so the next row of `docs` does not
    inherit a ghost document."""
    path = tmp_path / "db"
    with recallql.connect(path, embedder=index_embedder) as db:
        db.ingest("docs", [{"id": "a", "title": "alpha"}])
        db.sessions.create("s", "agent")
        committed = db.store.committed_batch()
        with db.store.writing():  # what the dead writer left: tantivy only
            text = db.store._state("docs").text
            text.add([1], committed + 1, ["ghost words"])
            text.commit()
    with recallql.connect(path, embedder=index_embedder) as db:
        db.messages.append("s", "user", "another collection takes the batch number")
        assert db.store.committed_batch() == committed + 1
        db.ingest("docs", [{"id": "b", "title": "beta"}])  # rowid 1
        assert db.execute("SEARCH docs MATCHING 'ghost' USING LEXICAL").ids() == []
        assert db.execute("SEARCH docs MATCHING 'beta' USING LEXICAL").ids() == ["b"]
        assert db.check().ok and db.check().problems == []


@pytest.mark.parametrize("text_fields, fields, message", [
    (("text",), ["tag"], "collection 'x': fields must be a mapping of field name to type, "
                         "e.g. {'tag': str, 'year': int}, got list ['tag']"),
    (5, None, "collection 'x': text_fields must be a list of field names, e.g. "
              "('title', 'body'), got int 5"),
    (None, None, "collection 'x': text_fields must be a list of field names, e.g. "
                 "('title', 'body'), got NoneType None"),
], ids=["fields-as-list", "text-fields-int", "text-fields-none"])
def test_a_definition_of_the_wrong_shape_is_a_store_error(text_fields, fields, message):
    """Was: a raw AttributeError ('list' object has no attribute 'items') or TypeError
    ('int' object is not iterable) from inside the schema check."""
    with recallql.connect(embedder=None) as db:
        with pytest.raises(StoreError) as info:
            db.create_collection("x", text_fields, fields, dim=2, embedder=None)
        assert str(info.value) == message
        with pytest.raises(StoreError, match="fields must be a mapping"):
            db.store.add_fields("docs", ["tag"])
        assert "x" not in {c.name for c in db.collections()}


@pytest.mark.parametrize("name", ["t_a%200", "what?", "a#b c", "naïve"])
def test_a_database_opens_under_a_directory_whose_name_a_uri_would_misread(tmp_path, name):
    """Read-only connections open the metadata store by URI (``mode=ro``): the path is
    %-escaped, so '%20', '?' and '#' in a directory name (a cluster's tenant directories are
    percent-encoded names) stay themselves."""
    db = recallql.connect(tmp_path / name, embedder=None)
    db.sessions.create("s1", "a0")
    db.ingest("docs", [{"id": "d1", "title": "tape backup", "vector": [1.0] + [0.0] * 383}])
    assert db.sessions.get("s1").agent_id == "a0"
    assert db.execute("RETRIEVE FROM docs LIMIT 3").ids() == ["d1"]
    db.close()
