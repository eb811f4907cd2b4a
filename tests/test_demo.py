"""``recallql demo``: the whole demo on trimmed input, and its parts."""

from __future__ import annotations

import gzip
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from recallql.demo import MARKER, DemoError, prepare, run_demo
from recallql.demo.build import ROTATE_EVERY, conversation_roots, plan_conversations
from recallql.demo.sources import Chat, Turn, debian_docs, parse_python_news

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("1. Hybrid search", "2. Filters, parameters and recency",
            "3. EXPLAIN: the arithmetic behind every score",
            "4. FOR SESSION: the agent's context changes the ranking",
            "5. RETRIEVE FOR SESSION", "6. Conversations: one row per conversation",
            "7. FOR SESSION on messages", "8. Lineage")
HAS_DEBIAN = bool(list(Path("/usr/share/doc").glob("*/changelog.Debian.gz")))


@pytest.mark.slow  # the real embedder over the real demo data
def test_demo_small_end_to_end(tmp_path):
    """The real entry point with the real embedder: builds, then prints every section."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "140", "NO_COLOR": "1"}
    path = tmp_path / "demo.db"
    done = subprocess.run([sys.executable, "-m", "recallql.cli", "demo", "--small", "--db",
                           str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for title in SECTIONS:
        assert title in out, title
    assert re.search(r"built in [\d.]+ s: \d+ documents, \d+ messages in \d+ sessions", out)
    # every ranked statement printed rows; the catalog ones printed records
    assert out.count("(5 rows)") >= 3 and "(4 rows)" in out and "(8 rows)" in out
    assert "TopK" in out and "SESSION_KEYWORDS(1/1)" in out and "SESSION_ENTITY(" in out
    assert "↑" in out  # FOR SESSION moved a row up
    assert "is hidden" in out  # the live-context example hid the current session's message
    assert "continuation" in out and "branch" in out
    assert " shell --db " in out and (path / MARKER).is_file()
    assert "Traceback" not in done.stderr


def test_demo_rebuilds_its_own_database_and_refuses_others(tmp_path):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(DemoError, match="not built by the demo"):
        prepare(other)
    built = tmp_path / "demo.db"
    built.mkdir()
    (built / MARKER).write_text("{}")
    prepare(built)
    assert not built.exists()


def test_demo_keeps_its_database_once_something_else_wrote_to_it(tmp_path):
    """`recallql demo` rebuilt its database even after the user had written to it (a session
    created in the demo database was gone on the next run, without a word); reading it
    (the shell the demo suggests) still lets it rebuild."""
    import shutil

    import recallql
    from recallql.index.embedders import HashEmbedder

    path = tmp_path / "demo.db"
    run_demo(path, size="small", embedder="hash",
             console=Console(file=io.StringIO(), width=120, color_system=None))
    with recallql.connect(path, embedder=HashEmbedder(), readonly=True) as db:
        assert db.execute("SEARCH docs MATCHING 'crash' LIMIT 1").ids()
    looked_at = tmp_path / "looked-at.db"
    shutil.copytree(path, looked_at)
    prepare(looked_at)
    assert not looked_at.exists()
    with recallql.connect(path, embedder=HashEmbedder()) as db:
        db.sessions.create("mine", "me")
    with pytest.raises(DemoError, match="built by the demo and written to since"):
        prepare(path)
    with recallql.connect(path, embedder=HashEmbedder(), readonly=True) as db:
        assert db.sessions.snapshot("mine").agent_id == "me"


def test_demo_falls_back_to_python_news_without_debian_changelogs(tmp_path):
    if not list(Path("/usr/share/doc").glob("python3*/NEWS.gz")):
        pytest.skip("no Python NEWS.gz on this machine")
    out = io.StringIO()
    counts = run_demo(tmp_path / "db", size="small", embedder="hash",
                      console=Console(file=out, width=120, color_system=None),
                      doc_root=tmp_path / "empty")
    text = out.getvalue()
    assert "note: no Debian changelogs" in text and "using Python's NEWS" in text
    assert counts["documents"] == 200 and counts["sections"] == len(SECTIONS)
    assert "python-news:" in text


def test_conversation_plans_rotate_branch_and_reset():
    turns = [Turn("user" if i % 2 == 0 else "assistant", f"turn {i}", 1000.0 + i)
             for i in range(50)]
    long = [Chat(f"c{i}", "p", list(turns)) for i in range(4)]
    plans = plan_conversations(long, [Chat("s", "p", turns[:7])])
    chat0 = plans["chat0"]
    assert [p.id for p in chat0] == ["chat0-1", "chat0-2", "chat0-3"]
    assert [p.parent for p in chat0] == [None, "chat0-1", "chat0-2"]
    assert [p.end_reason for p in chat0] == ["compression", "compression", None]
    assert len(chat0[0].turns) == ROTATE_EVERY
    branch = plans["chat1"][-1]
    assert branch.id == "chat1-branch" and branch.branched_from == plans["chat1"][-2].id
    assert plans["chat1"][-2].end_reason == "branched"
    assert branch.copied == plans["chat1"][-2].turns and branch.end_reason is None
    reset = plans["chat2"][-1]
    assert reset.id == "chat2-reset" and plans["chat2"][-2].end_reason == "session_reset"
    assert plans["chat3"][-1].end_reason == "user_exit"
    assert [p.id for p in plans["talk0"]] == ["talk0"]
    assert plans["chat0"][1].started == turns[20].at and plans["chat0"][0].ended == 1020.0
    roots = conversation_roots(p for chain in plans.values() for p in chain)
    assert roots["chat0-3"] == roots["chat1-2"].replace("chat1", "chat0") == "chat0-1"
    assert roots["chat1-branch"] == "chat1-branch" and roots["chat2-reset"] == "chat2-reset"


def test_python_news_parser():
    text = ("What's New in Python 3.11.2 final?\n==========\n\n*Release date: 2023-02-07*\n\n"
            "Library\n-------\n\n- gh-issue-1: Fix a crash\n  in the parser.\n\n"
            "Tests\n-----\n\n- bpo-2: Add a test.\n\n"
            "What's New in Python 3.11.1 final?\n==========\n\n- Old item.\n")
    items = list(parse_python_news(text))
    assert [i["id"] for i in items] == ["python-news:3.11.2:0", "python-news:3.11.2:1",
                                        "python-news:3.11.1:0"]
    assert items[0]["body"] == "gh-issue-1: Fix a crash in the parser."
    assert items[0]["tags"] == ["library"] and items[1]["tags"] == ["tests"]
    assert items[0]["created_at"].isoformat() == "2023-02-07T00:00:00+00:00"
    assert "created_at" not in items[2]


def test_debian_docs_are_breadth_first(tmp_path):
    for package, versions in (("alpha", ["2", "1"]), ("beta", ["9"])):
        entries = "".join(
            f"{package} ({v}) unstable; urgency=low\n\n  * Change {v}.\n\n"
            f" -- Dev <dev@example.org>  Mon, 0{i + 1} Jan 2024 10:00:00 +0000\n\n"
            for i, v in enumerate(versions))
        (tmp_path / package).mkdir()
        with gzip.open(tmp_path / package / "changelog.Debian.gz", "wt") as handle:
            handle.write(entries)
    items = debian_docs(2, tmp_path)
    assert [i["id"] for i in items] == ["debian:alpha:2", "debian:beta:9"]
    assert items[0]["tags"] == ["alpha"] and "authors" not in items[0]


@pytest.mark.skipif(not HAS_DEBIAN, reason="no Debian changelogs here")
def test_debian_docs_on_this_machine():
    items = debian_docs(50)
    assert len(items) == 50 and all(i["created_at"].year >= 1995 for i in items)


def test_the_closing_hint_names_a_command_that_runs_from_here(tmp_path, monkeypatch):
    """After `make demo` (which runs .venv/bin/recallql, not on PATH) the hint says
    .venv/bin/recallql; on PATH it says recallql; elsewhere python -m recallql.cli."""
    import sys

    from recallql.demo import command_name

    script = tmp_path / ".venv" / "bin" / "recallql"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/recallql", "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_name() == ".venv/bin/recallql"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert command_name() == "recallql"
    monkeypatch.setattr(sys, "argv", ["-c"])
    assert command_name() == f"{sys.executable} -m recallql.cli"


def test_the_hybrid_section_names_the_fusion_the_default_plan_uses():
    """The tour said "fused by reciprocal rank fusion" above an EXPLAIN showing ConvexFusion."""
    import inspect

    import recallql
    from recallql.api import HashEmbedder
    from recallql.demo import tour

    with recallql.connect(embedder=HashEmbedder()) as db:
        db.ingest("docs", [{"id": "a", "title": "backup"}])
        fusion = db.execute("EXPLAIN SEARCH docs MATCHING 'backup'").plan.children[0].children[0]
    text = " ".join(inspect.getsource(tour.hybrid).split())
    assert fusion.operator == "ConvexFusion" and "fused by the convex combination" in text
