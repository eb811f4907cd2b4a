"""`db.messages.append` and the `messages` collection (SPEC §2 Message, §8)."""

from __future__ import annotations

import numpy as np
import pytest
from test_conversations_support import T0, connect, session

import recallql
from recallql.sessions.lifecycle import SessionError, SessionNotFound


@pytest.fixture
def db():
    database = connect()
    yield database
    database.close()


def stored(db, message_id: int) -> dict:
    snap = db.snapshot("messages")
    (row,) = [r for r in snap.fetch(range(snap.size)) if r["message_id"] == message_id]
    return row


def test_append_numbers_messages_and_orders_them_per_session(db):
    db.sessions.create("a", "agent-1", started_at=T0)
    db.sessions.create("b", "agent-1", started_at=T0)
    ids = [db.messages.append(s, "user", f"m{i}", at=T0 + i) for i, s in enumerate("abab")]
    assert ids == [1, 2, 3, 4]
    assert [stored(db, i)["seq"] for i in ids] == [1, 1, 2, 2]
    row = stored(db, 3)
    assert {k: row[k] for k in ("id", "doc_id", "session_id", "role", "content", "active",
                                "compacted", "created_at")} == {
        "id": "msg:3", "doc_id": "session:a", "session_id": "a", "role": "user",
        "content": "m2", "active": True, "compacted": False, "created_at": T0 + 2}


def test_appending_after_an_import_continues_ids_and_seq(db):
    db.sessions.create("a", "agent-1")  # first: ingest refuses a message of no session
    db.ingest("messages", [{"id": "hermes:a:7", "content": "x", "session_id": "a",
                            "message_id": 40, "seq": 9, "active": True, "compacted": False}])
    assert db.messages.append("a", "user", "next") == 41
    assert stored(db, 41)["seq"] == 10


@pytest.mark.parametrize(("setup", "args", "error", "match"), [
    (None, ("nobody", "user", "x"), SessionNotFound, "no session 'nobody'"),
    ("closed", ("s", "user", "x"), SessionError, "it is closed"),
    ("open", ("s", "", "x"), SessionError, "role must be a non-empty string"),
    ("open", ("s", "user", 42), SessionError, "content must be a string"),
], ids=["unknown-session", "closed-session", "empty-role", "non-text-content"])
def test_append_rejects_mistakes_and_writes_nothing(db, setup, args, error, match):
    if setup:
        db.sessions.create("s", "agent-1")
    if setup == "closed":
        db.sessions.close("s")
    with pytest.raises(error, match=match):
        db.messages.append(*args)
    assert db.snapshot("messages").size == 0


def test_rewound_messages_are_never_searchable_anywhere(db):
    session(db, "s", msgs=((5, False, False), (3, False, True), 1))
    statements = [
        "SEARCH messages MATCHING 'alpha' LIMIT 10",
        "SEARCH messages MATCHING 'alpha' USING SEMANTIC LIMIT 10",
        "SEARCH messages MATCHING 'alpha' GROUP BY DOCUMENT LIMIT 10",
        "SEARCH messages MATCHING 'alpha' WHERE active = FALSE LIMIT 10",
        "RETRIEVE 10 FROM messages",
    ]
    for statement in statements:
        result = db.execute(statement)
        assert all(not (r.fields["active"] is False and r.fields["compacted"] is False)
                   for r in result.rows), statement
    flags = {(r.fields["active"], r.fields["compacted"])
             for r in db.execute("RETRIEVE 10 FROM messages").rows}
    assert flags == {(False, True), (True, False)}


def test_message_rows_carry_session_and_message_ids(db):
    ids = session(db, "s", msgs=(2,))
    (row,) = db.execute("SEARCH messages MATCHING 'alpha' LIMIT 5").rows
    assert (row.session_id, row.message_id, row.conversation_root) == ("s", ids["s#0"], None)


