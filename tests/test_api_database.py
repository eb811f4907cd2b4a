"""The `Database` object as a newcomer meets it at the prompt: its repr says where it is and
whether it writes, reads or is closed; `with connect(...)` closes it."""

from __future__ import annotations

import pytest

import recallql
from recallql import sessions
from recallql.index.embedders import HashEmbedder


def test_a_database_shows_its_path_and_state(tmp_path):
    path = tmp_path / "mem.db"
    with recallql.connect(path, embedder=HashEmbedder()) as db:
        assert repr(db) == str(db) == f"<recallql.Database {str(path)!r} writer>"
        assert not db.closed and not db.readonly
        with recallql.connect(path, readonly=True, embedder=None) as reader:
            assert repr(reader) == f"<recallql.Database {str(path)!r} reader>"
            assert reader.readonly
    assert db.closed and repr(db) == f"<recallql.Database {str(path)!r} closed>"
    with pytest.raises(recallql.StoreError, match="is closed"):
        db.execute("SHOW SESSIONS")
    memory = recallql.connect(embedder=HashEmbedder())
    assert repr(memory) == "<recallql.Database in memory writer>"
    memory.close()
    memory.close()  # twice is harmless
    assert repr(memory) == "<recallql.Database in memory closed>"


def test_every_type_the_everyday_api_hands_back_is_importable_from_recallql(tmp_path):
    """So user code can annotate what it gets (``def walk(node: recallql.PlanNode)``) without
    reaching into submodules; each name is in `recallql.__all__`."""
    db = recallql.connect(embedder=HashEmbedder())
    info = db.create_collection("notes", fields={"team": str})
    added = db.ingest("notes", [{"id": "a", "title": "backup", "body": "nightly",
                                 "doc_id": "d", "position": 0},
                                {"id": "b", "title": "restore", "body": "weekly",
                                 "doc_id": "d", "position": 1}])
    snapshot = db.sessions.create("s-1", "agent-7")
    result = db.execute("SEARCH notes MATCHING 'backup' FOR SESSION 'nope' "
                        "WITH CONTEXT (before = 1, after = 1)")
    explain = db.explain("SEARCH notes MATCHING 'backup'")
    row = result[0]
    handed_back = {
        "CollectionInfo": info, "IngestReport": added, "SessionSnapshot": snapshot,
        "Result": result, "Row": row, "ReasonEntry": row.reasons[0],
        "ContextItem": row.context[0], "Notice": result.warnings[0], "Explain": explain,
        "PlanNode": explain.plan, "Reason": row.reasons[0].code,
        "DeleteReport": db.delete("notes", ["b"]), "CheckReport": db.check(),
        "SweepReport": db.sessions.sweep(365, dry_run=True), "QueryPlan": db.plan(
            "SEARCH notes MATCHING 'x'"),
    }
    for name, value in handed_back.items():
        assert type(value) is getattr(recallql, name) and name in recallql.__all__, name
    for name, value in {"Sessions": db.sessions, "Messages": db.messages}.items():
        assert type(value) is getattr(sessions, name), name  # db.sessions / .messages
        assert name in sessions.__all__
    db.close()


def test_reopening_with_another_embedder_says_which_embedder_opens_it(tmp_path):
    """`connect(path)` asks for the default embedder; a database built with another one (or
    with none) was refused naming only the two embedders, not what to pass."""
    bare, hashed = tmp_path / "bare.db", tmp_path / "hashed.db"
    recallql.connect(bare, embedder=None).close()
    with pytest.raises(recallql.StoreError) as info:
        recallql.connect(bare)
    assert str(info.value) == (
        f"the database {bare} was created with no embedder (vectors from the caller, dim 384) "
        "for its built-in collection 'docs', not 'all-MiniLM-L6-v2-onnx-int8' (dim 384), "
        "connect's default: open it with connect(path, embedder=None)")
    with recallql.connect(bare, embedder=None) as db:
        assert db.embedder("docs") is None
    recallql.connect(hashed, embedder=HashEmbedder(16)).close()
    with pytest.raises(recallql.StoreError) as info:
        recallql.connect(hashed, embedder=HashEmbedder(32), readonly=True)
    assert str(info.value) == (
        f"the database {hashed} was created with embedder 'hash-blake2b-16' (dim 16) for its "
        "built-in collection 'docs', not 'hash-blake2b-32' (dim 32): open it with "
        "connect(path, embedder=...) given that embedder, or embedder=None to attach none")
    with recallql.connect(hashed, embedder=HashEmbedder(16)) as db:
        assert db.embedder("docs").name == "hash-blake2b-16"


def test_explain_options_given_to_execute_point_to_explain(tmp_path):
    db = recallql.connect(tmp_path / "db", embedder=None)
    db.create_collection("kb", text_fields=("body",), dim=4, embedder=None)
    with pytest.raises(recallql.ParameterError) as err:
        db.execute("SEARCH kb MATCHING :q", q="x", analyze=True)
    assert err.value.hint == ("analyze=True is an option of db.explain, not a parameter: call "
                              "db.explain(text, analyze=True), or write EXPLAIN ANALYZE / "
                              "EXPLAIN VERBOSE before the statement")
    with pytest.raises(recallql.ParameterError) as err:  # a real parameter named analyze: no hint
        db.execute("SEARCH kb MATCHING :analyze LIMIT :n", analyze="x")
    assert err.value.hint is None or "db.explain" not in err.value.hint
    with pytest.raises(TypeError, match="analyze must be True or False, got 'yes'"):
        db.explain("SEARCH kb MATCHING 'x'", analyze="yes")
    assert db.explain("SEARCH kb MATCHING 'x'", analyze=True).rows == []
    db.close()
