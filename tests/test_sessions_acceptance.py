"""User acceptance for sessions (issue 5): one agent, walked through its session step by step.

Agent `agent-7` works on credentials rotation in session `s-1` over a tiny notes corpus with
hand-written vectors and a pinned clock. Each test replays the earlier steps (`walk`) and checks
its own step, so every test stands alone.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from engine_helpers import Clock

import recallql
from recallql import SignalRejected
from recallql.engine.reasons import Reason
from recallql.sessions.lifecycle import SessionError

T0 = 1_750_000_000.0  # 2025-06-15T15:06:40Z
HOUR, DAY = 3600.0, 86400.0
QUERY_VECTOR = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
NOTES = [
    {"id": "runbook-restore", "body": "restore the database from backup", "tag": "ops",
     "tags": ["backup", "restore"], "entity": "doc:runbook", "vector": [1, 0, 0, 0]},
    {"id": "policy-retention", "body": "backup retention policy for the database",
     "tag": "policy", "tags": ["backup"], "entity": "doc:policy", "vector": [1, 0, 0, 0]},
    {"id": "creds", "body": "rotate database credentials", "tag": "Security", "tags": [],
     "entity": "doc:creds", "vector": [0, 1, 0, 0]},
    {"id": "cpp", "body": "c++ build flags", "tag": "build", "entity": "doc:cpp",
     "vector": [0, 0, 1, 0]},
]
#: RRF pinned: with QUERY_VECTOR the credentials note (cosine 0) is half a match under the
#: default FUSE CONVEX (relevance 0.5 against the runbook's 1.0) and the session adds 0.35;
#: under RRF the two are 0.016 apart. `test_6_session_under_the_default_fusion` shows both.
SEARCH = "SEARCH notes MATCHING 'database' NEAR :v {session} WITHOUT RECENCY FUSE RRF LIMIT 4"
DEFAULT_SEARCH = "SEARCH notes MATCHING 'database' NEAR :v {session} WITHOUT RECENCY LIMIT 4"
RETRIEVE = "RETRIEVE 4 FROM notes {session} WITHOUT RECENCY WITHOUT SIGNAL BOOST"




@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def db(clock):
    database = recallql.connect(embedder=None, clock=clock)
    database.create_collection("notes", ("body",), {"tag": str, "tags": list[str]},
                               embedder=None, dim=4)
    database.ingest("notes", [dict(n, created_at=T0 - 30 * DAY) for n in NOTES])
    yield database
    database.close()


STEPS = ("create", "signal", "annotate", "close", "archive")


def walk(db, clock: Clock, upto: str) -> None:
    """Replay the agent's steps before `upto` (exclusive)."""
    for step in STEPS[: STEPS.index(upto)]:
        if step == "create":
            db.sessions.create("s-1", "agent-7")
        elif step == "signal":
            db.sessions.signal("s-1", "reward", 1.0, entity="doc:creds")
        elif step == "annotate":
            db.sessions.annotate("s-1", "Credentials SECURITY credentials")
        elif step == "close":
            clock.now = T0 + HOUR
            db.sessions.close("s-1", end_reason="user_exit")


def ids(db, text: str, session: str = "", **params) -> list[str]:
    return db.execute(text.format(session=session), **params).ids()


def test_1_agent_creates_a_session(db, clock):
    snap = db.sessions.create("s-1", "agent-7")
    assert (snap.id, snap.agent_id, snap.status, snap.source) == ("s-1", "agent-7", "open", "cli")
    assert snap.started_at == datetime.fromtimestamp(T0, tz=UTC)
    assert snap.ended_at is None and snap.keywords == [] and snap.velocity == 0.0
    assert [r["id"] for r in db.execute("SHOW SESSIONS").records] == ["s-1"]


@pytest.mark.parametrize("agent", ["", "agent 7", "agent'7", "a" * 129, "agént", None, 7],
                         ids=["empty", "space", "quote", "too-long", "non-ascii", "none", "int"])
