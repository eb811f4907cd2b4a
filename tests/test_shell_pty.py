"""Shell behaviours driven through a pseudo-terminal (pexpect), as a person types them: Ctrl-C
on a running statement, backslash commands on continuation lines, ``\\r``, the prompt inside a
string, history entries, the pager (on a terminal only), formats, ``\\x`` and ``\\o``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import recallql
from recallql.index.embedders import HashEmbedder

pexpect = pytest.importorskip("pexpect")
REPO = Path(__file__).resolve().parents[1]
PAGER_MARK = "PAGED:"


@pytest.fixture(scope="module")
def db_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shell") / "db"
    with recallql.connect(path, embedder=HashEmbedder()) as db:
        db.ingest("docs", [{"id": f"note-{n:02d}", "title": f"Backup note {n}",
                            "body": f"backup rotation step {n}", "created_at": "2025-01-01"}
                           for n in range(30)])
        db.sessions.create("ops-7", "agent")
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1",
            "RECALLQL_HISTORY": str(tmp_path / "history"),
            "PAGER": f"sed s/^/{PAGER_MARK}/"}


def _shell(db_path: Path, tmp_path: Path, rows: int = 60, args: tuple[str, ...] = ()):
    child = pexpect.spawn(sys.executable, ["-m", "recallql.cli", "shell", "--db", str(db_path),
                                           *args], env=_env(tmp_path), encoding="utf-8",
                          dimensions=(rows, 160), timeout=30, cwd=str(tmp_path))
    child.expect("recallql>")
    return child


def _quit(child) -> None:
    child.send("\\q\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


SLOW_SHELL = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import recallql
    from recallql.index.embedders import HashEmbedder
    from recallql.repl import Repl

    db = recallql.connect(sys.argv[1], embedder=HashEmbedder(), readonly=True)

    class SlowDatabase:
        '''The real database, except that a statement mentioning 'slow' takes a minute.'''
        def __getattr__(self, name):
            return getattr(db, name)
        def execute(self, stmt, *args, **params):
            if "slow" in getattr(stmt, "source", str(stmt)):
                print("[slow statement started]", file=sys.stderr, flush=True)
                time.sleep(60)
            return db.execute(stmt, *args, **params)

    sys.exit(Repl(SlowDatabase(), history=Path(sys.argv[2])).run())
""")


def test_ctrl_c_cancels_a_running_statement_and_keeps_the_shell(db_path, tmp_path):
    script = tmp_path / "slow_shell.py"
    script.write_text(SLOW_SHELL)
    child = pexpect.spawn(sys.executable, [str(script), str(db_path), str(tmp_path / "h")],
                          env=_env(tmp_path), encoding="utf-8", dimensions=(60, 160),
                          timeout=30)
    try:
        child.expect("recallql>")
        child.send("SEARCH docs MATCHING 'slow backup' LIMIT 1;\r")
        child.expect(r"\[slow statement started\]")  # running (it would take a minute)
        child.sendintr()
        child.expect("cancelled: the statement was interrupted")
        child.expect("recallql>")
        child.send("SEARCH docs MATCHING 'rotation' LIMIT 1;\r")  # the shell still works
        child.expect(r"\(1 row\)")
        child.expect("recallql>")
        child.sendintr()  # at the prompt: clears the input, keeps the shell
        child.expect("recallql>")
        _quit(child)
    finally:
        child.close(force=True)


def test_backslash_commands_on_continuation_lines_and_reset(db_path, tmp_path):
    child = _shell(db_path, tmp_path)
    try:
        child.send("SEARCH docs MATCHING 'backup'\r")
        child.expect(r"\.\.\.>")
        child.send("\\x\r")  # runs at once; the statement is kept in the buffer
        child.expect("expanded display is on")
        child.send(" LIMIT 2;\r")
        child.expect(r"-\[ RECORD 1 \]-")
        child.expect(r"-\[ RECORD 2 \]-")
        child.expect(r"\(2 rows\)")
        child.expect("recallql>")
        child.send("\\x off\r")
        child.expect("expanded display is off")
        child.send("SEARCH docs\r")
        child.expect(r"\.\.\.>")
        child.send("\\r\r")
        child.expect("query buffer reset")
        child.send("SHOW COLLECTIONS;\r")  # the reset statement is gone: this runs alone
        child.expect(r"\(2 rows\)")
        assert "QuerySyntaxError" not in child.before
        _quit(child)
    finally:
        child.close(force=True)


