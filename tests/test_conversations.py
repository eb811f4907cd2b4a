"""GROUP BY CONVERSATION end to end on a real database (SPEC §6): identity, fail closed, EXPLAIN,
truncation, pagination, SHOW LINEAGE. Live context: test_conversations_live.py; scale and budget:
test_conversations_scale.py."""

from __future__ import annotations

import json

import pytest
from session_rows import forget_roots
from test_conversations_support import T0, connect, query, rows, run, session, text

from recallql import QuerySemanticError
from recallql.engine.reasons import Reason
from recallql.sessions.messages import message_item


@pytest.fixture
def db():
    database = connect()
    yield database
    database.close()


def codes(result) -> list[Reason]:
    return [w.code for w in result.warnings]


# -- identity ------------------------------------------------------------------------------------


def test_compression_chain_is_one_conversation(db):
    ids = session(db, "root", end="compression", msgs=(1,))
    ids |= session(db, "mid", "root", end="compression", msgs=(2,))
    ids |= session(db, "tip", "mid", msgs=(3,))
    result = run(db)
    assert rows(result) == [("tip", "root")]
    assert result.rows[0].message_id == ids["tip#0"]
    assert [r.session_id for r in run(db, group=False).rows] == ["tip", "mid", "root"]


def test_a_hit_only_in_the_tip_names_the_tip_and_the_root(db):
    db.sessions.create("root", "agent-1")
    db.messages.append("root", "user", "nothing relevant here")
    db.sessions.close("root", end_reason="compression")
    session(db, "mid", "root", end="compression")
    ids = session(db, "tip", "mid", msgs=(2,))
    (row,) = run(db).rows
    assert (row.session_id, row.conversation_root, row.message_id) == ("tip", "root",
                                                                       ids["tip#0"])
    assert row.fields["session_id"] == "tip"  # never rewritten to the root


# child kwargs, parent end reason, same conversation?
EDGES = {
    "continuation": ({}, "compression", True),
    "branch": ({"branched": "p"}, "branched", False),
    "branch-marker-on-compressed-parent": ({"branched": "p"}, "compression", False),
    "delegate": ({"source": "subagent", "delegate": "p"}, None, False),
    "delegate-marker-on-compressed-parent": ({"delegate": "p"}, "compression", False),
    "tool": ({"source": "tool"}, "compression", False),
    "reset": ({}, "new_session", False),
    "user-exit": ({}, "user_exit", False),
    "open-parent": ({}, None, False),
    "marker-elsewhere": ({"branched": "x", "delegate": "y"}, "compression", True),
    "subagent-without-marker": ({"source": "subagent"}, "compression", True),
}


@pytest.mark.parametrize(("child", "reason", "same"), EDGES.values(), ids=EDGES.keys())
def test_only_a_compression_continuation_carries_identity(db, child, reason, same):
    session(db, "p", end=reason, msgs=(3,))
    session(db, "c", "p", msgs=(2,), **child)
    expected = [("p", "p")] if same else [("p", "p"), ("c", "c")]
    assert rows(run(db)) == expected


def test_best_displayable_hit_ranks_each_conversation(db):
    session(db, "a0", end="compression", msgs=(5, 1))
    session(db, "a1", "a0", msgs=(2,))
    session(db, "b0", msgs=(4,))
    session(db, "c0", end="compression", msgs=(1,))
    session(db, "c1", "c0", msgs=(3,))
    result = run(db)
    assert rows(result) == [("a0", "a0"), ("b0", "b0"), ("c1", "c0")]
    assert [round(r.score, 12) for r in result.rows] == [1.0, round(61 / 62, 12),
                                                         round(61 / 63, 12)]


# -- fail closed ---------------------------------------------------------------------------------

BROKEN = {  # sessions (id, parent) all ended by compression; the hit sessions are in the first
    "2-cycle": [("a", "b"), ("b", "a")],
    "3-cycle": [("a", "b"), ("b", "c"), ("c", "a")],
    "tail-into-cycle": [("t", "a"), ("a", "b"), ("b", "a")],
    "self-loop": [("a", "a")],
    "dangling-parent": [("a", "gone")],
}


