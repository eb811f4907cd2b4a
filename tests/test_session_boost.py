"""SessionBoost and SignalBoost (SPEC §4.3, §4.4, §5): exact values, ordering, degradation.

Expected numbers are computed here from the SPEC formulas, in the order the engine sums them, and
compared with `==`.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime

import numpy as np
import pytest
from engine_helpers import Clock

import recallql
from recallql.engine.reasons import Reason
from recallql.engine.scoring import rrf_share

T0 = 1_750_000_000.0
DAY = 86400.0
AS_OF = datetime.fromtimestamp(T0, tz=UTC).isoformat().replace("+00:00", "Z")
PINNED = f" AS OF TIMESTAMP '{AS_OF}'"
V = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
# RETRIEVE with boosts only; the session and signal boosts decide the order
BOOSTS_ONLY = "RETRIEVE 10 FROM notes {session} WITHOUT RECENCY WITHOUT SIGNAL BOOST"




@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


def item(id_: str, **extra) -> dict:
    """An item equal to every other one except for `extra`: same text, vector and date."""
    return {"id": id_, "body": "shared words", "vector": [1, 0, 0, 0],
            "created_at": T0 - 10 * DAY, **extra}


@pytest.fixture
def db(clock):
    database = recallql.connect(embedder=None, clock=clock)
    database.create_collection("notes", ("body",), {"tag": str, "tags": list[str], "n": int},
                               embedder=None, dim=4)
    yield database
    database.close()


def contributions(row) -> dict[Reason, float]:
    return {r.code: r.contribution for r in row.reasons}


def reasons_sum(row) -> float:
    """The row's contributions summed left to right (as the score is)."""
    return functools.reduce(lambda acc, r: acc + r.contribution, row.reasons, 0.0)


def run(db, text: str, session: str | None = None, **params):
    clause = f"FOR SESSION '{session}'" if session else ""
    return db.execute(text.format(session=clause), **params)


# -- keyword hints -----------------------------------------------------------------------------


def test_keyword_hint_moves_a_matching_item_above_an_equal_one(db):
    db.ingest("notes", [item("a", tag="misc"), item("b", tag="Backup-Policy")])
    db.sessions.create("s", "agent")
    db.sessions.annotate("s", "backup")
    assert run(db, BOOSTS_ONLY).ids() == ["a", "b"]  # tie: item id decides
    result = run(db, BOOSTS_ONLY, "s")
    assert result.ids() == ["b", "a"]
    assert contributions(result.rows[0])[Reason.SESSION_KEYWORDS] == 0.3 * (1 / 1)
    assert contributions(result.rows[1])[Reason.SESSION_KEYWORDS] == 0.0


@pytest.mark.parametrize("annotation, value", [
    ("BACKUP", "backup"), ("backup", "BaCkUp"), ("Back", "nightly-BACKUPS"), ("été", "ÉTÉ 2024"),
    ("c++", "C++ build"),
], ids=["upper-keyword", "mixed-value", "substring", "non-ascii", "punctuation"])
def test_keyword_hints_are_case_insensitive_substrings(db, annotation, value):
    db.ingest("notes", [item("a", tag=value), item("b", tags=["x", value]), item("c", tag="zzz")])
    db.sessions.create("s", "agent")
    db.sessions.annotate("s", annotation)
    parts = {r.id: contributions(r)[Reason.SESSION_KEYWORDS] for r in run(db, BOOSTS_ONLY, "s")}
    assert parts == {"a": 0.3, "b": 0.3, "c": 0.0}


def test_keyword_hint_goes_to_the_value_that_holds_it_whatever_normalising_does(db):
    """Was: the vocabulary was searched as one normalised blob located by the values' original
    lengths; NFD ``Cafe\u0301`` shortens by one and ``Straße`` lengthens by one, so the blob kept
    its length, ``strasse`` was found at the boundary and credited to ``a``, not ``b``."""
    db.ingest("notes", [item("a", tag="Cafe\u0301"), item("b", tag="Straße"), item("c", tag="x")])
    db.sessions.create("s", "agent")
    db.sessions.annotate("s", "straße")
    parts = {r.id: contributions(r)[Reason.SESSION_KEYWORDS] for r in run(db, BOOSTS_ONLY, "s")}
    assert parts == {"a": 0.0, "b": 0.3, "c": 0.0}