def test_prompt_shows_an_open_string_and_history_keeps_one_entry(db_path, tmp_path):
    child = _shell(db_path, tmp_path)
    try:
        child.send("SEARCH docs MATCHING 'backup\r")
        child.expect(r"\.\.'>")  # inside the string literal
        child.send("rotation' LIMIT 1;\r")
        child.expect(r"\(1 row\)")
        child.expect("recallql>")
        child.send("SEARCH docs\r")
        child.expect(r"\.\.\.>")
        child.send("\\timing on\r")  # a command on a continuation line: its own entry
        child.expect("timing is on")
        child.send("MATCHING 'step' LIMIT 1;\r")
        child.expect("Time: ")
        _quit(child)
    finally:
        child.close(force=True)
    entries = [e for e in (tmp_path / "history").read_text().split("\n#") if e.strip()]
    bodies = ["\n".join(line[1:] for line in e.splitlines() if line.startswith("+"))
              for e in entries]
    assert bodies == ["SEARCH docs MATCHING 'backup\nrotation' LIMIT 1;", "\\timing on",
                      "SEARCH docs\nMATCHING 'step' LIMIT 1;", "\\q"]


def test_pager_on_a_terminal_for_long_results_only(db_path, tmp_path):
    child = _shell(db_path, tmp_path, rows=12)
    try:
        child.send("SEARCH docs MATCHING 'backup' LIMIT 20;\r")
        child.expect(PAGER_MARK + ".*note-")  # longer than the screen: through $PAGER
        child.expect("recallql>")
        child.send("SEARCH docs MATCHING 'backup' LIMIT 1;\r")  # fits: printed directly
        child.expect(r"\(1 row\)")
        assert PAGER_MARK not in child.before
        child.send("\\pager off\r")
        child.expect("pager is off")
        child.send("SEARCH docs MATCHING 'backup' LIMIT 20;\r")
        child.expect(r"\(20 rows\)")
        assert PAGER_MARK not in child.before
        _quit(child)
    finally:
        child.close(force=True)


def test_pager_is_off_when_output_is_not_a_terminal(db_path, tmp_path):
    done = subprocess.run([sys.executable, "-m", "recallql.cli", "shell", "--db", str(db_path)],
                          input="SEARCH docs MATCHING 'backup' LIMIT 30;\n", text=True,
                          capture_output=True, env={**_env(tmp_path), "LINES": "5"},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "(30 rows)" in done.stdout and PAGER_MARK not in done.stdout


def test_formats_and_output_to_a_file(db_path, tmp_path):
    child = _shell(db_path, tmp_path)
    try:
        for fmt, expected in (("csv", "rank,id,score,created_at,text,why"),
                              ("markdown", r"\| rank \| id \| score \|"),
                              ("jsonl", '{"rank": 1, "id": "note-'),
                              ("json", '"id": "note-')):
            child.send(f"\\format {fmt}\r")
            child.expect(f"output format is {fmt}")
            child.send("SEARCH docs MATCHING 'rotation step 7' LIMIT 2;\r")
            child.expect(expected)
            child.expect("recallql>")
        child.send("\\format csv\r")
        child.send("\\o hits.csv\r")
        child.expect("results go to hits.csv")
        child.send("SEARCH docs MATCHING 'rotation step 7' LIMIT 3;\r")
        child.expect("recallql>")
        child.send("\\o\r")
        child.expect("results go to the terminal")
        _quit(child)
    finally:
        child.close(force=True)
    lines = (tmp_path / "hits.csv").read_text().splitlines()
    assert lines[0] == "rank,id,score,created_at,text,why" and len(lines) == 4
    assert lines[1].startswith("1,note-07,")
    assert "Backup note 7 — backup rotation step 7" in lines[1]


def test_completion_by_context_and_never_inside_a_string(db_path, tmp_path):
    child = _shell(db_path, tmp_path)
    try:
        child.send("SHOW SESSION \t")
        child.expect_exact("'ops-7'")
        child.send(";\r")
        child.expect("agent_id")
        child.expect("recallql>")
        child.send("SEARCH docs MATCHING 'SEA\t")  # inside the string: Tab completes nothing
        child.send("' LIMIT 1;\r")
        child.expect(r"\(0 rows\)|\(1 row\)")
        assert "SEARCH'" not in child.before and "SEASON" not in child.before
        _quit(child)
    finally:
        child.close(force=True)
