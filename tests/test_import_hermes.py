"""`db.import_hermes`: a Hermes Agent 0.19.0 store into sessions and messages, end to end."""

from __future__ import annotations

import hashlib
import importlib.util
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from test_conversations_support import connect

from recallql.importers.hermes_store import HermesFormatError
from recallql.index.errors import StoreError

_BUILDER = Path(__file__).parent / "fixtures" / "hermes" / "build_state_db.py"
_spec = importlib.util.spec_from_file_location("build_state_db", _BUILDER)
builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)
T0 = builder.T0
LEX = "SEARCH messages MATCHING :q USING LEXICAL WITHOUT RECENCY "
LIVE = "SEARCH messages MATCHING :q USING LEXICAL FOR SESSION :cur WITHOUT RECENCY "


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "hermes" / "state.db"
    path.parent.mkdir()
    builder.build_state_db(path)
    return path


@pytest.fixture
def db():
    database = connect()
    yield database
    database.close()


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_report_counts_everything(db, store):
    report = db.import_hermes(store)
    assert report.model_dump() == {
        "path": str(store), "snapshot": "immutable", "schema_version": 22,
        "sessions": 17, "sessions_added": 17, "sessions_updated": 0,
        "messages": 21, "messages_added": 21, "messages_updated": 0,
        "skipped": {"empty_content": 2, "malformed_model_config": 1,
                    "undecodable_json_content": 1},
        "missing_parents": ["gone-session"], "unresolved": {"cycle": 2, "missing_parent": 1},
        "roots_updated": 17,
        "batches": 1, "missing_columns": [],
    }
    assert report.to_text().splitlines()[1:3] == [
        "  sessions: 17 (17 added, 0 updated)",
        "  messages: 21 (21 added, 0 updated) in 1 batch(es)"]
    assert int(db.snapshot("messages").live.sum()) == 21


EDGES = {
    "conv-tip": [("conv-tip", "continuation"), ("conv-mid", "continuation"),
                 ("conv-root", "root")],
    "branch-child": [("branch-child", "branch"), ("branch-parent", "root")],
    "deleg-sub": [("deleg-sub", "delegate"), ("deleg-parent", "root")],
    "tool-child": [("tool-child", "tool"), ("tool-parent", "root")],
    "else-child": [("else-child", "continuation"), ("else-parent", "root")],
    "reset-new": [("reset-new", "root")],
    "bad-config": [("bad-config", "root")],
    "orphan": [("orphan", "missing")],
    "cycle-b": [("cycle-b", "continuation"), ("cycle-a", "cycle")],
}


@pytest.mark.parametrize(("sid", "expected"), EDGES.items(), ids=EDGES.keys())
def test_each_shape_imports_with_its_lineage_verdicts(db, store, sid, expected):
    db.import_hermes(store)
    records = db.execute("SHOW LINEAGE :s", s=sid).records
    assert [(r["session_id"], r["edge"]) for r in records] == expected


def test_session_rows_are_mapped(db, store):
    db.import_hermes(store)
    snap = db.sessions.snapshot
    child, sub, old = snap("branch-child"), snap("deleg-sub"), snap("reset-old")
    assert (child.branched_from, child.delegate_from, child.status) == ("branch-parent", None,
                                                                         "open")
    assert (sub.source, sub.delegate_from, sub.parent_session_id) == ("subagent", "deleg-parent",
                                                                      "deleg-parent")
    assert (old.status, old.end_reason, old.agent_id) == ("archived", "new_session", "hermes")
    root = snap("conv-root")
    assert (root.status, root.started_at.timestamp(), root.ended_at.timestamp()) == (
        "closed", T0, T0 + 100)
    assert root.metadata == {"model": "claude-sonnet-4", "origin": "hermes"}
    assert snap("else-child").delegate_from == "__orphaned__"
    assert snap("bad-config").branched_from is None