def test_keyword_hint_counts_matched_over_total(db):
    db.ingest("notes", [item("a", tag="alpha", tags=["beta", "x"]), item("b", tags=["gamma"]),
                        item("c", tag="alphabet soup")])
    db.sessions.create("s", "agent")
    db.sessions.annotate("s", "alpha beta delta")
    rows = {r.id: r for r in run(db, BOOSTS_ONLY, "s", )}
    hints = {i: (contributions(r)[Reason.SESSION_KEYWORDS],
                 [x.detail for x in r.reasons if x.code is Reason.SESSION_KEYWORDS][0])
             for i, r in rows.items()}
    assert hints == {"a": (0.3 * (2 / 3), "2/3"), "b": (0.0, "0/3"), "c": (0.3 * (1 / 3), "1/3")}


def test_keywords_do_not_match_text_fields_numbers_or_the_entity(db):
    db.ingest("notes", [item("backup-1", body="backup backup", n=42, entity="backup:e")])
    db.sessions.create("s", "agent")
    db.sessions.annotate("s", "backup 42")
    row = run(db, BOOSTS_ONLY, "s").rows[0]
    assert contributions(row)[Reason.SESSION_KEYWORDS] == 0.0


def test_no_keywords_adds_exactly_zero(db):
    db.ingest("notes", [item("a", tag="x"), item("b")])
    db.sessions.create("s", "agent")
    result = run(db, BOOSTS_ONLY, "s")
    for row in result:
        parts = [x for x in row.reasons if x.code is Reason.SESSION_KEYWORDS]
        assert [(p.contribution, p.detail) for p in parts] == [(0.0, "0/0")]
        assert row.score == 0.0


def test_keyword_weight_comes_from_the_statement(db):
    db.ingest("notes", [item("a", tag="alpha")])
    db.sessions.create("s", "agent")
    db.sessions.annotate("s", "alpha")
    text = ("RETRIEVE 1 FROM notes {session} WITH SESSION BOOST (keywords = 0.75, velocity = 0, "
            "entities = 0) WITHOUT RECENCY WITHOUT SIGNAL BOOST")
    assert run(db, text, "s").rows[0].score == 0.75


# -- velocity ----------------------------------------------------------------------------------


def test_velocity_alone_never_changes_the_order(db):
    db.ingest("notes", [item(f"i{k}", body=f"words {'x ' * k}", vector=[1, k / 10, 0, 0])
                        for k in range(6)])
    db.sessions.create("s", "agent", started_at=T0 - 2 * DAY)
    db.sessions.signal("s", "reward", 0.9, at=T0 - DAY)
    db.sessions.signal("s", "reward", 0.6, at=T0 - 2 * DAY)
    text = "SEARCH notes MATCHING 'words x' NEAR :v {session}" + PINNED
    without, with_ = run(db, text, v=V), run(db, text, "s", v=V)
    assert with_.ids() == without.ids()
    v = 0.0 + 0.6 * 0.5 ** (2 / 7)  # summed in recording order
    v += 0.9 * 0.5 ** (1 / 7)
    boost = 0.2 * (v / (v + 1.0))
    for row in with_:
        velocity = [x for x in row.reasons if x.code is Reason.SESSION_VELOCITY]
        assert [(x.contribution, x.detail) for x in velocity] == [(boost, f"uniform, v={v:.3f}")]


def test_negative_velocity_counts_as_zero(db):
    db.ingest("notes", [item("a")])
    db.sessions.create("s", "agent")
    db.sessions.signal("s", "reward", -1.0)
    assert contributions(run(db, BOOSTS_ONLY, "s").rows[0])[Reason.SESSION_VELOCITY] == 0.0


# -- entity boost ------------------------------------------------------------------------------


def test_entity_boost_ranks_the_rewarded_entity_above_an_equal_item(db):
    db.ingest("notes", [item("a", entity="doc:1"), item("b", entity="doc:5")])
    db.sessions.create("s", "agent")
    db.sessions.signal("s", "reward", 1.0, entity="doc:5")
    db.sessions.create("other", "agent")
    result = run(db, BOOSTS_ONLY, "s")
    assert result.ids() == ["b", "a"]
    parts = {r.id: contributions(r)[Reason.SESSION_ENTITY] for r in result}
    assert parts == {"b": 0.2 * (1.0 / (1.0 + 1.0)), "a": 0.0}
    never = {r.id: contributions(r)[Reason.SESSION_ENTITY] for r in run(db, BOOSTS_ONLY, "other")}
    assert never == {"a": 0.0, "b": 0.0}


def test_entity_boost_applies_to_every_chunk_of_the_entity(db):
    db.ingest("notes", [item("d#0", doc_id="d", position=0), item("d#1", doc_id="d", position=1),
                        item("e#0", doc_id="e", position=0)])
    db.sessions.create("s", "agent")
    db.sessions.signal("s", "reward", 0.5, entity="d")  # entity defaults to doc_id
    parts = {r.id: contributions(r)[Reason.SESSION_ENTITY] for r in run(db, BOOSTS_ONLY, "s")}
    assert parts == {"d#0": 0.2 * (0.5 / 1.5), "d#1": 0.2 * (0.5 / 1.5), "e#0": 0.0}


