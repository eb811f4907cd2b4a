"""The shell: driven in a pseudo-terminal (pexpect), and its parts in process."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

import recallql
from recallql.index.embedders import HashEmbedder
from recallql.repl import Repl, is_complete
from recallql.repl.commands import parse_command
from recallql.repl.lexer import RecallQLCompleter, RecallQLLexer

REPO = Path(__file__).resolve().parents[1]
DOCS = [
    {"id": "backup", "title": "Backup retention policy", "body": "Keep daily backups.",
     "created_at": "2024-01-01", "tags": ["ops"]},
    {"id": "creds", "title": "Rotate credentials", "body": "Rotate API keys every 90 days.",
     "created_at": "2023-06-01", "tags": ["security"]},
]


@pytest.fixture(scope="module")
def db_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("repl") / "db"
    with recallql.connect(path, embedder=HashEmbedder()) as db:
        db.ingest("docs", DOCS)
    return path


@pytest.fixture
def repl(db_path):
    with recallql.connect(db_path, embedder=HashEmbedder(), readonly=True) as db:
        out = io.StringIO()
        shell = Repl(db, console=Console(file=out, width=120, color_system=None))
        shell.output = out  # type: ignore[attr-defined]
        yield shell


def test_pty_multiline_statement_table_and_error_with_caret(db_path, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1",
           "RECALLQL_HISTORY": str(tmp_path / "history")}
    child = pexpect.spawn(sys.executable, ["-m", "recallql.cli", "shell", "--db", str(db_path)],
                          env=env, encoding="utf-8", dimensions=(40, 140), timeout=30)
    try:
        child.expect("recallql>")
        child.send("SEARCH docs\r")
        child.expect(r"\.\.\.>")  # the statement goes on until ';'
        child.send("  MATCHING 'backup' LIMIT 1;\r")
        child.expect("backup")
        child.expect(r"\(1 row\)")
        child.expect("recallql>")
        child.send("SEARCH docs MATCHING 'x' LIMIT ten;\r")
        child.expect("QuerySyntaxError")
        child.expect(r"\^\^\^")
        child.expect("hint: LIMIT takes")
        child.expect("recallql>")  # the prompt is back, no traceback
        assert "Traceback" not in child.before
        child.send("\\q\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    history = (tmp_path / "history").read_text()
    assert "MATCHING 'backup' LIMIT 1;" in history


def test_piped_input_runs_statements_and_sets_the_exit_code(db_path):
    import subprocess

    script = "SHOW COLLECTIONS;\n\\timing on\nSEARCH docs MATCHING 'rotate'\n  LIMIT 1;\n"
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "recallql.cli", "shell", "--db", str(db_path)],
                          input=script, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "messages" in done.stdout and "creds" in done.stdout and "Time:" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "recallql.cli", "shell", "--db", str(db_path)],
                         input="SEARCH nope MATCHING 'x';\n", capture_output=True, text=True,
                         env=env, timeout=60)
    assert bad.returncode == 1 and "unknown collection 'nope'" in bad.stderr
    assert bad.stdout == ""  # errors go to stderr, as psql's: not among a script's results


def test_a_script_with_bytes_that_are_not_utf8_says_so(db_path):
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "recallql.cli", "shell", "--db", str(db_path)],
                          input=b"SEARCH docs MATCHING 'caf\xe9';\n", capture_output=True,
                          env=env, timeout=60)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 1 and "hint: the input holds bytes that are not UTF-8: the shell " \
        "reads UTF-8 text" in err and "as a parameter" not in err
    assert "Traceback" not in err


def test_tables_to_a_pipe_or_an_o_file_have_no_trailing_spaces(repl, tmp_path):
    """rich pads each line's last cell; the shell's tables in a pipe (its console is not a
    terminal here) and in a ``\\o`` file carried those spaces, as the CLI's did."""
    statements = ["SEARCH docs MATCHING 'backup' LIMIT 2;\n", "SHOW COLLECTIONS;\n",
                  "DESCRIBE docs;\n"]
    repl.run_lines(statements)
    target = tmp_path / "out.txt"
    repl.run_lines([f"\\o {target}\n", *statements, "\\o\n"])
    for text in (repl.output.getvalue(), target.read_text(encoding="utf-8")):
        lines = text.splitlines()
        assert "(2 rows)" in text and "BM25 text" in text and "messages" in text
        assert [line for line in lines if line != line.rstrip()] == []


