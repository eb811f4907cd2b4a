"""Plan -> legs -> merge as public steps (SPEC §8, §10): `execute` is exactly
`merge(plan, run_legs(plan), db)`, also after a JSON round trip of the plan and of the batches,
as a coordinator would ship them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from engine_helpers import doc, make_db, q, vec
from test_conversations_support import connect, session

import recallql
from recallql.engine import LegBatches, QueryPlan, RefillPolicy, run_statement
from recallql.engine.models import Explain, Result

V = q(vec(1, 0.1, 0, 0))


@pytest.fixture(scope="module")
def kb():
    items = [
        doc("a#0", "Backup retention", "daily backups kept 30 days", vec(1, 0, 0, 0),
            created_at="2026-01-01T00:00:00Z", doc_id="a", position=0, team="ops",
            tags=["backup", "ops"]),
        doc("a#1", "Backup retention", "monthly backups to cold storage", vec(0.9, 0.3, 0, 0),
            created_at="2026-01-01T00:00:00Z", doc_id="a", position=1, team="ops"),
        doc("b#0", "Backup schedule", "nightly backups at 02:00", vec(0.7, 0.7, 0, 0),
            created_at="2026-11-20T00:00:00Z", doc_id="b", team="ops", tags=["schedule"]),
        doc("c#0", "Rotate credentials", "rotate keys every 90 days", vec(0, 0, 1, 0),
            created_at="2027-01-01T00:00:00Z", doc_id="c", team="sec"),
        doc("d#0", "Retention of logs", "logs are kept for a week", vec(0.2, 0, 0, 1),
            doc_id="d"),
    ]
    db = make_db(items, fields={"team": "str", "tags": "list[str]"})
    db.sessions.create("s-1", "agent", started_at=1_700_000_000)
    db.sessions.annotate("s-1", "ops schedule", at=1_700_000_100)
    db.sessions.signal("s-1", "reward", 0.8, entity="b", at=1_700_000_200)
    yield db
    db.close()


STATEMENTS = {
    "hybrid": ("SEARCH kb MATCHING 'backup retention' NEAR :v LIMIT 4", {"v": V}),
    "lexical": ("SEARCH kb MATCHING 'backup' USING LEXICAL FUSE RRF (k = 10) LIMIT 3", {}),
    "weighted": ("SEARCH kb MATCHING 'backup retention' NEAR :v "
                 "FUSE RRF (weights = (lexical = 2, semantic = 0.5)) LIMIT 4", {"v": V}),
    "for_session": ("SEARCH kb MATCHING 'backup' NEAR :v FOR SESSION 's-1' WITH SIGNAL BOOST "
                    "LIMIT 4", {"v": V}),
    "missing_session": ("RETRIEVE 3 FROM kb FOR SESSION 'nobody'", {}),
    "group_by_document": ("SEARCH kb MATCHING 'backup' NEAR :v WHERE team = 'ops' "
                          "GROUP BY DOCUMENT LIMIT 2", {"v": V}),
    "retrieve": ("RETRIEVE 4 FROM kb WHERE team IN ('ops', 'sec')", {}),
    "filters": ("RETRIEVE 5 FROM kb WHERE (created_at >= TIMESTAMP '2026-01-01T00:00:00Z' AND "
                "team NOT IN ('sec') AND position BETWEEN 0 AND 1) OR tags CONTAINS 'schedule' "
                "OR (doc_id LIKE 'd%' AND team IS NULL) OR NOT created_at IS NOT NULL", {}),
    "explain": ("EXPLAIN SEARCH kb MATCHING 'backup retention' NEAR :v LIMIT 3", {"v": V}),
    "explain_json": ("EXPLAIN FORMAT JSON SEARCH kb MATCHING 'rotate' NEAR :v FOR SESSION 's-1' "
                     "LIMIT 3", {"v": V}),
}


def shipped(plan: QueryPlan) -> QueryPlan:
    return QueryPlan.model_validate_json(plan.model_dump_json())


def through_json(db, plan: QueryPlan) -> tuple[QueryPlan, LegBatches]:
    """The plan and its leg batches after a JSON round trip each (a coordinator's view)."""
    plan = shipped(plan)
    batches = LegBatches.from_json(db.run_legs(plan).to_json())
    return plan, batches


def same_result(a: Result, b: Result) -> None:
    assert a.ids() == b.ids()
    assert [r.score for r in a.rows] == [r.score for r in b.rows]  # exact floats
    assert [r.reasons for r in a.rows] == [r.reasons for r in b.rows]
    assert [r.fields for r in a.rows] == [r.fields for r in b.rows]
    assert (a.warnings, a.truncated, a.session_snapshot) == (b.warnings, b.truncated,
                                                             b.session_snapshot)
    assert a.statement == b.statement and a.collection == b.collection


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_merge_of_run_legs_is_execute(kb, name):
    text, params = STATEMENTS[name]
    expected = kb.execute(text, **params)
    plan = kb.plan(text, **params)
    for p, batches in ((plan, kb.run_legs(plan)), through_json(kb, plan)):
        got = recallql.merge(p, batches, kb)
        assert type(got) is type(expected)
        if isinstance(got, Explain):
            assert got.to_text() == expected.to_text()
            assert got.model_dump(exclude={"result"}) == expected.model_dump(exclude={"result"})
            got, want = got.result, expected.result
        else:
            want = expected
        assert expected.rows
        same_result(got, want)


def test_plan_json_round_trips_exactly(kb):
    plan = kb.plan(*STATEMENTS["for_session"][:1], v=V)
    restored = shipped(plan)
    assert restored.model_dump_json() == plan.model_dump_json()
    data = json.loads(plan.model_dump_json())
    assert data["now"] == plan.now and data["window"] == 100
    assert [leg["name"] for leg in data["legs"]] == ["lexical", "semantic", "context"]
    assert data["legs"][2]["options"] == {"weight": 0.5}
    assert data["fusion"] == {"method": "convex", "k": 60.0, "window": 100,
                              "normalization": "minmax", "weights": []}
    assert data["legs"][0]["terms"] == ["backup"]
    assert data["legs"][1]["vector"] == V.tolist()
    assert np.array_equal(restored.legs[1].vector, plan.legs[1].vector)
    assert data["features"] == {"entities": True, "recency": "created_at", "strings": True,
                                "messages": False}


def test_leg_batches_json_round_trips_exactly(kb):
    plan = kb.plan(*STATEMENTS["hybrid"][:1], v=V)
    batches = kb.run_legs(plan)
    restored = LegBatches.from_json(batches.to_json())
    assert restored.to_json() == batches.to_json()
    for a, b in zip(batches.legs, restored.legs, strict=True):
        assert (a.name, a.kind, a.window) == (b.name, b.kind, b.window)
        assert a.scores.dtype == b.scores.dtype == np.float64
        assert a.scores.tobytes() == b.scores.tobytes()  # bit for bit
        assert a.rowids.tolist() == b.rowids.tolist() and a.ranks.tolist() == b.ranks.tolist()
        assert a.ids.tolist() == b.ids.tolist()
    assert batches.batch == kb.snapshot("kb").seq and batches.size == kb.snapshot("kb").size
    union = sorted(set().union(*(b.rowids.tolist() for b in batches.legs)))
    assert batches.features.rowid.tolist() == union


def test_group_by_conversation_on_messages_through_json():
    db = connect()
    try:
        session(db, "root", end="compression", msgs=(1, 4))
        session(db, "mid", "root", end="compression", msgs=(2,))
        session(db, "tip", "mid", msgs=(3,))
        session(db, "other", msgs=(5, 1))
        text = ("SEARCH messages MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY "
                "GROUP BY CONVERSATION LIMIT 2")
        expected = db.execute(text)
        assert [r.conversation_root for r in expected.rows] == ["other", "root"]
        plan, batches = through_json(db, db.plan(text))
        assert batches.features.session_ids is not None
        same_result(recallql.merge(plan, batches, db), expected)
        assert [r.conversation_root for r in recallql.merge(plan, batches, db).rows] == [
            "other", "root"]
    finally:
        db.close()


def test_refill_through_json_equals_execute():
    """GROUP BY DOCUMENT with a window of 2 chunks per leg: documents of 3 chunks under-fill the
    page, so the refill policy runs the legs again with window 8 — here every step through JSON,
    as a coordinator runs it."""
    items = [doc(f"d{d}#{c}", "alpha", f"alpha chunk {c}", vec(1, c, d, 0), doc_id=f"d{d}",
                 position=c) for d in range(3) for c in range(3)]
    db = make_db(items)
    try:
        text = "SEARCH kb MATCHING 'alpha' USING LEXICAL FUSE RRF (window = 2) GROUP BY " \
               "DOCUMENT LIMIT 2"
        expected = db.execute(text)
        assert len(expected.rows) == 2 and expected.stats["window"] == 8
        windows = []

        def run_legs(plan):
            windows.append(plan.window)
            return through_json(db, plan)[1]

        got = run_statement(shipped(db.plan(text)), run_legs, db)
        assert windows == [2, 8]
        same_result(got, expected)
        single = recallql.merge(db.plan(text), db.run_legs(db.plan(text)), db)
        assert len(single.rows) == 1  # one pass at window 2: a short page
    finally:
        db.close()


def test_refill_policy_decisions():
    from recallql.engine.merging import MergeOutcome

    policy = RefillPolicy()
    short = MergeOutcome(Result(), underfilled=True, cut=True, truncated=False)
    assert policy.decide(100, 50_000, short).window == 400
    assert policy.decide(4000, 50_000, short).window == 10_000
    end = policy.decide(10_000, 50_000, short)
    assert (end.window, end.exhausted) == (None, True)
    assert policy.decide(400, 300, short).window is None  # the whole collection was asked for
    assert not policy.decide(400, 300, short).exhausted
    for outcome in (MergeOutcome(Result(), False, True, False),
                    MergeOutcome(Result(), True, False, False),
                    MergeOutcome(Result(), True, True, True)):
        assert policy.decide(100, 50_000, outcome).window is None


def test_query_vectors_are_cached_per_embedder_not_per_collection():
    """Re-attaching an embedder with the same name but other vectors must not reuse vectors
    embedded by the previous one."""
    def fixed(values):
        def embed(texts):
            return np.tile(np.asarray(values, np.float32), (len(texts), 1))
        embed.name = "mine"
        embed.dim = 4
        return embed

    db = recallql.connect(embedder=None)
    try:
        db.create_collection("c", ("body",), embedder=fixed([1, 0, 0, 0]))
        first = db.plan("SEARCH c MATCHING 'x'").legs[1].vector
        db.set_embedder("c", fixed([0, 1, 0, 0]))
        second = db.plan("SEARCH c MATCHING 'x'").legs[1].vector
        assert first.tolist() == [1, 0, 0, 0] and second.tolist() == [0, 1, 0, 0]
    finally:
        db.close()


def test_the_leg_pool_belongs_to_the_database():
    db = make_db([doc("a", "alpha", "", vec(1, 0, 0, 0))])
    assert db._pool is None  # created lazily
    db.execute("SEARCH kb MATCHING 'alpha' NEAR :v", v=V)
    pool = db._pool
    assert pool is not None and db.leg_pool() is pool
    db.close()
    assert db._pool is None and pool._shutdown


def test_legs_in_threads_answer_as_legs_run_one_after_the_other(kb, monkeypatch):
    """Small eligible sets run the legs in the calling thread (`THREADED_MIN_ROWS`); with the
    bound at 0 they run in the leg pool, with the same rows, scores and reasons."""
    import threading

    from recallql.engine import legs

    statement = ("SEARCH kb MATCHING 'backup retention' NEAR :v WHERE team = 'ops' "
                 "FOR SESSION 's-1' LIMIT 4")
    serial = kb.execute(statement, v=V)
    calls = []
    monkeypatch.setattr(legs, "THREADED_MIN_ROWS", 0)
    monkeypatch.setattr(legs, "_search", lambda op, ctx, real=legs._search: (
        calls.append(threading.current_thread().name), real(op, ctx))[1])
    threaded = kb.execute(statement, v=V)
    assert len(calls) == 2 and any(name.startswith("recallql-leg") for name in calls)
    assert [(r.id, r.score, r.reasons) for r in threaded.rows] == \
        [(r.id, r.score, r.reasons) for r in serial.rows]
    assert len(serial.rows) == 3


def test_plan_refuses_statements_without_a_plan(kb):
    with pytest.raises(recallql.QuerySemanticError, match="only SEARCH, RETRIEVE and EXPLAIN"):
        kb.plan("SHOW COLLECTIONS")


def test_merge_refuses_leg_batches_of_another_collection(kb):
    """The batches' rowids index their own collection: merged with a plan of another one they
    raised a bare IndexError from the row fetch (``rowid 0 out of range 0..-1``)."""
    batches = kb.run_legs(kb.plan("SEARCH kb MATCHING 'backup'"))
    plan = kb.plan("SEARCH messages MATCHING 'backup'")
    with pytest.raises(ValueError, match="the leg batches are of collection 'kb', the plan of "
                                         "'messages'"):
        recallql.merge(plan, batches, kb)


def test_merge_refuses_leg_batches_without_a_leg_the_plan_fuses(kb):
    batches = kb.run_legs(kb.plan("SEARCH kb MATCHING 'backup' USING LEXICAL"))
    with pytest.raises(ValueError, match="no batch for leg 'semantic'"):
        recallql.merge(kb.plan("SEARCH kb MATCHING 'backup' NEAR :v", v=V), batches, kb)