def test_group_by_document_under_for_session_lets_a_later_hit_serve(db):
    ids = session(db, "cur", msgs=(5, (2, False, True)))
    session(db, "other", msgs=(3,))
    result = db.execute("SEARCH messages MATCHING 'alpha' USING LEXICAL FOR SESSION 'cur' "
                        "WITHOUT RECENCY FUSE RRF (weights = (context = 0)) GROUP BY DOCUMENT "
                        "LIMIT 5")
    assert [(r.session_id, r.message_id) for r in result.rows] == [
        ("other", 3), ("cur", ids["cur#1"])]


def test_with_context_returns_the_neighbouring_messages_of_the_session(db):
    """Messages are ordered by seq in their session; a rewound message (active = 0,
    compacted = 0) is never searchable, so it is skipped in the context too."""
    ids = session(db, "s", msgs=(0, (0, False, False), 3, 0, 0))
    session(db, "t", msgs=(0,))
    result = db.execute("SEARCH messages MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY "
                        "WITH CONTEXT (before = 2, after = 1) LIMIT 1")
    (row,) = result.rows
    assert row.message_id == ids["s#2"]
    assert [(c.offset, c.session_id, c.message_id) for c in row.context] == [
        (-1, "s", ids["s#0"]), (1, "s", ids["s#3"])]


def test_context_credit_between_messages_of_a_session(db):
    ids = session(db, "s", msgs=(0, 3, 0))
    result = db.execute("SEARCH messages MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY LIMIT 5")
    by = {r.message_id: r for r in result.rows}
    hit = by[ids["s#1"]]
    assert hit.score == 1.0  # the only lexical match: φ = 1, one leg (W = 1)
    for label, side in (("s#0", "after"), ("s#2", "before")):
        ctx = next(x for x in by[ids[label]].reasons if x.code.value == "CONTEXT_MATCH")
        assert (ctx.neighbour, ctx.side, ctx.relevance) == (hit.id, side, 1.0)
        assert by[ids[label]].score == 0.5


def test_an_ingested_message_without_flags_is_searchable_as_an_appended_one(db):
    """`db.ingest("messages", ...)` (and MCP `remember(collection="messages")`) left `active` and
    `compacted` NULL: the row was stored, reported added, and never matched any search (the
    searchable rule is `active OR compacted`; only `active = false AND compacted = false` is a
    rewound message)."""
    db.sessions.create("a", "agent-1", started_at=T0)
    report = db.ingest("messages", [{"id": "m-raw", "content": "zebra crossing",
                                     "session_id": "a"},
                                    {"id": "m-rewound", "content": "zebra stripes",
                                     "session_id": "a", "active": False, "compacted": False}])
    assert report.added == 2
    row = db.snapshot("messages").fetch([0])[0]
    assert (row["active"], row["compacted"]) == (True, False)
    assert db.execute("SEARCH messages MATCHING 'zebra' USING LEXICAL").ids() == ["m-raw"]


def test_an_ingested_message_gets_its_session_as_document_and_its_seq_as_position(db):
    """`db.ingest("messages", ...)` without `doc_id` / `position` made each message its own
    document, so WITH CONTEXT and GROUP BY DOCUMENT did not see its session; they come from
    `session_id` / `seq` as `append` gives them (a given `doc_id` / `position` is kept)."""
    db.sessions.create("a", "agent-1", started_at=T0)
    words = ["hello there friend", "zebra crossing ahead", "thanks a lot", "zebra again"]
    db.ingest("messages", [{"id": f"m{i}", "content": w, "session_id": "a", "seq": i + 1,
                            "message_id": i + 1} for i, w in enumerate(words[:3])])
    db.ingest("messages", [{"id": "own", "content": words[3], "session_id": "a", "seq": 9,
                            "doc_id": "elsewhere", "position": 0}])
    rows = {r["id"]: (r["doc_id"], r["position"]) for r in
            db.snapshot("messages").fetch(range(db.snapshot("messages").size))}
    assert rows == {"m0": ("session:a", 1), "m1": ("session:a", 2), "m2": ("session:a", 3),
                    "own": ("elsewhere", 0)}
    hit = db.execute("SEARCH messages MATCHING 'crossing' USING LEXICAL WITH CONTEXT LIMIT 1")[0]
    assert hit.id == "m1" and [(c.offset, c.id) for c in hit.context] == [(-1, "m0"), (1, "m2")]
    grouped = db.execute("SEARCH messages MATCHING 'zebra hello thanks' USING LEXICAL "
                         "GROUP BY DOCUMENT")
    assert sorted(r.fields["doc_id"] for r in grouped) == ["elsewhere", "session:a"]