@pytest.mark.parametrize("shape", BROKEN.values(), ids=BROKEN.keys())
def test_unresolved_lineage_fails_closed(db, shape):
    for i, (sid, parent) in enumerate(shape):
        session(db, sid, parent, end="compression", msgs=(5 - i % 2,))
    session(db, "ok", msgs=(1,))
    result = run(db)
    assert rows(result) == [("ok", "ok")]
    assert codes(result) == [Reason.LINEAGE_UNRESOLVED_DROPPED]
    stats = result.stats["conversation"]
    reason = "missing_parent" if shape[0][1] == "gone" else "cycle"
    assert stats["unresolved_dropped"] == len(shape)
    assert stats["lineage"]["unresolved"] == {reason: len(shape)}
    assert result.truncated is False


def test_messages_of_a_missing_session_are_dropped(db):
    # db.ingest refuses such a row now; the store below it can still hold one (a database
    # written before that check), and the engine must drop it
    db.store.ingest("messages", [{"id": "stray", "content": "alpha", "session_id": "never",
                                  "active": True, "compacted": False}], db.embedder("messages"))
    result = run(db)
    assert result.rows == []
    assert result.stats["conversation"]["lineage"]["unresolved"] == {"missing_session": 1}


# -- EXPLAIN, stats ------------------------------------------------------------------------------


def chain_and_friends(db):
    session(db, "root", end="compression", msgs=(1,))
    session(db, "mid", "root", end="compression", msgs=(4,))
    session(db, "tip", "mid", msgs=(2,))
    session(db, "solo", msgs=(3,))
    session(db, "cyc", "cyc", end="compression", msgs=(5,))


def test_explain_shows_lineage_reasons_and_stats(db):
    chain_and_friends(db)
    explain = run(db, 2, explain="EXPLAIN ANALYZE")  # LIMIT 2: the walk stops after 3 hits
    assert explain.rows == run(db, 2).rows  # same ids, same order, same reasons
    text = explain.to_text()
    assert "GroupByConversation: key=conversation_root budget=2000  rows=5→2" in text
    assert "LINEAGE(root=root, anchor=mid) +0.00000" in text
    assert "LINEAGE(root=solo, anchor=solo) +0.00000" in text
    assert "warning: LINEAGE_UNRESOLVED_DROPPED: 1 hit(s) dropped" in text
    stats = explain.result.stats["conversation"]
    assert {k: v for k, v in stats.items() if k != "lineage"} == {
        "candidates": 5, "scanned": 3, "sessions": 3, "kept": 2, "unresolved_dropped": 1,
        "live_hidden": 0, "budget_hit": False}
    lineage = stats["lineage"]  # three stored roots read, no walk
    assert (lineage["stored"], lineage["fetches"], lineage["max_depth"]) == (3, 0, 1)
    for part in ("conversation.candidates=5", "conversation.sessions=3",
                 "conversation.lineage.stored=3", "conversation.lineage.fetches=0",
                 "conversation.budget_hit=False"):
        assert part in text
    reasons = explain.rows[0].reasons
    assert (reasons[-1].code, reasons[-1].detail) == (Reason.LINEAGE, "root=root, anchor=mid")
    assert sum(r.contribution for r in reasons) == explain.rows[0].score


def test_explain_json_carries_the_same_content(db):
    chain_and_friends(db)
    payload = json.loads(db.explain(query(2), analyze=True).to_json())
    assert payload["plan"]["children"][0]["operator"] == "GroupByConversation"
    rows_ = payload["result"]["rows"]
    assert [(r["session_id"], r["conversation_root"]) for r in rows_] == [("mid", "root"),
                                                                          ("solo", "solo")]
    assert rows_[0]["reasons"][-1] == {"code": "LINEAGE", "contribution": 0.0, "root": "root",
                                       "anchor": "mid", "detail": "root=root, anchor=mid"}
    assert payload["result"]["stats"]["conversation"]["unresolved_dropped"] == 1