def test_message_items_keep_text_flags_and_order(db, store):
    db.import_hermes(store)
    snap = db.snapshot("messages")
    stored = {r["id"]: r for r in snap.fetch(np.flatnonzero(snap.live))}
    tip = sorted((r for r in stored.values() if r["session_id"] == "conv-tip"),
                 key=lambda r: r["seq"])
    assert [(r["seq"], r["role"], r["active"], r["compacted"]) for r in tip] == [
        (1, "user", False, True), (2, "assistant", False, True), (3, "assistant", True, False),
        (4, "user", False, False), (5, "user", True, False), (8, "tool", True, False),
        (9, "assistant", True, False)]  # seq counts the messages read (the broken one is not)
    assert tip[4]["content"] == "see the attached diagram\nand the notes"
    assert tip[4]["created_at"] == T0 + 205
    assert [r["message_id"] for r in tip] == sorted(r["message_id"] for r in tip)
    assert len({r["message_id"] for r in stored.values()}) == 21
    assert snap.has_vectors()


def test_the_source_store_is_byte_identical_afterwards(db, store):
    before = digest(store.parent)
    db.import_hermes(store)
    db.import_hermes(store)
    assert digest(store.parent) == before == {"state.db": before["state.db"]}


def test_a_live_wal_store_is_read_from_a_copy_and_left_alone(db, tmp_path):
    path = tmp_path / "live" / "state.db"
    path.parent.mkdir()
    writer = builder.build_state_db(path, keep_open=True)
    try:
        before = digest(path.parent)
        assert "state.db-wal" in before
        report = db.import_hermes(path)
        assert digest(path.parent) == before
    finally:
        writer.close()
    assert (report.snapshot, report.sessions, report.messages) == ("copy", 18, 22)
    (row,) = db.execute(LEX + "LIMIT 1", q="checkpoint").rows
    assert row.session_id == "late-session"


def test_reimporting_the_same_file_writes_nothing(db, store):
    db.import_hermes(store)
    size, batch = db.snapshot("messages").size, db.store.meta.committed_batch()
    again = db.import_hermes(store)
    assert (again.sessions, again.messages, again.batches) == (17, 21, 0)
    assert (again.sessions_added, again.sessions_updated, again.messages_added,
            again.messages_updated) == (0, 0, 0, 0)
    assert (db.snapshot("messages").size, db.store.meta.committed_batch()) == (size, batch)


def hermes_moves_on(path: Path) -> None:
    """conv-tip is compressed into conv-tip2; its last answer was compacted in place first."""
    conn = sqlite3.connect(path)
    conn.execute("UPDATE messages SET active = 0, compacted = 1 "
                 "WHERE content = 'live answer: all pods are running'")
    conn.execute("UPDATE sessions SET end_reason = 'compression', ended_at = ? "
                 "WHERE id = 'conv-tip'", (T0 + 250,))
    builder.add_session(conn, "conv-tip2", parent="conv-tip", start=250)
    builder.add_message(conn, "conv-tip2", "user", "after the second compression", 251)
    conn.commit()
    conn.close()


def test_reimport_updates_what_changed(db, store):
    db.import_hermes(store)
    old = {r.id: r for r in db.execute(LEX + "LIMIT 5", q="pods running").rows}
    hermes_moves_on(store)
    report = db.import_hermes(store)
    assert (report.sessions, report.sessions_added, report.sessions_updated) == (18, 1, 1)
    assert (report.messages, report.messages_added, report.messages_updated) == (22, 1, 1)
    new = {r.id: r for r in db.execute(LEX + "LIMIT 5", q="pods running").rows}
    answer = "hermes:conv-tip:" + next(i.split(":")[-1] for i in old if old[i].fields["role"]
                                       == "assistant")
    assert (new[answer].message_id, new[answer].fields["seq"]) == (
        old[answer].message_id, old[answer].fields["seq"])
    assert (new[answer].fields["active"], new[answer].fields["compacted"]) == (False, True)
    assert db.sessions.snapshot("conv-tip").end_reason == "compression"
    records = db.execute("SHOW LINEAGE 'conv-tip2'").records
    assert [r["edge"] for r in records] == ["continuation", "continuation", "continuation",
                                            "root"]