def test_ingest_into_messages_for_a_missing_session_is_refused_like_append():
    """Newcomer: db.ingest('messages', ...) for a session that does not exist wrote an orphan
    row, where db.messages.append refuses it. Now an `IngestError` names the item and the
    session id, and nothing of the batch is written."""
    db = recallql.connect(None, embedder=None)
    db.sessions.create("s-1", "agent")
    items = [{"id": "ok", "content": "hello", "session_id": "s-1"},
             {"id": "m2", "content": "hello", "session_id": "s-404"}]
    with pytest.raises(recallql.IngestError) as err:
        db.ingest("messages", items)
    assert str(err.value) == ("item 'm2', field 'session_id': no session 's-404': a message "
                              "belongs to an existing session (create it first with "
                              "db.sessions.create)")
    assert db.snapshot("messages").size == 0
    assert db.ingest("messages", items[:1]).added == 1


def _raw(id: str, sid: str | None = "a", seq: int | None = None, **extra) -> dict:
    item = {"id": id, "content": "hello", **extra}
    if sid is not None:
        item["session_id"] = sid
    if seq is not None:
        item["seq"] = seq
    return item


@pytest.mark.parametrize(("items", "message"), [
    ([_raw("ok", seq=3), _raw("m2", sid=None)],
     "item 'm2', field 'session_id': a message belongs to a session: give its session_id (or "
     "write it with db.messages.append / extend, which number it too)"),
    ([{"content": "no id, no session"}],
     "item #0, field 'session_id': a message belongs to a session: give its session_id (or "
     "write it with db.messages.append / extend, which number it too)"),
    ([_raw("ok", seq=3), _raw("m2", sid="done", seq=1)],
     "item 'm2', field 'session_id': session 'done' is closed: messages go to an open session "
     "(as db.messages.append)"),
    ([_raw("m2", seq=1)],
     "item 'm2', field 'seq': session 'a' already has message 'msg:1' at seq 1: a session "
     "numbers its messages once each (db.messages.append gives the next seq)"),
    ([_raw("m2", seq=3), _raw("m3", seq=3)],
     "item 'm3', field 'seq': session 'a' already has message 'm2' at seq 3: a session "
     "numbers its messages once each (db.messages.append gives the next seq)"),
    ([_raw("m2", seq=3, created_at=T0 - 1)],
     "item 'm2', field 'created_at': message at 2025-10-09T08:53:19.000000Z is before its "
     "session 'a' started (2025-10-09T08:53:20.000000Z)"),
    ([_raw("m2", seq=3, created_at=T0 + 86_400 + 301)],
     "item 'm2', field 'created_at': message at 2025-10-10T08:58:21.000000Z is after the "
     "clock (2025-10-10T08:53:20.000000Z) by more than 300 s; record it when it happens, or "
     "omit created_at= for now"),
    ([_raw("m2", seq=0)],
     "item 'm2', field 'seq': seq must be 1 or more (a session numbers its messages 1, 2, "
     "...) and at most 9223372036854775807, got 0"),
    ([_raw("m2", seq=10**30)],
     "item 'm2', field 'seq': seq must be 1 or more (a session numbers its messages 1, 2, "
     "...) and at most 9223372036854775807, got 1000000000000000000000000000000"),
    ([_raw("m2", seq=3, message_id=2)],
     "item 'm2', field 'message_id': message 'msg:2' already has message_id 2: a message id "
     "is unique in the database (leave it out, or write the message with "
     "db.messages.append, which gives the next one)"),
    ([_raw("m2", seq=3, message_id=7), _raw("m3", sid="b", seq=1, message_id=7)],
     "item 'm3', field 'message_id': message 'm2' already has message_id 7: a message id "
     "is unique in the database (leave it out, or write the message with "
     "db.messages.append, which gives the next one)"),
    ([_raw("m2", seq=3, message_id=-4)],
     "item 'm2', field 'message_id': message_id must be 1 or more and at most "
     "9223372036854775807, got -4"),
], ids=["no-session-id", "no-id", "closed-session", "seq-taken", "seq-twice-in-batch",
        "before-start", "after-the-clock", "seq-zero", "seq-too-large", "message-id-taken",
        "message-id-twice-in-batch", "message-id-negative"])
