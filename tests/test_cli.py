"""The ``recallql`` CLI through its real entry point (``python -m recallql.cli`` in a subprocess),
on a real database on disk with the hash embedder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [
    {"id": "backup", "title": "Backup retention policy", "body": "Keep daily backups for 30 days.",
     "created_at": "2024-01-01", "tags": ["ops"]},
    {"id": "creds", "title": "Rotate credentials", "body": "Rotate API keys every 90 days.",
     "created_at": "2023-06-01", "tags": ["security"]},
    {"id": "quote", "title": "It's \"quoted\"", "body": "O'Reilly wrote [bold]this[/bold].",
     "tags": ["it's"]},
]


def cli(*args: str, stdin: str | None = None, cwd: Path | None = None,
        columns: str | None = "120") -> subprocess.CompletedProcess:
    """Run ``python -m recallql.cli ARGS`` and capture its output (``COLUMNS`` unset when
    `columns` is None)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("RECALLQL_DB", None)
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "recallql.cli", *args], input=stdin,
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """A database made by ``recallql ingest`` from a small directory (JSONL + Markdown)."""
    root = tmp_path_factory.mktemp("cli")
    data = root / "data"
    data.mkdir()
    (data / "items.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (data / "runbook.md").write_text("# Restore runbook\n\nRestore the latest snapshot first.\n")
    path = root / "db"
    done = cli("ingest", str(data), "--db", str(path), "--embedder", "hash")
    assert done.returncode == 0, done.stderr
    assert "ingested 4 items into docs" in done.stdout
    return path


def test_query_prints_a_table(db):
    done = cli("query", "SEARCH docs MATCHING 'backup retention' LIMIT 2", "--db", str(db))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split()[:2] == ["1", "backup"] for line in lines if line.strip())
    assert "(2 rows)" in done.stdout


def test_piped_tables_keep_the_why_column_and_whole_words(db):
    done = cli("query", "SEARCH docs MATCHING 'backup retention' LIMIT 2", "--db", str(db),
               columns=None)
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()[0].split()
    assert head == ["#", "id", "score", "date", "text", "why"]
    assert "lex#1" in done.stdout and "2024-01-01" in done.stdout


@pytest.mark.parametrize("statement", ["SEARCH docs MATCHING 'backup retention' LIMIT 2",
                                       "SHOW COLLECTIONS", "DESCRIBE docs"],
                         ids=["search", "show", "describe"])
def test_piped_tables_have_no_trailing_spaces_and_keep_their_columns(db, statement):
    """rich pads every line's last cell to the column's width; in a pipe that was trailing
    spaces on every line (README shows none)."""
    done = cli("query", statement, "--db", str(db))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    last = lines[0].rindex(" ") + 1  # where the last column starts, under its heading
    rows = [line for line in lines[2:] if len(line) > last and not line.startswith("(")]
    assert rows and all(line[last - 1] == " " != line[last] for line in rows), rows


def test_show_session_is_the_vertical_view_of_sessions_show(db):
    assert cli("sessions", "create", "s-view", "--agent", "a", "--db", str(db)).returncode == 0
    shown = cli("sessions", "show", "s-view", "--db", str(db))
    queried = cli("query", "SHOW SESSION 's-view'", "--db", str(db))
    assert shown.returncode == 0 and queried.returncode == 0, queried.stderr
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert lines[0] == ["field", "value"] and ["status", "open"] in lines
    as_of = next(i for i, line in enumerate(lines) if line[0] == "as_of")
    assert [a for i, a in enumerate(lines) if i != as_of] == [
        a for i, a in enumerate(queried.stdout.splitlines()) for a in [a.split()]
        if i != as_of]


