"""Sessions keep the store sound: `create` checks the parent; `sweep` removes the swept sessions'
messages too, in the same all-or-nothing batch (real SQLite + tantivy)."""

from __future__ import annotations

import pytest
from engine_helpers import Clock

import recallql
from recallql.engine.reasons import Reason
from recallql.index.embedders import HashEmbedder
from recallql.sessions import sweep as session_sweep
from recallql.sessions.lifecycle import SessionError, SweepReport

T0 = 1_750_000_000.0
DAY = 86400.0




@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def db(tmp_path, clock):
    database = recallql.connect(tmp_path / "db", embedder=HashEmbedder(16), clock=clock)
    yield database
    database.close()


def session_ids(db) -> list[str]:
    return [s["id"] for s in db.sessions.list()]


# -- create: the parent ------------------------------------------------------------------------


def test_a_parent_that_does_not_exist_is_refused(db):
    with pytest.raises(SessionError, match=r"cannot create session 'child': its parent session "
                                           r"'ghost' does not exist"):
        db.sessions.create("child", "agent", parent="ghost")
    assert session_ids(db) == []


def test_a_session_cannot_be_its_own_parent(db):
    with pytest.raises(SessionError, match="'loop': a session cannot be its own parent"):
        db.sessions.create("loop", "agent", parent="loop")
    assert session_ids(db) == []


def test_markers_may_point_anywhere(db):
    db.sessions.create("p", "agent")
    snap = db.sessions.create("c", "agent", parent="p", branched_from="gone",
                              delegate_from="c")
    assert snap.parent_session_id == "p"
    assert sorted(session_ids(db)) == ["c", "p"]


# -- sweep: messages go with their sessions ----------------------------------------------------


def fill(db, clock) -> None:
    """'old' (closed 40 days ago, 2 messages), its child 'mid' (closed 35 days ago, 1 message)
    and 'new' (open, 1 message), all about `alpha`."""
    db.sessions.create("old", "agent", started_at=T0 - 41 * DAY)
    db.messages.append("old", "user", "alpha one", at=T0 - 41 * DAY)
    db.messages.append("old", "assistant", "alpha two", at=T0 - 41 * DAY + 1)
    db.sessions.close("old", end_reason="compression", at=T0 - 40 * DAY)
    db.sessions.create("mid", "agent", parent="old", started_at=T0 - 40 * DAY)
    db.messages.append("mid", "user", "alpha three", at=T0 - 40 * DAY + 1)
    db.sessions.close("mid", at=T0 - 35 * DAY)
    db.sessions.create("new", "agent", started_at=T0 - DAY)
    db.messages.append("new", "user", "alpha four", at=T0 - DAY)


def search(db, group: bool = False):
    grouping = "GROUP BY CONVERSATION " if group else ""
    return db.execute(f"SEARCH messages MATCHING 'alpha' USING LEXICAL {grouping}LIMIT 10")


def test_sweep_removes_the_messages_of_swept_sessions(db, clock):
    fill(db, clock)
    assert sorted(r.session_id for r in search(db)) == ["mid", "new", "old", "old"]
    report = db.sessions.sweep(30)
    assert isinstance(report, SweepReport)
    assert report == 2 and (report.sessions, report.messages) == (2, 3)
    assert repr(report) == "SweepReport(sessions=2, messages=3)" and str(report) == "2"
    assert session_ids(db) == ["new"]
    assert [r.session_id for r in search(db)] == ["new"]
    grouped = search(db, group=True)
    assert [r.session_id for r in grouped] == ["new"]
    assert Reason.LINEAGE_UNRESOLVED_DROPPED not in {w.code for w in grouped.warnings}


def test_sweeping_nothing_writes_no_batch(db, clock):
    fill(db, clock)
    batch = db.store.committed_batch()
    report = db.sessions.sweep(60)
    assert (report, report.messages) == (0, 0)
    assert db.store.committed_batch() == batch


def test_a_swept_session_without_messages_still_goes(db, clock):
    db.sessions.create("quiet", "agent", started_at=T0 - 50 * DAY)
    report = db.sessions.sweep(30)
    assert (report.sessions, report.messages) == (1, 0)
    assert session_ids(db) == []


def test_a_failed_sweep_removes_nothing(db, clock, monkeypatch):
    fill(db, clock)
    db.sessions.signal("new", "reward", 1.0, entity="x")
    before = (session_ids(db), sorted(r.id for r in search(db)))

    def fail(ids, conn):
        conn.execute("DELETE FROM sessions")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(session_sweep, "delete_sessions", fail)
    with pytest.raises(RuntimeError, match="disk on fire"):
        db.sessions.sweep(30)
    assert (session_ids(db), sorted(r.id for r in search(db))) == before
    monkeypatch.undo()
    assert db.sessions.sweep(30) == 2


def test_sweep_survives_reopen(tmp_path, clock):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16), clock=clock) as db:
        fill(db, clock)
        db.sessions.sweep(30)
    with recallql.connect(path, embedder=HashEmbedder(16), clock=clock) as db:
        assert [r.session_id for r in search(db)] == ["new"]


def test_messages_ingested_by_hand_go_by_session_id(db, clock):
    db.sessions.create("old", "agent", started_at=T0 - 41 * DAY)
    db.ingest("messages", [{"id": "mine", "content": "alpha by hand", "session_id": "old",
                            "doc_id": "elsewhere", "created_at": T0 - 41 * DAY}])
    assert db.sessions.sweep(30).messages == 1
    assert search(db).ids() == []
