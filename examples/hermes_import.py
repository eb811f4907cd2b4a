"""Import a Hermes Agent session store and search it by conversation.

Run: python examples/hermes_import.py [STATE_DB]

Without an argument it builds a tiny Hermes 0.19 store (every lineage shape: a compression chain
with in-place compaction and a rewound message, a /branch, a delegate subagent, a tool child,
a /new reset, broken links) with `tests/fixtures/hermes/build_state_db.py`. With your own store,
pass it: `python examples/hermes_import.py ~/.hermes/state.db` (read-only: never written).
The same from the command line: `recallql import hermes ~/.hermes/state.db --db memory.db`.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import recallql

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hermes" / \
    "build_state_db.py"


def tiny_store(directory: Path) -> Path:
    """Build the test fixture's Hermes store in `directory`."""
    spec = importlib.util.spec_from_file_location("build_state_db", FIXTURE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    path = directory / "state.db"
    module.build_state_db(path)
    return path


def main(store: Path, directory: Path) -> None:
    with recallql.connect(directory / "memory.db") as db:
        report = db.import_hermes(store)
        print("-- import report")
        for key, value in report.model_dump().items():
            print(f"   {key}: {value}")
        again = db.import_hermes(store)  # idempotent: nothing is added twice
        print("-- re-import adds nothing:", {k: v for k, v in again.model_dump().items()
                                             if k.endswith("_added")})

        sessions = db.execute("SHOW SESSIONS LIMIT 20")
        print(f"-- {len(sessions)} sessions, e.g.",
              [(r["id"], r["end_reason"]) for r in sessions[:6]])  # a Result of records
        tip = next((r["id"] for r in sessions if r["id"] == "conv-tip"),
                   sessions[-1]["id"] if len(sessions) else None)
        if tip:
            print(f"-- SHOW LINEAGE {tip!r}:",
                  [(r["session_id"], r["edge"]) for r in
                   db.execute("SHOW LINEAGE :s", s=tip)])
        print("-- SEARCH messages ... GROUP BY CONVERSATION")
        result = db.execute("SEARCH messages MATCHING :q GROUP BY CONVERSATION LIMIT 5",
                            q="kubernetes migration")
        for row in result:
            print(f"   {row.id:<22} session={row.session_id:<14} "
                  f"conversation={row.conversation_root}  {row.fields['content'][:50]!r}")
        for notice in result.warnings:
            print(f"   warning {notice.code.value}: {notice.message}")
        # Hermes' own search hides subagent and tool sessions and tool rows: the same view
        print("-- the Hermes-equivalent view: WHERE source NOT IN ('subagent', 'tool') AND "
              "role != 'tool'")
        hermes_view = db.execute(
            "SEARCH messages MATCHING :q WHERE source NOT IN ('subagent', 'tool') "
            "AND role != 'tool' GROUP BY CONVERSATION LIMIT 5", q="vector databases tool output")
        for row in hermes_view:
            print(f"   {row.id:<22} session={row.session_id:<14} source={row.fields['source']:<8}"
                  f" role={row.fields['role']:<9} {row.fields['content'][:40]!r}")
        check = db.sessions.verify_lineage()  # stored roots against the walk
        print("--", check.to_text().splitlines()[0])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        given = Path(sys.argv[1]).expanduser() if len(sys.argv) > 1 else None
        main(given or tiny_store(Path(tmp)), Path(tmp))
