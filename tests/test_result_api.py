"""The Python result API: len, iteration, indexing and slicing agree for every statement;
to_dicts / to_pandas / to_arrow; repr and _repr_html_; aware datetimes; py.typed."""

from __future__ import annotations

import builtins
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import recallql
from recallql.api import HashEmbedder

STATEMENTS = [
    "SEARCH docs MATCHING 'backup' LIMIT 5",
    "RETRIEVE 3 FROM docs",
    "SEARCH messages MATCHING 'backup' GROUP BY CONVERSATION",
    "SHOW COLLECTIONS",
    "DESCRIBE docs",
    "SHOW SESSIONS",
    "SHOW SESSION 's-1'",
    "SHOW LINEAGE 's-1'",
]


@pytest.fixture(scope="module")
def db():
    database = recallql.connect(embedder=HashEmbedder(), clock=lambda: 1_767_225_600.0)
    database.ingest("docs", [
        {"id": "a", "title": "Backup policy", "body": "keep daily backups 30 days",
         "created_at": "2025-03-01T12:00:00Z", "tags": ["ops"]},
        {"id": "b", "title": "Restore", "body": "restore a backup from the archive",
         "created_at": "2025-06-01"},
        {"id": "c", "title": "Upgrades", "body": "pg_upgrade then analyze"},
    ])
    database.create_collection("tickets", fields={"due": datetime, "team": str},
                               embedder=HashEmbedder())
    database.ingest("tickets", [{"id": "t1", "title": "Backup disk", "body": "full",
                                 "due": "2025-02-03T04:05:06Z", "team": "ops"}])
    database.sessions.create("s-1", "agent-7")
    database.messages.append("s-1", "user", "where is the backup?")
    yield database
    database.close()


@pytest.mark.parametrize("statement", STATEMENTS)
def test_len_iteration_indexing_and_to_dicts_agree(db, statement):
    result = db.execute(statement)
    entries = list(result)
    assert len(result) == len(entries) == len(result.to_dicts()) > 0
    assert [result[i] for i in range(len(result))] == entries
    assert result[-1] == entries[-1]
    assert list(result[1:]) == entries[1:] and len(result[:1]) == 1
    with pytest.raises(IndexError):
        result[len(result)]
    with pytest.raises(TypeError, match="integers or slices"):
        result["id"]


def test_search_rows_are_rows_and_records_are_dicts(db):
    search = db.execute("SEARCH docs MATCHING 'backup' LIMIT 5")
    assert isinstance(search[0], recallql.Row) and search[0].id == search.ids()[0]
    shown = db.execute("SHOW SESSIONS")
    assert shown[0]["id"] == "s-1" and shown[0]["agent_id"] == "agent-7"


def test_slice_keeps_the_statement_and_is_a_result(db):
    result = db.execute("SEARCH docs MATCHING 'backup' LIMIT 5")
    head = result[:1]
    assert isinstance(head, recallql.Result)
    assert head.statement == result.statement and head.ids() == result.ids()[:1]


def test_to_dicts_rows_flat_with_aware_datetimes(db):
    result = db.execute("SEARCH docs MATCHING 'backup' WHERE tags CONTAINS 'ops'")
    (row,) = result.to_dicts()
    assert row["rank"] == 1 and row["id"] == "a" and row["collection"] == "docs"
    assert row["score"] == result[0].score and row["tags"] == ["ops"]
    assert row["created_at"] == datetime(2025, 3, 1, 12, tzinfo=UTC)
    assert row["created_at"].tzinfo is not None
    assert row["reasons"] == [r.render() for r in result[0].reasons]
    assert "session_id" not in row  # no row of this result has one


