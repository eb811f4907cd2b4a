"""Write-time lineage (issue 14): every session row stores its conversation root, kept by each
write that can change it; `verify_lineage` and SHOW LINEAGE compare it with the walk."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_rows import forget_roots, write_session_row

import recallql
from recallql.engine.reasons import Reason
from recallql.index.embedders import HashEmbedder
from recallql.sessions import roots
from recallql.sessions.lineage import Resolution, ResolutionStatus, UnresolvedReason

RESOLVED = ResolutionStatus.RESOLVED


@pytest.fixture
def db():
    database = recallql.connect(embedder=HashEmbedder(16), clock=lambda: 1_760_000_000.0)
    yield database
    database.close()


def stored(db, *ids: str) -> dict[str, tuple]:
    """`{id: (root, status, depth)}` as stored."""
    with db.read_transaction() as conn:
        found = db.sessions.stored_roots(conn, list(ids))
    return {sid: (None if r is None else (r.root, str(r.reason or r.status), r.depth))
            for sid, r in found.items()}


def resolved(root: str, depth: int) -> tuple:
    return (root, "resolved", depth)


# -- each write keeps the roots ------------------------------------------------------------------


def test_create_stores_the_root_of_a_continuation(db):
    db.sessions.create("root", "a")
    db.sessions.close("root", "compression")
    db.sessions.create("mid", "a", parent="root")
    db.sessions.close("mid", "compression")
    db.sessions.create("tip", "a", parent="mid")
    db.sessions.create("branch", "a", parent="tip", branched_from="tip")
    assert stored(db, "root", "mid", "tip", "branch") == {
        "root": resolved("root", 0), "mid": resolved("root", 1), "tip": resolved("root", 2),
        "branch": resolved("branch", 0)}
    assert db.sessions.verify_lineage().ok


def test_closing_a_parent_by_compression_moves_its_descendants(db):
    db.sessions.create("p", "a")
    db.sessions.create("c", "a", parent="p")  # p still open: c starts its own conversation
    db.sessions.create("g", "a", parent="c")
    db.sessions.close("c", "compression")
    assert stored(db, "c", "g") == {"c": resolved("c", 0), "g": resolved("c", 1)}
    db.sessions.close("p", "compression")  # now c continues p, and g with it
    assert stored(db, "p", "c", "g") == {"p": resolved("p", 0), "c": resolved("p", 1),
                                         "g": resolved("p", 2)}
    assert db.sessions.verify_lineage().ok


def test_archiving_an_open_parent_keeps_its_child_apart(db):
    db.sessions.create("p", "a")
    db.sessions.create("c", "a", parent="p")
    db.sessions.archive("p")  # closes it with end_reason 'archived': not a continuation
    assert stored(db, "c") == {"c": resolved("c", 0)}
    assert db.sessions.verify_lineage().ok


def test_a_parent_created_after_its_orphan_adopts_it(db):
    write_session_row(db, "orphan", parent="late")  # as an import may write it
    assert stored(db, "orphan") == {"orphan": (None, "missing_parent", 0)}
    db.sessions.create("late", "a")
    assert stored(db, "orphan") == {"orphan": resolved("orphan", 0)}  # late is open
    db.sessions.close("late", "compression")
    assert stored(db, "orphan") == {"orphan": resolved("late", 1)}


def test_a_cycle_and_what_continues_it_are_unresolved(db):
    write_session_row(db, "a", parent="b")
    write_session_row(db, "b", parent="a")
    db.sessions.close("a", "compression")
    db.sessions.close("b", "compression")
    db.sessions.create("tail", "a", parent="a")
    assert stored(db, "a", "b", "tail") == {
        "a": (None, "cycle", 0), "b": (None, "cycle", 0), "tail": (None, "cycle", 0)}
    assert db.sessions.verify_lineage().ok


def test_a_10000_deep_chain_moves_in_one_batch(db):
    """Changing the end reason at the top of a 10,000-deep chain rewrites every root below it
    in the one transaction of that write (the time is benchmarks/bench_lineage.py's)."""
    with db.store.transaction() as conn:
        conn.execute("INSERT INTO sessions (id, agent_id, status, started_at) "
                     "VALUES ('top', 'a', 'open', 0)")
        conn.executemany(
            "INSERT INTO sessions (id, agent_id, status, parent_session_id, end_reason, "
            "started_at) VALUES (?, 'a', 'closed', ?, 'compression', 0)",
            [(f"s{i}", "top" if i == 0 else f"s{i - 1}") for i in range(10_000)])
        first = roots.refresh(conn, ["top"])
    assert (first.affected, first.changed) == (10_001, 10_001)
    assert stored(db, "s9999")["s9999"] == resolved("s0", 9999)  # top is open: s0 is a root
    with db.store.transaction() as conn:
        conn.execute("UPDATE sessions SET end_reason = 'compression' WHERE id = 'top'")
        update = roots.refresh(conn, ["top"])
    assert (update.affected, update.changed) == (10_001, 10_000)
    assert stored(db, "s9999")["s9999"] == resolved("top", 10_000)
    assert db.sessions.verify_lineage().ok


def test_appending_to_a_chain_recomputes_one_session(db):
    db.sessions.create("s0", "a")
    for i in range(1, 50):
        db.sessions.close(f"s{i - 1}", "compression")
        db.sessions.create(f"s{i}", "a", parent=f"s{i - 1}")
    with db.store.transaction() as conn:
        conn.execute("INSERT INTO sessions (id, agent_id, status, parent_session_id, "
                     "started_at) VALUES ('s50', 'a', 'open', 's49', 0)")
        update = roots.refresh(conn, ["s50"])
    assert (update.affected, update.changed) == (1, 1)  # the parent's stored root is read


# -- reads: stored roots, the walk where none is stored --------------------------------------------


def test_a_session_without_a_stored_root_is_walked(db):
    db.sessions.create("root", "a")
    db.sessions.close("root", "compression")
    db.sessions.create("tip", "a", parent="root")
    with db.store.transaction() as conn:
        conn.execute("UPDATE sessions SET lineage_status = NULL WHERE id = 'tip'")
    with db.read_transaction() as conn:
        resolver = db.sessions.resolver(conn)
        assert resolver.resolve("tip") == Resolution("root", RESOLVED, None, 1)
        assert resolver.resolve("root") == Resolution("root", RESOLVED, None, 0)
        assert resolver.resolve("nobody").reason is UnresolvedReason.MISSING_SESSION
        stats = resolver.stats.describe()
    assert (stats["stored"], stats["fetches"]) == (1, 2)  # tip and root walked, root stored
    report = db.sessions.verify_lineage()
    assert report.unmaintained == ["tip"] and not report.ok


def test_opening_as_a_writer_heals_rows_without_a_stored_root(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.sessions.create("root", "a")
        db.sessions.close("root", "compression")
        db.sessions.create("tip", "a", parent="root")
        forget_roots(db)
    with recallql.connect(path, readonly=True, embedder=HashEmbedder(16)) as reader:
        assert reader.sessions.verify_lineage().unmaintained == ["root", "tip"]
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        assert stored(db, "tip") == {"tip": resolved("root", 1)}
        assert db.sessions.verify_lineage().ok


# -- verify and SHOW LINEAGE report disagreement -----------------------------------------------


def tamper(db, sid: str, root: str) -> None:
    with db.store.transaction() as conn:
        conn.execute("UPDATE sessions SET conversation_root = ? WHERE id = ?", (root, sid))


def test_verify_names_a_stored_root_the_walk_disagrees_with(db):
    db.sessions.create("root", "a")
    db.sessions.close("root", "compression")
    db.sessions.create("tip", "a", parent="root")
    tamper(db, "tip", "elsewhere")
    report = db.sessions.verify_lineage()
    assert not report.ok and report.sessions == 2 and report.stored == 2
    assert [(m.session_id, m.stored, m.walked) for m in report.mismatches] == [
        ("tip", "elsewhere", "root")]
    assert "tip: stored elsewhere, walk gives root" in report.to_text()


def test_check_reports_a_stored_root_the_walk_disagrees_with(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.sessions.create("root", "a")
        db.sessions.close("root", "compression")
        db.sessions.create("tip", "a", parent="root")
        assert db.check().ok and not db.check().problems
        tamper(db, "tip", "elsewhere")
        report = db.check()
    assert not report.ok
    assert [(p.severity, p.kind, p.detail) for p in report.problems] == [
        ("error", "lineage", "session 'tip': stored conversation root elsewhere, the lineage "
                             "walk gives root")]
    assert report.problems[0].file == str(path / "meta.sqlite")
    assert recallql.api.check_database(path).problems == report.problems


def test_check_warns_of_sessions_without_a_stored_root(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.sessions.create("root", "a")
        forget_roots(db)
    report = recallql.api.check_database(path)  # read-only: nothing is healed
    assert report.ok
    assert [(p.severity, p.kind) for p in report.problems] == [("warning", "lineage")]
    assert report.problems[0].detail.startswith("1 session(s) have no stored conversation "
                                                "root ('root')")


def test_recallql_check_exits_1_naming_the_session(tmp_path):
    from typer.testing import CliRunner

    from recallql.cli import app

    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.sessions.create("root", "a")
        db.sessions.close("root", "compression")
        db.sessions.create("tip", "a", parent="root")
        tamper(db, "tip", "elsewhere")
    result = CliRunner().invoke(app, ["check", "--db", str(path)])
    assert result.exit_code == 1
    assert "[lineage] session 'tip': stored conversation root elsewhere" in result.output


def test_show_lineage_shows_the_stored_root_and_warns_on_disagreement(db):
    db.sessions.create("root", "a")
    db.sessions.close("root", "compression")
    db.sessions.create("tip", "a", parent="root")
    result = db.execute("SHOW LINEAGE 'tip'")
    assert [(r["conversation_root"], r["stored_root"]) for r in result.records] == [
        ("root", "root"), ("root", "root")]
    assert result.warnings == []
    tamper(db, "tip", "elsewhere")
    result = db.execute("SHOW LINEAGE 'tip'")
    assert [r["stored_root"] for r in result.records] == ["elsewhere", "root"]
    (warning,) = result.warnings
    assert warning.code is Reason.LINEAGE_ROOT_MISMATCH
    assert "tip" in warning.message and "elsewhere" in warning.message


# -- upgrade of a store an earlier version wrote ---------------------------------------------------


def make_older(path) -> None:
    """Strip what this version adds (the lineage columns; `source`/`agent_id` on messages), so
    the store looks as an earlier version wrote it."""
    conn = sqlite3.connect(path / "meta.sqlite")
    for name, _ in roots.COLUMNS:
        conn.execute(f"ALTER TABLE sessions DROP COLUMN {name}")
    fields = ('{"session_id": "str", "message_id": "int", "seq": "int", "role": "str", '
              '"active": "bool", "compacted": "bool"}')
    conn.execute("UPDATE collections SET fields = ? WHERE name = 'messages'", (fields,))
    conn.execute("UPDATE items SET fields = json_remove(fields, '$.source', '$.agent_id')")
    conn.commit()
    conn.close()


def build_chain(db) -> None:
    db.sessions.create("root", "agent-x")
    db.messages.append("root", "user", "alpha at the root")
    db.sessions.close("root", "compression")
    db.sessions.create("tip", "agent-x", parent="root", source="telegram")
    db.messages.append("tip", "user", "alpha at the tip")


GROUPED = "SEARCH messages MATCHING 'alpha' USING LEXICAL GROUP BY CONVERSATION"


def test_an_older_store_reads_by_the_walk_and_upgrades_when_a_writer_opens_it(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        build_chain(db)
    make_older(path)
    with recallql.connect(path, readonly=True, embedder=HashEmbedder(16)) as reader:
        result = reader.execute(GROUPED)  # no stored roots: the query-time walk
        assert [(r.session_id, r.conversation_root) for r in result.rows] == [("tip", "root")]
        assert result.stats["conversation"]["lineage"]["fetches"] == 2
        with pytest.raises(recallql.QuerySemanticError, match="unknown field 'source'"):
            reader.execute("SEARCH messages MATCHING 'alpha' WHERE source = 'telegram'")
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:  # the upgrade
        assert db.sessions.verify_lineage().ok
        result = db.execute(GROUPED)
        assert [(r.session_id, r.conversation_root) for r in result.rows] == [("tip", "root")]
        assert result.stats["conversation"]["lineage"]["fetches"] == 0
        rows = db.execute("SEARCH messages MATCHING 'alpha' WHERE source = 'telegram'").rows
        assert [(r.session_id, r.fields["agent_id"]) for r in rows] == [("tip", "agent-x")]
        db.messages.append("tip", "user", "alpha once more")
        assert len(db.execute("SEARCH messages MATCHING 'alpha' WHERE agent_id = 'agent-x'"
                              ).rows) == 3


def test_two_writers_opening_an_older_store_at_once_both_open(tmp_path, monkeypatch):
    """Found by trials: a writer read that `messages` lacks `source`/`agent_id`, another
    process opening the store at the same time added them first, and the first one's
    connect failed with "collection 'messages' already has field(s) ['agent_id', 'source']"
    (several MCP servers started at once after an upgrade). The writer reads again under the
    writer lock."""
    from recallql.index.metadata import MetadataStore

    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        build_chain(db)
    make_older(path)
    real = MetadataStore.collection
    raced = []

    def collection(self, name, conn=None):
        row = real(self, name, conn)
        if name == "messages" and row is not None and "source" not in row.info.fields \
                and not raced:
            raced.append(True)  # the other process opens (and upgrades) right after this read
            recallql.connect(path, embedder=HashEmbedder(16)).close()
        return row

    monkeypatch.setattr(MetadataStore, "collection", collection)
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        assert raced
        assert {"source", "agent_id"} <= set(db.store.collection("messages").fields)
        rows = db.execute("SEARCH messages MATCHING 'alpha' WHERE source = 'telegram'").rows
        assert [(r.session_id, r.fields["agent_id"]) for r in rows] == [("tip", "agent-x")]
        assert db.check().ok


# -- property: any sequence of writes leaves every stored root equal to the walk -----------------

_IDS = [f"s{i}" for i in range(8)]
_REASONS = ["compression", "compression", "branched", "new_session", "user_exit"]
_write = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(_IDS), st.sampled_from([None, *_IDS]),
              st.sampled_from(["cli", "tool", "subagent"]), st.sampled_from([None, *_IDS])),
    st.tuples(st.just("close"), st.sampled_from(_IDS), st.sampled_from(_REASONS)),
    st.tuples(st.just("archive"), st.sampled_from(_IDS)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_write, min_size=1, max_size=14))
def test_stored_roots_always_equal_the_walk(writes):
    with recallql.connect(embedder=HashEmbedder(4)) as db:
        for write in writes:
            _apply(db, write)
        report = db.sessions.verify_lineage()
        assert report.ok, report.to_text()


def _apply(db, write) -> None:
    kind, sid, *args = write
    exists = db.sessions.get(sid) is not None
    if kind == "create" and not exists:
        parent, source, marker = args
        # a raw row may point at a missing parent or at itself, as an import may write it
        write_session_row(db, sid, parent=parent, source=source, branched_from=marker)
    elif kind == "close" and exists and db.sessions.get(sid).status == "open":
        db.sessions.close(sid, args[0])
    elif kind == "archive" and exists:
        db.sessions.archive(sid)