def test_several_statements_on_one_line_run_in_order(repl):
    repl.run_lines(["DESCRIBE docs; SHOW COLLECTIONS;\n"])
    text = repl.output.getvalue()
    assert text.index("BM25 text") < text.index("messages")


def test_a_script_stops_at_the_first_error(repl):
    repl.run_lines(["SEARCH dcos MATCHING 'x'; SHOW COLLECTIONS;\n", "DESCRIBE docs;\n"])
    text = repl.output.getvalue()
    assert "did you mean 'docs'?" in text and "^^^^" in text
    assert "messages" not in text and "BM25 text" not in text and repl.failed


@pytest.mark.parametrize(("script", "line"), [
    ("SHOW COLLECTIONS;\n\n\nSEARCH docs\n MATCHING 'x'\n LIMIT ten;\n", 6),
    ("SHOW COLLECTIONS; SEARCH dcos\n MATCHING 'x';\n", 1),
    ("SHOW COLLECTIONS;\nSEARCH docs\n\\timing\nMATCHING 'x'\nLIMIT ten;\n", 5),
    ("SEARCH docs \\x\n\n MATCHING 'y' LIMIT x;\n", 3),
    ("SHOW COLLECTIONS;\n\\d nope\n", 2),
    ("SHOW COLLECTIONS;\nSEARCH docs MATCHING 'unterminated\n", 2),
], ids=["multi-line", "second-on-a-line", "command-inside", "command-after-head", "backslash-d",
        "unterminated-at-eof"])
def test_an_error_in_a_script_names_its_line_in_the_script(repl, script, line):
    """psql says ``psql:file:6: ERROR``; the shell's caret counts lines within the failing
    statement, so in a script of many statements the error did not say where it was."""
    repl.run_lines(io.StringIO(script))
    text = repl.output.getvalue()
    assert repl.failed and text.rstrip().endswith(f"at line {line} of the script"), text


def test_statements_before_a_syntax_error_on_the_same_line_run(repl):
    repl.run_lines(["DESCRIBE docs; SEARCH docs MATCHING 'x' LIMIT ten; SHOW COLLECTIONS;\n"])
    text = repl.output.getvalue()
    assert text.index("BM25 text") < text.index("QuerySyntaxError")
    assert "(line 1, column 32)" in text and "messages" not in text and repl.failed


def test_a_parameter_in_the_shell_says_how_to_give_its_value_here(repl):
    """The shell binds no parameters; a statement with one said "hint: pass q=...", advice
    for db.execute that cannot be followed at the prompt."""
    repl.run_lines(["SEARCH docs MATCHING 'x' WHERE tags CONTAINS :tag LIMIT :n;\n",
                    "SHOW COLLECTIONS;\n"])
    assert repl.output.getvalue() == (
        "ParameterError: the shell has no value for parameter :tag (line 1, column 46)\n"
        "\n"
        "  SEARCH docs MATCHING 'x' WHERE tags CONTAINS :tag LIMIT :n\n"
        "                                               ^^^^\n"
        "  hint: write the value into the statement (MATCHING 'disk full', LIMIT 5), or run it "
        "with recallql query \"...\" -p name=value\n"
        "  at line 1 of the script\n")
    assert repl.failed


def test_a_positional_parameter_in_the_shell_is_hinted_to_become_a_named_one(repl):
    """For `?` the hint said "-p name=value", which binds `:name` parameters only."""
    repl.run_lines(["SEARCH docs MATCHING ? LIMIT 3;\n"])
    assert repl.output.getvalue() == (
        "ParameterError: the shell has no value for parameter ?1 (line 1, column 22)\n"
        "\n"
        "  SEARCH docs MATCHING ? LIMIT 3\n"
        "                       ^\n"
        "  hint: write the value into the statement (MATCHING 'disk full', LIMIT 5), or use a "
        "named parameter :name instead and run it with recallql query \"...\" -p name=value\n"
        "  at line 1 of the script\n")
    assert repl.failed


