"""Sweep keeps live data (issue 13 found 8 / build 7, issue 14 build 4): activity counts messages,
signals, annotations and the end; a conversation goes as a whole; surviving sessions stay
resolvable; `dry_run` lists what would go and writes nothing."""

from __future__ import annotations

import json

import pytest
from engine_helpers import Clock
from test_cli import cli

import recallql
from recallql.engine.reasons import Reason
from recallql.index.embedders import HashEmbedder

T0 = 1_750_000_000.0
DAY = 86400.0
GROUPED = "SEARCH messages MATCHING 'alpha' USING LEXICAL GROUP BY CONVERSATION"


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def db(tmp_path, clock):
    database = recallql.connect(tmp_path / "db", embedder=HashEmbedder(16), clock=clock)
    yield database
    database.close()


def ids(db) -> list[str]:
    return sorted(s["id"] for s in db.sessions.list())


def conversations(db) -> list[tuple[str, str]]:
    result = db.execute(GROUPED)
    assert result.truncated is False
    assert Reason.LINEAGE_UNRESOLVED_DROPPED not in [w.code for w in result.warnings]
    return sorted((r.session_id, r.conversation_root) for r in result.rows)


# -- activity ----------------------------------------------------------------------------------


def test_a_session_started_long_ago_with_a_recent_message_is_kept(db, clock):
    db.sessions.create("s", "a", started_at=T0)
    clock.now = T0 + 100 * DAY
    db.messages.append("s", "user", "alpha still talking")
    clock.now = T0 + 101 * DAY
    report = db.sessions.sweep(30)
    assert report == 0 and ids(db) == ["s"]
    assert [r.session_id for r in db.execute(GROUPED).rows] == ["s"]


@pytest.mark.parametrize("recent", ["signal", "annotation", "end"])
def test_signals_annotations_and_the_end_count_as_activity(db, clock, recent):
    db.sessions.create("s", "a", started_at=T0)
    at = T0 + 90 * DAY
    clock.now = T0 + 100 * DAY  # writes are dated in the past (not after the clock)
    if recent == "signal":
        db.sessions.signal("s", "reward", 1.0, at=at)
    elif recent == "annotation":
        db.sessions.annotate("s", "still relevant", at=at)
    else:
        db.sessions.close("s", "user_exit", at=at)
    assert db.sessions.sweep(30) == 0
    assert db.sessions.sweep(5) == 1 and ids(db) == []


# -- conversations go as a whole -----------------------------------------------------------------


def chain(db, clock) -> None:
    """root (ended by compression 100 days ago) ← tip (messages until yesterday)."""
    db.sessions.create("root", "a", started_at=T0)
    db.messages.append("root", "user", "alpha at the beginning", at=T0 + 1)
    db.sessions.close("root", "compression", at=T0 + 2)
    db.sessions.create("tip", "a", parent="root", started_at=T0 + 2)
    clock.now = T0 + 99 * DAY
    db.messages.append("tip", "user", "alpha alpha still going")
    clock.now = T0 + 100 * DAY


def test_sweeping_the_old_root_of_a_live_chain_keeps_the_conversation(db, clock):
    chain(db, clock)
    report = db.sessions.sweep(30)
    assert report == 0 and report.kept == ("root",)  # inactive, but its conversation is not
    assert ids(db) == ["root", "tip"]
    assert conversations(db) == [("tip", "root")]
    assert db.sessions.verify_lineage().ok


def test_a_conversation_inactive_as_a_whole_goes_as_a_whole(db, clock):
    chain(db, clock)
    db.sessions.create("other", "a")
    db.messages.append("other", "user", "alpha today")
    clock.now = T0 + 200 * DAY
    report = db.sessions.sweep(30)
    assert report.ids == ["other", "root", "tip"] and report.messages == 3
    assert report.swept[1].conversation == "root" and report.kept == ()
    report = db.sessions.sweep(30)
    assert report == 0


def test_a_branch_that_survives_its_swept_parent_keeps_its_hits(db, clock):
    db.sessions.create("parent", "a", started_at=T0)
    db.messages.append("parent", "user", "alpha before the branch", at=T0 + 1)
    db.sessions.close("parent", "branched", at=T0 + 2)
    db.sessions.create("branch", "a", parent="parent", branched_from="parent",
                       started_at=T0 + 2)
    clock.now = T0 + 99 * DAY
    db.messages.append("branch", "user", "alpha on the branch")
    clock.now = T0 + 100 * DAY
    report = db.sessions.sweep(30)
    assert report.ids == ["parent"] and report.detached == ("branch",)
    snap = db.sessions.snapshot("branch")
    assert (snap.parent_session_id, snap.branched_from) == (None, "parent")  # marker kept
    assert conversations(db) == [("branch", "branch")]
    assert db.sessions.verify_lineage().ok