def test_negative_entity_sum_counts_as_zero(db):
    db.ingest("notes", [item("a", entity="doc:1")])
    db.sessions.create("s", "agent")
    db.sessions.signal("s", "reward", 0.3, entity="doc:1")
    db.sessions.signal("s", "reward", -0.8, entity="doc:1")
    row = run(db, BOOSTS_ONLY, "s").rows[0]
    assert contributions(row)[Reason.SESSION_ENTITY] == 0.0
    assert "e=-0.500" in [x.detail for x in row.reasons if x.code is Reason.SESSION_ENTITY][0]


# -- exact EXPLAIN arithmetic ------------------------------------------------------------------


@pytest.fixture
def handmade(db):
    """Two items and one hand-made session: 3 keywords, 3 rewards (one negative)."""
    db.ingest("notes", [
        item("p", tag="Backup-2023", tags=["ops", "x"], entity="E1", vector=[1, 0, 0, 0]),
        item("q", body="other words", tag="misc", entity="E2", vector=[0.6, 0.8, 0, 0]),
    ])
    db.sessions.create("s", "agent", started_at=T0 - 5 * DAY)
    db.sessions.annotate("s", "backup Restore OPS", at=T0 - 5 * DAY)
    db.sessions.signal("s", "reward", -0.25, entity="E2", at=T0 - 3.5 * DAY)
    db.sessions.signal("s", "reward", 1.0, entity="E1", at=T0 - 2 * DAY)
    db.sessions.signal("s", "reward", 0.5, at=T0 - 1 * DAY)
    return db


def _expected_session_parts():
    e1 = 1.0 * 0.5 ** (2 / 7)
    e2 = -0.25 * 0.5 ** (3.5 / 7)
    v = 0.0 + e2
    v += e1
    v += 0.5 * 0.5 ** (1 / 7)
    velocity = 0.2 * (v / (v + 1.0))
    return {"p": (0.3 * (2 / 3), velocity, 0.2 * (e1 / (e1 + 1.0))),
            "q": (0.3 * (0 / 3), velocity, 0.0)}, e1


def test_explain_shows_exact_session_boost_values(handmade):
    parts, e1 = _expected_session_parts()
    text = ("EXPLAIN RETRIEVE 2 FROM notes FOR SESSION 's' WITHOUT RECENCY "
            f"AS OF TIMESTAMP '{AS_OF}'")
    explain = handmade.execute(text)
    signal = 0.1 * (e1 / (e1 + 1.0))  # RETRIEVE's default cross-session signal boost
    assert explain.result.ids() == ["p", "q"]
    for row in explain.rows:
        kw, vel, ent = parts[row.id]
        got = contributions(row)
        assert (got[Reason.SESSION_KEYWORDS], got[Reason.SESSION_VELOCITY],
                got[Reason.SESSION_ENTITY]) == (kw, vel, ent)
        expected_signal = signal if row.id == "p" else 0.0
        assert got[Reason.SIGNAL_BOOST] == expected_signal
        assert row.score == 0.0 + kw + vel + ent + expected_signal
        assert reasons_sum(row) == row.score
    assert "SESSION_KEYWORDS(2/3) +0.20000" in explain.to_text()
    assert "SessionBoost: session=s keywords=0.3 velocity=0.2 entities=0.2" in explain.to_text()


def test_explain_search_contributions_sum_to_the_score(handmade):
    parts, _ = _expected_session_parts()
    text = ("SEARCH notes MATCHING 'shared words' NEAR :v FOR SESSION 's' FUSE RRF "
            f"AS OF TIMESTAMP '{AS_OF}'")
    explain = handmade.explain(text, v=V)
    assert explain.result.ids() == handmade.execute(text, v=V).ids() == ["p", "q"]
    ranks = {"p": (1, 1), "q": (2, 2)}
    for row in explain.rows:
        lex, sem = (rrf_share(np.array([r]), 60, 2)[0] for r in ranks[row.id])
        kw, vel, ent = parts[row.id]
        recency = contributions(row)[Reason.RECENCY]
        assert row.score == 0.0 + lex + sem + kw + vel + ent + recency
        assert reasons_sum(row) == row.score


# -- archived sessions -------------------------------------------------------------------------


