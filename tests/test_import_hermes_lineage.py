"""Hermes import and lineage (issue 14): malformed `model_config`, numeric markers, tool-call-only
messages, incremental re-import, the Hermes-equivalent view; and the acceptance store — every
lineage shape of the fixture plus a 5,000-deep chain — grouped by stored roots exactly as the
query-time contract groups with an unlimited budget."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from test_conversations_support import connect

from recallql.engine.reasons import Reason
from recallql.importers.hermes_content import tool_calls_text
from recallql.importers.hermes_store import read_hermes_store
from recallql.sessions.lineage import LineageResolver, SessionRow

_BUILDER = Path(__file__).parent / "fixtures" / "hermes" / "build_state_db.py"
_spec = importlib.util.spec_from_file_location("build_state_db", _BUILDER)
builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)
T0 = builder.T0
GROUPED = "SEARCH messages MATCHING :q USING LEXICAL WITHOUT RECENCY GROUP BY CONVERSATION"


@pytest.fixture
def db():
    database = connect()
    yield database
    database.close()


def new_store(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    builder.create_schema(conn)
    return conn


def conversations(db, q: str) -> list[tuple[str, str]]:
    result = db.execute(GROUPED, q=q)
    assert result.truncated is False
    return [(r.session_id, r.conversation_root) for r in result.rows]


# -- model_config and markers ------------------------------------------------------------------


def test_a_malformed_model_config_proves_no_edge(db, tmp_path):
    conn = new_store(tmp_path / "state.db")
    builder.add_session(conn, "p", end=10, reason="compression")
    builder.add_message(conn, "p", "user", "kappa before", 1)
    builder.add_session(conn, "c", parent="p", start=10, config="{not json")
    builder.add_message(conn, "c", "user", "kappa kappa after", 11)
    conn.commit()
    conn.close()
    report = db.import_hermes(tmp_path / "state.db")
    assert report.skipped["malformed_model_config"] == 1
    assert conversations(db, "kappa") == [("c", "c"), ("p", "p")]  # two conversations
    edges = [r["edge"] for r in db.execute("SHOW LINEAGE 'c'").records]
    assert edges == ["markers_unreadable", "root"]
    assert db.sessions.verify_lineage().ok


@pytest.mark.parametrize(("marker", "root"), [(42, "42"), ("42", "c")],
                         ids=["number-is-not-the-id", "text-is-the-id"])
def test_a_numeric_marker_is_compared_as_a_value(db, tmp_path, marker, root):
    """`_branched_from: 42` (a JSON number) is not the text id '42', so it blocks nothing and
    the compression edge holds; the text '42' marks a branch."""
    conn = new_store(tmp_path / "state.db")
    builder.add_session(conn, "42", end=10, reason="compression")
    builder.add_session(conn, "c", parent="42", start=10, config={"_branched_from": marker})
    builder.add_message(conn, "c", "user", "lambda here", 11)
    conn.commit()
    conn.close()
    report = db.import_hermes(tmp_path / "state.db")
    assert report.skipped.get("non_text_marker", 0) == (1 if marker == 42 else 0)
    assert conversations(db, "lambda") == [("c", root)]


# -- tool calls --------------------------------------------------------------------------------

CALLS = [{"id": "call_1", "type": "function",
          "function": {"name": "terminal",
                       "arguments": json.dumps({"command": "kubectl rollout status web",
                                                "timeout": 30})}},
         {"type": "function", "function": {"name": "web_search",
                                           "arguments": "{not json but findable"}}]


def test_tool_calls_text():
    assert tool_calls_text(json.dumps(CALLS)) == (
        "terminal: kubectl rollout status web 30\nweb_search: {not json but findable")
    assert tool_calls_text("plain words") == "plain words"
    assert tool_calls_text("[]") == ""


def test_a_message_with_only_tool_calls_is_findable(db, tmp_path):
    conn = new_store(tmp_path / "state.db")
    builder.add_session(conn, "s")
    conn.execute("INSERT INTO messages (session_id, role, content, tool_calls, timestamp) "
                 "VALUES ('s', 'assistant', NULL, ?, ?)", (json.dumps(CALLS), T0 + 1))
    conn.execute("INSERT INTO messages (session_id, role, content, tool_calls, timestamp) "
                 "VALUES ('s', 'assistant', '', NULL, ?)", (T0 + 2,))
    conn.commit()
    conn.close()
    report = db.import_hermes(tmp_path / "state.db")
    assert (report.messages_added, report.skipped) == (1, {"empty_content": 1})
    (row,) = db.execute("SEARCH messages MATCHING 'rollout' USING LEXICAL").rows
    assert row.fields["content"].startswith("terminal: kubectl rollout status web")
    assert row.fields["role"] == "assistant"


# -- re-import: roots follow what Hermes wrote since -----------------------------------------------


def test_a_reimport_updates_roots_incrementally(db, tmp_path):
    path = tmp_path / "state.db"
    conn = new_store(path)
    builder.add_session(conn, "root")  # still open
    builder.add_message(conn, "root", "user", "mu first", 1)
    builder.add_session(conn, "solo", start=2)
    builder.add_message(conn, "solo", "user", "mu elsewhere", 3)
    conn.execute("PRAGMA foreign_keys = OFF")  # a child copied before its parent
    builder.add_session(conn, "late-child", parent="late-parent", start=50)
    builder.add_message(conn, "late-child", "user", "mu mu mu waiting", 51)
    conn.commit()
    first = db.import_hermes(path)
    assert (first.roots_updated, first.unresolved) == (3, {"missing_parent": 1})
    assert sorted(conversations(db, "mu")) == [("root", "root"), ("solo", "solo")]  # dropped:
    # late-child (its parent is missing)
    # Hermes rotates `root` by compression, starts `tip`, and the missing parent appears
    conn.execute("UPDATE sessions SET ended_at = ?, end_reason = 'compression' "
                 "WHERE id = 'root'", (T0 + 10,))
    builder.add_session(conn, "tip", parent="root", start=10)
    builder.add_message(conn, "tip", "user", "mu mu at the tip", 11)
    builder.add_session(conn, "late-parent", start=40, end=50, reason="compression")
    conn.commit()
    conn.close()
    second = db.import_hermes(path)
    # recomputed: root (its end changed), tip (new), late-parent (new), late-child (adopted);
    # root's own root did not change, `solo` was not touched
    assert (second.sessions_added, second.sessions_updated) == (2, 1)
    assert (second.roots_updated, second.unresolved) == (3, {})
    assert sorted(conversations(db, "mu")) == [("late-child", "late-parent"), ("solo", "solo"),
                                               ("tip", "root")]
    assert db.sessions.verify_lineage().ok
    assert db.import_hermes(path).roots_updated == 0  # nothing new: nothing recomputed


# -- the Hermes-equivalent view ------------------------------------------------------------------


def test_the_hermes_equivalent_view_hides_subagents_tools_and_tool_rows(db, tmp_path):
    builder.build_state_db(tmp_path / "state.db")
    db.import_hermes(tmp_path / "state.db")
    everything = "SEARCH messages MATCHING :q USING LEXICAL {where}LIMIT 50"
    view = everything.format(where="WHERE source NOT IN ('subagent', 'tool') AND role != 'tool' ")
    everything = everything.format(where="")
    q = "vector databases tool run output pods"
    shown = {(r.session_id, r.fields["role"]) for r in db.execute(everything, q=q).rows}
    assert {("deleg-sub", "assistant"), ("tool-child", "tool"), ("conv-tip", "tool")} <= shown
    filtered = {(r.session_id, r.fields["source"], r.fields["role"])
                for r in db.execute(view, q=q).rows}
    assert filtered and all(src not in ("subagent", "tool") and role != "tool"
                            for _, src, role in filtered)
    assert ("deleg-parent", "cli", "user") in filtered
    assert {r.fields["agent_id"] for r in db.execute(view, q=q).rows} == {"hermes"}


# -- acceptance: every shape + a 5,000-deep chain, stored roots == the contract ----------------

DEPTH = 5_000
QUERIES = ["kubernetes staging helm", "postgres mysql", "vector databases", "topic",
           "deep chain message", "parent deleted cycle", "tool run output pods", "omega"]


@pytest.fixture(scope="module")
def acceptance(tmp_path_factory):
    path = tmp_path_factory.mktemp("acceptance") / "state.db"
    builder.build_state_db(path)
    conn = sqlite3.connect(path)
    for i in range(DEPTH + 1):
        tip = i == DEPTH
        builder.add_session(conn, f"d{i}", parent=f"d{i - 1}" if i else None, start=3000 + i,
                            end=None if tip else 3001 + i, reason=None if tip else "compression")
        if i % 500 == 0:
            builder.add_message(conn, f"d{i}", "user", f"deep chain message omega {i}",
                                3000 + i + 0.5)
    conn.commit()
    conn.close()
    database = connect()
    database.import_hermes(path)
    store = read_hermes_store(path)
    rows = {s["id"]: SessionRow.from_mapping(s) for s in store.sessions}
    yield database, rows
    database.close()


def contract(db, rows, statement: str, q: str, limit: int) -> list[tuple[str, str]]:
    """GROUP BY CONVERSATION by the query-time contract with an unlimited budget, over the
    statement's own ranking (the same statement without grouping, every candidate)."""
    ranked = db.execute(statement.format(group="", limit=10_000), q=q).rows
    resolver = LineageResolver(rows.get, budget=10 * len(rows))
    out, seen = [], set()
    for r in ranked:
        res = resolver.resolve(r.session_id)
        if res.resolved and res.root not in seen:
            seen.add(res.root)
            out.append((r.session_id, res.root))
    return out[:limit]