def test_an_error_in_the_interactive_shell_does_not_end_it(repl):
    assert repl.handle("SEARCH dcos MATCHING 'x';") is True
    assert repl.handle("SHOW COLLECTIONS;") is True
    assert "messages" in repl.output.getvalue()


@pytest.mark.parametrize(("text", "pieces"), [
    ("A; B;", ["A", " B"]),
    ("A 'x;y'; B", ["A 'x;y'", " B"]),
    ('A "a;b"; B -- c;\n', ['A "a;b"', " B -- c;\n"]),
    ("A 'it''s;'; ;", ["A 'it''s;'"]),
    ("", []),
], ids=["two", "string", "identifier-and-comment", "escaped-quote", "empty"])
def test_split_statements(text, pieces):
    from recallql.repl.input import split_statements

    assert split_statements(text) == pieces


def test_explain_prints_the_text_format(repl):
    statement = "SEARCH docs MATCHING 'rotate keys' LIMIT 1"
    repl.run_lines([f"EXPLAIN {statement};\n"])
    text = repl.output.getvalue()
    assert text.rstrip("\n") == repl.db.explain(statement).to_text()
    assert text.startswith("TopK: k=1 offset=0\n")
    assert "    ConvexFusion: normalization=minmax window=100" in text
    assert "LEXICAL_MATCH(rank=1" in text and "#1 creds" in text


def test_explain_format_json_prints_json(repl):
    import json

    repl.run_lines(["EXPLAIN FORMAT JSON SEARCH docs MATCHING 'rotate keys' LIMIT 1;\n"])
    assert json.loads(repl.output.getvalue())["result"]["rows"][0]["id"] == "creds"


@pytest.mark.parametrize("width", [40, 60, 80])
def test_narrow_tables_never_split_a_word_or_a_timestamp(width):
    from recallql.ui.render import records_table

    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    records = [{"session_id": "s-2", "edge": "continuation", "end_reason": "compression",
                "started_at": "2025-01-06T09:00:00.123456Z", "note": "a few words to wrap"}]
    console.print(records_table(list(records[0]), records * 2, width=width))
    text = out.getvalue()
    for word in ("continuation", "compression", "a few words"):
        assert text.count(word) == 2, text
    if width < 80:  # too narrow for a table: each record vertically, full timestamps
        assert text.count("2025-01-06T09:00:00Z") == 2, text
    else:           # a table, timestamps to the minute so it fits
        assert text.count("2025-01-06 09:00") == 2 and "started_at" in text.split("\n")[0]
    assert ".123456" not in text


def test_tables_drop_columns_empty_in_every_record():
    from recallql.ui.render import records_table

    out = io.StringIO()
    records = [{"id": "s-1", "parent_session_id": None, "title": "", "status": "open"},
               {"id": "s-2", "parent_session_id": None, "title": "", "status": "closed"}]
    Console(file=out, width=100, color_system=None).print(
        records_table(list(records[0]), records, width=100))
    header = out.getvalue().split("\n")[0]
    assert header.split() == ["id", "status"]


@pytest.mark.parametrize("width", [80, 120])
def test_wide_characters_are_measured_in_terminal_cells(tmp_path, width):
    """A CJK character takes two cells: the text column was cut by characters, so it came out
    twice as wide as its room and the #, id and score columns were squeezed to '…' or
    dropped."""
    from rich.cells import cell_len

    with recallql.connect(tmp_path / "db", embedder=HashEmbedder()) as db:
        db.ingest("docs", [{"id": "cjk-1", "title": "日本語のバックアップ方針",
                            "body": "毎日バックアップを取る。backup 保持期間は三十日。" * 3},
                           {"id": "plain-2", "title": "backup", "body": "backup"}])
        out = io.StringIO()
        shell = Repl(db, console=Console(file=out, width=width, color_system=None))
        shell.run_lines(["SEARCH docs MATCHING 'backup';\n"])
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["#", "id", "score"], out.getvalue()
    ids = [line.split()[1] for line in lines if line[:1].isdigit()]
    assert sorted(ids) == ["cjk-1", "plain-2"], out.getvalue()
    assert max(cell_len(line) for line in lines) <= width


