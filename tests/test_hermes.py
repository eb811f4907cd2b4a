"""Hermes Agent 0.19.0 store reader: rows, markers, content decoding, strict read-only."""

from __future__ import annotations

import hashlib
import importlib.util
import sqlite3
from pathlib import Path

import pytest

from recallql.importers import hermes_store as hermes
from recallql.importers.hermes_store import (
    HermesFormatError,
    HermesStoreBusy,
    decode_content,
    read_hermes_store,
)

_BUILDER = Path(__file__).parent / "fixtures" / "hermes" / "build_state_db.py"
_spec = importlib.util.spec_from_file_location("build_state_db", _BUILDER)
builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)
T0 = builder.T0


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("hermes") / "state.db"
    builder.build_state_db(path)
    return read_hermes_store(path)


def sha256s(db: Path) -> dict[str, str | None]:
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = db.with_name(db.name + suffix)
        out[suffix] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    return out


# (id, parent, source, end_reason, branched_from, delegate_from, archived)
SESSIONS = [
    ("conv-root", None, "cli", "compression", None, None, False),
    ("conv-mid", "conv-root", "cli", "compression", None, None, False),
    ("conv-tip", "conv-mid", "cli", None, None, None, False),
    ("branch-parent", None, "cli", "branched", None, None, False),
    ("branch-child", "branch-parent", "cli", None, "branch-parent", None, False),
    ("deleg-parent", None, "cli", None, None, None, False),
    ("deleg-sub", "deleg-parent", "subagent", None, None, "deleg-parent", False),
    ("tool-parent", None, "cli", "compression", None, None, False),
    ("tool-child", "tool-parent", "tool", None, None, None, False),
    ("reset-old", None, "cli", "new_session", None, None, True),
    ("reset-new", None, "cli", None, None, None, False),
    ("else-parent", None, "telegram", "compression", None, None, False),
    ("else-child", "else-parent", "telegram", None, None, "__orphaned__", False),
    ("bad-config", None, "cli", None, None, None, False),
    ("orphan", "gone-session", "cli", None, None, None, False),
    ("cycle-a", "cycle-b", "cli", "compression", None, None, False),
    ("cycle-b", "cycle-a", "cli", "compression", None, None, False),
]


@pytest.mark.parametrize("expected", SESSIONS, ids=[s[0] for s in SESSIONS])
def test_session_rows_and_markers(store, expected):
    by_id = {s["id"]: s for s in store.sessions}
    s = by_id[expected[0]]
    keys = ("id", "parent_session_id", "source", "end_reason", "branched_from",
            "delegate_from", "archived")
    assert tuple(s[k] for k in keys) == expected
    assert set(s) == set(keys) | {"started_at", "ended_at", "title", "model",
                                     "markers_unreadable"}


def test_session_times_and_display_fields(store):
    tip, mid = (next(s for s in store.sessions if s["id"] == i) for i in ("conv-tip", "conv-mid"))
    assert (mid["started_at"], mid["ended_at"]) == (T0 + 100, T0 + 200)
    assert (tip["ended_at"], tip["title"], tip["model"]) == (None, "k8s migration #3",
                                                            "claude-sonnet-4")


# (content, session, role, active, compacted, tool_name)
MESSAGES = [
    ("compacted question about helm charts", "conv-tip", "user", False, True, None),
    ("summary: helm charts were ported", "conv-tip", "assistant", True, False, None),
    ("rewound message the user took back", "conv-tip", "user", False, False, None),
    ("see the attached diagram\nand the notes", "conv-tip", "user", True, False, None),
    ("pods: 12 running", "conv-tip", "tool", True, False, "terminal"),
    ("compare postgres and mysql", "branch-parent", "user", True, False, None),
    ("subagent report on vector databases", "deleg-sub", "assistant", True, False, None),
    ("my parent was deleted", "orphan", "user", True, False, None),
]


@pytest.mark.parametrize("expected", MESSAGES, ids=[m[0][:24] for m in MESSAGES])
def test_message_rows(store, expected):
    keys = ("content", "session_id", "role", "active", "compacted", "tool_name")
    found = [tuple(m[k] for k in keys) for m in store.messages if m["content"] == expected[0]]
    assert found[0] == expected


