"""Sessions and messages: hostile input is rejected cleanly and never poisons reads (SPEC §2, §8).

Every write API rejects a bad argument with `SessionError` (lifecycle, messages) or
`SignalRejected` naming the rule (signals, annotations) before anything is written; values already
stored out of range (an older version, another tool) still read back.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

import recallql
from recallql import IngestError, SignalRejected
from recallql.sessions.lifecycle import SessionError, SessionNotFound
from recallql.sessions.state import MAX_TIME, MIN_TIME

T0 = 1_750_000_000.0
DAY = 86400.0


@pytest.fixture
def db():
    database = recallql.connect(embedder=None, clock=lambda: T0)
    database.sessions.create("s-1", "agent", started_at=T0 - DAY)
    yield database
    database.close()


def dump(db) -> dict[str, list[tuple]]:
    """Every session-table row and the number of message items."""
    conn = db.store.meta.read
    tables = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
              for t in ("sessions", "annotations", "signals")}
    return {**tables, "messages": [(db.snapshot("messages").size,)]}


# -- times: one valid range, years 1..9999 UTC -----------------------------------------------

BAD_TIMES = {
    "1e300": 1e300,
    "-1e300": -1e300,
    "inf": float("inf"),
    "nan": float("nan"),
    "int-overflows-float": 10**400,
    "int-beyond-repr": -(10**5000),
    "year-0-in-utc": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    "year-10000-in-utc": datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))),
    "just-after-9999": 253402300800,
    "just-before-year-1": MIN_TIME - 1,
}
TIMED_CALLS = {
    "create": (lambda db, t: db.sessions.create("s-2", "agent", started_at=t), SessionError),
    "close": (lambda db, t: db.sessions.close("s-1", at=t), SessionError),
    "snapshot": (lambda db, t: db.sessions.snapshot("s-1", as_of=t), SessionError),
    "signal": (lambda db, t: db.sessions.signal("s-1", "reward", 1.0, entity="e", at=t),
               SignalRejected),
    "annotate": (lambda db, t: db.sessions.annotate("s-1", "words", at=t), SignalRejected),
    "append": (lambda db, t: db.messages.append("s-1", "user", "hello", at=t), IngestError),
}


@pytest.mark.parametrize("call", list(TIMED_CALLS))
@pytest.mark.parametrize("time", list(BAD_TIMES))
def test_out_of_range_time_is_rejected_before_writing(db, call, time):
    fn, error = TIMED_CALLS[call]
    before = dump(db)
    with pytest.raises(error, match="bad_time" if error is SignalRejected else "years 1..9999"):
        fn(db, BAD_TIMES[time])
    assert dump(db) == before
    db.execute("SHOW SESSIONS")
    db.sessions.snapshot("s-1")


@pytest.mark.parametrize("call, error, rule", [
    (lambda db: db.sessions.signal("s-1", "reward", 1.0, at=T0 - 2 * DAY), SignalRejected,
     "before_start"),
    (lambda db: db.sessions.annotate("s-1", "words", at=T0 - 2 * DAY), SignalRejected,
     "before_start"),
    (lambda db: db.messages.append("s-1", "user", "hello", at=T0 - 2 * DAY), SessionError,
     "before its session started"),
    (lambda db: db.messages.append("s-1", "user", "hello", at="yesterday"), IngestError,
     "at must be a datetime"),
], ids=["signal", "annotate", "append", "append-not-a-time"])
def test_writes_before_the_session_started_are_rejected_alike(db, call, error, rule):
    before = dump(db)
    with pytest.raises(error, match=rule):
        call(db)
    assert dump(db) == before


FUTURE_WRITES = {
    "signal": (lambda db, t: db.sessions.signal("s-1", "reward", 1.0, entity="e", at=t),
               SignalRejected, "rule in_future"),
    "signal_many": (lambda db, t: db.sessions.signal_many(
        [{"session_id": "s-1", "name": "reward", "value": 1.0, "at": T0 - 5},
         {"session_id": "s-1", "name": "reward", "value": 1.0, "at": t}]),
        SignalRejected, "signal #1: signal rejected .rule in_future"),
    "annotate": (lambda db, t: db.sessions.annotate("s-1", "words", at=t), SignalRejected,
                 "rule in_future"),
    "append": (lambda db, t: db.messages.append("s-1", "user", "hello", at=t), SessionError,
               "message at 2025-06-15T15:11:41.000000Z is after the clock"),
}


@pytest.mark.parametrize("call", list(FUTURE_WRITES))
def test_a_write_dated_after_the_clock_is_refused_and_the_session_still_closes(tmp_path, call):
    """Was (newcomer #41): a signal at 2999-01-01 was accepted, counted for nothing until
    then, and `close()` (at now) was refused forever: "its last signal or annotation is at
    2999". Writes dated more than CLOCK_SKEW_SECONDS (300 s) after the clock are refused."""
    fn, error, message = FUTURE_WRITES[call]
    with recallql.connect(tmp_path / "f.db", embedder=None, clock=lambda: T0) as db:
        db.sessions.create("s-1", "agent", started_at=T0 - DAY)
        before = dump(db)
        with pytest.raises(error, match=message):
            fn(db, T0 + 301)
        assert dump(db) == before
        fn(db, datetime.fromtimestamp(T0 + 300, tz=UTC))  # within the skew allowance: kept
        assert db.sessions.close("s-1", at=T0 + 300).status == "closed"


def test_a_session_starting_after_the_clock_is_refused_and_one_within_the_skew_works(tmp_path):
    """Was: `create(..., started_at=now + 30 days)` was accepted, and then every message,
    signal, annotation, close and archive of the session was refused until that date (each
    write is refused before the start, and one dated after the clock). A start more than
    CLOCK_SKEW_SECONDS (300 s) after the database's clock is refused, naming the session, the
    time and the clock; one within it takes every write."""
    with recallql.connect(tmp_path / "f.db", embedder=None, clock=lambda: T0) as db:
        before = dump(db)
        with pytest.raises(SessionError) as err:
            db.sessions.create("s-1", "agent", started_at=T0 + 30 * DAY)
        assert str(err.value) == (
            "cannot create session 's-1': its start at 2025-07-15T15:06:40.000000Z is after "
            "the clock (2025-06-15T15:06:40.000000Z) by more than 300 s; record it when it "
            "happens, or omit started_at= for now (a session started later takes no message, "
            "signal, annotation or close until then)")
        with pytest.raises(SessionError, match="'s-2': its start at 2025-06-15T15:11:41"):
            db.sessions.create("s-2", "agent", started_at=datetime.fromtimestamp(T0 + 301, UTC))
        assert dump(db) == before
        snap = db.sessions.create("s-1", "agent", started_at=T0 + 300)
        assert snap.started_at == datetime.fromtimestamp(T0 + 300, UTC)
        db.messages.append("s-1", "user", "hello", at=T0 + 300)
        db.sessions.signal("s-1", "reward", 1.0, entity="e", at=T0 + 300)
        db.sessions.annotate("s-1", "words", at=T0 + 300)
        assert db.sessions.close("s-1", at=T0 + 300).status == "closed"
        assert db.sessions.archive("s-1").status == "archived"


def test_a_message_at_the_session_start_is_accepted(db):
    db.messages.append("s-1", "user", "hello", at=datetime.fromtimestamp(T0 - DAY, tz=UTC))
    assert db.snapshot("messages").size == 1


@pytest.mark.parametrize("start, stored", [
    (datetime(1, 1, 1, tzinfo=UTC), MIN_TIME),
    (MIN_TIME, MIN_TIME),
    (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), MAX_TIME),  # float rounds up: kept
    (MAX_TIME, MAX_TIME),
    (datetime(1, 1, 1, 14, tzinfo=timezone(timedelta(hours=14))), MIN_TIME),
], ids=["first-datetime", "first-seconds", "last-datetime", "last-seconds", "first-offset"])
def test_the_ends_of_the_range_are_accepted_and_read_back(start, stored):
    clock = max(T0, stored)  # a session may not start after the database's clock
    with recallql.connect(embedder=None, clock=lambda: clock) as db:
        snap = db.sessions.create("s-1", "agent", started_at=start)
        assert snap.started_at.timestamp() == stored
        (row,) = db.execute("SHOW SESSIONS").records
        assert row["started_at"].startswith(("0001-01-01T00:00:00", "9999-12-31T23:59:59.9"))