def test_2_agent_ids_are_validated(db, agent):
    with pytest.raises(SessionError, match="invalid agent id"):
        db.sessions.create("s-1", agent)
    assert db.execute("SHOW SESSIONS").records == []


def test_2_valid_agent_ids_at_the_limits(db):
    db.sessions.create("s-1", "a" * 128)
    db.sessions.create("s-2", "Agent_7.team:eu-1")
    assert [r["agent_id"] for r in db.execute("SHOW SESSIONS").records] == \
        ["a" * 128, "Agent_7.team:eu-1"]


def test_3_signals_are_accepted_and_rejected(db, clock):
    walk(db, clock, "signal")
    db.sessions.signal("s-1", "reward", 1.0, entity="doc:creds")
    rejected = [("reward", 2.0, "out_of_bounds"), ("like", 1.0, "unknown_name"),
                ("reward", float("nan"), "not_finite"), ("reward", float("inf"), "not_finite")]
    for name, value, rule in rejected:
        with pytest.raises(SignalRejected, match=f"rule {rule}"):
            db.sessions.signal("s-1", name, value, entity="doc:creds")
    snap = db.sessions.snapshot("s-1")
    assert snap.signal_scores == {"reward": 1.0}
    assert snap.entities == {"doc:creds": 1.0}
    assert snap.velocity == 1.0


def test_4_annotations_become_keywords(db, clock):
    walk(db, clock, "annotate")
    db.sessions.annotate("s-1", "Credentials SECURITY credentials")
    assert db.sessions.snapshot("s-1").keywords == ["credentials", "security"]


def test_5_results_come_with_the_session_snapshot(db, clock):
    walk(db, clock, "close")
    result = db.execute(RETRIEVE.format(session="FOR SESSION 's-1'"))
    assert result.session_snapshot == db.sessions.snapshot("s-1", as_of=T0)
    assert result.session_snapshot.keywords == ["credentials", "security"]
    assert result.warnings == []


def test_6_session_ranks_search_results(db, clock):
    walk(db, clock, "close")
    assert ids(db, SEARCH, v=QUERY_VECTOR)[0] != "creds"
    assert ids(db, SEARCH, "FOR SESSION 's-1'", v=QUERY_VECTOR)[0] == "creds"


def _cosines(rows) -> dict[str, float]:
    return {r.id: next(x.cosine for x in r.reasons if x.code is Reason.SEMANTIC_MATCH)
            for r in rows}


def test_6_session_under_the_default_fusion(db, clock):
    """FUSE CONVEX: boosts are not rescaled (both fusions put relevance on [0, 1], 1 = the top
    of every leg). The session lifts a note of comparable relevance to the top, but not half a
    match over a full one."""
    walk(db, clock, "close")  # open session at T0: reward 1.0 undecayed, so e = v = 1
    keywords, velocity, entity = 0.3 * (1 / 2), 0.2 * (1 / 2), 0.2 * (1 / 2)
    near = np.array([0.8, 0.6, 0.0, 0.0], dtype=np.float32)  # cosines 0.8, 0.8, 0.6, 0
    assert ids(db, DEFAULT_SEARCH, v=near)[0] == "runbook-restore"
    rows = db.execute(DEFAULT_SEARCH.format(session="FOR SESSION 's-1'"), v=near).rows
    assert [r.id for r in rows][:2] == ["creds", "runbook-restore"]
    by, cos = {r.id: r for r in rows}, _cosines(rows)
    assert cos["creds"] == pytest.approx(0.6) and cos["runbook-restore"] == pytest.approx(0.8)
    # both match 'database' once in 3 terms: equal BM25, φ_lex = 1; φ_sem = (cos − lo)/(hi − lo)
    # with lo = cpp's cosine (0), hi = the runbook's
    lo, hi = cos["cpp"], cos["runbook-restore"]
    sem = 0.5 * ((cos["creds"] - lo) / (hi - lo))
    assert by["creds"].score == 0.5 * 1.0 + sem + keywords + velocity + entity  # 1.225
    assert by["runbook-restore"].score == 0.5 * 1.0 + 0.5 * 1.0 + 0.0 + velocity + 0.0  # 1.1
    # QUERY_VECTOR: creds is orthogonal (φ_sem = 0): 0.5 + 0.35 stays below the runbook's 1.1
    orth = {r.id: r for r in db.execute(DEFAULT_SEARCH.format(session="FOR SESSION 's-1'"),
                                         v=QUERY_VECTOR).rows}
    assert orth["creds"].score == 0.5 * 1.0 + 0.0 + keywords + velocity + entity
    assert orth["runbook-restore"].score == 0.5 + 0.5 + 0.0 + velocity + 0.0
    assert orth["runbook-restore"].score > orth["creds"].score


