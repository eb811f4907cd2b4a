"""``AS OF t`` answers from the database as committed at `t` (SPEC §3.2, issue 13).

Found by trials: a row committed after `t` still appeared in a statement ``AS OF t`` (with a
future ``created_at`` it even outranked the rows that existed). Now batches record their commit
time; rows committed later are invisible, rows deleted or replaced later are visible again
within the retention window, and past it the result says so (`AS_OF_BEYOND_RETENTION`).
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from datetime import UTC, datetime

import numpy as np
import pytest
from engine_helpers import Clock

import recallql
from recallql.api import check_database

T0 = 1_760_000_000.0
DAY = 86400.0


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def item(id_: str, text: str, v: list[float], created_at: float | None = None) -> dict:
    out = {"id": id_, "body": text, "vector": v}
    if created_at is not None:
        out["created_at"] = created_at
    return out


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


def make(clock: Clock, path=None, **options) -> recallql.Database:
    db = recallql.connect(path, embedder=None, clock=clock, **options)
    db.create_collection("kb", ("body",), dim=4, embedder=None)
    return db


HYBRID = ("SEARCH kb MATCHING 'alpha' NEAR :v WITH RECENCY (weight = 0.5, half_life = 1 DAYS) "
          "AS OF TIMESTAMP '{at}' LIMIT 10")
V = [1.0, 0.0, 0.0, 0.0]


def test_rows_committed_after_t_are_invisible(clock):
    db = make(clock)
    db.ingest("kb", [item("old", "alpha", V, created_at=T0 - DAY)])
    clock.now = T0 + 100
    # committed later, dated in the future: it would outrank 'old' on recency
    db.ingest("kb", [item("new", "alpha alpha", V, created_at=T0 + 10 * DAY)])
    at = db.execute(HYBRID.format(at=iso(T0 + 50)), v=V)
    assert at.ids() == ["old"]
    assert not at.warnings
    now = db.execute(HYBRID.format(at=iso(T0 + 200)), v=V)
    assert now.ids() == ["new", "old"]
    assert db.execute(HYBRID.format(at=iso(T0 - 1)), v=V).ids() == []  # before any batch


def test_rows_deleted_or_replaced_after_t_are_visible_on_every_leg(clock, tmp_path):
    db = make(clock, tmp_path / "db")
    db.ingest("kb", [item("a", "alpha first", V), item("b", "alpha bravo", [0.9, 0.1, 0, 0]),
                     item("c", "charlie", [0, 1, 0, 0])])
    clock.now = T0 + 100
    db.delete("kb", ["b"])
    db.ingest("kb", [item("a", "alpha replaced", V)])
    clock.now = T0 + 200
    db.ingest("kb", [item("d", "delta", [0, 0, 1, 0])])  # later batches purge nothing yet
    for using in ("LEXICAL", "SEMANTIC"):
        stmt = (f"SEARCH kb MATCHING 'alpha' USING {using} NEAR :v AS OF TIMESTAMP "
                f"'{iso(T0 + 50)}' LIMIT 10")
        then = db.execute(stmt, v=V)
        assert set(then.ids()) == {"a", "b"} | ({"c"} if using == "SEMANTIC" else set())
        assert next(r for r in then if r.id == "a").fields["body"] == "alpha first"
        assert not then.warnings
    now = db.execute("SEARCH kb MATCHING 'alpha' LIMIT 10")
    assert now.ids() == ["a"] and now.rows[0].fields["body"] == "alpha replaced"
    snap = db.snapshot("kb", as_of=T0 + 50)
    assert (snap.size, int(snap.live.sum())) == (3, 3)


def test_as_of_reproduces_the_result_of_its_time(clock):
    db = make(clock)
    db.ingest("kb", [item(f"d{i}", "alpha " * (i + 1), [1, i / 10, 0, 0],
                          created_at=T0 - i * DAY) for i in range(6)])
    stmt = HYBRID.format(at=iso(T0))
    before = db.execute(stmt, v=V)
    clock.now = T0 + DAY
    db.delete("kb", ["d0", "d3"])
    db.ingest("kb", [item("late", "alpha alpha alpha alpha alpha alpha alpha", V, T0 + DAY)])
    after = db.execute(stmt, v=V)
    assert [(r.id, r.fields) for r in after] == [(r.id, r.fields) for r in before]
    assert [r.reasons[0].code for r in after] == [r.reasons[0].code for r in before]


def test_past_the_retention_window_a_notice_says_what_is_missing(clock, tmp_path):
    db = make(clock, tmp_path / "db", retention=1)  # one day
    db.ingest("kb", [item("a", "alpha", V), item("b", "alpha", V)])
    clock.now = T0 + 100
    db.delete("kb", ["b"])
    stmt = f"SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '{iso(T0 + 50)}'"
    assert set(db.execute(stmt).ids()) == {"a", "b"}  # within the window
    clock.now = T0 + 2 * DAY  # the deletion is older than the window now: later batches purge
    for k in range(3):
        db.ingest("kb", [item(f"x{k}", "other", [0, 1, 0, 0])])
    result = db.execute(stmt)
    assert result.ids() == ["a"]
    codes = {w.code: w.message for w in result.warnings}
    assert "AS_OF_BEYOND_RETENTION" in codes and "1 row(s)" in codes["AS_OF_BEYOND_RETENTION"]
    assert db.check().ok


def test_vacuum_purges_at_once_and_as_of_says_so(clock, tmp_path):
    db = make(clock, tmp_path / "db")
    db.ingest("kb", [item("a", "alpha", V), item("b", "alpha", [0.5, 0.5, 0, 0])])
    clock.now = T0 + 100
    db.delete("kb", ["b"])
    text = db.store._state("kb").text
    assert text.searcher().num_docs == 2
    assert db.vacuum() != []
    assert text.searcher().num_docs == 1
    assert sum(len(s.rowids) for s in db.store._state("kb").segments) == 1
    result = db.execute(f"SEARCH kb MATCHING 'alpha' NEAR :v AS OF TIMESTAMP '{iso(T0 + 50)}'",
                        v=V)
    assert result.ids() == ["a"]
    assert [w.code for w in result.warnings] == ["AS_OF_BEYOND_RETENTION"]
    assert db.vacuum() == []  # nothing left to purge
    assert db.check().ok


def test_a_rebuild_purges_like_vacuum_and_the_notice_names_it(clock, tmp_path):
    """`reindex` / `recallql optimize` rebuild the text index from the live rows, so rows
    deleted within the retention window vanish from AS OF; the notice said they were "past the
    retention window" (they were not) and pointed at vacuum only."""
    db = make(clock, tmp_path / "db")
    db.ingest("kb", [item("a", "alpha", V), item("b", "alpha", V)])
    clock.now = T0 + 100
    db.delete("kb", ["b"])
    db.reindex(["kb"])
    result = db.execute(f"SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '{iso(T0 + 50)}'")
    assert result.ids() == ["a"]
    notice = next(w for w in result.warnings if w.code == "AS_OF_BEYOND_RETENTION")
    assert "are past the retention window" not in notice.message
    assert "1 row(s) deleted since then were purged (past the retention window, by `recallql " \
        "vacuum`, or by a rebuild of the text index: `recallql reindex` / `optimize`)" \
        in notice.message


