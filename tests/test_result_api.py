"""The Python result API: len, iteration, indexing and slicing agree for every statement;
to_dicts / to_pandas / to_arrow; repr and _repr_html_; aware datetimes; py.typed."""

from __future__ import annotations

import builtins
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