def test_a_survivor_of_a_swept_cycle_becomes_a_root(db, clock):
    """An unresolved session is judged on its own; a survivor whose parent is swept loses the
    link like any other."""
    from session_rows import write_session_row

    write_session_row(db, "x", parent="y", started_at=T0)
    write_session_row(db, "y", parent="x", started_at=T0)
    db.sessions.close("x", "compression", at=T0 + 1)
    db.sessions.close("y", "compression", at=T0 + 1)
    with db.store.transaction() as conn:  # y ended recently (as an import may write it)
        conn.execute("UPDATE sessions SET ended_at = ? WHERE id = 'y'", (T0 + 99 * DAY,))
    clock.now = T0 + 100 * DAY
    report = db.sessions.sweep(30)
    assert report.ids == ["x"] and report.detached == ("y",)
    assert db.sessions.verify_lineage().ok


# -- dry run -----------------------------------------------------------------------------------


def test_a_dry_run_lists_what_would_go_and_writes_nothing(db, clock):
    chain(db, clock)
    db.sessions.create("old", "a", started_at=T0)
    db.messages.append("old", "user", "alpha long ago", at=T0 + 5)
    batch = db.store.committed_batch()
    report = db.sessions.sweep(30, dry_run=True)
    assert report.dry_run and report.ids == ["old"] and report.messages == 1
    (old,) = report.swept
    assert (old.last_active, old.conversation, old.messages) == (T0 + 5, "old", 1)
    assert report.kept == ("root",)
    assert ids(db) == ["old", "root", "tip"] and db.store.committed_batch() == batch
    assert db.sessions.sweep(30).ids == report.ids  # the sweep removes what the dry run listed


def test_a_dry_run_works_on_a_read_only_database(tmp_path, clock):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16), clock=clock) as db:
        chain(db, clock)
    with recallql.connect(path, readonly=True, embedder=HashEmbedder(16), clock=clock) as reader:
        assert reader.sessions.sweep(30, dry_run=True).kept == ("root",)
        with pytest.raises(recallql.StoreError):
            reader.sessions.sweep(30)


def test_the_cli_dry_run_lists_sessions_and_changes_nothing(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.sessions.create("old", "a", started_at=1_000_000_000.0)
        db.messages.append("old", "user", "alpha", at=1_000_000_001.0)
    done = cli("sessions", "sweep", "--older-than", "30", "--dry-run", "--db", str(path))
    assert done.returncode == 0, done.stderr
    assert "old  last active 2001-09-09T01:46:41Z  conversation old  1 message(s)" in done.stdout
    assert "would remove 1 session and 1 message(s)" in done.stdout
    listed = cli("sessions", "sweep", "--older-than", "30", "--dry-run", "--json",
                 "--db", str(path))
    assert json.loads(listed.stdout)["sessions"][0]["id"] == "old"
    with recallql.connect(path, readonly=True, embedder=HashEmbedder(16)) as db:
        assert [s["id"] for s in db.sessions.list()] == ["old"]


# -- a reader's statement during a sweep -------------------------------------------------------


class _SweepWhileEmbedding(HashEmbedder):
    """The reader's embedder: embedding the statement's text (after the statement took its
    snapshot, before its legs and grouping run) lets the writer commit a sweep first."""

    def __init__(self, sweep) -> None:
        super().__init__(16)
        self.sweep = sweep

    def __call__(self, texts):
        if self.sweep is not None and texts == ["alpha"]:
            self.sweep, sweep = None, self.sweep
            sweep()
        return super().__call__(texts)


def test_a_sweep_committed_during_a_statement_is_not_half_seen(db, clock, tmp_path):
    """A reader's statement answers from one committed batch on every leg (SPEC §7): the
    conversation a sweep removes while the statement runs is either all there or all gone,
    never dropped as unresolved lineage."""
    db.sessions.create("old", "agent")
    db.messages.append("old", "user", "alpha from long ago")
    db.sessions.close("old")
    clock.now = T0 + 30 * DAY
    db.sessions.create("new", "agent")
    db.messages.append("new", "user", "alpha from today")
    reader = recallql.connect(tmp_path / "db", readonly=True,
                              embedder=_SweepWhileEmbedding(lambda: db.sessions.sweep(7)))
    result = reader.execute("SEARCH messages MATCHING 'alpha' GROUP BY CONVERSATION")
    reader.close()
    assert ids(db) == ["new"]  # the sweep ran during the statement
    assert Reason.LINEAGE_UNRESOLVED_DROPPED not in [w.code for w in result.warnings]
    assert sorted(r.session_id for r in result.rows) in (["new"], ["new", "old"])