def test_long_reason_lines_wrap_between_reasons():
    from recallql.ui.render import wrap_reasons

    line = ("   SESSION_KEYWORDS(1/1) +0.30000  SESSION_VELOCITY(uniform, v=1.000) +0.10000  "
            "SESSION_ENTITY(entity=a  b, e=1.000) +0.10000  RECENCY(age=0.00d) +0.00500")
    assert wrap_reasons(line, 100) == [
        "   SESSION_KEYWORDS(1/1) +0.30000  SESSION_VELOCITY(uniform, v=1.000) +0.10000",
        "   SESSION_ENTITY(entity=a  b, e=1.000) +0.10000  RECENCY(age=0.00d) +0.00500"]
    assert wrap_reasons(line, 200) == [line]
    assert wrap_reasons("   RECENCY(age=0.00d) +0.00500", 10) == ["   RECENCY(age=0.00d) +0.00500"]


def test_format_json_and_timing(repl):
    import json

    repl.run_lines(["\\format json\n", "SEARCH docs MATCHING 'backup' LIMIT 1;\n"])
    text = repl.output.getvalue()
    payload = text[text.index("{"):]
    assert json.loads(payload)["rows"][0]["id"] == "backup"
    repl.run_lines(["\\format xml\n"])
    assert "unknown format 'xml'" in repl.output.getvalue()


def test_a_bare_help_prints_the_help_as_in_psql(repl):
    """`help` typed alone is answered at once (it used to continue as a statement, then fail
    as a syntax error at 'help')."""
    assert repl.handle("help") is True and repl.handle("Help;") is True
    text = repl.output.getvalue()
    assert text.count("\\format") >= 2 and "QuerySyntaxError" not in text


def test_duckdb_dot_commands_point_to_the_backslash_ones(repl):
    from recallql.repl.input import is_complete

    assert all(is_complete(t) for t in (".tables", ".mode csv", ".quit"))
    assert repl.handle(".tables") and repl.handle(".mode csv") and repl.handle(".foo")
    text = repl.output.getvalue()
    assert "unknown command .tables; this shell's commands start with a backslash: use \\d" \
        in text
    assert "unknown command .mode; this shell's commands start with a backslash: use " \
        "\\format" in text
    assert "unknown command .foo; this shell's commands start with a backslash (\\? lists " \
        "them)" in text
    assert repl.handle(".quit") is False and repl.handle(".EXIT;") is False


def test_backslash_commands(repl):
    repl.run_lines(["\\timing\n", "\\d\n", "\\help\n", "\\nope\n"])
    text = repl.output.getvalue()
    assert "timing is on" in text and "docs" in text and "\\format" in text
    assert "unknown command \\nope" in text
    assert repl.handle("\\q") is False and repl.handle("quit;") is False


@pytest.mark.parametrize(("text", "complete"), [
    ("", True),
    ("SEARCH docs", False),
    ("SEARCH docs MATCHING 'a;'", False),
    ("SEARCH docs MATCHING 'a;';", True),
    ("SEARCH docs MATCHING 'it''s';  ", True),
    ("SEARCH docs MATCHING 'open", False),
    ("SHOW COLLECTIONS; -- done", True),
    ("SHOW COLLECTIONS -- ;", False),
    ('DESCRIBE "a;b"', False),
    ("\\timing", True),
    ("quit", True),
    ("help", True),
    ("HELP;", True),
    ("SEARCH docs MATCHING 'x'\nhelp", False),
], ids=lambda v: repr(v))
def test_statement_completion(text, complete):
    assert is_complete(text) is complete