def _failing_transaction(meta):
    """`meta.transaction`, failing as on a failing disk once its statements ran (rolled back;
    the batch's tantivy commit, before it, went through)."""
    original = meta.transaction

    @contextlib.contextmanager
    def transaction():
        with original() as conn:
            yield conn
            raise sqlite3.OperationalError("disk I/O error")
    return transaction


def test_a_purging_batch_whose_sqlite_commit_failed_leaves_a_store_that_checks_ok(
        clock, tmp_path, monkeypatch):
    """Found by crash trials: a batch purges the tantivy documents of rows deleted before the
    horizon in its tantivy commit, and records the purge mark in its SQLite COMMIT. When that
    COMMIT failed (or the writer was killed just before it), `check` called the store
    DAMAGED ("1 rows SQLite expects in the text index are not there") although no snapshot,
    AS OF included, can return those rows. Now their documents may be there or not."""
    db = make(clock, tmp_path / "db", retention=1)  # one day
    db.ingest("kb", [item("a", "alpha", V), item("b", "alpha", [0.5, 0.5, 0, 0])])
    clock.now = T0 + 100
    db.delete("kb", ["b"])
    clock.now = T0 + 2 * DAY
    db.ingest("kb", [item("x0", "other", [0, 1, 0, 0])])  # records a horizon past the delete
    text = db.store._state("kb").text
    assert text.searcher().num_docs == 3
    with monkeypatch.context() as patch:
        patch.setattr(db.store.meta, "transaction", _failing_transaction(db.store.meta))
        with pytest.raises(recallql.StoreError, match="disk I/O error"):
            db.ingest("kb", [item("x1", "other", [0, 0, 1, 0])])  # purges b, then fails
    assert text.searcher().num_docs == 2  # b's document is gone, its purge mark not recorded
    assert db.store.committed_batch() == 3
    assert db.check().ok, db.check().to_text()
    assert db.execute("SEARCH kb MATCHING 'alpha'").ids() == ["a"]
    db.ingest("kb", [item("x1", "other", [0, 0, 1, 0])])
    assert db.check().ok
    db.close()
    assert check_database(tmp_path / "db").ok