def test_imported_conversations_search_end_to_end(db, store):
    db.import_hermes(store)
    grouped = db.execute(LEX + "GROUP BY CONVERSATION LIMIT 10", q="pods")
    assert [(r.session_id, r.conversation_root) for r in grouped.rows] == [
        ("conv-tip", "conv-root")]
    live = db.execute(LIVE + "GROUP BY CONVERSATION LIMIT 10", q="helm charts", cur="conv-tip")
    assert [(r.fields["content"], r.conversation_root) for r in live.rows] == [
        ("compacted question about helm charts", "conv-root")]  # the live summary is hidden
    branch = db.execute(LIVE + "LIMIT 10", q="postgres mysql", cur="branch-child")
    assert branch.rows == []  # the parent's history was copied into the branch: still live
    rewound = db.execute(LEX + "LIMIT 10", q="rewound took back")
    assert rewound.rows == []


def test_batches_progress_and_whole_sessions(db, store):
    calls = []
    report = db.import_hermes(store, progress=lambda done, total: calls.append((done, total)),
                              batch_size=3)
    assert calls == [(0, 21), (3, 21), (10, 21), (13, 21), (16, 21), (19, 21), (21, 21)]
    assert report.batches == 6


def test_an_interrupted_import_completes_on_rerun(db, store, monkeypatch):
    ingest, seen = db.store.ingest, []

    def failing(*args, **kwargs):
        seen.append(1)
        if len(seen) == 3:
            raise StoreError("disk full (simulated)")
        return ingest(*args, **kwargs)

    monkeypatch.setattr(db.store, "ingest", failing)
    with pytest.raises(StoreError, match="simulated"):
        db.import_hermes(store, batch_size=3)
    monkeypatch.setattr(db.store, "ingest", ingest)
    assert int(db.snapshot("messages").live.sum()) == 10  # two whole batches
    assert db.sessions.get("branch-parent") is None  # batch 3's sessions: not half-written
    report = db.import_hermes(store, batch_size=3)
    assert (report.sessions_added, report.messages_added) == (14, 11)
    fresh = connect()
    fresh.import_hermes(store)
    assert message_ids(db) == message_ids(fresh)
    fresh.close()


def message_ids(database) -> dict[str, int]:
    snap = database.snapshot("messages")
    return {r["id"]: r["message_id"] for r in snap.fetch(np.flatnonzero(snap.live))}


def test_a_native_session_with_the_same_id_is_never_overwritten(db, store):
    db.sessions.create("conv-root", "me")
    report = db.import_hermes(store)
    assert report.skipped["session_id_taken"] == 1
    assert report.skipped["message_of_skipped_session"] == 2
    assert db.sessions.snapshot("conv-root").agent_id == "me"


def test_an_older_schema_imports(db, tmp_path):
    path = tmp_path / "legacy.db"
    builder.build_legacy_state_db(path)
    report = db.import_hermes(path)
    assert (report.sessions, report.messages, report.schema_version) == (2, 1, None)
    assert "messages.active" in report.missing_columns
    records = db.execute("SHOW LINEAGE 'old-tip'").records
    assert [r["edge"] for r in records] == ["continuation", "root"]


@pytest.mark.parametrize("content", [None, b"not a database at all" * 100])
def test_not_a_hermes_store_is_a_clear_error(db, tmp_path, content):
    path = tmp_path / "state.db"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(HermesFormatError, match="Hermes store"):
        db.import_hermes(path)
    assert list(db.sessions.rows()) == []


def test_batch_size_must_be_positive(db, store):
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        db.import_hermes(store, batch_size=0)


