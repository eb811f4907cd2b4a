"""Every script in examples/ runs to completion (a subprocess each, the real default embedder)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
EXPECTED = {  # a line each example must print
    "agent_memory.py": "conversation=s-1",
    "embedded_queries.py": "a hostile value is just words",
    "explain_walkthrough.py": "SESSION_KEYWORDS(1/1)",
    "hermes_import.py": "GROUP BY CONVERSATION",
    # the scripted agent loop over a real `recallql mcp` server: it writes memories, recalls
    # the best one, rewards it and gets EXPLAIN with that reward in the score arithmetic
    "mcp_agent_loop.py": "SIGNAL_BOOST(entity=restore, reward=1.000) +0.05000",
}
NEEDS_IMPORTER = {"hermes_import.py"}


def test_every_example_is_listed():
    assert {p.name for p in EXAMPLES} == set(EXPECTED)


@pytest.mark.slow  # the real default embedder, a subprocess each
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    if script.name in NEEDS_IMPORTER and importlib.util.find_spec(
            "recallql.importers.hermes") is None:
        pytest.skip("the Hermes importer is not on this branch yet")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert EXPECTED[script.name] in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # the real default embedder, two subprocesses
def test_agent_memory_runs_twice_on_one_directory(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = str(REPO / "examples" / "agent_memory.py")
    runs = [subprocess.run([sys.executable, script, str(tmp_path / "memory.db")],
                           capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr[-2000:]
    assert "earlier run" in runs[1].stdout
    assert runs[1].stdout.split("\n", 1)[1] == runs[0].stdout


def _tour_blocks() -> list[tuple[str, str]]:
    """The README tour as (kind, text) code blocks in order: kind ``sh`` or ``out``."""
    text = (REPO / "README.md").read_text()
    tour = text.split("## A five-minute tour", 1)[1].split("**GROUP BY CONVERSATION**", 1)[0]
    blocks = []
    for chunk in tour.split("```")[1::2]:
        kind, _, body = chunk.partition("\n")
        blocks.append(("sh" if kind == "sh" else "out", body))
    return blocks


def test_readme_tour_outputs_follow_the_commands_that_print_them(tmp_path):
    """Runs the tour (hash embedder, so scores differ) and checks each output block against
    what the command before it prints: first line, and the row count."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100", "NO_COLOR": "1"}
    shim = f'recallql() {{ "{sys.executable}" -m recallql.cli "$@"; }}\n'
    blocks = _tour_blocks()
    assert [k for k, _ in blocks[:2]] == ["sh", "out"]
    for (kind, body), after in zip(blocks, [*blocks[1:], ("sh", "")], strict=True):
        if kind != "sh":
            continue
        script = body.replace("recallql ingest notes/", "recallql ingest --embedder hash notes/")
        done = subprocess.run(["bash", "-ec", shim + script], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, body + done.stderr
        if after[0] == "out":
            expected, got = after[1].splitlines(), done.stdout.splitlines()
            assert got[0].split()[:4] == expected[0].split()[:4], (body, done.stdout)
            assert got[-1].startswith("(") == expected[-1].startswith("(")
            if expected[-1].startswith("("):
                assert got[-1] == expected[-1], (body, done.stdout)
            if "RETRIEVE" in body and "MATCHING" not in body:  # boosts only: no embedder in it
                assert _ranked(got) == _ranked(expected), (body, done.stdout)


def _ranked(lines: list[str]) -> list[tuple[str, list[str]]]:
    """A result table's rows as (id, the boosts its `why` names: keywords, entity, ...)."""
    rows: list[tuple[str, list[str]]] = []
    for line in lines:
        if re.match(r"\d+\s", line):
            rows.append((line.split()[1], []))
        if rows:
            rows[-1][1].extend(re.findall(r"([a-z]+) \+\d", line))
    return rows