def test_a_rebuild_whose_purge_mark_was_not_recorded_leaves_a_store_that_checks_ok(
        clock, tmp_path, monkeypatch):
    """A rebuild drops the documents of deleted rows and then records the purge mark in its
    own transaction; when that failed (or the writer was killed between the two, as crash
    trials did), `check` called the store DAMAGED."""
    from recallql.index import reindex

    db = make(clock, tmp_path / "db")
    db.ingest("kb", [item("a", "alpha", V), item("b", "alpha", [0.5, 0.5, 0, 0])])
    clock.now = T0 + 100
    db.delete("kb", ["b"])
    rebuild = reindex.rebuild

    def then_fail(*args, **kwargs):
        report = rebuild(*args, **kwargs)
        monkeypatch.setattr(db.store.meta, "transaction", _failing_transaction(db.store.meta))
        return report

    monkeypatch.setattr(reindex, "rebuild", then_fail)
    with pytest.raises(recallql.StoreError, match="disk I/O error"):
        db.reindex(["kb"])
    monkeypatch.undo()
    assert db.store._state("kb").text.searcher().num_docs == 1
    assert db.check().ok, db.check().to_text()
    assert db.execute("SEARCH kb MATCHING 'alpha'").ids() == ["a"]
    db.close()
    assert check_database(tmp_path / "db").ok


def test_commit_times_never_go_backwards(clock):
    """A clock that steps back (NTP, another process) stamps the batch with the previous
    batch's time, so `AS OF` stays a prefix of the batches."""
    db = make(clock)
    db.ingest("kb", [item("a", "alpha", V)])
    clock.now = T0 - 1000
    db.ingest("kb", [item("b", "alpha", V)])
    times = [t for (t,) in db.store.meta.read.execute(
        "SELECT committed_at FROM batches ORDER BY seq")]
    assert times == [T0, T0]
    assert db.execute(f"SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '{iso(T0 - 500)}'").ids() == []