def test_messages_in_id_order_with_skips(store):
    ids = [m["id"] for m in store.messages]
    assert ids == sorted(ids) and len(ids) == 23
    assert 10 not in ids  # the broken "\x00json:" row
    tip = [m for m in store.messages if m["session_id"] == "conv-tip"]
    assert [m["content"] for m in tip if m["role"] == "assistant" and m["content"] == ""]
    assert tip[0]["timestamp"] == T0 + 201


def test_report(store):
    r = store.report
    assert (r.snapshot, r.schema_version, r.sessions, r.messages) == ("immutable", 22, 17, 23)
    assert r.skipped == {"malformed_model_config": 1, "undecodable_json_content": 1}
    assert (r.structured_without_text, r.missing_parents, r.missing_columns) == (
        1, ["gone-session"], [])


DECODE = [
    ("plain", "hello", "hello"),
    ("null", None, ""),
    ("parts", '\x00json:[{"type":"text","text":"a"},{"type":"image_url"},"b"]', "a\nb"),
    ("single-part", '\x00json:{"type":"text","text":"only"}', "only"),
    ("json-string", '\x00json:"just text"', "just text"),
    ("no-text", '\x00json:[{"type":"image_url","image_url":{}}]', ""),
    ("non-string-text", '\x00json:[{"type":"text","text":5}]', ""),
    ("undecodable", "\x00json:[{", None),
    ("prefix-not-at-start", "x\x00json:[", "x\x00json:["),
]


@pytest.mark.parametrize(("raw", "expected"), [d[1:] for d in DECODE], ids=[d[0] for d in DECODE])
def test_decode_content(raw, expected):
    assert decode_content(raw) == expected


@pytest.mark.parametrize("dirname", ["plain", "with space", "q?mark#hash%20pct"])
def test_clean_store_is_untouched(tmp_path, dirname):
    db = tmp_path / dirname / "state.db"
    db.parent.mkdir()
    builder.build_state_db(db)
    before, listing = sha256s(db), sorted(p.name for p in db.parent.iterdir())
    assert before["-wal"] is None and before["-shm"] is None
    result = read_hermes_store(db)
    assert (result.report.snapshot, result.report.sessions) == ("immutable", 17)
    assert sha256s(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == listing


@pytest.mark.parametrize("dirname", ["plain", "q?mark#hash%20pct"])
def test_live_store_reads_wal_rows_and_stays_byte_identical(tmp_path, dirname):
    db = tmp_path / dirname / "state.db"
    db.parent.mkdir()
    writer = builder.build_state_db(db, keep_open=True)
    try:
        before, listing = sha256s(db), sorted(p.name for p in db.parent.iterdir())
        assert before["-wal"] is not None and before["-shm"] is not None
        result = read_hermes_store(db)
        assert sha256s(db) == before
        assert sorted(p.name for p in db.parent.iterdir()) == listing
    finally:
        writer.close()
    assert result.report.snapshot == "copy"
    assert "late-session" in {s["id"] for s in result.sessions}
    assert result.messages[-1]["content"] == "written after the last checkpoint"
    assert (result.report.sessions, result.report.messages) == (18, 24)


def test_symlinked_live_store_reads_the_wal_next_to_the_real_file(tmp_path):
    real = tmp_path / "real" / "state.db"
    real.parent.mkdir()
    link = tmp_path / "state.db"
    link.symlink_to(real)
    writer = builder.build_state_db(real, keep_open=True)
    try:
        before = sha256s(real)
        result = read_hermes_store(link)
        assert sha256s(real) == before
    finally:
        writer.close()
    assert (result.report.snapshot, result.report.path) == ("copy", str(link))
    assert "late-session" in {s["id"] for s in result.sessions}


def test_store_that_keeps_changing_is_busy(tmp_path, monkeypatch):
    db = tmp_path / "state.db"
    builder.build_state_db(db)
    ticks = iter(range(10**6))
    monkeypatch.setattr(hermes, "_fingerprint", lambda _db: next(ticks))
    with pytest.raises(HermesStoreBusy, match="kept changing"):
        read_hermes_store(db)


def test_changed_during_immutable_read_falls_back_to_a_copy(tmp_path, monkeypatch):
    db = tmp_path / "state.db"
    builder.build_state_db(db)
    real, calls = hermes._fingerprint, []

    def flaky(path):
        calls.append(path)
        return ("moved", len(calls)) if len(calls) <= 6 else real(path)

    monkeypatch.setattr(hermes, "_fingerprint", flaky)
    assert read_hermes_store(db).report.snapshot == "copy"


def test_legacy_schema_is_tolerated(tmp_path):
    db = tmp_path / "state.db"
    builder.build_legacy_state_db(db)
    result = read_hermes_store(db)
    assert result.report.missing_columns == ["sessions.title", "sessions.archived",
                                             "messages.tool_name", "messages.active",
                                             "messages.compacted"]
    assert result.report.schema_version is None
    tip = next(s for s in result.sessions if s["id"] == "old-tip")
    assert (tip["parent_session_id"], tip["title"], tip["archived"]) == ("old-root", None, False)
    (message,) = result.messages
    assert (message["active"], message["compacted"], message["tool_name"]) == (True, False, None)


def _not_sqlite(path: Path) -> None:
    path.write_text("this is a text file, not a database\n" * 100)


def _empty_sqlite(path: Path) -> None:
    sqlite3.connect(path).close()


def _other_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()


def _sessions_without_parent(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL)")
        conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT)")
    conn.close()


