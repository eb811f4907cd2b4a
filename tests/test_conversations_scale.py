"""Lineage at scale and at the budget's edges, end to end (SPEC §6, issue 14).

Every session stores its conversation root (written by create, close, import, sweep), so
statements read one stored root per hit session: a 10,000-deep chain groups under any budget,
and nothing is truncated by lineage.

The budget still governs the query-time walk, which a statement falls back to for sessions
without a stored root (`forget_roots` clears them, as rows written behind recallql's back look).
Budget arithmetic there (see `recallql.sessions.lineage`): resolving a hit in a continuation chain
of depth d (d + 1 sessions, the root without a parent link) costs d + 1 successful row fetches; a
root with a non-continuation parent link costs one more (that parent's row is read to see that
the edge is not a continuation); a cycle of k sessions is proven after k fetches. Under the walk
a 10,000-deep chain needs ``budget >= 10,001``.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest
from session_rows import forget_roots
from test_conversations_support import connect, rows, run, session

from recallql.engine.reasons import Reason
from recallql.sessions import roots

_BUILDER = Path(__file__).parent / "fixtures" / "hermes" / "build_state_db.py"
_spec = importlib.util.spec_from_file_location("build_state_db", _BUILDER)
builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)

DEPTH = 10_000


@pytest.fixture
def db():
    database = connect()
    yield database
    database.close()


@pytest.fixture(scope="module")
def deep_db(tmp_path_factory):
    """A 10,000-deep compression chain s0 ← … ← s10000, imported from a Hermes store; s0 and the
    tip s10000 each hold one message."""
    path = tmp_path_factory.mktemp("deep") / "state.db"
    conn = sqlite3.connect(path)
    builder.create_schema(conn)
    for i in range(DEPTH + 1):
        tip = i == DEPTH
        builder.add_session(conn, f"s{i}", parent=f"s{i - 1}" if i else None, start=i,
                            end=None if tip else i + 1, reason=None if tip else "compression")
    builder.add_message(conn, "s0", "user", "alpha at the very start", 0.5)
    builder.add_message(conn, "s10000", "user", "alpha alpha at the tip", DEPTH + 0.5)
    conn.commit()
    conn.close()
    database = connect()
    report = database.import_hermes(path)
    assert (report.sessions, report.messages, report.unresolved) == (DEPTH + 1, 2, {})
    yield database
    database.close()


@pytest.mark.parametrize("budget", [None, 1])
def test_a_10000_deep_chain_groups_under_any_budget(deep_db, budget):
    result = run(deep_db, budget=budget)
    assert rows(result) == [("s10000", "s0")]
    assert result.truncated is False and result.warnings == []
    lineage = result.stats["conversation"]["lineage"]
    assert (lineage["stored"], lineage["fetches"], lineage["max_depth"]) == (2, 0, DEPTH)


@pytest.fixture
def walked(deep_db):
    """`deep_db` with its stored roots cleared (statements walk), healed afterwards."""
    forget_roots(deep_db)
    yield deep_db
    with deep_db.store.transaction() as conn:
        assert roots.heal(conn).changed == DEPTH + 1


def test_without_stored_roots_a_10000_deep_chain_needs_a_raised_budget(walked):
    result = run(walked)
    assert result.rows == [] and result.truncated is True
    assert [w.code for w in result.warnings] == [Reason.LINEAGE_BUDGET_TRUNCATED]
    assert result.stats["conversation"]["lineage"]["fetches"] == 2000
    result = run(walked, budget=20_000)
    assert rows(result) == [("s10000", "s0")] and result.truncated is False
    lineage = result.stats["conversation"]["lineage"]
    assert (lineage["fetches"], lineage["max_depth"], lineage["memo_hits"]) == (DEPTH + 1, DEPTH, 1)


def test_the_current_session_of_a_10000_deep_chain_reads_no_chain(deep_db):
    result = run(deep_db, current="s10000")
    assert rows(result) == [("s0", "s0")]  # the tip's own hit is live; the root was compressed
    lineage = result.stats["conversation"]["lineage"]
    assert (lineage["fetches"], lineage["chain_fetches"]) == (0, 0)
    assert result.truncated is False


def test_without_stored_roots_the_current_chain_is_read_outside_the_budget(walked):
    result = run(walked, current="s10000")
    assert rows(result) == [("s0", "s0")]
    lineage = result.stats["conversation"]["lineage"]
    assert (lineage["fetches"], lineage["chain_fetches"]) == (0, DEPTH + 1)
    assert result.truncated is False


def test_show_lineage_lists_all_10001_sessions(deep_db):
    records = deep_db.execute("SHOW LINEAGE 's10000'").records
    assert len(records) == DEPTH + 1
    assert (records[0]["edge"], records[-1]["session_id"], records[-1]["edge"]) == (
        "continuation", "s0", "root")
    assert {r["conversation_root"] for r in records} == {"s0"}


def chain(db, depth: int, root_parent: str | None = None) -> None:
    """c0 ← … ← c{depth}, one hit in the tip; c0 links to `root_parent` (a branch) if given."""
    if root_parent is not None:
        session(db, root_parent, end="branched")
    for i in range(depth + 1):
        parent = f"c{i - 1}" if i else root_parent
        end = "compression" if i < depth else None
        session(db, f"c{i}", parent, end=end, msgs=(3,) if i == depth else (),
                branched=root_parent if i == 0 else None)


@pytest.mark.parametrize(("budget", "resolved"), [(4, False), (5, True), (6, True)],
                         ids=["B-1", "B", "B+1"])
def test_budget_boundaries(db, budget, resolved):
    chain(db, 4)  # 5 sessions: resolving the tip costs exactly 5 fetches
    forget_roots(db)
    result = run(db, budget=budget)
    assert rows(result) == ([("c4", "c0")] if resolved else [])
    assert result.truncated is (not resolved)
    assert result.stats["conversation"]["lineage"]["fetches"] == min(budget, 5)


@pytest.mark.parametrize(("budget", "resolved"), [(5, False), (6, True)])
def test_a_root_with_a_non_continuation_parent_costs_one_more_fetch(db, budget, resolved):
    chain(db, 4, root_parent="bp")
    forget_roots(db)
    assert rows(run(db, budget=budget)) == ([("c4", "c0")] if resolved else [])


@pytest.mark.parametrize(("budget", "truncated"), [(2, True), (3, False), (4, False)])
def test_a_cycle_proven_at_the_bound_is_a_cycle(db, budget, truncated):
    session(db, "x", "z", end="compression", msgs=(3,))
    session(db, "y", "x", end="compression")
    session(db, "z", "y", end="compression")
    forget_roots(db)
    result = run(db, budget=budget)
    assert result.rows == [] and result.truncated is truncated
    codes = [w.code for w in result.warnings]
    expected = Reason.LINEAGE_BUDGET_TRUNCATED if truncated else Reason.LINEAGE_UNRESOLVED_DROPPED
    assert codes == [expected]
    assert result.stats["conversation"]["lineage"]["unresolved"] == (
        {} if truncated else {"cycle": 1})


def test_a_truncated_statement_memoises_nothing_for_the_next(db):
    chain(db, 4)
    forget_roots(db)
    for budget, expected in [(4, []), (5, [("c4", "c0")]), (4, []), (None, [("c4", "c0")])]:
        result = run(db, budget=budget)
        assert rows(result) == expected
        assert result.truncated is (not expected)


@pytest.mark.parametrize("current", [None, "c1999"])
def test_a_2000_session_chain_under_a_branch_resolves_by_its_stored_roots(db, current):
    """Issue 14, found 4: resolving this chain by the walk costs 2,001 fetches (one for the
    branch parent above its root), one more than the default budget; stored roots cost none."""
    chain(db, 1999, root_parent="bp")
    session(db, "other", msgs=(2,))
    result = run(db, current=current)
    expected = [("other", "other")] if current else [("c1999", "c0"), ("other", "other")]
    assert rows(result) == expected  # under FOR SESSION the tip's own hit is live
    assert result.truncated is False
    hidden = [Reason.LIVE_CONTEXT_HIDDEN] if current else []
    assert [w.code for w in result.warnings] == hidden
    assert result.stats["conversation"]["lineage"]["fetches"] == 0
