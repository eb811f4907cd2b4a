"""An agent's memory: sessions, messages, compression rotation, FOR SESSION and conversations.

Run: python examples/agent_memory.py [DB_DIR]   (default: a temporary directory; run again on
the same DB_DIR, it reuses what the first run stored)

An agent talks in session `s-1`; its context compressor rotates it into `s-2` (the parent ends
with end_reason 'compression'); the user then branches `s-2` into `s-3`. Later:
- `GROUP BY CONVERSATION` returns one row per conversation (s-1 and s-2 are one conversation),
- `FOR SESSION 's-2'` hides what is still in the agent's live context, and
- `RETRIEVE ... FOR SESSION` recalls documents by the session's annotations and rewards.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime, timedelta

import recallql

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def talk(db: recallql.Database, session: str, start: int, lines: list[tuple[str, str]]) -> None:
    for i, (role, text) in enumerate(lines):
        db.messages.append(session, role, text, at=at(start + i))


def remember(db: recallql.Database) -> None:
    """Store the documents and the agent's sessions s-1 → s-2 → s-3 with their messages."""
    db.ingest("docs", [
        {"id": "pg-upgrade", "title": "Upgrading PostgreSQL", "tags": ["postgres"],
         "body": "Run pg_upgrade with --link; re-analyze afterwards.",
         "created_at": "2024-10-01"},
        {"id": "pg-backup", "title": "PostgreSQL backups", "tags": ["postgres", "backup"],
         "body": "Use pg_basebackup nightly and archive WAL segments.",
         "created_at": "2023-02-01"},
        {"id": "redis", "title": "Redis persistence", "tags": ["redis"],
         "body": "Enable AOF for durability; RDB snapshots for backups.",
         "created_at": "2024-08-01"},
    ])
    db.sessions.create("s-1", "ops-agent", started_at=at(0))
    talk(db, "s-1", 0, [("user", "Our postgres backups take too long, any idea?"),
                        ("assistant", "Switch to pg_basebackup and archive WAL.")])
    db.sessions.close("s-1", end_reason="compression", at=at(10))  # context rotated
    db.sessions.create("s-2", "ops-agent", parent="s-1", started_at=at(10))
    talk(db, "s-2", 10, [("user", "And how do we restore postgres backups quickly?"),
                         ("assistant", "Restore the base backup, then replay WAL.")])
    db.sessions.annotate("s-2", "postgres", at=at(12))  # keyword for the session boost
    db.sessions.signal("s-2", "reward", 1.0, entity="pg-backup", at=at(13))

    # a branch of s-2: another conversation, even though its parent is s-2
    db.sessions.close("s-2", end_reason="branched", at=at(20))
    db.sessions.create("s-3", "ops-agent", parent="s-2", branched_from="s-2",
                       started_at=at(20))
    talk(db, "s-3", 20, [("user", "Let's try restoring postgres backups to a replica.")])


def recall(db: recallql.Database) -> None:
    """Ask: lineage, conversations, FOR SESSION on messages and on documents."""
    print("-- lineage of s-3 (a branch) and s-2 (a compression continuation)")
    for s in ("s-3", "s-2"):
        print(f"   {s}:", [(r["session_id"], r["edge"]) for r in
                           db.execute("SHOW LINEAGE :s", s=s)])  # a Result of records

    q = "restore postgres backups"
    print("-- SEARCH messages ... GROUP BY CONVERSATION: one row per conversation")
    for row in db.execute("SEARCH messages MATCHING :q GROUP BY CONVERSATION", q=q):
        print(f"   {row.id:<6} session={row.session_id} conversation={row.conversation_root}"
              f"  {row.fields['content']!r}")

    print("-- the same FOR SESSION 's-3': its live messages are hidden")
    result = db.execute("SEARCH messages MATCHING :q FOR SESSION :s GROUP BY CONVERSATION",
                        q=q, s="s-3")
    for row in result:
        print(f"   {row.id:<6} session={row.session_id} conversation={row.conversation_root}")

    print("-- RETRIEVE FROM docs FOR SESSION 's-2': what should this agent see now")
    for row in db.execute("RETRIEVE 3 FROM docs FOR SESSION :s", s="s-2"):
        print(f"   {row.id:<10} {row.score:.4f}  " + "  ".join(
            f"{r.code.value}{'(' + r.detail + ')' if r.detail else ''}"
            for r in row.reasons if r.contribution > 0))


def main(path: str) -> None:
    with recallql.connect(path, clock=at(120).timestamp) as db:
        if len(db.execute("SHOW SESSIONS WHERE id = 's-1'")):
            print(f"-- {path} holds an earlier run's memory: asking it again")
        else:
            remember(db)
        recall(db)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(f"{tmp}/memory.db")