def test_ingest_into_messages_refuses_what_extend_refuses(db, items, message):
    """`db.ingest("messages", ...)` wrote a message with no session, one into a closed
    session, a second message at a seq its session had already numbered (WITH CONTEXT and live
    context read neighbours by seq), and messages dated before their session or after the
    clock (`close` then refused an end before the last message), where `db.messages.append` /
    `extend` refuse all of these. Now an `IngestError` names the item and field, and nothing
    of the batch is written. A seq below 1 (or too large: the error named the derived
    `position`) and a message_id below 1 or another message holds are refused the same
    way."""
    db.sessions.create("a", "agent-1", started_at=T0)
    db.sessions.create("b", "agent-1", started_at=T0)
    db.sessions.create("done", "agent-1", started_at=T0)
    db.sessions.close("done", at=T0 + 1)
    db.messages.extend([{"session_id": "a", "role": "user", "content": "x", "at": T0 + i}
                        for i in range(2)])
    with pytest.raises(recallql.IngestError) as err:
        db.ingest("messages", items)
    assert str(err.value) == message
    assert db.snapshot("messages").size == 2


def test_an_ingested_message_carries_its_sessions_source_and_agent_id(db):
    """`db.ingest("messages", ...)` left `source` and `agent_id` NULL, where `append` copies
    them from the session: `WHERE agent_id = ...` and `WHERE source ...` (NULL fails closed)
    never matched a raw message, and a raw message could claim another agent than its
    session's. They are copied from the session; a differing value is refused, naming it."""
    db.sessions.create("a", "agent-1", source="subagent", started_at=T0)
    db.messages.append("a", "user", "zebra appended", at=T0)
    db.ingest("messages", [_raw("m-raw", seq=2, content="zebra ingested")], key="k-raw")
    row = db.snapshot("messages").fetch([1])[0]
    assert (row["id"], row["source"], row["agent_id"]) == ("m-raw", "subagent", "agent-1")
    found = db.execute("SEARCH messages MATCHING 'zebra' USING LEXICAL "
                       "WHERE agent_id = 'agent-1' AND source IN ('subagent')")
    assert sorted(found.ids()) == ["m-raw", "msg:1"]
    assert db.ingest("messages", [_raw("m-raw", seq=2, content="zebra ingested")],
                     key="k-raw").added == 1  # the retry replays (same filled batch)
    with pytest.raises(recallql.IngestError) as err:
        db.ingest("messages", [_raw("m-2", seq=3, agent_id="intruder")])
    assert str(err.value) == ("item 'm-2', field 'agent_id': session 'a' has agent_id "
                              "'agent-1', the message says 'intruder': a message carries its "
                              "session's agent_id (leave it out)")
    assert db.snapshot("messages").size == 2