def test_6_session_ranks_retrieve_results(db, clock):
    walk(db, clock, "close")
    assert ids(db, RETRIEVE) == ["cpp", "creds", "policy-retention", "runbook-restore"]
    assert ids(db, RETRIEVE, "FOR SESSION 's-1'")[0] == "creds"


def test_7_two_sessions_never_mix(db, clock):
    walk(db, clock, "close")
    db.sessions.create("s-2", "agent-9")
    db.sessions.signal("s-2", "reward", 1.0, entity="doc:cpp")
    db.sessions.annotate("s-2", "build")
    for session, own, other in (("s-1", "creds", "cpp"), ("s-2", "cpp", "creds")):
        rows = {r.id: r for r in db.execute(RETRIEVE.format(session=f"FOR SESSION '{session}'"))}
        parts = {i: {x.code: x.contribution for x in rows[i].reasons} for i in (own, other)}
        assert parts[own][Reason.SESSION_ENTITY] > 0 and parts[own][Reason.SESSION_KEYWORDS] > 0
        assert parts[other][Reason.SESSION_ENTITY] == 0.0
        assert parts[other][Reason.SESSION_KEYWORDS] == 0.0
    assert db.sessions.snapshot("s-1").entities == {"doc:creds": 1.0}
    assert db.sessions.snapshot("s-2").entities == {"doc:cpp": 1.0}


def test_8_closing_freezes_the_session(db, clock):
    walk(db, clock, "close")
    clock.now = T0 + HOUR
    snap = db.sessions.close("s-1", end_reason="user_exit")
    assert (snap.status, snap.end_reason) == ("closed", "user_exit")
    assert snap.ended_at == datetime.fromtimestamp(T0 + HOUR, tz=UTC)
    with pytest.raises(SignalRejected, match="rule session_not_open"):
        db.sessions.signal("s-1", "reward", 1.0)
    with pytest.raises(SignalRejected, match="rule session_not_open"):
        db.sessions.annotate("s-1", "more")
    clock.now = T0 + 30 * DAY
    assert db.sessions.snapshot("s-1").velocity == snap.velocity
    assert db.sessions.snapshot("s-1").entities == snap.entities


def test_9_archived_session_ranks_as_at_close_a_week_later(db, clock):
    walk(db, clock, "archive")
    text = ("RETRIEVE 4 FROM notes FOR SESSION 's-1' WITHOUT RECENCY "
            "AS OF TIMESTAMP '{at}'")
    at_close = db.execute(text.format(at=_iso(T0 + HOUR)))
    frozen = db.sessions.archive("s-1")
    assert frozen.status == "archived"
    clock.now = T0 + HOUR + 7 * DAY
    later = db.execute(text.format(at=_iso(clock.now)))
    assert [(r.id, r.score, r.reasons) for r in later] == \
        [(r.id, r.score, r.reasons) for r in at_close]
    assert later.session_snapshot == at_close.session_snapshot.model_copy(
        update={"status": "archived"})


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")