@pytest.mark.parametrize("using", ["LEXICAL", "HYBRID"])
@pytest.mark.parametrize("q", QUERIES)
def test_grouping_by_stored_roots_is_the_contract_with_an_unlimited_budget(acceptance, using,
                                                                           q):
    db, rows = acceptance
    statement = ("SEARCH messages MATCHING :q USING " + using +
                 " FUSE RRF (k = 60, window = 10000) {group}LIMIT {limit}")
    for limit in (3, 10, 100):
        result = db.execute(statement.format(group="GROUP BY CONVERSATION ", limit=limit), q=q)
        assert result.truncated is False
        assert Reason.LINEAGE_BUDGET_TRUNCATED not in [w.code for w in result.warnings]
        got = [(r.session_id, r.conversation_root) for r in result.rows]
        assert got == contract(db, rows, statement, q, limit)
        assert result.stats["conversation"]["lineage"]["fetches"] == 0


def test_the_deep_chain_is_one_conversation(acceptance):
    db, _ = acceptance
    result = db.execute("SEARCH messages MATCHING 'omega' USING HYBRID GROUP BY CONVERSATION")
    assert [(r.conversation_root, result.truncated) for r in result.rows][:1] == [("d0", False)]
    assert sum(r.conversation_root == "d0" for r in result.rows) == 1
    assert db.sessions.verify_lineage().ok