# -- budget truncation (only where a walk remains: sessions without a stored root) ----------------


def three_conversations(db):
    """A (1 session, rank 1), B (a 6-session chain, rank 2), C (1 session, rank 3)."""
    session(db, "a", msgs=(5,))
    for i in range(6):
        parent = f"b{i - 1}" if i else None
        end = "compression" if i < 5 else None
        session(db, f"b{i}", parent, end=end, msgs=(4,) if i == 5 else ())
    session(db, "c", msgs=(3,))


@pytest.mark.parametrize(("budget", "expected", "truncated"), [
    (6, ["a"], True), (7, ["a", "b0"], True), (8, ["a", "b0", "c"], False),
])
def test_budget_exhaustion_returns_a_safe_ranked_prefix(db, budget, expected, truncated):
    three_conversations(db)
    forget_roots(db)
    result = run(db, budget=budget)
    assert [r.conversation_root for r in result.rows] == expected
    assert result.truncated is truncated
    assert (Reason.LINEAGE_BUDGET_TRUNCATED in codes(result)) is truncated
    lineage = result.stats["conversation"]["lineage"]
    assert lineage["fetches"] == min(budget, 8)
    assert lineage["budget_exhausted"] is truncated


def test_stored_roots_need_no_budget(db):
    three_conversations(db)
    result = run(db, budget=1)  # no walk: the budget is never spent
    assert [r.conversation_root for r in result.rows] == ["a", "b0", "c"]
    assert result.truncated is False and result.warnings == []
    lineage = result.stats["conversation"]["lineage"]
    assert (lineage["stored"], lineage["fetches"], lineage["budget_exhausted"]) == (3, 0, False)


def test_budget_warning_says_how_to_raise_it(db):
    three_conversations(db)
    forget_roots(db)
    (notice,) = run(db, budget=6).warnings
    assert notice.message == ("lineage budget of 6 session-row fetches ran out; the result is a "
                              "safe ranked prefix (raise it with GROUP BY CONVERSATION "
                              "(budget = n))")


# -- pagination and deeper windows ---------------------------------------------------------------


def many_conversations(db):
    for c in range(7):
        for depth in range(c % 3 + 1):
            parent = f"c{c}s{depth - 1}" if depth else None
            end = "compression" if depth < c % 3 else None
            session(db, f"c{c}s{depth}", parent, end=end, msgs=((c + depth) % 5 + 1, 1))


def test_pages_of_conversations_concatenate_to_the_unpaged_list(db):
    many_conversations(db)
    whole = [(r.id, r.conversation_root) for r in run(db, 7).rows]
    assert len({root for _, root in whole}) == 7
    pages = []
    for offset in (0, 3, 6):
        pages += [(r.id, r.conversation_root) for r in run(db, 3, offset=offset).rows]
    assert pages == whole


def test_underfilled_groups_fetch_a_deeper_window(db):
    session(db, "big", msgs=(5, 5, 5, 5, 5, 5))
    session(db, "x", msgs=(2,))
    session(db, "y", msgs=(1,))
    text = ("SEARCH messages MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY "
            "FUSE RRF (k = 60, window = 2) GROUP BY CONVERSATION LIMIT 3")
    result = db.execute(text)
    assert rows(result) == [("big", "big"), ("x", "x"), ("y", "y")]
    assert result.stats["window"] == 12  # N = max(offset + limit, window) = 3, then 3 × 4


# -- SHOW LINEAGE --------------------------------------------------------------------------------