def test_lexer_tokens():
    tokens = {(str(kind), value) for kind, value in RecallQLLexer().get_tokens(
        "search docs MATCHING 'it''s' WHERE n >= :p LIMIT 5 -- c")}
    assert ("Token.Keyword", "search") in tokens and ("Token.Keyword", "MATCHING") in tokens
    assert ("Token.Literal.String.Single", "'it''s'") in tokens
    assert ("Token.Name.Variable.Magic", ":p") in tokens
    assert ("Token.Literal.Number", "5") in tokens and ("Token.Name", "docs") in tokens
    assert ("Token.Comment.Single", "-- c") in tokens


def test_lexer_highlights_only_ascii_digits_as_numbers():
    """The grammar reads numbers in ASCII digits only (a full-width ３ is refused with a
    caret), so the shell does not colour one as a number either."""
    tokens = [(str(kind), value) for kind, value in RecallQLLexer().get_tokens("LIMIT ３ 4")]
    assert ("Token.Literal.Number", "4") in tokens
    assert not any(kind == "Token.Literal.Number" and "３" in value for kind, value in tokens)


def test_completion_of_keywords_collections_fields_and_commands():
    catalog = {"docs": ["title", "body", "tags"], "messages": ["content", "role"]}
    completer = RecallQLCompleter(lambda: catalog, ["\\help", "\\timing"])

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert complete("SEA") == ["SEARCH"] and complete("sea") == ["search"]
    assert complete("SEARCH do") == ["docs"]
    assert complete("SEARCH docs MATCHING 'x' WHERE ta")[0] == "tags"
    assert complete("SEARCH messages MATCHING 'x' WHERE r")[0] == "role"
    assert complete("\\ti") == ["\\timing"]
    assert "half_life" in complete("SEARCH docs MATCHING 'x' WITH RECENCY (half")


def test_parse_command():
    assert parse_command("\\timing on;") == ("\\timing", "on")
    assert parse_command("\\d Docs") == ("\\d", "Docs")


def test_backslash_d_takes_a_quoted_name_as_psql_does(repl):
    """``\\d "docs"`` quoted the quotes: unknown collection '"docs"'."""
    repl.run_lines(['\\d "docs"\n', '\\d "do""cs"\n'])
    text = repl.output.getvalue()
    assert "BM25 text" in text and 'unknown collection \'do"cs\'' in text, text


def test_backslash_d_ignores_extra_arguments_as_psql_does(repl):
    """``\\d docs extra`` described a collection named 'docs extra'."""
    repl.run_lines(['\\d docs extra more\n', '\\d "docs" x\n'])
    text = repl.output.getvalue()
    assert text.count("BM25 text (concatenated)") == 4, text  # two fields, twice
    assert "\\d: extra arguments extra more ignored" in text
    assert "\\d: extra argument x ignored" in text


def test_timing_takes_on_or_off_like_the_other_switches(repl):
    """``\\timing what`` turned timing on (``\\x maybe`` and ``\\pager maybe`` are errors)."""
    for line in ("\\timing what", "\\timing on", "\\timing", "\\x maybe"):
        repl.run_lines([line + "\n"])  # one script each: a script stops at its first error
    text = repl.output.getvalue()
    assert "\\timing takes on or off, not 'what'" in text
    assert text.index("timing is on") < text.index("timing is off")
    assert "\\x takes on or off, not 'maybe'" in text
    assert repl.timing is False


def test_a_backslash_command_after_statements_on_the_same_line_runs_after_them(repl):
    """As psql: ``DESCRIBE docs; \\format json`` runs DESCRIBE, then switches the format."""
    import json

    repl.run_lines(["DESCRIBE docs; \\format json\n", "SHOW COLLECTIONS;\n"])
    text = repl.output.getvalue()
    assert not repl.failed and "QuerySyntaxError" not in text
    assert text.index("BM25 text") < text.index("output format is json") < text.index("{")
    assert json.loads(text[text.index("{"):])["statement"] == "SHOW COLLECTIONS"