def test_a_stored_out_of_range_time_reads_back_clamped(db):
    """A value written before times were validated (or by another tool) must not break reads."""
    db.sessions.create("s-2", "agent", started_at=T0 - DAY)
    db.sessions.signal("s-2", "reward", 1.0, entity="e", at=T0 - 10)
    db.sessions.close("s-2", end_reason="compression", at=T0 - 5)
    with db.store.meta.transaction() as conn:
        conn.execute("UPDATE sessions SET started_at = 1e300 WHERE id = 's-1'")
        conn.execute("UPDATE sessions SET ended_at = 1e999 WHERE id = 's-2'")  # inf
        conn.execute("UPDATE signals SET at = -1e300")
    records = {r["id"]: r for r in db.execute("SHOW SESSIONS").records}
    assert records["s-1"]["started_at"].startswith("9999-12-31T23:59:59.9")
    assert records["s-2"]["ended_at"].startswith("9999-12-31T23:59:59.9")
    assert db.sessions.snapshot("s-1").started_at.year == 9999
    assert db.sessions.snapshot("s-2").signal_scores == {"reward": 0.0}  # decayed away
    assert [s["id"] for s in db.sessions.list()] == ["s-2", "s-1"]
    db.execute("SHOW SESSION 's-2'")
    db.execute("RETRIEVE FROM messages FOR SESSION 's-1' WITH SIGNAL BOOST")


