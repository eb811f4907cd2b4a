"""Live context under FOR SESSION on messages, end to end (SPEC §6), grouped and ungrouped."""

from __future__ import annotations

import pytest
from test_conversations_support import connect, rows, run, session

from recallql.engine.reasons import Reason
from recallql.sessions.lineage import FRESH_RESET_REASONS


@pytest.fixture
def db():
    database = connect()
    yield database
    database.close()


def sessions_of(result) -> list[str]:
    return [r.session_id for r in result.rows]


def chain(db, tip_msgs=(5,)):
    """root (tf 3) ← mid (tf 2) ← tip (`tip_msgs`), plus an unrelated `other` (tf 4)."""
    ids = session(db, "root", end="compression", msgs=(3,))
    ids |= session(db, "mid", "root", end="compression", msgs=(2,))
    ids |= session(db, "tip", "mid", msgs=tip_msgs)
    ids |= session(db, "other", msgs=(4,))
    return ids


def test_current_tip_hides_its_live_hits_and_shows_the_compressed_ancestors(db):
    chain(db)
    result = run(db, current="tip", group=False)
    assert sessions_of(result) == ["other", "root", "mid"]
    assert result.stats["live_context"]["live_hidden"] == 1
    assert Reason.LIVE_CONTEXT_HIDDEN in [w.code for w in result.warnings]


def test_a_hidden_hit_never_lets_its_conversation_jump_ahead(db):
    chain(db)  # tip (5) hidden; other (4) outranks root (3), which now serves the chain
    assert rows(run(db, current="tip")) == [("other", "other"), ("root", "root")]
    assert rows(run(db)) == [("tip", "root"), ("other", "other")]


def test_a_later_hit_of_the_same_session_serves(db):
    ids = chain(db, tip_msgs=(5, (1, False, True)))  # a live hit, then a compacted one
    result = run(db, current="tip", budget=None)
    assert rows(result) == [("other", "other"), ("root", "root")]
    ungrouped = run(db, current="tip", group=False)
    assert sessions_of(ungrouped) == ["other", "root", "mid", "tip"]
    assert ungrouped.rows[-1].message_id == ids["tip#1"]


def test_a_compacted_message_of_the_current_session_stays_findable(db):
    ids = session(db, "cur", msgs=((5, False, True), 4))
    result = run(db, current="cur", group=False)
    assert [r.message_id for r in result.rows] == [ids["cur#0"]]
    assert rows(run(db, current="cur")) == [("cur", "cur")]


def test_rewound_messages_are_never_searchable(db):
    session(db, "cur", msgs=((5, False, False), 1))
    session(db, "x", msgs=((4, False, False),))
    assert sessions_of(run(db, group=False)) == ["cur"]
    assert sessions_of(run(db, current="x", group=False)) == ["cur"]
    assert rows(run(db)) == [("cur", "cur")]


@pytest.mark.parametrize("reason", sorted(FRESH_RESET_REASONS))
def test_a_fresh_reset_predecessor_stays_findable(db, reason):
    session(db, "old", end=reason, msgs=(3,))
    session(db, "new", "old", msgs=(2,))  # a linked reset (later Hermes versions)
    session(db, "unlinked", msgs=(1,))     # /new in Hermes 0.19.0: no link
    assert sessions_of(run(db, current="new", group=False)) == ["old", "unlinked"]
    assert rows(run(db, current="new")) == [("old", "old"), ("unlinked", "unlinked")]


@pytest.mark.parametrize("reason", ["branched", "user_exit", None])
def test_a_branch_parent_stays_hidden_from_its_branch(db, reason):
    session(db, "bp", end=reason, msgs=(5, (4, False, True)))
    session(db, "bc", "bp", branched="bp", msgs=(3,))  # the copied history and its own
    session(db, "z", msgs=(1,))
    assert sessions_of(run(db, current="bc", group=False)) == ["bp", "z"]  # bp's compacted hit
    # from the parent, the child is no ancestor: shown (after bp's own compacted hit)
    assert sessions_of(run(db, current="bp", group=False)) == ["bp", "bc", "z"]


def test_a_delegate_parent_is_hidden_from_its_subagent(db):
    session(db, "dp", msgs=(5,))
    session(db, "sub", "dp", source="subagent", delegate="dp", msgs=(3,))
    assert sessions_of(run(db, current="sub", group=False)) == []
    assert sessions_of(run(db, current="dp", group=False)) == ["sub"]


def test_a_second_continuation_of_the_conversation_is_live(db):
    chain(db)
    session(db, "tip2", "mid", msgs=(1,))  # same conversation, still open
    assert sessions_of(run(db, current="tip", group=False)) == ["other", "root", "mid"]


@pytest.mark.parametrize("parent", ["a", "gone"], ids=["tail-into-cycle", "dangling-parent"])
def test_an_unresolved_current_session_hides_only_its_own_id(db, parent):
    session(db, "a", "b", end="compression", msgs=(2,))  # a ↔ b: a 2-cycle
    session(db, "b", "a", end="compression", msgs=(2,))
    session(db, "cur", parent, msgs=(5,))
    session(db, "sib", parent, msgs=(4,))  # would share cur's conversation if it resolved
    session(db, "ok", msgs=(1,))
    ungrouped = run(db, current="cur", group=False)
    assert sessions_of(ungrouped) == ["sib", "a", "b", "ok"]
    reason = "cycle" if parent == "a" else "missing_parent"
    assert ungrouped.stats["live_context"]["lineage"]["unresolved"] == {reason: 1}
    grouped = run(db, current="cur")
    assert rows(grouped) == [("ok", "ok")]  # every other hit fails closed
    assert grouped.stats["conversation"]["unresolved_dropped"] == 4  # cur, sib, a, b


def test_an_unknown_current_session_degrades(db):
    chain(db)
    result = run(db, current="nobody")
    assert rows(result) == [("tip", "root"), ("other", "other")]
    assert [w.code for w in result.warnings] == [Reason.SESSION_NOT_FOUND]


def test_ungrouped_live_filter_stops_once_the_page_is_full(db):
    chain(db)
    result = run(db, 1, current="tip", group=False)
    assert sessions_of(result) == ["other"]
    stats = result.stats["live_context"]
    assert (stats["scanned"], stats["kept"], stats["live_hidden"]) == (2, 1, 1)