def test_a_command_after_an_unfinished_statement_keeps_it_and_a_failed_one_stops_it(repl):
    assert repl.handle("DESCRIBE docs; SEARCH docs MATCHING 'backup' \\x") is True
    assert repl.pending == " SEARCH docs MATCHING 'backup' \n" and repl.expanded
    repl.pending = ""
    repl.handle("SEARCH dcos MATCHING 'x'; \\format json")
    assert "did you mean 'docs'?" in repl.output.getvalue() and repl.fmt == "table"


@pytest.mark.parametrize(("text", "head", "command"), [
    ("DESCRIBE docs; \\format json", "DESCRIBE docs; ", "\\format json"),
    ("SEARCH docs\n  \\x\n", "SEARCH docs\n  ", "\\x"),
    ("SEARCH docs MATCHING 'a\\b';", "SEARCH docs MATCHING 'a\\b';", None),
    ("SHOW COLLECTIONS; -- \\x", "SHOW COLLECTIONS; -- \\x", None),
    ("SEARCH docs MATCHING 'a\n\\x", "SEARCH docs MATCHING 'a\n\\x", None),
], ids=["after-statement", "continuation", "in-string", "in-comment", "in-open-string"])
def test_split_command(text, head, command):
    from recallql.repl.input import split_command

    assert split_command(text) == (head, command)


def test_history_keeps_statements_and_a_command_on_one_line_as_typed():
    from recallql.repl.input import history_entry

    assert history_entry("DESCRIBE docs; \\format json") == "DESCRIBE docs; \\format json"
    assert history_entry("SEARCH docs\n\\x") == "\\x"


class _TooMuchWork(Exception):
    pass


def _count_repl_lines(limit: int, stop: bool = True) -> tuple[list[int], object]:
    """A trace function counting the lines run in recallql/repl (the shell's own work per
    key); past `limit` it raises `_TooMuchWork`, or (``stop=False``: prompt_toolkit would
    catch it) stops counting."""
    repl_dir = str(Path(recallql.repl.__file__).parent)
    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] > limit and stop:
                raise _TooMuchWork(count[0])
        return local

    def tracer(frame, event, arg):
        if count[0] > limit:
            return None
        return local if frame.f_code.co_filename.startswith(repl_dir) else None

    return count, tracer


def _pasted(lines: int) -> str:
    body = "\n".join(f"word{i:03d} " * 5 for i in range(lines))
    return f"SEARCH docs MATCHING '{body}' LIMIT 3;"


def test_a_20k_statement_typed_key_by_key_costs_the_shell_linear_work():
    """Newcomer: pasting a 17k-character statement (un-bracketed: one key per character,
    Enter for each newline) never finished. Each Enter asked whether the input was complete
    and each drawn line which continuation prompt it gets, both by rescanning the whole
    buffer: quadratic (thousands of lines run per character, growing with the input). Now
    the shell's code runs a bounded number of lines per key."""
    from recallql.repl.input import continuation

    statement = _pasted(500)
    assert len(statement) > 20_000
    count, tracer = _count_repl_lines(limit=60 * len(statement))
    line = 0
    sys.settrace(tracer)
    try:
        for end in range(1, len(statement) + 1):
            text = statement[:end]
            if text[-1] == "\n":  # Enter: run it, or a new line? then a redraw of 20 lines
                line += 1
                assert not is_complete(text)
                assert {continuation(text, n) for n in range(max(1, line - 19), line + 1)} \
                    == {"..'> "}
        assert is_complete(statement)
    finally:
        sys.settrace(None)
    assert 0 < count[0] <= 60 * len(statement)