# -- session ids of the wrong type or not encodable --------------------------------------------

ID_CALLS = {
    "snapshot": (lambda db, sid: db.sessions.snapshot(sid), SessionNotFound),
    "archive": (lambda db, sid: db.sessions.archive(sid), SessionNotFound),
    "close": (lambda db, sid: db.sessions.close(sid), SessionNotFound),
    "annotate": (lambda db, sid: db.sessions.annotate(sid, "x"), SignalRejected),
    "signal": (lambda db, sid: db.sessions.signal(sid, "reward", 1.0), SignalRejected),
    "append": (lambda db, sid: db.messages.append(sid, "user", "hello"), SessionNotFound),
}


@pytest.mark.parametrize("call", list(ID_CALLS))
@pytest.mark.parametrize("sid", [["s-1"], {"id": "s-1"}, ("s-1",), b"s-1", None, 1, 1.5,
                                 "s\ud800", "\x00"],
                         ids=["list", "dict", "tuple", "bytes", "none", "int", "float",
                              "surrogate", "nul"])
def test_a_session_id_that_cannot_exist_is_not_found(db, call, sid):
    fn, error = ID_CALLS[call]
    before = dump(db)
    with pytest.raises(error, match="rule unknown_session" if error is SignalRejected
                       else "no session") as err:
        fn(db, sid)
    if not isinstance(sid, str):
        assert f"a session id is a string, got {type(sid).__name__}" in str(err.value)
    assert dump(db) == before
    assert db.sessions.get(sid) is None
    assert db.sessions.state(sid, T0) is None


# -- metadata ----------------------------------------------------------------------------------


def nested(depth: int, leaf: object = 1) -> dict:
    """A mapping nested `depth` levels deep (alternating dicts and lists below the top)."""
    value: object = leaf
    for level in range(depth - 1):
        value = {"a": value} if level % 2 else [value]
    return {"top": value}


def test_metadata_may_nest_64_levels(db):
    snap = db.sessions.create("s-2", "agent", metadata=nested(64))
    assert snap.metadata == nested(64)


@pytest.mark.parametrize("metadata", [nested(65), nested(5000)], ids=["65", "5000"])
def test_deeper_metadata_is_refused(db, metadata):
    before = dump(db)
    with pytest.raises(SessionError, match="nested more than 64 levels"):
        db.sessions.create("s-2", "agent", metadata=metadata)
    assert dump(db) == before


def test_circular_metadata_is_refused(db):
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(SessionError, match="circular"):
        db.sessions.create("s-2", "agent", metadata=loop)


def test_a_deeply_nested_non_mapping_is_refused_with_its_type(db):
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(SessionError, match="mapping with string keys, got <list>"):
        db.sessions.create("s-2", "agent", metadata=deep)


