"""Bulk writes and idempotency keys (issue 13): `db.messages.extend` (one batch for many
messages, several sessions), `db.sessions.signal_many` (one transaction), and ``key=`` on
append / extend / signal / signal_many / ingest, so a retried call writes once.
"""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import Clock

import recallql
from recallql import IdempotencyKeyReused, SessionError, SessionNotFound, SignalRejected
from recallql.index.embedders import HashEmbedder

T0 = 1_760_000_000.0


@pytest.fixture
def db(tmp_path):
    database = recallql.connect(tmp_path / "db", embedder=HashEmbedder(16), clock=Clock(T0))
    for sid in ("s1", "s2"):
        database.sessions.create(sid, "agent", started_at=T0 - 100)
    database.messages.append("s1", "user", "already there")
    yield database
    database.close()


def messages(db) -> list[dict]:
    snap = db.snapshot("messages")
    return sorted(snap.fetch(np.flatnonzero(snap.live)), key=lambda r: r["message_id"])


def dump(db) -> tuple:
    """Everything a write can change."""
    conn = db.store.meta.read
    return (db.store.committed_batch(), [(r["message_id"], r["content"]) for r in messages(db)],
            conn.execute("SELECT * FROM signals ORDER BY id").fetchall(),
            conn.execute("SELECT key FROM request_keys ORDER BY key").fetchall())


def test_extend_writes_one_batch_for_several_sessions(db):
    batch = db.store.committed_batch()
    ids = db.messages.extend([
        {"session_id": "s1", "role": "user", "content": "one"},
        {"session_id": "s2", "role": "assistant", "content": "two", "at": T0 - 50},
        {"session_id": "s1", "role": "tool", "content": "three", "active": False,
         "compacted": True},
    ])
    assert ids == [2, 3, 4]
    assert db.store.committed_batch() == batch + 1  # one batch for all of them
    got = {r["message_id"]: (r["session_id"], r["seq"], r["role"], r["active"], r["compacted"])
           for r in messages(db)}
    assert got == {1: ("s1", 1, "user", True, False), 2: ("s1", 2, "user", True, False),
                   3: ("s2", 1, "assistant", True, False), 4: ("s1", 3, "tool", False, True)}
    assert db.messages.extend([]) == [] and db.store.committed_batch() == batch + 1


@pytest.mark.parametrize("bad, error, match", [
    ({"session_id": "nope", "role": "user", "content": "x"}, SessionNotFound, "message #1"),
    ({"session_id": "s2", "role": "", "content": "x"}, SessionError, "message #1: role"),
    ({"session_id": "s2", "role": "user"}, SessionError, "message #1: a message needs 'content'"),
    ({"session_id": "s2", "role": "user", "content": "x", "colour": 1}, SessionError,
     "unknown message field"),
    ({"session_id": "s2", "role": "user", "content": "x", "at": T0 - 1000}, SessionError,
     "message #1: message at .* is before its session started"),
    ("not a mapping", SessionError, "message #1: a message is a mapping"),
])
def test_extend_is_all_or_nothing_and_names_the_message(db, bad, error, match):
    before = dump(db)
    with pytest.raises(error, match=match):
        db.messages.extend([{"session_id": "s1", "role": "user", "content": "fine"}, bad])
    assert dump(db) == before


def test_a_retried_append_or_extend_with_its_key_writes_once(db, tmp_path):
    first = db.messages.append("s1", "user", "hello", key="req-1")
    assert db.messages.append("s1", "user", "hello", key="req-1") == first
    many = db.messages.extend([{"session_id": "s2", "role": "user", "content": "a"},
                               {"session_id": "s2", "role": "user", "content": "b"}], key="req-2")
    before = dump(db)
    assert db.messages.extend([{"session_id": "s2", "role": "user", "content": "a"},
                               {"session_id": "s2", "role": "user", "content": "b"}],
                              key="req-2") == many
    assert dump(db) == before
    db.close()
    again = recallql.connect(tmp_path / "db", embedder=HashEmbedder(16), clock=Clock(T0))
    assert again.messages.append("s1", "user", "hello", key="req-1") == first  # durable
    assert [r["content"] for r in messages(again)].count("hello") == 1
    again.close()


def test_a_key_reused_for_another_request_is_refused(db):
    db.messages.append("s1", "user", "hello", key="k")
    before = dump(db)
    with pytest.raises(IdempotencyKeyReused, match="'k' was already used for a different"):
        db.messages.append("s1", "user", "something else", key="k")
    with pytest.raises(IdempotencyKeyReused, match="a messages write"):
        db.sessions.signal("s1", "reward", 1.0, key="k")
    assert dump(db) == before


def test_a_failed_keyed_write_stores_no_key(db):
    """The key is written in the write's own transaction: a rejected write leaves no key, so
    the corrected retry writes."""
    with pytest.raises(SessionNotFound):
        db.messages.append("gone", "user", "x", key="k2")
    assert db.messages.append("s1", "user", "x", key="k2") == 2


def test_signal_many_is_one_transaction_naming_the_rejected_signal(db):
    before = dump(db)
    with pytest.raises(SignalRejected, match=r"signal #2: .*rule out_of_bounds"):
        db.sessions.signal_many([
            {"session_id": "s1", "name": "reward", "value": 1.0, "entity": "doc:1"},
            {"session_id": "s2", "name": "reward", "value": 0.5},
            {"session_id": "s2", "name": "reward", "value": 7.0},
        ])
    assert dump(db) == before
    assert db.sessions.signal_many([
        {"session_id": "s1", "name": "reward", "value": 1.0, "entity": "doc:1"},
        {"session_id": "s2", "name": "reward", "value": 0.5, "at": T0 - 10},
    ], key="sig-1") == 2
    assert db.sessions.signal_many([
        {"session_id": "s1", "name": "reward", "value": 1.0, "entity": "doc:1"},
        {"session_id": "s2", "name": "reward", "value": 0.5, "at": T0 - 10},
    ], key="sig-1") == 0  # the retry records nothing
    assert db.sessions.snapshot("s1").entities == {"doc:1": 1.0}
    db.sessions.signal("s1", "reward", 0.5, entity="doc:2", key="sig-2")
    db.sessions.signal("s1", "reward", 0.5, entity="doc:2", key="sig-2")
    assert db.sessions.snapshot("s1").entities == {"doc:1": 1.0, "doc:2": 0.5}


def test_a_retried_ingest_with_its_key_returns_the_first_report(db):
    items = [{"id": "a", "title": "alpha"}, {"id": "b", "title": "beta"}]
    first = db.ingest("docs", items, key="ing-1")
    batch = db.store.committed_batch()
    again = db.ingest("docs", items, key="ing-1")
    assert again == first and db.store.committed_batch() == batch
    with pytest.raises(IdempotencyKeyReused):
        db.ingest("docs", [{"id": "a", "title": "changed"}], key="ing-1")
    unchanged = db.ingest("docs", items, key="ing-2")  # nothing to write: the key is kept
    assert (unchanged.batch, unchanged.unchanged) == (0, 2)
    assert db.ingest("docs", items, key="ing-2") == unchanged
    assert db.store.committed_batch() == batch


@pytest.mark.parametrize("key", ["", "x" * 257, 5, "a\ud800"])
def test_an_invalid_key_is_refused_before_anything_is_written(db, key):
    before = dump(db)
    with pytest.raises(recallql.IngestError, match="key"):
        db.messages.append("s1", "user", "x", key=key)
    assert dump(db) == before