def test_row_fields_hold_epoch_seconds_and_to_dicts_datetimes(db):
    """The documented split (`Row` docstring, README): `Row.fields` holds stored timestamps as
    epoch seconds UTC (floats), `to_dicts()` as aware UTC datetimes of the same instant."""
    (row,) = db.execute("SEARCH tickets MATCHING 'backup'").rows
    (flat,) = db.execute("SEARCH tickets MATCHING 'backup'").to_dicts()
    assert (row.fields["due"], type(row.fields["due"])) == (1738555506.0, float)
    assert flat["due"] == datetime(2025, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert datetime.fromtimestamp(row.fields["due"], tz=UTC) == flat["due"]
    (a,) = db.execute("SEARCH docs MATCHING 'backup' WHERE tags CONTAINS 'ops'").rows
    assert a.fields["created_at"] == 1740830400.0


def test_declared_timestamp_fields_become_datetimes(db):
    (row,) = db.execute("SEARCH tickets MATCHING 'backup'").to_dicts()
    assert row["due"] == datetime(2025, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert row["created_at"] is None


def test_message_rows_carry_session_fields(db):
    (row,) = db.execute("SEARCH messages MATCHING 'backup'").to_dicts()
    assert row["session_id"] == "s-1" and row["message_id"] == 1 and row["role"] == "user"


def test_record_timestamps_become_datetimes(db):
    (record,) = db.execute("SHOW SESSIONS").to_dicts()
    assert record["started_at"] == datetime(2026, 1, 1, tzinfo=UTC)
    assert record["ended_at"] is None
    assert list(record) == db.execute("SHOW SESSIONS").columns


def test_to_pandas(db):
    frame = db.execute("SEARCH docs MATCHING 'backup' LIMIT 5").to_pandas()
    assert list(frame["id"]) == db.execute("SEARCH docs MATCHING 'backup' LIMIT 5").ids()
    assert str(frame["created_at"].dtype).endswith("UTC]")
    sessions = db.execute("SHOW SESSIONS").to_pandas()
    assert list(sessions.columns) == db.execute("SHOW SESSIONS").columns
    assert sessions.loc[0, "id"] == "s-1"


def test_to_arrow(db):
    table = db.execute("SEARCH docs MATCHING 'backup' LIMIT 5").to_arrow()
    assert table.num_rows == 3 and table.column("id").to_pylist()[0] in {"a", "b", "c"}
    assert str(table.schema.field("created_at").type) == "timestamp[us, tz=UTC]"
    described = db.execute("SHOW COLLECTIONS").to_arrow()  # per-row mappings as JSON text
    assert described.num_rows == 3 and '"tags": "list[str]"' in described.column(
        "fields").to_pylist()[0]


def test_an_empty_result_converts(db):
    empty = db.execute("SEARCH docs MATCHING 'zzzz' USING LEXICAL")
    assert len(empty) == 0 and list(empty) == [] and empty.to_dicts() == []
    assert empty.to_pandas().shape == (0, 5) and empty.to_arrow().num_rows == 0


@pytest.mark.parametrize(("method", "module", "extra"),
                         [("to_pandas", "pandas", "pandas"), ("to_arrow", "pyarrow", "arrow")])
def test_missing_optional_package_names_the_extra(db, monkeypatch, method, module, extra):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"No module named {module!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    result = db.execute("SEARCH docs MATCHING 'backup'")
    with pytest.raises(ImportError, match=rf"pip install 'recallql\[{extra}\]'"):
        getattr(result, method)()


def test_repr_is_short_and_html_escapes(db):
    db.ingest("docs", [{"id": "<x>", "title": "backup <b>bold</b>", "body": "backup"}])
    result = db.execute("SEARCH docs MATCHING 'backup' LIMIT 10")
    text = repr(result)
    assert text.startswith("<Result SEARCH docs MATCHING 'backup' …: 4 rows [")
    assert len(text) < 200 and ", …]>" not in text
    assert repr(db.execute("SHOW SESSIONS")) == "<Result SHOW SESSIONS: 1 record>"
    page = result._repr_html_()
    assert "<table>" in page and "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold" not in page
    db.delete("docs", ["<x>"])


def test_repr_escapes_control_characters_of_the_statement(db):
    """Was: a bound MATCHING text with ESC printed it raw in the repr (a REPL echoing the
    result obeyed `\x1b[2J`); row ids were escaped already."""
    text = repr(db.execute("SEARCH docs MATCHING :q LIMIT 1", q="backup\x1b[2J\u202e"))
    assert text.startswith("<Result SEARCH docs MATCHING 'backup\\x1b[2J\\u202e' …: 1 row [")
    assert "\x1b" not in text and "\u202e" not in text


def test_package_is_typed():
    assert (Path(recallql.__file__).parent / "py.typed").is_file()


USER_CODE = """\
import recallql
from recallql import Database, Explain, Result, Row


def top_ids(db: Database, q: str) -> list[str]:
    return db.execute("SEARCH docs MATCHING :q LIMIT 3", q=q).ids()


def best(result: Result) -> Row:
    return result.rows[0]


def root_operator(explain: Explain) -> str:
    return explain.plan.operator


with recallql.connect() as db:
    notices = [w.message for w in db.execute("SEARCH docs MATCHING 'x'").warnings]
    sessions = db.execute("SHOW SESSIONS").records or []
    root_operator(db.explain("SEARCH docs MATCHING 'x'"))
    wrong: int = recallql.connect()
"""


def test_type_checkers_see_the_public_names(tmp_path, monkeypatch):
    """`import recallql` names its API lazily (a module `__getattr__`); a type checker must
    still see each name's real type: `mypy --strict` accepts the natural uses above and
    rejects only the last line (were the names `Any`, it would reject nothing)."""
    pytest.importorskip("mypy")
    monkeypatch.setenv("MYPYPATH", str(Path(recallql.__file__).parents[1]))
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    # in a process of its own: mypy raises the interpreter's recursion limit for good
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                          "--config-file", "mypy.ini", "--cache-dir", "cache", "-c", USER_CODE],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = run.stdout
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out + run.stderr
    assert errors[0].startswith(f"<string>:{USER_CODE.count(chr(10))}: error: Incompatible "
                                'types in assignment (expression has type "Database", '
                                'variable has type "int")'), out


@pytest.mark.parametrize("statement", ["EXPLAIN SEARCH docs MATCHING 'backup' LIMIT 5",
                                       "EXPLAIN ANALYZE RETRIEVE 3 FROM docs"])
def test_explain_is_a_sequence_of_its_rows(db, statement):
    explain = db.execute(statement)
    assert isinstance(explain, recallql.engine.models.Explain)
    entries = list(explain)
    assert entries == explain.result.rows and all(isinstance(r, recallql.Row) for r in entries)
    assert len(explain) == len(entries) == len(explain.to_dicts()) > 0
    assert explain[0] == entries[0] and explain[-1] == entries[-1]
    assert isinstance(explain[:1], recallql.Result) and explain[:1].ids() == [entries[0].id]
    assert explain.to_dicts() == explain.result.to_dicts()
    with pytest.raises(IndexError):
        explain[len(explain)]
    with pytest.raises(TypeError, match="integers or slices"):
        explain["plan"]
    restored = recallql.engine.models.Explain.model_validate_json(explain.to_json())
    assert list(restored) == entries


@pytest.mark.parametrize("statement", ["SEARCH docs MATCHING 'backup' FOR SESSION 's-1' LIMIT 2",
                                       "SEARCH docs MATCHING 'backup' FOR SESSION 'nope'",
                                       "RETRIEVE 3 FROM tickets"])
def test_an_explain_reads_like_the_result_it_explains(db, statement):
    """`db.execute` is typed `Result | Explain`: every `Result` accessor also works on an
    `Explain`, giving its result's value (so code taking either needs no isinstance)."""
    explain = db.execute("EXPLAIN " + statement)
    result = explain.result
    names = [n for n in recallql.Result.model_fields if n != "statement"]
    assert {"warnings", "session_snapshot", "stats", "records", "rows"} <= set(names)
    for name in names:
        assert getattr(explain, name) == getattr(result, name), name
    assert explain.ids() == result.ids() and explain.ids() == [row.id for row in explain]
    assert explain.model_dump().keys() == recallql.Explain.model_fields.keys()  # no new fields
    if "nope" in statement:
        assert [w.code for w in explain.warnings] == [recallql.Reason.SESSION_NOT_FOUND]


@pytest.mark.parametrize("package", ["recallql", "recallql.engine"])
def test_every_lazy_export_is_imported_for_type_checkers(package):
    """The `if TYPE_CHECKING:` imports of a lazily exporting package are its `_EXPORTS`, name
    for name and module for module (a name added to one only would be `Any` to mypy)."""
    import ast
    import importlib

    module = importlib.import_module(package)
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "_TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                for alias in stmt.names:
                    assert alias.asname == alias.name  # an explicit re-export
                    imported[alias.name] = stmt.module
    assert imported == module._EXPORTS


def test_an_explain_shows_as_one_line_and_prints_as_its_text(db):
    """At the prompt an `Explain` is one line, like a `Result` (it was pydantic's dump of
    the whole plan tree and every reason); `print` shows what ``recallql explain`` prints."""
    explain = db.explain("SEARCH docs MATCHING 'backup: the policy' LIMIT 2", analyze=True)
    first, second = explain.rows
    assert repr(explain) == (
        "<Explain ANALYZE SEARCH docs MATCHING 'backup: …: plan TopK, 2 rows "
        f"[{first.id!r} {first.score:.5f}, {second.id!r} {second.score:.5f}]>")
    assert str(explain) == explain.to_text() and "\n#1 " in str(explain)
    as_json = db.execute("EXPLAIN VERBOSE FORMAT JSON SEARCH docs MATCHING 'zzz' LIMIT 1")
    assert repr(as_json).startswith("<Explain VERBOSE SEARCH docs MATCHING 'zzz' …: plan TopK, ")
    assert str(as_json) == as_json.to_json()
    assert repr(db.explain("RETRIEVE 3 FROM docs WHERE id = 'nothing'")) == (
        "<Explain RETRIEVE 3 FROM docs …: plan TopK, 0 rows>")


def test_a_reason_prints_as_its_explain_line_and_shows_only_its_fields(db):
    row = db.execute("SEARCH docs MATCHING 'backup' LIMIT 1")[0]
    lexical = row.reasons[0]
    assert lexical.code == recallql.Reason.LEXICAL_MATCH
    assert str(lexical) == lexical.render() == (
        f"LEXICAL_MATCH(rank=1, bm25={lexical.bm25:.3f}, norm=1.00000) +0.50000")
    assert repr(lexical) == (
        "ReasonEntry(code=<Reason.LEXICAL_MATCH: 'LEXICAL_MATCH'>, contribution=0.5, "
        f"leg='lexical', rank=1, bm25={lexical.bm25!r}, norm=1.0)")
    assert "None" not in repr(row.reasons)


def test_rows_go_in_sets(db):
    """A frozen `Row` is hashable (pydantic's field hash failed on its `fields` dict), so
    the rows of two searches deduplicate in a set."""
    first = db.execute("SEARCH docs MATCHING 'backup'")
    again = db.execute("SEARCH docs MATCHING 'backup'")
    assert len(first) >= 2 and list(first) == list(again)
    assert len(set(first) | set(again)) == len(first)
    assert {row: row.score for row in first}[again[0]] == again[0].score