# -- message flags ---------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [
    {"active": "false"}, {"compacted": "0"}, {"active": None}, {"active": float("nan")},
    {"active": 0.0}, {"compacted": 2}, {"active": -1}, {"compacted": [False]},
    {"active": 10**5000},
], ids=["str-false", "str-0", "none", "nan", "float-0", "int-2", "int-minus-1", "list",
        "huge-int"])
def test_a_message_flag_must_be_a_bool(db, flags):
    before = dump(db)
    with pytest.raises(SessionError, match=f"{next(iter(flags))} must be a bool"):
        db.messages.append("s-1", "user", "rewound words", **flags)
    assert dump(db) == before


@pytest.mark.parametrize("active, compacted, searchable", [
    (True, False, True), (1, 0, True), (np.bool_(False), np.bool_(True), True),
    (0, 1, True), (False, False, False), (np.int64(0), np.int64(0), False),
])
def test_bool_and_0_1_flags_are_accepted(db, active, compacted, searchable):
    db.messages.append("s-1", "user", "rewound words", active=active, compacted=compacted)
    found = db.execute("SEARCH messages MATCHING 'rewound' USING LEXICAL").ids()
    assert bool(found) is searchable


# -- text that is not valid Unicode (a lone surrogate) --------------------------------------------

SURROGATE = "\ud800"
TEXT_CALLS = {
    "title": (lambda s, m: s.create("s-2", "agent", title=f"x{SURROGATE}"), SessionError,
              "title is not valid Unicode"),
    "source": (lambda s, m: s.create("s-2", "agent", source=SURROGATE), SessionError,
               "source is not valid Unicode"),
    "metadata-value": (lambda s, m: s.create("s-2", "agent", metadata={"k": SURROGATE}),
                       SessionError, "metadata string is not valid Unicode"),
    "metadata-key": (lambda s, m: s.create("s-2", "agent", metadata={SURROGATE: 1}),
                     SessionError, "metadata key is not valid Unicode"),
    "metadata-nested": (lambda s, m: s.create("s-2", "agent",
                                              metadata={"k": [{"j": ["ok", SURROGATE]}]}),
                        SessionError, "metadata string is not valid Unicode"),
    "end_reason": (lambda s, m: s.close("s-1", end_reason=SURROGATE), SessionError,
                   "end_reason is not valid Unicode"),
    "annotation": (lambda s, m: s.annotate("s-1", f"ops {SURROGATE}"), SignalRejected,
                   r"annotation rejected \(rule bad_text\): annotation text is not valid"),
    "entity": (lambda s, m: s.signal("s-1", "reward", 1.0, entity=SURROGATE), SignalRejected,
               r"signal rejected \(rule bad_entity\): entity is not valid Unicode"),
    "signal-name": (lambda s, m: s.signal("s-1", SURROGATE, 1.0), SignalRejected,
                    r"rule unknown_name"),
    "agent-id": (lambda s, m: s.create("s-2", SURROGATE), SessionError, "invalid agent id"),
    "role": (lambda s, m: m.append("s-1", SURROGATE, "hello"), SessionError,
             "role is not valid Unicode"),
    "content": (lambda s, m: m.append("s-1", "user", f"hello {SURROGATE}"), SessionError,
                r"content is not valid Unicode: lone surrogate '\\ud800' at index 6"),
}


@pytest.mark.parametrize("call", list(TEXT_CALLS))
def test_text_that_is_not_valid_unicode_is_refused_by_name(db, call):
    fn, error, match = TEXT_CALLS[call]
    before = dump(db)
    with pytest.raises(error, match=match):
        fn(db.sessions, db.messages)
    assert dump(db) == before


def test_valid_non_ascii_text_is_stored(db):
    text = "zéro 🧠 \u202e\x00 ok"
    db.sessions.create("s-2", "agent", title=text, source=text, metadata={text: [text]},
                       started_at=T0 - DAY)
    db.sessions.annotate("s-2", text)
    db.sessions.signal("s-2", "reward", 1.0, entity=text)
    db.messages.append("s-2", text, text)
    snap = db.sessions.close("s-2", end_reason=text, any_reason=True)
    assert (snap.source, snap.end_reason, snap.metadata) == (text, text, {text: [text]})
    assert snap.entities == {text: 1.0}
    snap.model_dump_json()