def edit(path: Path, *statements: str) -> Path:
    """Apply hostile edits to a built store (foreign keys off; no WAL left behind)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


@pytest.mark.parametrize("sql", [
    "UPDATE sessions SET started_at = 1e300 WHERE id = 'conv-root'",
    "UPDATE sessions SET started_at = -1e999 WHERE id = 'conv-root'",
    "UPDATE sessions SET started_at = -62135596801 WHERE id = 'conv-root'",
    "UPDATE sessions SET ended_at = 1e999 WHERE id = 'conv-root'",
    "UPDATE sessions SET ended_at = 253402300800 WHERE id = 'conv-root'",
], ids=["start-1e300", "start-minus-inf", "start-before-year-1", "end-inf", "end-year-10000"])
def test_a_session_time_out_of_range_skips_the_session_and_its_messages(db, store, sql):
    report = db.import_hermes(edit(store, sql))
    assert report.skipped["session_time_out_of_range"] == 1
    assert report.skipped["message_of_skipped_session"] == 2
    assert (report.sessions, report.messages) == (16, 19)
    assert db.sessions.get("conv-root") is None
    assert "conv-root" not in [r["id"] for r in db.execute("SHOW SESSIONS").records]
    assert db.execute("SHOW LINEAGE 'conv-tip'").records[-1]["edge"] == "missing"
    db.execute(LEX + "GROUP BY CONVERSATION", q="kubernetes")


@pytest.mark.parametrize("value", ["1e300", "-1e300", "1e999"])
def test_a_message_time_out_of_range_keeps_the_message_without_a_time(db, store, value):
    report = db.import_hermes(edit(store, f"UPDATE messages SET timestamp = {value} "
                                          "WHERE content = 'plan the kubernetes migration'"))
    assert report.skipped["message_time_out_of_range"] == 1
    assert report.messages == 21
    (row,) = db.execute(LEX + "LIMIT 1", q="kubernetes migration plan").rows
    assert row.fields["content"] == "plan the kubernetes migration"
    assert row.fields.get("created_at") is None
    again = db.import_hermes(store)  # the dropped time is not a change: nothing rewritten
    assert (again.messages_added, again.messages_updated, again.batches) == (0, 0, 0)


def test_a_message_with_undecodable_text_is_skipped_and_the_rest_imports(db, store):
    report = db.import_hermes(edit(store, "UPDATE messages SET content = CAST(x'61ff62' AS TEXT) "
                                          "WHERE content = 'plan the kubernetes migration'"))
    assert report.skipped["undecodable_text"] == 1
    assert (report.sessions, report.messages) == (17, 20)
    assert "hermes:conv-root:1" not in db.execute(LEX, q="kubernetes migration plan").ids()
    assert "hermes:conv-root:2" in db.execute(LEX, q="staging cluster").ids()


def test_a_message_appended_while_importing_keeps_its_own_message_id(db, store):
    """Message ids are assigned inside each batch's write, not when the import is planned: a
    write committed in between (another thread or process; here the progress hook, called
    after planning) does not share its id with an imported message (found by trials: the
    appended message and the first imported one both got message_id 1)."""
    db.sessions.create("mine", "agent")
    appended: list[int] = []

    def progress(done: int, total: int) -> None:
        if done == 0:
            appended.append(db.messages.append("mine", "user", "written while importing"))

    db.import_hermes(store, progress=progress)
    snap = db.snapshot("messages")
    ids = snap.values("message_id", np.flatnonzero(snap.live).tolist())
    assert appended == [1]
    assert len(ids) == 22 and sorted(ids) == list(range(1, 23))


def test_a_reimport_numbers_new_messages_after_ones_appended_since(db, tmp_path):
    """A message appended to an imported open session through recallql takes the next seq; a
    later Hermes message imported into that session comes after it, never with the same seq
    (found by trials: both got seq 3, so their order in the session was lost)."""
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    builder.create_schema(conn)
    builder.add_session(conn, "h")
    builder.add_message(conn, "h", "user", "one", 1)
    builder.add_message(conn, "h", "user", "two", 2)
    conn.commit()
    db.import_hermes(path)
    db.messages.append("h", "user", "three, appended to recallql", at=T0 + 3)
    builder.add_message(conn, "h", "assistant", "three, written by hermes", 4)
    builder.add_message(conn, "h", "assistant", "four, written by hermes", 5)
    conn.commit()
    conn.close()
    db.import_hermes(path)
    snap = db.snapshot("messages")
    by_seq = sorted((r["seq"], r["content"]) for r in snap.fetch(np.flatnonzero(snap.live)))
    assert by_seq == [(1, "one"), (2, "two"), (3, "three, appended to recallql"),
                      (4, "three, written by hermes"), (5, "four, written by hermes")]
    assert db.import_hermes(path).messages_added == 0  # and a re-import keeps them
    snap = db.snapshot("messages")
    assert sorted(r["seq"] for r in snap.fetch(np.flatnonzero(snap.live))) == [1, 2, 3, 4, 5]