def test_messages_appended_after_t_are_invisible(clock):
    db = recallql.connect(embedder=None, clock=clock)
    db.sessions.create("s", "agent", started_at=T0 - DAY)
    db.messages.append("s", "user", "alpha before")
    clock.now = T0 + 100
    db.messages.append("s", "user", "alpha after")
    rows = db.execute(f"SEARCH messages MATCHING 'alpha' AS OF TIMESTAMP '{iso(T0 + 50)}'")
    assert [r.fields["content"] for r in rows] == ["alpha before"]


LIVE = "SEARCH messages MATCHING 'alpha' USING LEXICAL FOR SESSION :cur WITHOUT RECENCY {} LIMIT 5"


@pytest.mark.parametrize("verb", ["SEARCH", "RETRIEVE"])
def test_a_session_started_after_t_did_not_exist_as_of_t(clock, verb):
    """Was: ``FOR SESSION b AS OF t``, with `b` created after `t` as a child of `a`, found `b`,
    attached a snapshot dated before `b` started and hid `a`'s message as `b`'s live context,
    while the same statement run at `t` degraded with SESSION_NOT_FOUND and showed it. Now
    ``AS OF t`` answers as at `t`: `b` did not exist yet."""
    db = recallql.connect(embedder=None, clock=clock)
    db.sessions.create("a", "agent", started_at=T0)
    db.messages.append("a", "user", "alpha before")
    clock.now = T0 + 50
    text = LIVE if verb == "SEARCH" else \
        "RETRIEVE 5 FROM messages FOR SESSION :cur WITHOUT RECENCY {}"
    then = db.execute(text.format(""), cur="b")
    clock.now = T0 + 100
    db.sessions.create("b", "agent", parent="a", started_at=T0 + 100)
    db.sessions.annotate("b", "before")
    past = db.execute(text.format(f"AS OF TIMESTAMP '{iso(T0 + 50)}'"), cur="b")
    for result in (then, past):
        assert [r.fields["content"] for r in result.rows] == ["alpha before"]
        assert [w.code.value for w in result.warnings] == ["SESSION_NOT_FOUND"]
        assert result.session_snapshot is None
    assert "did not exist yet at AS OF" in past.warnings[0].message
    started = db.execute(text.format(f"AS OF TIMESTAMP '{iso(T0 + 100)}'"), cur="b")
    assert started.rows == [] and started.session_snapshot.id == "b"  # a is b's live context


@pytest.mark.parametrize("archive", [False, True], ids=["closed", "archived"])
def test_a_session_that_ended_after_t_was_open_as_of_t(clock, archive):
    """Was: ``FOR SESSION a AS OF t`` (and ``snapshot(a, as_of=t)``) reported `a` closed by
    compression at a time after `t` (or archived), while the statement at `t` saw it open.
    The boost's numbers were already those of `t`; now the snapshot is too."""
    db = recallql.connect(embedder=None, clock=clock)
    db.sessions.create("a", "agent", started_at=T0)
    db.sessions.signal("a", "reward", 1.0)
    clock.now = T0 + 50
    text = "RETRIEVE 3 FROM messages FOR SESSION 'a' {}"
    then = db.execute(text.format("")).session_snapshot
    clock.now = T0 + 100
    db.sessions.close("a", "compression")
    if archive:
        db.sessions.archive("a")
    past = db.execute(text.format(f"AS OF TIMESTAMP '{iso(T0 + 50)}'")).session_snapshot
    for snap in (past, db.sessions.snapshot("a", as_of=T0 + 50)):
        assert (snap.status, snap.end_reason, snap.ended_at) == ("open", None, None)
        assert snap.velocity == then.velocity == 0.5 ** (50 / DAY / 7)
    later = db.sessions.snapshot("a", as_of=T0 + 100)
    assert (later.status, later.end_reason) == ("archived" if archive else "closed", "compression")