def test_a_pasted_statement_through_prompt_toolkit_costs_the_shell_linear_work(tmp_path):
    """The same through a real prompt session (pipe input: the multi-line condition and the
    continuation prompts as prompt_toolkit calls them)."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from recallql.repl.input import make_session

    statement = _pasted(30)
    count, tracer = _count_repl_lines(limit=40 * len(statement), stop=False)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        session = make_session(tmp_path / "history", lambda: {"docs": ["body"]}, ["\\q"])
        pipe.send_text(statement + "\r")
        sys.settrace(tracer)
        try:
            text = session.prompt()
        finally:
            sys.settrace(None)
    assert text == statement
    assert 0 < count[0] <= 40 * len(statement)


def test_a_history_file_that_cannot_be_written_keeps_history_in_memory(tmp_path):
    """A directory as the history file passed the startup check (touch() succeeds on one),
    and a history file that stops being writable later failed in prompt_toolkit's Enter
    handler: each statement printed a traceback and "Press ENTER to continue..."."""
    from recallql.repl.input import make_session

    directory = tmp_path / "a-directory"
    directory.mkdir()
    later = tmp_path / "history"
    for path in (directory, later):
        session = make_session(path, lambda: {"docs": ["body"]}, ["\\q"])
        if path == later:
            later.unlink()
            later.mkdir()  # the file is gone and nothing can be written there now
        session.history.append_string("SHOW COLLECTIONS;")
        assert list(session.history.get_strings()) == ["SHOW COLLECTIONS;"]


def test_a_history_that_is_no_regular_file_is_kept_in_memory():
    """/dev/full reads as endless zeros: loading it as a history file never returned."""
    from prompt_toolkit.history import InMemoryHistory

    from recallql.repl.input import make_session

    for device in ("/dev/full", "/dev/null"):
        session = make_session(Path(device), lambda: {"docs": ["body"]}, ["\\q"])
        assert isinstance(session.history, InMemoryHistory)
        assert list(session.history.load_history_strings()) == []


@pytest.mark.parametrize("edits", [
    ["SEARCH docs MATCHING 'a", "SEARCH docs MATCHING 'a'';", "SEARCH docs MATCHING 'a'';\n"],
    ["SHOW COLLECTIONS -", "SHOW COLLECTIONS --", "SHOW COLLECTIONS --;\n;", "SHOW COLLECTIONS -;"],
    ['DESCRIBE "a\n;b', 'DESCRIBE "a\n;b";\n\\x', "DESCRIBE 'a\n;b';\n\\x", "DE\n;"],
    ["x;\ny;\n'z", "x;\n'z", "x;\ny;\n'z';\\x", ""],
], ids=["string-grows", "dash-becomes-comment", "edit-inside-prefix", "delete-and-retype"])
def test_the_incremental_scanner_agrees_with_a_fresh_scan(edits):
    from recallql.repl.input import continuation
    from recallql.repl.scanning import Scanner

    shared = Scanner()
    for text in edits:
        fresh = Scanner()
        assert shared.scan(text) == fresh.scan(text), text
        lines = text.count("\n") + 2
        assert [shared.quote_before_line(text, n) for n in range(lines)] == \
            [fresh.quote_before_line(text, n) for n in range(lines)]
    assert Scanner().scan("x;\ny;\n'z';\\x") == ([1, 4, 9], "x", False, "", (10,))
    assert continuation("SEARCH docs MATCHING 'a\nb';\n", 1) == "..'> "
    assert continuation("SEARCH docs MATCHING 'a\nb';\n", 2) == "...> "


def test_typing_at_the_end_scans_only_the_new_characters():
    from recallql.repl.scanning import Scanner

    scanner, text = Scanner(), ""
    for ch in "SEARCH docs MATCHING 'a long\nstatement' LIMIT 3;" * 100:
        text += ch
        scanner.scan(text)
        scanner.quote_before_line(text, text.count("\n"))
    assert scanner.steps == len(text)


def test_markdown_escapes_control_characters_and_csv_keeps_them():
    """A markdown table is a document to read: ESC, CR and bidi controls are shown escaped
    (a stored ESC sequence drove the terminal); csv keeps the data as stored."""
    from recallql.ui.formats import to_csv, to_markdown

    rows = [{"id": "a|b", "body": "red\x1b[31m\rtext\u202e\nnext"}]
    assert to_markdown(["id", "body"], rows).splitlines()[2] == \
        "| a\\|b | red\\x1b[31m\\rtext\\u202e<br>next |"
    assert "\x1b[31m\r" in to_csv(["id", "body"], rows)
