"""``recallql sessions ...`` and ``recallql import hermes`` through the real entry point."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from test_cli import DOCS, cli

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sessions")
    (root / "items.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    path = root / "db"
    assert cli("ingest", str(root / "items.jsonl"), "--db", str(path), "--embedder",
               "hash").returncode == 0
    return path


def test_session_lifecycle(db):
    created = cli("sessions", "create", "s-1", "--agent", "ops-bot", "--meta", "team=infra",
                  "--json", "--db", str(db))
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["status"] == "open"
    assert cli("sessions", "annotate", "s-1", "security", "--db", str(db)).returncode == 0
    signal = cli("sessions", "signal", "s-1", "reward", "1.0", "--entity", "creds",
                 "--db", str(db))
    assert signal.returncode == 0 and "recorded reward 1 on creds" in signal.stdout
    shown = json.loads(cli("sessions", "show", "s-1", "--json", "--db", str(db)).stdout)
    assert shown["keywords"] == ["security"] and shown["entities"]["creds"] > 0.99
    assert shown["metadata"] == {"team": "infra"}

    ranked = cli("query", "RETRIEVE 2 FROM docs FOR SESSION :s", "-p", "s=s-1", "--json",
                 "--db", str(db))
    assert ranked.returncode == 0, ranked.stderr
    assert json.loads(ranked.stdout)["rows"][0]["id"] == "creds"

    listed = cli("sessions", "list", "--status", "open", "--db", str(db))
    assert listed.returncode == 0 and "s-1" in listed.stdout and "ops-bot" in listed.stdout
    assert cli("sessions", "close", "s-1", "--reason", "compression",
               "--db", str(db)).returncode == 0
    child = cli("sessions", "create", "s-2", "--agent", "ops-bot", "--parent", "s-1",
                "--db", str(db))
    assert child.returncode == 0, child.stderr
    lineage = cli("sessions", "lineage", "s-2", "--json", "--db", str(db))
    edges = [r["edge"] for r in json.loads(lineage.stdout)["records"]]
    assert edges == ["continuation", "root"]
    assert cli("sessions", "archive", "s-1", "--db", str(db)).returncode == 0
    closed = cli("sessions", "list", "--status", "archived", "--json", "--db", str(db))
    assert [r["id"] for r in json.loads(closed.stdout)["records"]] == ["s-1"]


@pytest.mark.parametrize(("args", "message"), [
    (["signal", "nope", "reward", "1"], "signal rejected"),
    (["signal", "s-x", "reward", "5"], "signal rejected"),
    (["show", "nope"], "no session 'nope'"),
    (["close", "nope"], "no session 'nope'"),
    (["create", "bad id!", "--agent", "a"], "session id"),
], ids=["unknown-session", "out-of-bounds", "show-unknown", "close-unknown", "bad-id"])
def test_session_errors_exit_1(db, args, message):
    cli("sessions", "create", "s-x", "--agent", "a", "--db", str(db))
    done = cli("sessions", *args, "--db", str(db))
    assert done.returncode == 1, done.stdout
    assert message in done.stderr and "Traceback" not in done.stderr


def test_sweep_removes_nothing_recent(db):
    done = cli("sessions", "sweep", "--older-than", "30", "--db", str(db))
    assert done.returncode == 0 and "nothing to remove" in done.stdout
    assert cli("sessions", "sweep", "--db", str(db)).returncode == 2  # --older-than required


def _fresh(tmp_path: Path, *sessions: str) -> Path:
    path = tmp_path / "db"
    for session in sessions:
        assert cli("sessions", "create", session, "--agent", "a", "--db", str(path)
                   ).returncode == 0
    return path


def test_sweep_asks_first_showing_how_many(tmp_path):
    path = _fresh(tmp_path, "old-1", "old-2")
    declined = cli("sessions", "sweep", "--older-than", "0", "--db", str(path), stdin="n\n")
    assert (declined.returncode, declined.stdout) == (0, "nothing removed (answered no)\n")
    assert declined.stderr == ("remove 2 sessions (last active more than 0 days ago) with their "
                               "annotations, signals and messages? [y/N]: ")
    listed = cli("sessions", "list", "--json", "--db", str(path))
    assert len(json.loads(listed.stdout)["records"]) == 2
    agreed = cli("sessions", "sweep", "--older-than", "0", "--db", str(path), stdin="y\n")
    assert agreed.returncode == 0 and "removed 2 sessions" in agreed.stdout


def test_a_declined_sweep_is_no_error_and_no_answer_is_one(tmp_path):
    """Answering no printed "Aborted!" and exited 1; now it says nothing was removed and exits
    0 (JSON too). No answer at all (end of input) still exits 1, saying nothing was removed."""
    path = _fresh(tmp_path, "old-1")
    declined = cli("sessions", "sweep", "--older-than", "0", "--json", "--db", str(path),
                   stdin="n\n")
    assert (declined.returncode, json.loads(declined.stdout)) == (
        0, {"removed": 0, "messages": 0, "ids": [], "detached": []})
    unanswered = cli("sessions", "sweep", "--older-than", "0", "--db", str(path), stdin="")
    assert (unanswered.returncode, unanswered.stdout) == (1, "")
    assert unanswered.stderr.splitlines()[1:] == [
        "error: no answer (end of input or Ctrl-C); nothing was removed (--yes removes without "
        "asking)"]
    listed = cli("sessions", "list", "--json", "--db", str(path))
    assert [r["id"] for r in json.loads(listed.stdout)["records"]] == ["old-1"]


def test_sweep_yes_does_not_ask(tmp_path):
    path = _fresh(tmp_path, "old-1")
    done = cli("sessions", "sweep", "--older-than", "0", "--yes", "--db", str(path))
    assert done.returncode == 0 and "removed 1 session" in done.stdout and done.stderr == ""


def test_negative_signal_values_are_values(db):
    cli("sessions", "create", "s-neg", "--agent", "a", "--db", str(db))
    done = cli("sessions", "signal", "s-neg", "reward", "-1", "--entity", "creds",
               "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "recorded reward -1 on creds in session s-neg" in done.stdout


def test_close_checks_the_end_reason(db):
    cli("sessions", "create", "s-close", "--agent", "a", "--db", str(db))
    typo = cli("sessions", "close", "s-close", "--reason", "compresion", "--db", str(db))
    assert typo.returncode == 2 and "did you mean 'compression'?" in typo.stderr
    other = cli("sessions", "close", "s-close", "--reason", "handoff", "--any-reason",
                "--db", str(db))
    assert other.returncode == 0 and "closed session s-close (handoff)" in other.stdout


def test_a_known_end_reason_ignores_case(db):
    """`--reason Compression` is the known reason compression (it was refused, or with
    --any-reason stored as another reason that continues no conversation)."""
    cli("sessions", "create", "s-case", "--agent", "a", "--db", str(db))
    done = cli("sessions", "close", "s-case", "--reason", "Compression", "--any-reason",
               "--db", str(db))
    assert (done.returncode, done.stdout) == (0, "closed session s-case (compression)\n")
    shown = json.loads(cli("sessions", "show", "s-case", "--json", "--db", str(db)).stdout)
    assert shown["end_reason"] == "compression"


def test_locked_database_is_a_clean_error(db):
    import recallql
    from recallql.index.embedders import HashEmbedder

    with recallql.connect(db, embedder=HashEmbedder()) as held, held.store.writing():
        done = cli("sessions", "create", "s-9", "--agent", "a", "--db", str(db), "--wait", "0.2")
        reader = cli("sessions", "list", "--db", str(db))
    assert done.returncode == 1 and "locked by another writer" in done.stderr
    assert f"process {os.getpid()}" in done.stderr and "waited 0.2 s" in done.stderr
    assert "wait for the other writer" in done.stderr and "readonly=True" not in done.stderr
    assert reader.returncode == 0  # readers never wait for the writer


@pytest.mark.skipif(importlib.util.find_spec("recallql.importers.hermes") is None,
                    reason="the Hermes importer is not on this branch yet")
def test_import_hermes(tmp_path):
    sys.path.insert(0, str(REPO / "tests" / "fixtures" / "hermes"))
    try:
        from build_state_db import build_state_db
    finally:
        sys.path.pop(0)
    store = tmp_path / "state.db"
    build_state_db(store)
    done = cli("import", "hermes", str(store), "--db", str(tmp_path / "db"), "--embedder",
               "hash")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar (it printed an empty line) when not a terminal
    listed = cli("sessions", "list", "--json", "--db", str(tmp_path / "db"))
    assert "conv-tip" in {r["id"] for r in json.loads(listed.stdout)["records"]}
    missing = cli("import", "hermes", str(tmp_path / "nope.db"), "--db", str(tmp_path / "db"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    # a directory (the recallql database itself, say) was reported as 'no such file'
    folder = cli("import", "hermes", str(tmp_path / "db"), "--db", str(tmp_path / "db"))
    assert folder.returncode == 1
    assert f"{tmp_path / 'db'} is a directory, not a Hermes store" in folder.stderr


@pytest.mark.parametrize("command", ["show", "lineage"])
def test_show_and_lineage_of_a_missing_session_name_it_without_a_caret(db, command):
    """The caret went under ':s' of 'SHOW SESSION :s', a statement the user never typed."""
    plain = cli("sessions", command, "nobody", "--db", str(db))
    assert plain.returncode == 1
    assert plain.stderr == ("error: no session 'nobody' (recallql sessions list lists the "
                            "sessions there are)\n")
    if command == "lineage":
        as_json = cli("sessions", command, "nobody", "--json", "--db", str(db))
        assert as_json.returncode == 1 and json.loads(as_json.stderr)["error"] == (
            "no session 'nobody'")


@pytest.mark.parametrize("command", ["show", "lineage"])
def test_a_mistyped_session_id_gets_a_did_you_mean(db, command):
    """A near miss of an existing id is named (it was a bare "no session 's-4'")."""
    made = cli("sessions", "create", f"{command}-s-42", "--agent", "a", "--db", str(db))
    assert made.returncode == 0
    done = cli("sessions", command, f"{command}-s-4", "--db", str(db))
    assert done.returncode == 1
    assert done.stderr == f"error: no session '{command}-s-4' (did you mean '{command}-s-42'?)\n"


@pytest.mark.parametrize("args", [
    ["sessions", "create", "bad id", "--agent", "a"],
    ["sessions", "create", "s1", "--agent", "a", "--parent", "nope"],
    ["import", "hermes", "NOT_SQLITE"],
], ids=["bad-id", "missing-parent", "not-a-hermes-store"])
def test_a_failed_first_write_leaves_no_database_behind(tmp_path, args):
    """These commands create the database they write to; failing, they left an empty one."""
    (tmp_path / "afile").write_text("not an SQLite file\n")
    db = tmp_path / "new.db"
    args = [str(tmp_path / "afile") if a == "NOT_SQLITE" else a for a in args]
    done = cli(*args, "--db", str(db))
    assert done.returncode == 1 and "error:" in done.stderr and not db.exists()
    assert cli("sessions", "create", "s0", "--agent", "a", "--db", str(db)).returncode == 0
    assert cli(*args, "--db", str(db)).returncode == 1 and db.is_dir()  # it was there: stays


@pytest.mark.parametrize(("status", "hint"), [("opn", "did you mean 'open'?"),
                                              ("done", "known: open, closed, archived")])
def test_list_refuses_an_unknown_status(db, status, hint):
    """A typo in --status is a usage error naming the states, not an empty list that reads as
    "there are no sessions"."""
    done = cli("sessions", "list", "--status", status, "--db", str(db))
    assert done.returncode == 2, done.stdout
    assert f"unknown status '{status}'; {hint}" in done.stderr
    assert done.stdout == ""