LINEAGES = {
    "tip": [("tip", "mid", "continuation", "root"), ("mid", "root", "continuation", "root"),
            ("root", None, "root", "root")],
    "bc": [("bc", "bp", "branch", "bc"), ("bp", None, "root", "bp")],
    "sub": [("sub", "dp", "delegate", "sub"), ("dp", None, "root", "dp")],
    "tl": [("tl", "root", "tool", "tl"), ("root", None, "root", "root")],
    "new": [("new", "old", "reset", "new"), ("old", None, "root", "old")],
    "orphan": [("orphan", "gone", "missing", "unresolved: missing_parent")],
    "ca": [("ca", "cb", "continuation", "unresolved: cycle"),
           ("cb", "ca", "cycle", "unresolved: cycle")],
}


@pytest.mark.parametrize(("sid", "expected"), LINEAGES.items(), ids=LINEAGES.keys())
def test_show_lineage_prints_each_edge_verdict(db, sid, expected):
    session(db, "root", end="compression")
    session(db, "mid", "root", end="compression")
    session(db, "tip", "mid")
    session(db, "bp", end="branched")
    session(db, "bc", "bp", branched="bp")
    session(db, "dp")
    session(db, "sub", "dp", source="subagent", delegate="dp")
    session(db, "tl", "root", source="tool")
    session(db, "old", end="new_session")
    session(db, "new", "old")
    session(db, "orphan", "gone")
    session(db, "ca", "cb", end="compression")
    session(db, "cb", "ca", end="compression")
    result = db.execute("SHOW LINEAGE :s", s=sid)
    assert result.columns == ["depth", "session_id", "parent_session_id", "source", "end_reason",
                              "edge", "conversation_root", "stored_root"]
    got = [(r["session_id"], r["parent_session_id"], r["edge"], r["conversation_root"])
           for r in result.records]
    assert got == expected
    assert [r["stored_root"] for r in result.records] == [r[3] for r in expected]
    assert result.warnings == []  # every stored root agrees with the walk
    assert [r["depth"] for r in result.records] == list(range(len(expected)))


def test_show_lineage_of_an_unknown_session_is_a_clear_error(db):
    with pytest.raises(QuerySemanticError, match="no session 'nobody'"):
        db.execute("SHOW LINEAGE 'nobody'")


def test_a_long_run_of_tied_scores_does_not_end_the_walk(db):
    """1,100 hits of one conversation tie at one score: a deeper head whose cut falls in the same
    run adds no row, and the walk must go on to the hit of the second conversation below it."""
    db.sessions.create("big", "agent-1", started_at=T0)  # its messages are at T0
    db.sessions.create("small", "agent-1", started_at=T0)
    items = [message_item("big", i + 1, i + 1, "user", text(5 if i < 10 else 3), T0, True,
                          False) for i in range(1110)]
    items.append(message_item("small", 1111, 1, "user", text(1), T0, True, False))
    db.ingest("messages", items)
    result = db.execute("SEARCH messages MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY "
                        "FUSE RRF (k = 60, window = 1200) GROUP BY CONVERSATION LIMIT 2")
    assert rows(result) == [("big", "big"), ("small", "small")]
    assert result.stats["conversation"]["scanned"] == 1111


def test_the_walk_orders_deeper_heads_as_it_goes(db):
    """301 candidates: the walk orders the best 64, then 256, then all, without losing its place."""
    db.sessions.create("big", "agent-1", started_at=T0)  # its messages are at T0
    db.sessions.create("small", "agent-1", started_at=T0)
    items = [message_item("big", i + 1, i + 1, "user", text(2 + i % 4), T0, True, False)
             for i in range(300)]
    items.append(message_item("small", 301, 1, "user", text(1), T0, True, False))
    db.ingest("messages", items)
    result = db.execute("SEARCH messages MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY "
                        "FUSE RRF (k = 60, window = 400) GROUP BY CONVERSATION LIMIT 2")
    assert rows(result) == [("big", "big"), ("small", "small")]
    stats = result.stats["conversation"]
    assert (stats["candidates"], stats["scanned"], stats["kept"]) == (301, 301, 2)
    best = db.execute("SEARCH messages MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY "
                      "FUSE RRF (k = 60, window = 400) LIMIT 1").rows[0]
    assert result.rows[0].id == best.id


