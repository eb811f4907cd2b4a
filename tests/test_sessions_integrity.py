"""Sessions keep the store sound: `create` checks the parent (real SQLite + tantivy)."""

from __future__ import annotations

import pytest

import recallql
from recallql.engine.sessions import SessionError
from recallql.index.embedders import HashEmbedder

T0 = 1_750_000_000.0
DAY = 86400.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


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