def test_query_json_parses(db):
    done = cli("query", "SEARCH docs MATCHING :q LIMIT :n", "-p", "q=rotate keys", "-p", "n=1",
               "--json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [row["id"] for row in result["rows"]] == ["creds"]
    reasons = result["rows"][0]["reasons"]
    assert sum(r["contribution"] for r in reasons) == pytest.approx(result["rows"][0]["score"])


def test_json_is_one_object_per_statement_per_line(db):
    done = cli("query", "SHOW COLLECTIONS; DESCRIBE docs", "--json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert {r["name"] for r in first["records"]} == {"docs", "messages"}
    assert "title" in {r["field"] for r in second["records"]}
    single = cli("query", "SHOW COLLECTIONS", "--json", "--db", str(db))
    assert single.stdout.count("\n") == 1 and json.loads(single.stdout)["columns"]


def test_json_timestamps_are_iso_utc_strings(db):
    for command in ("query", "explain"):
        done = cli(command, "SEARCH docs MATCHING 'backup retention' LIMIT 1", "--json",
                   "--db", str(db))
        payload = json.loads(done.stdout)
        row = (payload["result"] if command == "explain" else payload)["rows"][0]
        assert row["fields"]["created_at"] == "2024-01-01T00:00:00.000000Z"


@pytest.mark.parametrize(("args", "expected"), [
    (["query", "SEARCH docs MATCHING 'x' LIMIT ten"],
     {"type": "QuerySyntaxError", "line": 1, "column": 32}),
    (["explain", "SEARCH dcos MATCHING 'x'"],
     {"type": "QuerySemanticError", "line": 1, "column": 8, "hint": "did you mean 'docs'?"}),
    (["sessions", "show", "nope"], {"type": "SessionNotFound", "line": None}),
], ids=["syntax", "semantic", "data"])
def test_errors_under_json_are_a_json_object_on_stderr(db, args, expected):
    done = cli(*args, "--json", "--db", str(db))
    assert done.returncode == 1 and done.stdout == ""
    error = json.loads(done.stderr)
    assert error["error"] and expected.items() <= error.items(), error


def test_missing_database_under_json(tmp_path):
    done = cli("query", "SHOW COLLECTIONS", "--json", "--db", str(tmp_path / "none"))
    assert done.returncode == 1
    assert json.loads(done.stderr)["error"].startswith("no recallql database at")


def test_values_with_quotes_travel_as_parameters(db):
    done = cli("query", "SEARCH docs MATCHING :q WHERE tags CONTAINS :t", "-p", "q=O'Reilly",
               "-p", "t=it's", "--json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [row["id"] for row in result["rows"]] == ["quote"]
    assert result["statement"].count("'") >= 4  # canonical text quotes the bound values


def test_inferred_number_falls_back_to_text_where_text_is_needed(db):
    done = cli("query", "SEARCH docs MATCHING :q LIMIT :n", "-p", "q=30", "-p", "n=1", "--json",
               "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"][0]["id"] == "backup"


def test_markup_in_data_is_printed_verbatim(db):
    done = cli("query", "SEARCH docs MATCHING 'Reilly' LIMIT 1", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "[bold]this[/bold]" in done.stdout


def test_bad_query_exits_1_with_the_caret_on_stderr(db):
    done = cli("query", "SEARCH docs MATCHING 'x' LIMIT ten", "--db", str(db))
    assert done.returncode == 1
    assert "QuerySyntaxError" in done.stderr and "^^^" in done.stderr
    caret = next(line for line in done.stderr.splitlines() if "^^^" in line)
    source = next(line for line in done.stderr.splitlines() if "LIMIT ten" in line)
    assert source[caret.index("^"):].startswith("ten")
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("text", ["", "  ;  ", " -- only a comment"])
def test_a_query_without_a_statement_exits_1(db, text):
    done = cli("query", text, "--db", str(db))
    assert done.returncode == 1 and done.stdout == ""
    assert "error: no statement given" in done.stderr and "Traceback" not in done.stderr


def test_ingest_help_names_every_format():
    done = cli("ingest", "--help")
    assert "jsonl, json, text, cacm" in " ".join(done.stdout.split())


def test_help_lists_every_exit_code():
    assert "2 usage, 130 an ingest interrupted with Ctrl-C" in " ".join(
        cli("--help").stdout.split())


def test_python_dash_m_recallql_is_the_command_line():
    """`python -m recallql` runs the CLI, as `python -m pip` does (it said "No module named
    recallql.__main__"), for an environment whose scripts are not on PATH."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "recallql", "--version"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout == cli("--version").stdout != ""


def test_unknown_collection_is_a_semantic_error(db):
    done = cli("query", "SEARCH dcos MATCHING 'x'", "--db", str(db))
    assert done.returncode == 1 and "did you mean 'docs'?" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["query"], "Missing argument"),
    (["query", "SHOW COLLECTIONS", "--param", "novalue"], "name=value"),
    (["query", "SHOW COLLECTIONS", "-p", "x=1"], "not used by the statement: x"),
    (["explain", "SEARCH docs MATCHING 'x'", "-p", "x=1"], "not used by the statement: x"),
    (["query", "SEARCH docs MATCHING :q", "-p", "qq=1"],
     "not used by the statement: qq (did you mean 'q'?)"),
    (["query", "SEARCH docs MATCHING :q LIMIT :n", "-p", "q=a", "-p", "n=1", "-p", "zzz=1"],
     "not used by the statement: zzz (its parameters: :q, :n)"),
    (["query", "SHOW COLLECTIONS", "-p", "x=1"],
     "not used by the statement: x (it has no :name parameters)"),
    (["nosuchcommand"], "No such command"),
    (["explain", "SEARCH docs MATCHING 'x'", "--frobnicate"], "No such option"),
], ids=["missing-statement", "bad-param", "unused-param", "explain-unused-param",
        "unused-param-did-you-mean", "unused-param-lists-the-used", "unused-param-none-used",
        "unknown-command", "unknown-option"])
def test_usage_errors_exit_2(db, args, message):
    done = cli(*args, "--db", str(db))
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.parametrize(("args", "line", "caret"), [
    (["query", "SHOW COLLECTIONS; SEARCH docs MATCHING ? LIMIT 3"],
     "  SHOW COLLECTIONS; SEARCH docs MATCHING ? LIMIT 3", 39),
    (["query", "SEARCH docs MATCHING ?", "-p", "q=backup"], "  SEARCH docs MATCHING ?", 21),
    (["explain", "SEARCH docs MATCHING 'x' LIMIT ?"], "  SEARCH docs MATCHING 'x' LIMIT ?", 31),
], ids=["query-before-anything-runs", "query-with-a-named-value", "explain"])
def test_a_positional_parameter_is_refused_up_front_with_a_hint_for_a_named_one(db, args, line,
                                                                                 caret):
    """`-p` binds by name only, so a `?` failed as "missing value for parameter ?1" (after
    the statements before it had printed), or made every -p "not used by the statement"."""
    done = cli(*args, "--db", str(db))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        "ParameterError: a ? parameter takes its value by position; the command line gives "
        f"values only by name (-p name=value) (line 1, column {caret + 1})\n"
        "\n"
        f"{line}\n"
        f"  {' ' * caret}^\n"
        "  hint: use a named parameter :name instead (e.g. MATCHING :q) and give its value with "
        "-p name=value (-p q='disk full')\n")


def test_missing_database_is_a_clear_error(tmp_path):
    done = cli("query", "SHOW COLLECTIONS", "--db", str(tmp_path / "none"))
    assert done.returncode == 1
    assert "no recallql database at" in done.stderr and "recallql ingest" in done.stderr


def test_a_missing_default_database_points_at_the_demo_one_beside_it(tmp_path):
    """After `make demo`, `recallql query ...` without --db looked for ./recallql.db and
    suggested building a demo there, though the demo's database was ./recallql-demo.db."""
    import recallql

    recallql.connect(tmp_path / "recallql-demo.db", embedder=None).close()
    for args in (["query", "SHOW COLLECTIONS"], ["shell"], ["sessions", "list"]):
        done = cli(*args, cwd=tmp_path, stdin="")
        assert done.returncode == 1 and done.stderr.startswith(
            "error: no recallql database at recallql.db (the demo's database here is "
            "recallql-demo.db: pass --db recallql-demo.db; or "), (args, done.stderr)
    assert not (tmp_path / "recallql.db").exists()
    (tmp_path / "other").mkdir()  # no demo database there: no word of one
    assert cli("query", "SHOW COLLECTIONS", cwd=tmp_path / "other").stderr == (
        "error: no recallql database at recallql.db (create one with `recallql ingest FILES "
        "--db recallql.db` or `recallql demo --db recallql.db`)\n")


def test_shell_refuses_a_missing_database_unless_asked_to_create_it(tmp_path):
    missing = tmp_path / "none"
    done = cli("shell", "--db", str(missing), stdin="SHOW COLLECTIONS;\n")
    assert done.returncode == 1 and not missing.exists()
    assert "--create" in done.stderr and "recallql ingest" in done.stderr
    created = cli("shell", "--db", str(missing), "--create", stdin="SHOW COLLECTIONS;\n")
    assert created.returncode == 0 and "messages" in created.stdout
    assert created.stderr.startswith(
        f"created an empty database at {missing}; the shell only reads it: fill it with "
        f"`recallql ingest FILES --db {missing}` (or from Python)")


@pytest.mark.parametrize("command", [["query", "SHOW COLLECTIONS"], ["sessions", "list"],
                                     ["explain", "SEARCH docs MATCHING 'x'"], ["shell"]],
                         ids=" ".join)
def test_a_reader_given_another_directory_is_not_told_it_creates_one(tmp_path, command):
    """Readers never create a database, so the hint is an existing database directory (it
    said "or a new path to create one there")."""
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    done = cli(*command, "--db", str(other), stdin="")
    assert (done.returncode, " ".join(done.stderr.split())) == (1, (
        f"error: {other} is a directory but not a recallql database; pass --db an existing "
        "database directory (this command does not create one)")), done.stderr


@pytest.mark.parametrize("where", ["root", "group", "command"])
def test_db_works_before_the_command_on_its_group_and_after_it(tmp_path, where):
    """`recallql --db X sessions list`, `recallql sessions --db X list` and `recallql
    sessions list --db X` are one command (the group's --db was "No such option")."""
    db = str(tmp_path / "db")
    assert cli("sessions", "create", "s-1", "--agent", "a", "--db", db).returncode == 0
    args = {"root": ["--db", db, "sessions", "list", "--json"],
            "group": ["sessions", "--db", db, "list", "--json"],
            "command": ["sessions", "list", "--json", "--db", db]}[where]
    done = cli(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r["id"] for r in json.loads(done.stdout)["records"]] == ["s-1"]


def test_a_groups_db_wins_over_the_roots_and_a_commands_over_both(tmp_path):
    db, other = str(tmp_path / "db"), str(tmp_path / "other")
    assert cli("sessions", "create", "s-db", "--agent", "a", "--db", db).returncode == 0
    assert cli("sessions", "create", "s-other", "--agent", "a", "--db", other).returncode == 0
    group = cli("--db", other, "sessions", "--db", db, "list", "--json")
    command = cli("--db", other, "sessions", "--db", other, "list", "--json", "--db", db)
    for done in (group, command):
        assert done.returncode == 0, done.stderr
        assert [r["id"] for r in json.loads(done.stdout)["records"]] == ["s-db"]
    imported = cli("import", "--db", db, "hermes", str(tmp_path / "missing.db"))
    assert (imported.returncode, imported.stderr) == (
        1, f"error: {tmp_path / 'missing.db'}: no such file\n")


@pytest.mark.parametrize("args", [
    ["query", "SHOW COLLECTIONS", "--format", "JSON"],
    ["query", "SHOW COLLECTIONS", "-f", "Json"],
    ["sessions", "list", "--status", "OPEN", "--json"],
], ids=["format-JSON", "format-Json", "status-OPEN"])
def test_choices_ignore_case(db, args):
    """`--format JSON` was refused (exit 2): a choice's case does not matter."""
    lower = [a.lower() if a in ("JSON", "Json", "OPEN") else a for a in args]
    done, expected = cli(*args, "--db", str(db)), cli(*lower, "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == (expected.stdout, "")


@pytest.mark.parametrize("command", [["query", "SHOW COLLECTIONS"], ["shell"]])
def test_a_file_as_database_gets_a_hint_that_works(tmp_path, command):
    (tmp_path / "notes.txt").write_text("x")
    done = cli(*command, "--db", str(tmp_path / "notes.txt"), stdin="")
    assert done.returncode == 1 and "is a file, not a recallql database" in done.stderr
    assert "recallql ingest" not in done.stderr and "--create" not in done.stderr


def test_debug_is_accepted_after_the_subcommand(db):
    done = cli("query", "SHOW COLLECTIONS", "--debug", "--db", str(db))
    assert done.returncode == 0 and "messages" in done.stdout


def test_explain_text_json_and_analyze(db):
    text = cli("explain", "SEARCH docs MATCHING 'rotate' WITH RECENCY LIMIT 2", "--analyze",
               "--db", str(db))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("TopK: k=2 offset=0") and "rows=" in text.stdout
    assert "#1 creds" in text.stdout
    as_json = cli("explain", "SEARCH docs MATCHING :q", "-p", "q=rotate", "--json",
                  "--db", str(db))
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["plan"]["operator"] == "TopK"


def test_one_explain_format_in_query_and_explain(db):
    statement = "SEARCH docs MATCHING 'rotate keys' WITH RECENCY LIMIT 2"
    via_query = cli("query", f"EXPLAIN {statement}", "--db", str(db))
    via_explain = cli("explain", statement, "--db", str(db))
    assert via_query.returncode == 0 and via_explain.returncode == 0, via_query.stderr
    assert via_query.stdout == via_explain.stdout
    assert via_query.stdout.startswith("TopK: k=2 offset=0\n  RecencyBoost: ")


@pytest.mark.parametrize("command", ["query", "explain"])
def test_explain_format_json_prints_json(db, command):
    done = cli(command, "EXPLAIN FORMAT JSON SEARCH docs MATCHING 'rotate' LIMIT 1",
               "--db", str(db))
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["format"] == "json" and payload["plan"]["operator"] == "TopK"


@pytest.mark.parametrize("args", [("explain", "SEARCH docs MATCHING 'rotate' LIMIT 1", "--json"),
                                  ("query", "EXPLAIN SEARCH docs MATCHING 'rotate' LIMIT 1",
                                   "--json"),
                                  ("query", "EXPLAIN SEARCH docs MATCHING 'rotate' LIMIT 1",
                                   "--format", "jsonl")],
                         ids=["explain-json", "query-json", "query-jsonl"])
def test_explain_as_json_says_its_format_is_json(db, args):
    """`recallql explain --json` printed ``"format": "text"`` inside its JSON."""
    done = cli(*args, "--db", str(db))
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert (payload["format"], payload["plan"]["operator"]) == ("json", "TopK")


def test_explain_of_a_catalog_statement_exits_1(db):
    done = cli("explain", "SHOW COLLECTIONS", "--db", str(db))
    assert done.returncode == 1 and "EXPLAIN applies to SEARCH and RETRIEVE" in done.stderr
    assert done.stderr.endswith("  hint: SHOW and DESCRIBE have no plan or scores to explain: "
                                "run them as they are\n")


def test_explain_of_two_statements_points_at_the_second_with_a_hint_for_the_cli(db):
    """The parser's hint named db.execute and parse_script(), Python the command line user
    cannot call from here."""
    done = cli("explain", "SEARCH docs MATCHING 'x'; SEARCH docs MATCHING 'y'", "--db", str(db))
    assert done.returncode == 1
    assert done.stderr == (
        "QuerySyntaxError: expected one statement, found a second one (line 1, column 27)\n"
        "\n"
        "  SEARCH docs MATCHING 'x'; SEARCH docs MATCHING 'y'\n"
        "                            ^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "  hint: recallql explain takes one statement; explain several with recallql query "
        "\"EXPLAIN ...; EXPLAIN ...\"\n")


def test_explain_from_stdin_with_a_number_for_text(db):
    """`explain -` with `-p q=2024` (inferred a number, retried as the string MATCHING wants)
    read stdin again on the retry and failed with "found end of input"."""
    done = cli("explain", "-", "-p", "q=2024", "--db", str(db),
               stdin="SEARCH docs MATCHING :q LIMIT 1\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("TopK: k=1 offset=0\n")


def test_query_reads_statements_from_stdin(db):
    done = cli("query", "-", "--db", str(db), stdin="SHOW COLLECTIONS;\n")
    assert done.returncode == 0 and "messages" in done.stdout


def test_help_has_examples():
    done = cli("query", "--help")
    assert done.returncode == 0
    assert "Examples" in done.stdout and "--param" in done.stdout
    top = cli("--help")
    for command in ("ingest", "query", "explain", "shell", "sessions", "import", "demo", "bench"):
        assert command in top.stdout


COMMANDS = [["ingest"], ["query"], ["explain"], ["shell"], ["check"], ["vacuum"],
            ["reindex"], ["optimize"], ["demo"], ["bench"], ["mcp"],
            ["import", "hermes"], ["cluster", "serve"], *(["sessions", c] for c in (
                "list", "show", "lineage", "create", "annotate", "signal", "close", "archive",
                "sweep"))]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_examples_and_plain_placeholders(command):
    from typer.testing import CliRunner

    from recallql.cli import app

    done = CliRunner().invoke(app, [*command, "--help"], terminal_width=100)
    assert done.exit_code == 0, done.output
    text = done.output
    assert "Examples:\n    recallql " + " ".join(command) in text
    for odd in ("<bool>", "<str>", "<path>", "<int", "<float>", "{", "SPEC", "issue "):
        assert odd not in text, odd
    usage = text.splitlines()[0]
    assert usage.startswith("Usage: ") and usage == usage.rstrip()


def test_top_level_help_cuts_no_command_summary():
    """Every command's line in `recallql --help` is whole (click cuts a long first sentence
    with '...': 'Run a recallql cluster on Ray (shard actors that each own...')."""
    from typer.testing import CliRunner

    from recallql.cli import app

    done = CliRunner().invoke(app, ["--help"], terminal_width=80)
    listing = done.output.split("Commands:", 1)[1].split("Examples:", 1)[0]
    assert "..." not in listing, listing


def test_mcp_help_says_how_several_writers_share_a_database():
    """`recallql mcp --help` says what the server does (writes take turns at the writer lock,
    waiting LOCK_WAIT seconds), not that the process is the database's only writer."""
    from typer.testing import CliRunner

    from recallql.cli import app
    from recallql.mcp import LOCK_WAIT

    text = " ".join(CliRunner().invoke(app, ["mcp", "--help"], terminal_width=100
                                       ).output.split())
    assert "This process is the database's writer" not in text
    assert f"taking turns at the writer lock: a write waits up to {LOCK_WAIT:g} s" in text


@pytest.mark.parametrize("command", [["check"], ["import", "hermes"], *(["sessions", c] for c in (
    "list", "show", "lineage", "create", "sweep"))], ids=" ".join)
def test_json_help_of_a_command_that_runs_no_statements_says_what_it_prints(command):
    """`--json` of check, import and sessions prints one object; its help said "one object per
    statement", which only query and explain run."""
    from typer.testing import CliRunner

    from recallql.cli import app

    text = " ".join(CliRunner().invoke(app, [*command, "--help"], terminal_width=100
                                       ).output.split())
    assert "--json Print the result as JSON, one object on one line" in text
    assert "per statement" not in text


def test_help_paragraphs_are_rewrapped_not_ragged():
    from typer.testing import CliRunner

    from recallql.cli import app

    text = CliRunner().invoke(app, ["ingest", "--help"], terminal_width=100).output
    paragraphs = text.split("Examples:")[0].split("\n\n")[1:]
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        assert all(len(line) > 60 for line in lines[:-1]), text  # no docstring line breaks


def test_bench_outside_a_checkout_or_help():
    done = cli("bench", "--help")
    assert done.returncode == 0 and "benchmarks" in done.stdout


@pytest.mark.parametrize("command", [
    ["vacuum"], ["sessions", "annotate", "s1", "words"],
    ["sessions", "signal", "s1", "reward", "1"], ["sessions", "close", "s1"],
    ["sessions", "archive", "s1"],
    ["sessions", "sweep", "--older-than", "1", "--yes"],
], ids=" ".join)
def test_a_writer_with_nothing_to_act_on_leaves_no_database_at_a_new_path(tmp_path, command):
    """A mistyped --db made these create an empty database there, then say 'nothing to vacuum'
    or 'no session s1' (as reindex, optimize and delete already refused)."""
    db = tmp_path / "typo.db"
    result = cli(*command, "--db", str(db))
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: no recallql database at {db}")
    assert not db.exists()


def test_sessions_create_starts_a_database(tmp_path):
    db = tmp_path / "new.db"
    result = cli("sessions", "create", "s1", "--agent", "a", "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert "created session s1" in result.stdout and (db / "meta.sqlite").is_file()


@pytest.mark.parametrize("command", [["query", "SHOW COLLECTIONS"], ["sessions", "list"],
                                     ["explain", "SEARCH docs MATCHING 'x'"]])
def test_readers_call_a_database_without_its_metadata_damaged(tmp_path, command):
    """Readers said "a directory but not a recallql database" where ingest and check say it is
    damaged (README: a damaged database directory is refused by name)."""
    db = tmp_path / "db"
    assert cli("sessions", "create", "s1", "--agent", "a", "--db", str(db)).returncode == 0
    for part in db.glob("meta.sqlite*"):
        part.unlink()
    done = cli(*command, "--db", str(db))
    assert done.returncode == 1 and "the database is damaged" in done.stderr, done.stderr
    assert f"{db / 'meta.sqlite'} is missing" in " ".join(done.stderr.split())


@pytest.mark.parametrize(("args", "message"), [
    (("sessions", "list", "--limit", "x"),
     "Invalid value for '--limit': expected a whole number, got 'x'"),
    (("ingest", "a.jsonl", "--batch-size", "0"),
     "Invalid value for '--batch-size': must be at least 1, got 0"),
    (("sessions", "signal", "s", "reward", "abc"),
     "Invalid value for 'value': expected a number, got 'abc'"),
], ids=["int", "minimum", "number-argument"])
def test_usage_errors_are_in_the_products_words_naming_the_option(tmp_path, args, message):
    """Newcomer: usage errors read like pydantic ("Input should be a valid integer, unable to
    parse string as an integer"); they name the option or argument in the product's words,
    exit 2."""
    result = cli(*args, "--db", str(tmp_path / "db"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"Error: {message}"
    assert "Input should" not in result.stderr and "validation error" not in result.stderr


def test_vacuum_says_what_it_purged(tmp_path):
    import recallql

    path = tmp_path / "db"
    with recallql.connect(path, embedder=None) as database:
        for name in ("kb", "notes"):
            database.create_collection(name, text_fields=("body",), dim=4, embedder=None)
            database.ingest(name, [{"id": "a", "body": "alpha"}, {"id": "b", "body": "beta"}])
        database.delete("kb", ["a"])
    done = cli("vacuum", "--db", str(path), columns="400")  # one line however long the path
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"vacuumed {path}: deleted and replaced rows purged from 1 "
                           "collection (2 batches written)\n")
    again = cli("vacuum", "--db", str(path), columns="400")
    assert again.stdout == f"nothing to vacuum in {path}\n"


def _readme_cli_rows() -> list[str]:
    """The command cells of README's "The command line" table (`recallql ...`)."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = text.split("## The command line", 1)[1].split("\n\n", 2)[1]
    return [m.group(1) for m in re.finditer(r"^\| `recallql ((?:[^`\\]|\\.)*)` \|",
                                            table, re.M)]


def test_readme_command_table_matches_the_commands_and_their_options():
    """README's command table names every command (and every sessions subcommand), and every
    option a row shows is an option of that command (`recallql X --help` lists it)."""
    import typer.main

    from recallql.cli import app

    root: Any = typer.main.get_command(app)
    rows = [row.replace("\\|", "|") for row in _readme_cli_rows()]
    assert {row.split()[0] for row in rows} == set(root.commands)
    for row in rows:
        words = row.split()
        command = root.commands[words[0]]
        if words[0] == "sessions":
            assert set(words[1].split("|")) == set(command.commands), row
            continue
        if hasattr(command, "commands"):  # a group: import hermes, cluster serve
            command = command.commands[words[1]]
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        shown = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", row)) - {"--"}
        assert shown <= options, (row, shown - options)