def _directory(path: Path) -> None:
    path.mkdir()


BAD = [
    ("missing", None, "no such file"),
    ("directory", _directory, "not a regular file"),
    ("not-sqlite", _not_sqlite, "not an SQLite database"),
    ("empty-sqlite", _empty_sqlite, "no 'sessions' table"),
    ("other-sqlite", _other_sqlite, "no 'sessions' table"),
    ("old-columns", _sessions_without_parent, "'sessions' lacks column(s) parent_session_id"),
]


@pytest.mark.parametrize(("make", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_not_a_hermes_store(tmp_path, make, message):
    path = tmp_path / "state.db"
    if make is not None:
        make(path)
    with pytest.raises(HermesFormatError) as err:
        read_hermes_store(path)
    assert isinstance(err.value, ValueError)
    assert str(path) in str(err.value) and message in str(err.value)


def _torn(tmp_path: Path, *statements: str):
    """Read the fixture store after writing bytes that are not UTF-8 into TEXT columns."""
    path = tmp_path / "state.db"
    builder.build_state_db(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return read_hermes_store(path)


TORN = "CAST(x'61ff62' AS TEXT)"  # "a", an invalid byte, "b"


@pytest.mark.parametrize("column", ["content", "role", "session_id"])
def test_a_message_with_undecodable_text_is_dropped_and_counted(tmp_path, column):
    read = _torn(tmp_path, f"UPDATE messages SET {column} = {TORN} "
                           "WHERE content = 'plan the kubernetes migration'")
    assert read.report.skipped["undecodable_text"] == 1
    assert read.report.messages == 22
    assert "plan the kubernetes migration" not in [m["content"] for m in read.messages]
    assert "start with the staging cluster" in [m["content"] for m in read.messages]


@pytest.mark.parametrize("column", ["id", "source", "end_reason", "parent_session_id",
                                   "model_config"])
def test_a_session_with_undecodable_identity_or_lineage_is_dropped(tmp_path, column):
    read = _torn(tmp_path, f"UPDATE sessions SET {column} = {TORN} WHERE id = 'conv-root'")
    assert read.report.skipped["undecodable_text"] == 1
    assert "conv-root" not in [s["id"] for s in read.sessions]
    assert len(read.sessions) == 16
    assert read.report.skipped["message_without_session"] == 2  # its messages have no session


@pytest.mark.parametrize("table, column, where", [
    ("sessions", "title", "id = 'conv-tip'"),
    ("sessions", "model", "id = 'conv-tip'"),
    ("messages", "tool_name", "content = 'pods: 12 running'"),
])
def test_undecodable_display_text_is_kept_with_replacement_characters(tmp_path, table, column,
                                                                     where):
    read = _torn(tmp_path, f"UPDATE {table} SET {column} = {TORN} WHERE {where}")
    assert read.report.skipped == {"malformed_model_config": 1, "undecodable_json_content": 1,
                                   "undecodable_text_replaced": 1}
    rows = read.sessions if table == "sessions" else read.messages
    assert [r[column] for r in rows].count("a\ufffdb") == 1
    assert (read.report.sessions, read.report.messages) == (17, 23)