# -- huge ints elsewhere --------------------------------------------------------------------------


@pytest.mark.parametrize("call, error, match", [
    (lambda db: db.sessions.signal("s-1", "reward", 10**400), SignalRejected,
     r"rule not_finite\): value 1000"),
    (lambda db: db.sessions.signal("s-1", "reward", -(10**5000)), SignalRejected,
     r"rule not_finite\): value <int of 16610 bits>"),
    (lambda db: db.sessions.sweep(10**400), SessionError, "non-negative duration"),
    (lambda db: db.sessions.create(10**5000, "agent"), SessionError,
     "invalid session id <int of 16610 bits>"),
], ids=["signal-value", "signal-value-beyond-repr", "sweep", "session-id"])
def test_a_huge_int_is_refused_not_overflowed(db, call, error, match):
    before = dump(db)
    with pytest.raises(error, match=match):
        call(db)
    assert dump(db) == before


# -- batch arguments: a list of mappings -----------------------------------------------------

BATCH_CALLS = {
    "ingest": (lambda db, v: db.ingest("messages", v), IngestError, "items"),
    "extend": (lambda db, v: db.messages.extend(v), SessionError, "messages"),
    "signal_many": (lambda db, v: db.sessions.signal_many(v), SignalRejected, "signals"),
}
ONE_ITEM = {"ingest": {"id": "m", "content": "hello"},
            "extend": {"session_id": "s-1", "role": "user", "content": "hello"},
            "signal_many": {"session_id": "s-1", "name": "reward", "value": 1.0}}


@pytest.mark.parametrize("call", list(BATCH_CALLS))
def test_one_mapping_instead_of_a_list_says_so(db, call):
    """A single mapping iterated as its keys: the error was 'message #0: a message is a mapping
    ..., got 'session_id'' (an item must be a dict, got str), naming a key as the item."""
    fn, error, what = BATCH_CALLS[call]
    before = dump(db)
    with pytest.raises(error) as err:
        fn(db, ONE_ITEM[call])
    assert f"{what} must be a list of mappings" in str(err.value)
    assert "got one mapping (wrap it in a list" in str(err.value)
    assert dump(db) == before


@pytest.mark.parametrize("call", list(BATCH_CALLS))
@pytest.mark.parametrize("value", [5, "session_id", b"raw", None], ids=repr)
def test_a_batch_that_is_not_a_list_names_its_type(db, call, value):
    """Not iterable raised a bare TypeError ('int' object is not iterable); a string was read
    character by character."""
    fn, error, what = BATCH_CALLS[call]
    with pytest.raises(error) as err:
        fn(db, value)
    assert f"{what} must be a list of mappings" in str(err.value)
    assert f"got {type(value).__name__}" in str(err.value)


REJECTED = {
    "unknown_session": lambda db: db.sessions.signal("nope", "reward", 1.0),
    "unknown_name": lambda db: db.sessions.signal("s-1", "rewrd", 1.0),
    "out_of_bounds": lambda db: db.sessions.signal("s-1", "reward", 5.0),
    "not_finite": lambda db: db.sessions.signal("s-1", "reward", float("nan")),
    "bad_signal": lambda db: db.sessions.signal_many([{"session": "s-1", "value": 1.0}]),
    "empty_text": lambda db: db.sessions.annotate("s-1", "   "),
    "in_future": lambda db: db.sessions.signal_many(
        [{"session_id": "s-1", "name": "reward", "value": 1.0},
         {"session_id": "s-1", "name": "reward", "value": 1.0, "at": T0 + DAY}]),
}


@pytest.mark.parametrize("rule", list(REJECTED))
def test_a_rejected_signal_names_its_rule_as_an_attribute(db, rule):
    """An agent tells `unknown_session` from `out_of_bounds` by `err.rule`, not by parsing the
    message (which names it: ``signal rejected (rule out_of_bounds): ...``)."""
    with pytest.raises(SignalRejected) as info:
        REJECTED[rule](db)
    assert info.value.rule == rule and f"(rule {rule})" in str(info.value)
    assert SignalRejected("no rule named here").rule is None