# -- AS OF ---------------------------------------------------------------------------------------


def test_as_of_groups_by_the_lineage_of_its_time():
    """`AS OF t` answers from the database as committed at `t` (SPEC §3.2), lineage included:
    a parent that ended by compression only after `t` was open at `t`, so its child was then
    a conversation of its own, and (FOR SESSION the child) the open parent's hits were still
    live. Found by trials: the stored roots of today merged the two conversations `AS OF t`."""
    from engine_helpers import Clock

    from recallql import connect as open_db
    from recallql.index.embedders import HashEmbedder

    clock = Clock(T0)
    db = open_db(embedder=HashEmbedder(16), clock=clock)
    db.sessions.create("p", "agent")
    db.messages.append("p", "user", text(2))
    clock.now += 60
    db.sessions.create("c", "agent", parent="p")
    db.messages.append("c", "user", text(1))
    t = "2025-10-09T08:55:20Z"  # T0 + 120 s: after both commits, before the close
    clock.now = T0 + 3600
    db.sessions.close("p", end_reason="compression")
    grouped = ("SEARCH messages MATCHING 'alpha' USING LEXICAL {s}GROUP BY CONVERSATION"
               " AS OF TIMESTAMP '{t}'")
    assert rows(run(db)) == [("p", "p")]  # now: one conversation
    assert sorted(rows(db.execute(grouped.format(s="", t=t)))) == [("c", "c"), ("p", "p")]
    live = db.execute(grouped.format(s="FOR SESSION 'c' ", t=t))
    assert rows(live) == [] and Reason.LIVE_CONTEXT_HIDDEN in codes(live)
    later = db.execute(grouped.format(s="FOR SESSION 'c' ", t="2025-10-09T09:55:20Z"))
    assert rows(later) == [("p", "p")]  # T0 + 3720 s: after the close
    db.close()


def test_as_of_resolves_deep_chains_without_truncation_and_splits_where_an_end_came_later():
    """AS OF walks only where a stored root no longer holds: a 2,500-deep chain (more than
    the default budget of 2,000) whose tip's parent ended after `t` still groups as one
    conversation, untruncated; a chain whose middle session ended after `t` was two
    conversations at `t`."""
    from engine_helpers import Clock

    from recallql import connect as open_db
    from recallql.index.embedders import HashEmbedder

    clock = Clock(T0)
    db = open_db(embedder=HashEmbedder(16), clock=clock)
    depth = 2500
    hits = {"d0", f"d{depth - 100}", f"d{depth}", "m0", "m5", "m6", "m9"}
    for prefix, n, open_at_t in (("d", depth + 1, depth - 1), ("m", 10, 5)):
        for i in range(n):
            sid = f"{prefix}{i}"
            db.sessions.create(sid, "agent", parent=f"{prefix}{i - 1}" if i else None)
            if sid in hits:
                db.messages.append(sid, "user", text(1))
            if i not in (open_at_t, n - 1):
                db.sessions.close(sid, end_reason="compression")
    clock.now = T0 + 3600  # t = T0 + 120 s (below): the closes that follow came later
    db.sessions.close(f"d{depth - 1}", end_reason="compression")
    db.sessions.close("m5", end_reason="compression")
    grouped = ("SEARCH messages MATCHING 'alpha' USING LEXICAL GROUP BY CONVERSATION "
               "AS OF TIMESTAMP '{t}' LIMIT 10")
    now = db.execute(grouped.format(t="2025-10-09T09:55:20Z"))  # T0 + 3720 s
    assert sorted(r.conversation_root for r in now.rows) == ["d0", "m0"]
    then = db.execute(grouped.format(t="2025-10-09T08:55:20Z"))
    assert then.truncated is False
    assert sorted(r.conversation_root for r in then.rows) == ["d0", f"d{depth}", "m0", "m6"]
    db.close()