def test_snapshot_as_of_keeps_the_legs_in_step(clock):
    """The derived snapshot's arrays are sized to the earlier batch; rows of later batches
    never come back from either leg."""
    db = make(clock)
    db.ingest("kb", [item("a", "alpha", V)])
    clock.now = T0 + 10
    db.ingest("kb", [item(f"n{i}", "alpha", V) for i in range(5)])
    snap = db.snapshot("kb", as_of=T0)
    assert snap.size == 1 and snap.seq == 1
    rows, _ = snap.semantic_topn(np.array(V, np.float32), 10)
    assert rows.tolist() == [0]
    rows, _ = snap.lexical_topn(["alpha"], 10)
    assert rows.tolist() == [0]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"retention": "7"}, "retention must be a non-negative timedelta or number of days, got '7'"),
    ({"retention": "abc"}, "retention must be a non-negative timedelta or number of days, got "
                           "'abc'"),
    ({"retention": -1}, "retention must be a non-negative timedelta or number of days, got -1"),
    ({"retention": float("nan")}, "retention must be a non-negative timedelta or number of days"),
    ({"retention": -(10**400)}, "retention must be a non-negative timedelta or number of days"),
    ({"lock_timeout": "5"}, "lock_timeout must be a non-negative number of seconds, got '5'"),
    ({"lock_timeout": -1}, "lock_timeout must be a non-negative number of seconds, got -1"),
])
def test_connect_names_the_option_that_is_wrong(kwargs, message):
    """retention='abc' raised a bare ValueError from float(), lock_timeout='5' a TypeError, and
    one message named both options whichever was wrong. A bad argument is a ValueError naming
    it (a StoreError is the storage's failure, not the caller's)."""
    with pytest.raises(ValueError) as err:
        recallql.connect(embedder=None, **kwargs)
    assert message in str(err.value)


def test_connect_takes_a_huge_retention_as_forever():
    with recallql.connect(embedder=None, retention=10**400) as db:
        assert db.store.retention == math.inf


def test_as_of_in_the_future_warns_naming_the_time_and_now(clock):
    """Newcomer: ``AS OF`` a time after now answered silently. It answers from the rows
    committed so far, aged to that time, with the warning `AS_OF_IN_FUTURE` (also in
    EXPLAIN); a past or present time gives none."""
    db = make(clock)
    db.ingest("kb", [item("old", "alpha", V, created_at=T0 - DAY)])
    later = db.execute(HYBRID.format(at=iso(T0 + DAY)), v=V)
    assert later.ids() == ["old"]
    assert [(n.code.value, n.message) for n in later.warnings] == [(
        "AS_OF_IN_FUTURE",
        "AS OF 2025-10-10T08:53:20.000000Z is in the future (now is 2025-10-09T08:53:20.000000Z): "
        "the result shows the rows "
        "committed so far, with recency and signal decay computed at that time, and is not "
        "reproducible until then")]
    text = db.explain(HYBRID.format(at=iso(T0 + DAY)), v=V).to_text()
    assert "warning: AS_OF_IN_FUTURE: AS OF 2025-10-10T08:53:20.000000Z is in the future" in text
    assert not db.execute(HYBRID.format(at=iso(T0)), v=V).warnings


def test_as_of_text_that_is_no_time_is_refused_under_its_parameter():
    """ISO-8601 text binds at ``AS OF :t`` as a TIMESTAMP literal's text; text that is no time
    is refused when the statement runs, with the caret under the parameter and the literal's
    hint, as ``AS OF TIMESTAMP 'next tuesday'`` is."""
    import recallql
    from recallql.grammar.errors import QuerySyntaxError

    db = recallql.connect(embedder=None)
    with pytest.raises(QuerySyntaxError) as info:
        db.execute("SEARCH docs MATCHING 'x' AS OF :t", t="next tuesday")
    assert str(info.value).splitlines()[0] == (
        "QuerySyntaxError: invalid TIMESTAMP 'next tuesday' (line 1, column 32)")
    assert "  SEARCH docs MATCHING 'x' AS OF :t\n" + " " * 33 + "^^" in str(info.value)