def test_an_ingested_message_without_numbering_is_numbered_as_append_numbers_it(db):
    """`db.ingest("messages", ...)` stored a message without `seq`, `message_id` or
    `created_at` as NULLs: WITH CONTEXT and live context did not see its place, append numbered
    the next message as if it were not there, result rows had no message_id and AS OF / close
    no time. What an item leaves out is given as `append` gives it: the next seq of its
    session after its live messages and the batch's own seqs, the next message id after every
    stored or given one, in the batch's order, and the clock's time; an item replacing a live
    message of the same id keeps that message's (a re-ingest is unchanged)."""
    db.sessions.create("a", "agent-1", started_at=T0)
    db.sessions.create("b", "agent-1", started_at=T0)
    db.messages.append("a", "user", "first", at=T0)  # msg:1, seq 1
    report = db.ingest("messages", [
        {"id": "r1", "content": "alpha one", "session_id": "a"},
        {"id": "r2", "content": "alpha two", "session_id": "a", "seq": 5, "message_id": 9},
        {"id": "r3", "content": "alpha three", "session_id": "b"},
        {"id": "r4", "content": "alpha four", "session_id": "a", "created_at": T0 + 7}])
    assert report.added == 4
    snap = db.snapshot("messages")
    got = {r["id"]: (r["session_id"], r["seq"], r["message_id"], r["position"],
                     r["created_at"]) for r in snap.fetch(range(snap.size))}
    now = T0 + 86_400  # the pinned clock
    assert got == {"msg:1": ("a", 1, 1, 1, T0), "r1": ("a", 6, 10, 6, now),
                   "r2": ("a", 5, 9, 5, now), "r3": ("b", 1, 11, 1, now),
                   "r4": ("a", 7, 12, 7, T0 + 7)}
    again = db.ingest("messages", [{"id": "r1", "content": "alpha one", "session_id": "a"}])
    assert again.unchanged == 1
    assert db.messages.append("a", "user", "next") == 13
    assert stored(db, 13)["seq"] == 8
    hit = db.execute("SEARCH messages MATCHING 'one' USING LEXICAL WITH CONTEXT LIMIT 1")[0]
    assert hit.id == "r1" and [(c.offset, c.id) for c in hit.context] == [(-1, "r2"),
                                                                          (1, "r4")]


@pytest.mark.parametrize(("numbers", "field", "message"), [
    ({"message_id": 2**63 - 1, "seq": 1}, "message_id",
     "no message id is left: the largest (9223372036854775807) is taken"),
    ({"message_id": 1, "seq": 2**63 - 1}, "seq",
     "session 'a' has no seq left: the largest (9223372036854775807) is taken"),
], ids=["message-id", "seq"])
def test_numbering_past_the_largest_number_is_refused_naming_it(db, numbers, field, message):
    """An import took the largest message id (or seq): the next `append` failed with an
    IngestError about the `position` of an item the caller never wrote, and a raw message
    left unnumbered was refused as holding another message's id (the next number wrapped
    around). Both now say which number ran out; nothing is written."""
    db.sessions.create("a", "agent-1", started_at=T0)
    db.ingest("messages", [{"id": "last", "content": "x", "session_id": "a", **numbers}])
    with pytest.raises(recallql.IngestError) as err:
        db.messages.append("a", "user", "next")
    assert str(err.value) == f"field {field!r}: {message}"
    with pytest.raises(recallql.IngestError) as err:
        db.ingest("messages", [{"id": "n", "content": "x", "session_id": "a"}])
    assert str(err.value) == f"item 'n', field {field!r}: {message}"
    assert db.snapshot("messages").size == 1


def test_ingest_into_messages_may_renumber_what_it_replaces_and_replay_a_key(db):
    """A seq is taken only by a live message that stays: re-ingesting a session's messages
    with seqs swapped, or into a document replaced whole, is not a duplicate; a retry with
    its idempotency key replays even after the session closed."""
    db.sessions.create("a", "agent-1", started_at=T0)
    first = [_raw("m1", seq=1), _raw("m2", seq=2)]
    assert db.ingest("messages", first, key="k-1").added == 2
    swapped = [_raw("m1", seq=2), _raw("m2", seq=1)]
    assert db.ingest("messages", swapped).replaced == 2
    report = db.ingest("messages", [_raw("n1", seq=1)], replace_documents=True)
    assert (report.added, report.removed) == (1, 2)
    seqs = {r["id"]: r["seq"] for r in db.snapshot("messages").fetch(
        np.flatnonzero(db.snapshot("messages").live))}
    assert seqs == {"n1": 1}
    db.sessions.close("a")  # now: its messages are dated now
    assert db.ingest("messages", first, key="k-1").added == 2  # replayed: nothing written
    assert int(db.snapshot("messages").live.sum()) == 1