def test_archived_session_ranks_as_it_did_at_close(handmade, clock):
    text = "SEARCH notes MATCHING 'words' NEAR :v FOR SESSION 's' AS OF TIMESTAMP '{at}'"
    at_close = handmade.execute(text.format(at=AS_OF), v=V)
    handmade.sessions.close("s", at=T0)
    handmade.sessions.archive("s")
    clock.now = T0 + 7 * DAY
    week = datetime.fromtimestamp(clock.now, tz=UTC).isoformat()
    later = handmade.execute(text.format(at=week), v=V)

    def session_parts(result):
        return [(r.id, [x for x in r.reasons if x.code.value.startswith("SESSION_")])
                for r in result]

    assert session_parts(later) == session_parts(at_close)
    assert later.ids() == at_close.ids()


def test_frozen_snapshot_survives_a_policy_change(tmp_path, clock):
    from recallql.sessions.signals import SignalPolicy

    with recallql.connect(tmp_path / "db", embedder=None, clock=clock) as db:
        db.sessions.create("s", "agent")
        db.sessions.create("c", "agent")
        db.sessions.signal("s", "reward", 1.0, entity="E", at=T0)
        db.sessions.signal("c", "reward", 1.0, entity="E", at=T0)
        clock.now = T0 + 3 * DAY  # an end may not be dated after the clock
        db.sessions.close("s", at=T0 + 3 * DAY)
        frozen = db.sessions.archive("s")
        db.sessions.close("c", at=T0 + 3 * DAY)
    faster = SignalPolicy(half_lives={"reward": 1.0})
    clock.now = T0 + 10 * DAY
    with recallql.connect(tmp_path / "db", embedder=None, clock=clock,
                          signal_policy=faster) as db:
        assert db.sessions.snapshot("s") == frozen
        assert frozen.velocity == 0.5 ** (3 / 7)
        assert db.sessions.snapshot("c").velocity == 0.5 ** (3 / 1)  # closed: not frozen


# -- degradation -------------------------------------------------------------------------------

SURFACES = {
    "search": "SEARCH notes MATCHING 'shared words' NEAR :v {session}" + PINNED,
    "retrieve": "RETRIEVE 5 FROM notes {session}" + PINNED,
}


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("how", ["swept", "never-created"])
def test_missing_session_degrades_identically(handmade, clock, surface, how):
    session = "s" if how == "swept" else "ghost"
    if how == "swept":
        handmade.sessions.close("s", at=T0)
        clock.now = T0 + 40 * DAY
        assert handmade.sessions.sweep(30) == 1
        clock.now = T0
    text = SURFACES[surface]
    params = {"v": V} if surface == "search" else {}
    plain = run(handmade, text, **params)
    degraded = run(handmade, text, session, **params)
    assert [(r.id, r.score, r.reasons) for r in degraded] == \
        [(r.id, r.score, r.reasons) for r in plain]
    assert [(w.code, w.message) for w in degraded.warnings] == [(
        Reason.SESSION_NOT_FOUND,
        f"session '{session}' does not exist (never created, or swept); ran without the session "
        "boost")]
    assert degraded.session_snapshot is None


# -- cross-session signal boost ----------------------------------------------------------------


def test_signal_boost_sums_all_sessions_each_frozen_at_its_end(db, clock):
    db.ingest("notes", [item("a", entity="E"), item("b", entity="F")])
    db.sessions.create("s1", "agent", started_at=T0 - 10 * DAY)
    db.sessions.signal("s1", "reward", 1.0, entity="E", at=T0 - 10 * DAY)
    db.sessions.close("s1", at=T0 - 3 * DAY)
    db.sessions.create("s2", "other", started_at=T0 - 2 * DAY)
    db.sessions.signal("s2", "reward", 0.5, entity="E", at=T0 - 2 * DAY)
    db.sessions.signal("s2", "reward", -0.5, entity="F", at=T0 - 2 * DAY)
    text = f"RETRIEVE 5 FROM notes WITHOUT RECENCY AS OF TIMESTAMP '{AS_OF}'"
    rows = {r.id: contributions(r)[Reason.SIGNAL_BOOST] for r in db.execute(text)}
    s = 0.0 + 1.0 * 0.5 ** (7 / 7)  # s1 frozen at its end: age 7 days
    s += 0.5 * 0.5 ** (2 / 7)
    assert rows == {"a": 0.1 * (s / (s + 1.0)), "b": 0.0}


def test_signal_boost_handles_more_entities_than_one_sql_list(db):
    db.ingest("notes", [item(f"i{k:04d}", entity=f"E{k}") for k in range(1200)])
    db.sessions.create("s", "agent")
    for k in (0, 700, 1199):
        db.sessions.signal("s", "reward", 1.0, entity=f"E{k}", at=T0)
    result = db.execute(f"RETRIEVE 5 FROM notes WITHOUT RECENCY AS OF TIMESTAMP '{AS_OF}'")
    assert result.ids()[:3] == ["i0000", "i0700", "i1199"]
    assert contributions(result.rows[0])[Reason.SIGNAL_BOOST] == 0.1 * 0.5
