"""Sessions: lifecycle, signal policy, decay, persistence, sweep, SHOW SESSIONS (issue 5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from engine_helpers import Clock

import recallql
from recallql import QuerySemanticError, SignalRejected, StoreError
from recallql.engine.reasons import Reason
from recallql.sessions.lifecycle import SessionError, SessionNotFound
from recallql.sessions.signals import SignalPolicy

T0 = 1_750_000_000.0
DAY = 86400.0




@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def db(clock):
    database = recallql.connect(embedder=None, clock=clock)
    yield database
    database.close()


def dump(db) -> dict[str, list[tuple]]:
    """Every row of the session tables (to prove a rejected write changed nothing)."""
    conn = db.store.meta.read
    return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
            for t in ("sessions", "annotations", "signals")}


def iso(ts: float) -> str:
    return utc(ts).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


# -- lifecycle -------------------------------------------------------------------------------


def test_create_records_every_field(db):
    db.sessions.create("s-1", "agent", started_at=datetime(2025, 1, 1))
    snap = db.sessions.create("s-2", "agent", parent="s-1", source="subagent",
                              started_at=datetime(2025, 1, 2, 3, 4, 5), branched_from="s-0",
                              delegate_from="s-1", metadata={"model": "x", "n": 3})
    assert snap.model_dump(exclude={"as_of"}) == {
        "id": "s-2", "agent_id": "agent", "status": "open", "source": "subagent",
        "parent_session_id": "s-1", "end_reason": None, "branched_from": "s-0",
        "delegate_from": "s-1", "started_at": datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        "ended_at": None, "keywords": [], "signal_scores": {}, "velocity": 0.0, "entities": {},
        "metadata": {"model": "x", "n": 3}}


@pytest.mark.parametrize("kwargs, match", [
    ({"id": "bad id"}, "invalid session id"),
    ({"parent": "no good"}, "invalid parent session id"),
    ({"source": ""}, "source must be"),
    ({"started_at": "yesterday"}, "started_at must be"),
    ({"started_at": float("nan")}, "started_at must be"),
    ({"metadata": ["not", "a", "mapping"]}, "metadata must be a mapping"),
    ({"metadata": {"x": float("inf")}}, "finite"),
    ({"metadata": {"x": object()}}, "JSON-serialisable"),
], ids=["id", "parent", "source", "time-text", "time-nan", "metadata-list", "metadata-inf",
        "metadata-object"])
def test_create_rejects_bad_arguments(db, kwargs, match):
    args = {"id": "s-1", "agent_id": "agent", **kwargs}
    with pytest.raises(SessionError, match=match):
        db.sessions.create(**args)
    assert dump(db)["sessions"] == []


def test_duplicate_session_id_is_an_error(db):
    db.sessions.create("s-1", "agent")
    before = dump(db)
    with pytest.raises(SessionError, match="already exists"):
        db.sessions.create("s-1", "other")
    assert dump(db) == before


def test_close_sets_end_reason_and_time(db, clock):
    db.sessions.create("s-1", "agent")
    snap = db.sessions.close("s-1", end_reason="compression", at=T0 + 60)
    assert (snap.status, snap.end_reason, snap.ended_at) == ("closed", "compression",
                                                             utc(T0 + 60))


@pytest.mark.parametrize("case", ["unknown", "twice", "before-start", "before-last-signal",
                                  "before-last-message", "empty-reason", "unknown-reason",
                                  "after-the-clock", "far-future"])
def test_close_mistakes_are_errors_and_write_nothing(db, clock, case):
    db.sessions.create("s-1", "agent")
    if case == "before-last-signal":
        db.sessions.signal("s-1", "reward", 0.5, at=T0 + 100)
    if case == "before-last-message":
        db.sessions.signal("s-1", "reward", 0.5, at=T0 + 10)
        db.messages.append("s-1", "user", "later", at=T0 + 100)
    if case == "twice":
        db.sessions.close("s-1", at=T0 + 200)
    before = dump(db)
    id_, kwargs, err, match = {
        "unknown": ("nope", {}, SessionNotFound, "no session 'nope'"),
        "twice": ("s-1", {}, SessionError, "already closed"),
        "before-start": ("s-1", {"at": T0 - 1}, SessionError,
                         f"cannot close session 's-1' at {iso(T0 - 1)}: its start is at {iso(T0)}"),
        "before-last-signal": ("s-1", {"at": T0 + 50}, SessionError, "last signal"),
        "before-last-message": ("s-1", {"at": T0 + 50}, SessionError,
                                f"cannot close session 's-1' at {iso(T0 + 50)}: its last "
                                f"message is at {iso(T0 + 100)}"),
        "empty-reason": ("s-1", {"end_reason": ""}, SessionError, "end_reason"),
        "after-the-clock": ("s-1", {"at": T0 + 301}, SessionError,
                            f"^cannot close session 's-1': its end at {iso(T0 + 301)} is after "
                            f"the clock \\({iso(T0)}\\) by more than 300 s; record it when it "
                            "happens, or omit at= for now \\(a session is closed when it "
                            "ends\\)$"),
        "far-future": ("s-1", {"at": datetime(9999, 1, 1, tzinfo=UTC)}, SessionError,
                       "is after the clock"),
        "unknown-reason": ("s-1", {"end_reason": "compresion"}, SessionError,
                           "unknown end reason 'compresion'; did you mean 'compression'\\? "
                           "\\(any_reason=True records another\\)"),
    }[case]
    with pytest.raises(err, match=match):
        db.sessions.close(id_, **kwargs)
    assert dump(db) == before


def test_close_may_be_dated_up_to_the_clock_skew_ahead(db, clock):
    """`close(at=...)` accepted an end a year ahead of the clock (the session then read as
    closed in every AS OF before it); it takes an end up to 300 s ahead, as `create` takes a
    start, and refuses later ones."""
    db.sessions.create("s-1", "agent")
    assert db.sessions.close("s-1", at=T0 + 300).ended_at == utc(T0 + 300)


def test_close_records_another_reason_when_asked(db):
    db.sessions.create("s-1", "agent")
    assert db.sessions.close("s-1", end_reason="handoff", any_reason=True).end_reason == "handoff"


def test_archive_freezes_and_persists_the_snapshot(db, clock):
    db.sessions.create("s-1", "agent")
    db.sessions.annotate("s-1", "alpha beta")
    clock.now = T0 + DAY  # a write may not be dated after the clock
    db.sessions.signal("s-1", "reward", 1.0, entity="e1", at=T0 + DAY)
    clock.now = T0 + 2 * DAY  # an end may not be dated after the clock
    db.sessions.close("s-1", at=T0 + 2 * DAY)
    at_close = db.sessions.snapshot("s-1", as_of=T0 + 2 * DAY)
    frozen = db.sessions.archive("s-1")
    assert frozen == at_close.model_copy(update={"status": "archived"})
    stored = db.store.meta.read.execute(
        "SELECT frozen_snapshot FROM sessions WHERE id = 's-1'").fetchone()[0]
    assert recallql.engine.models.SessionSnapshot.model_validate_json(stored) == frozen
    clock.now = T0 + 100 * DAY
    assert db.sessions.snapshot("s-1") == frozen
    assert db.sessions.archive("s-1") == frozen  # archiving twice changes nothing


def test_archive_of_an_open_session_closes_it_now(db, clock):
    db.sessions.create("s-1", "agent")
    clock.now = T0 + 5
    snap = db.sessions.archive("s-1")
    assert (snap.status, snap.end_reason, snap.ended_at) == ("archived", "archived", utc(T0 + 5))


def test_archive_of_an_unknown_session_is_an_error(db):
    with pytest.raises(SessionNotFound, match="no session 'nope'"):
        db.sessions.archive("nope")


def test_archived_session_as_of_before_its_end_is_computed_like_a_closed_one(db, clock):
    db.sessions.create("s-1", "agent")
    clock.now = T0 + DAY
    db.sessions.signal("s-1", "reward", 1.0, at=T0 + DAY)
    clock.now = T0 + 2 * DAY  # an end may not be dated after the clock
    db.sessions.close("s-1", at=T0 + 2 * DAY)
    before_archive = db.sessions.snapshot("s-1", as_of=T0 + 1.5 * DAY)
    db.sessions.archive("s-1")
    # before its end it was open (not yet closed, let alone archived)
    assert (before_archive.status, before_archive.ended_at) == ("open", None)
    assert db.sessions.snapshot("s-1", as_of=T0 + 1.5 * DAY) == before_archive
    assert db.sessions.snapshot("s-1", as_of=T0 + 0.5 * DAY).signal_scores == {}


# -- signals and annotations: the policy -------------------------------------------------------


REJECTED_SIGNALS = {
    "unknown-session": (("nope", "reward", 1.0), {}, "unknown_session"),
    "unknown-name": (("s-1", "like", 1.0), {}, "unknown_name"),
    "nan": (("s-1", "reward", float("nan")), {}, "not_finite"),
    "inf": (("s-1", "reward", float("-inf")), {}, "not_finite"),
    "bool": (("s-1", "reward", True), {}, "not_finite"),
    "text": (("s-1", "reward", "1"), {}, "not_finite"),
    "above": (("s-1", "reward", 1.0000001), {}, "out_of_bounds"),
    "below": (("s-1", "reward", -1.5), {}, "out_of_bounds"),
    "entity-empty": (("s-1", "reward", 1.0), {"entity": ""}, "bad_entity"),
    "entity-int": (("s-1", "reward", 1.0), {"entity": 42}, "bad_entity"),
    "bad-time": (("s-1", "reward", 1.0), {"at": "now"}, "bad_time"),
    "before-start": (("s-1", "reward", 1.0), {"at": T0 - 1}, "before_start"),
    "closed": (("closed", "reward", 1.0), {}, "session_not_open"),
    "archived": (("archived", "reward", 1.0), {}, "session_not_open"),
}


@pytest.fixture
def populated(db):
    db.sessions.create("s-1", "agent")
    db.sessions.signal("s-1", "reward", 0.5, entity="e1")
    db.sessions.annotate("s-1", "alpha")
    for sid in ("closed", "archived"):
        db.sessions.create(sid, "agent")
        db.sessions.close(sid)
    db.sessions.archive("archived")
    return db


@pytest.mark.parametrize("case", list(REJECTED_SIGNALS))
def test_rejected_signal_names_the_rule_and_writes_nothing(populated, case):
    args, kwargs, rule = REJECTED_SIGNALS[case]
    before = dump(populated)
    with pytest.raises(SignalRejected, match=f"signal rejected \\(rule {rule}\\)"):
        populated.sessions.signal(*args, **kwargs)
    assert dump(populated) == before


@pytest.mark.parametrize(("name", "value", "message"), [
    ("rewrad", 1.0, "'rewrad' is not an allowed signal name (allowed: reward); did you mean "
                    "'reward'?"),
    ("like", 1.0, "'like' is not an allowed signal name (allowed: reward)"),
    ("reward", "1", "value '1' (a str) is not a finite number"),
    ("reward", True, "value True (a bool) is not a finite number"),
    ("reward", [1], "value [1] (a list) is not a finite number"),
    ("reward", float("nan"), "value nan is not a finite number"),
    ("reward", None, "value None is not a finite number"),
], ids=["typo", "unknown", "text", "bool", "list", "nan", "none"])
def test_a_rejected_signal_says_what_was_meant_and_what_the_value_is(populated, name, value,
                                                                     message):
    """A typo got no suggestion, and '1' read like the number 1 ("value '1' is not a finite
    number")."""
    with pytest.raises(SignalRejected) as err:
        populated.sessions.signal("s-1", name, value)
    assert str(err.value).split(": ", 1)[1] == message


@pytest.mark.parametrize("args, kwargs, rule", [
    (("s-1", "   "), {}, "empty_text"),
    (("s-1", None), {}, "empty_text"),
    (("s-1", "x"), {"at": float("inf")}, "bad_time"),
    (("s-1", "x"), {"at": T0 - 10}, "before_start"),
    (("nope", "x"), {}, "unknown_session"),
    (("closed", "x"), {}, "session_not_open"),
    (("archived", "x"), {}, "session_not_open"),
], ids=["blank", "none", "bad-time", "before-start", "unknown", "closed", "archived"])
def test_rejected_annotation_names_the_rule_and_writes_nothing(populated, args, kwargs, rule):
    before = dump(populated)
    with pytest.raises(SignalRejected, match=f"annotation rejected \\(rule {rule}\\)"):
        populated.sessions.annotate(*args, **kwargs)
    assert dump(populated) == before


def test_bounds_are_inclusive_and_ints_are_numbers(db):
    db.sessions.create("s-1", "agent")
    for value in (-1, 1, -1.0, 0):
        db.sessions.signal("s-1", "reward", value)
    assert db.sessions.snapshot("s-1").signal_scores == {"reward": -1.0}


def test_custom_policy_names_bounds_and_half_lives(clock):
    policy = SignalPolicy(bounds={"reward": (-1, 1), "click": (0, 5)}, half_lives={"click": 1.0})
    with recallql.connect(embedder=None, clock=clock, signal_policy=policy) as db:
        db.sessions.create("s-1", "agent")
        db.sessions.signal("s-1", "click", 4.0, entity="e", at=T0)
        db.sessions.signal("s-1", "reward", 1.0, entity="e", at=T0)
        with pytest.raises(SignalRejected, match="rule out_of_bounds"):
            db.sessions.signal("s-1", "click", 6.0)
        snap = db.sessions.snapshot("s-1", as_of=T0 + 2 * DAY)
    assert snap.signal_scores == {"click": 4.0 * 0.5 ** (2 / 1.0), "reward": 0.5 ** (2 / 7.0)}
    assert snap.entities == {"e": 4.0 * 0.5 ** 2.0 + 0.5 ** (2 / 7.0)}
    assert snap.velocity == 0.5 ** (2 / 7.0)


@pytest.mark.parametrize("kwargs, match", [
    ({"bounds": {"reward": (1, -1)}}, "low <= high"),
    ({"bounds": {"reward": (0, float("inf"))}}, "finite"),
    ({"bounds": {"reward": 1}}, "bounds must be"),
    ({"bounds": {"bad name": (0, 1)}}, "invalid signal name"),
    ({"half_lives": {"reward": 0}}, "positive number of days"),
    ({"half_lives": {"reward": float("nan")}}, "positive number of days"),
    ({"half_lives": {"click": 1.0}}, "not an allowed signal name"),
], ids=["inverted", "infinite", "not-a-pair", "name", "zero-half-life", "nan-half-life",
        "half-life-unknown-name"])
def test_bad_policy_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SignalPolicy(**kwargs)


def test_policy_copies_its_mappings():
    bounds = {"reward": (-1.0, 1.0)}
    policy = SignalPolicy(bounds=bounds)
    bounds["click"] = (0.0, 1.0)
    assert list(policy.bounds) == ["reward"]


# -- decay -------------------------------------------------------------------------------------


def test_live_session_decays_to_now_and_as_of(db, clock):
    db.sessions.create("s-1", "agent")
    db.sessions.signal("s-1", "reward", 0.8, entity="e1", at=T0)
    clock.now = T0 + 3 * DAY
    db.sessions.signal("s-1", "reward", -0.4, entity="e2", at=T0 + 3 * DAY)
    clock.now = T0 + 10 * DAY
    snap = db.sessions.snapshot("s-1")
    first, second = 0.8 * 0.5 ** (10 / 7), -0.4 * 0.5 ** (7 / 7)
    assert snap.velocity == first + second
    assert snap.entities == {"e1": first, "e2": second}
    assert snap.as_of == utc(T0 + 10 * DAY)
    early = db.sessions.snapshot("s-1", as_of=T0 + DAY)  # AS OF: the later signal is not yet
    assert early.entities == {"e1": 0.8 * 0.5 ** (1 / 7)}


def test_closed_session_is_frozen_at_its_end(db, clock):
    db.sessions.create("s-1", "agent")
    db.sessions.signal("s-1", "reward", 1.0, entity="e1", at=T0)
    clock.now = T0 + 7 * DAY
    db.sessions.close("s-1", at=T0 + 7 * DAY)
    expected = 0.5 ** (7 / 7)
    for later in (7, 8, 365):
        snap = db.sessions.snapshot("s-1", as_of=T0 + later * DAY)
        assert (snap.velocity, snap.entities, snap.as_of) == \
            (expected, {"e1": expected}, utc(T0 + 7 * DAY))


def test_keywords_are_split_lowercased_and_deduplicated(db):
    db.sessions.create("s-1", "agent")
    db.sessions.annotate("s-1", "Backup\tRESTORE  backup\nC++")
    db.sessions.annotate("s-1", "restore ÉTÉ")
    assert db.sessions.snapshot("s-1").keywords == ["backup", "restore", "c++", "été"]


# -- persistence and readers -------------------------------------------------------------------


def _fill(db) -> None:
    db.sessions.create("s-1", "agent")
    db.sessions.annotate("s-1", "alpha")
    db.sessions.signal("s-1", "reward", 1.0, entity="e1")
    db.sessions.create("s-2", "agent")
    db.sessions.close("s-2", end_reason="compression")
    db.sessions.archive("s-2")


def test_reopened_database_keeps_sessions(tmp_path, clock):
    with recallql.connect(tmp_path / "db", embedder=None, clock=clock) as db:
        _fill(db)
        before = [db.sessions.snapshot(s) for s in ("s-1", "s-2")]
    with recallql.connect(tmp_path / "db", embedder=None, clock=clock) as db:
        assert [db.sessions.snapshot(s) for s in ("s-1", "s-2")] == before
        db.sessions.signal("s-1", "reward", -1.0)  # still writable
        assert db.sessions.snapshot("s-1").velocity == 0.0


def test_readers_see_sessions_and_cannot_write_them(tmp_path, clock):
    writer = recallql.connect(tmp_path / "db", embedder=None, clock=clock)
    _fill(writer)
    reader = recallql.connect(tmp_path / "db", embedder=None, clock=clock, readonly=True)
    try:
        assert reader.sessions.snapshot("s-1") == writer.sessions.snapshot("s-1")
        assert [r["id"] for r in reader.execute("SHOW SESSIONS").records] == ["s-1", "s-2"]
        writer.sessions.annotate("s-1", "beta")  # readers see the last committed write
        assert reader.sessions.snapshot("s-1").keywords == ["alpha", "beta"]
        before = dump(reader)
        for write in (lambda: reader.sessions.create("s-3", "agent"),
                      lambda: reader.sessions.signal("s-1", "reward", 1.0),
                      lambda: reader.sessions.annotate("s-1", "x"),
                      lambda: reader.sessions.close("s-1"),
                      lambda: reader.sessions.archive("s-1"),
                      lambda: reader.sessions.sweep(0)):
            with pytest.raises(StoreError, match=r"cannot \w+ .*read-only"):
                write()
        assert dump(reader) == before
    finally:
        reader.close()
        writer.close()


# -- sweep -------------------------------------------------------------------------------------


def test_sweep_removes_sessions_past_retention(db, clock):
    db.sessions.create("old-closed", "a", started_at=T0 - 40 * DAY)
    db.sessions.signal("old-closed", "reward", 1.0, entity="e", at=T0 - 40 * DAY)
    db.sessions.annotate("old-closed", "x", at=T0 - 40 * DAY)
    db.sessions.close("old-closed", at=T0 - 31 * DAY)
    db.sessions.create("old-idle", "a", started_at=T0 - 40 * DAY)
    db.sessions.create("old-busy", "a", started_at=T0 - 40 * DAY)
    db.sessions.signal("old-busy", "reward", 1.0, at=T0 - DAY)
    db.sessions.create("recent-closed", "a", started_at=T0 - 40 * DAY)
    db.sessions.close("recent-closed", at=T0 - 29 * DAY)
    assert db.sessions.sweep(timedelta(days=30)) == 2
    assert [r["id"] for r in db.sessions.list()] == ["old-busy", "recent-closed"]
    tables = dump(db)
    assert all(r[1] != "old-closed" for r in tables["signals"] + tables["annotations"])
    assert db.sessions.entity_sums(["e"], ["reward"], T0) == {}
    assert db.sessions.sweep(30) == 0


@pytest.mark.parametrize("bad", [-1, float("nan"), "30", timedelta(days=-1)])
def test_sweep_rejects_bad_retention(db, bad):
    with pytest.raises(SessionError, match="older_than"):
        db.sessions.sweep(bad)


def test_swept_session_degrades_queries(db, clock):
    db.create_collection("notes", ("body",), embedder=None, dim=2)
    db.ingest("notes", [{"id": "a", "body": "x", "vector": [1, 0]}])
    db.sessions.create("s-1", "a")
    db.sessions.close("s-1")
    clock.now = T0 + 31 * DAY
    db.sessions.sweep(30)
    result = db.execute("RETRIEVE 1 FROM notes FOR SESSION 's-1'")
    assert [w.code for w in result.warnings] == [Reason.SESSION_NOT_FOUND]
    assert result.session_snapshot is None
    with pytest.raises(SessionNotFound):
        db.sessions.snapshot("s-1")


# -- listing: db.sessions.list, SHOW SESSIONS, SHOW SESSION ------------------------------------


@pytest.fixture
def three(db, clock):
    db.sessions.create("s-a", "agent-1", started_at=T0, title="first")
    clock.now = T0 + DAY  # a session cannot start after the clock
    db.sessions.create("s-b", "agent-2", started_at=T0 + DAY, parent="s-a", source="tool")
    clock.now = T0 + 2 * DAY
    db.sessions.close("s-b", end_reason="compression", at=T0 + 2 * DAY)
    clock.now = T0 + 3 * DAY
    db.sessions.create("s-c", "agent-1", started_at=T0 + 3 * DAY)
    clock.now = T0 + 4 * DAY
    return db


def test_list_filters_and_gives_datetimes(three):
    rows = three.sessions.list(agent_id="agent-1")
    assert [r["id"] for r in rows] == ["s-a", "s-c"]
    assert rows[0]["started_at"] == utc(T0) and rows[0]["ended_at"] is None
    assert rows[0]["title"] == "first"
    assert [r["id"] for r in three.sessions.list(status="closed")] == ["s-b"]


def test_show_sessions_table(three):
    result = three.execute("SHOW SESSIONS")
    assert result.columns == ["id", "agent_id", "status", "source", "parent_session_id",
                              "end_reason", "started_at", "ended_at", "title"]
    assert result.records[1] == {
        "id": "s-b", "agent_id": "agent-2", "status": "closed", "source": "tool",
        "parent_session_id": "s-a", "end_reason": "compression",
        "started_at": "2025-06-16T15:06:40.000000Z", "ended_at": "2025-06-17T15:06:40.000000Z",
        "title": None}


@pytest.mark.parametrize("where, expected", [
    ("status = 'open'", ["s-a", "s-c"]),
    ("agent_id = :agent", ["s-a", "s-c"]),
    ("agent_id LIKE 'agent-%' AND NOT status = 'open'", ["s-b"]),
    ("ended_at IS NULL", ["s-a", "s-c"]),
    ("ended_at IS NOT NULL", ["s-b"]),
    ("parent_session_id = 's-a'", ["s-b"]),
    ("parent_session_id != 's-a'", []),  # NULL compares unknown, as in SQL
    ("started_at >= TIMESTAMP '2025-06-16T15:06:40Z'", ["s-b", "s-c"]),
    ("started_at BETWEEN TIMESTAMP '2025-06-16T00:00:00Z' AND TIMESTAMP '2025-06-17T00:00:00Z'",
     ["s-b"]),
    ("id IN ('s-a', 's-c', 'zz')", ["s-a", "s-c"]),
    ("id NOT IN ('s-a')", ["s-b", "s-c"]),
    ("source CONTAINS 'oo'", ["s-b"]),
    ("status = 'open' OR source = 'tool'", ["s-a", "s-b", "s-c"]),
], ids=lambda x: x if isinstance(x, str) else None)
def test_show_sessions_where(three, where, expected):
    params = {"agent": "agent-1"} if ":agent" in where else {}
    result = three.execute(f"SHOW SESSIONS WHERE {where}", **params)
    assert [r["id"] for r in result.records] == expected


def test_show_sessions_limit_offset(three):
    assert [r["id"] for r in three.execute("SHOW SESSIONS LIMIT 1 OFFSET 1").records] == ["s-b"]


@pytest.mark.parametrize("where, fragment", [  # the messages of SEARCH ... WHERE
    ("status = 1", "field 'status' is str; expected a string"),
    ("started_at > TRUE", "field 'started_at' is timestamp; expected a TIMESTAMP"),
    ("started_at LIKE '2025%'", "LIKE needs a string field; 'started_at' is timestamp"),
    ("agent = 'x'", "unknown field 'agent'"),
    ("status = NULL", "'status = NULL' is never true"),
], ids=["text-vs-number", "time-vs-bool", "like-on-time", "unknown-field", "eq-null"])
def test_show_sessions_where_mistakes(three, where, fragment):
    with pytest.raises(QuerySemanticError, match=fragment) as err:
        three.execute(f"SHOW SESSIONS WHERE {where}")
    assert "^" in str(err.value)


def test_show_session_gives_the_snapshot(three):
    three.sessions.signal("s-c", "reward", 1.0, entity="e", at=T0 + 4 * DAY)
    result = three.execute("SHOW SESSION 's-c'")
    assert result.session_snapshot == three.sessions.snapshot("s-c")
    assert result.records == [result.session_snapshot.model_dump(mode="json")]
    assert result.records[0]["entities"] == {"e": 1.0}


def test_show_session_unknown_is_an_error_with_a_caret(three):
    with pytest.raises(QuerySemanticError, match="no session 'zz'") as err:
        three.execute("SHOW SESSION 'zz'")
    assert "^^^^" in str(err.value)
    assert err.value.hint == "SHOW SESSIONS lists the sessions there are"
    for statement in ("SHOW SESSION 's-'", "SHOW LINEAGE 's-'"):  # a near miss is named
        with pytest.raises(QuerySemanticError, match="no session 's-'") as err:
            three.execute(statement)
        assert err.value.hint is not None and err.value.hint.startswith("did you mean 's-")


def test_a_snapshot_before_the_session_started_is_not_found(db, clock):
    """`snapshot(as_of=)` before the start: no session then, as `FOR SESSION ... AS OF` reports
    SESSION_NOT_FOUND (it was a snapshot of an open session with no history)."""
    db.sessions.create("s-1", "agent")
    clock.now = T0 + DAY
    db.sessions.close("s-1", at=T0 + DAY)
    with pytest.raises(SessionNotFound, match=r"session 's-1' did not exist yet at "
                       r"2025-06-14T15:06:40\.000000Z \(it started at 2025-06-15T15:06:40"):
        db.sessions.snapshot("s-1", as_of=T0 - DAY)
    assert db.sessions.snapshot("s-1", as_of=T0).status == "open"  # at its start it exists
    assert db.sessions.snapshot("s-1", as_of=T0 + DAY).status == "closed"


def test_a_session_dated_ahead_of_the_clock_is_shown_now(db, clock):
    db.sessions.create("s-ahead", "agent", started_at=T0 + 200)  # allowed: ≤ 300 s ahead
    assert db.sessions.snapshot("s-ahead").status == "open"
    assert db.execute("SHOW SESSION 's-ahead'").records[0]["id"] == "s-ahead"
