"""Session rows written as an import writes them (no tests here).

`db.sessions.create` refuses a parent that does not exist or is the session itself; a Hermes
import may still store such lineage (a store copied mid-rotation, a corrupt parent link), and
queries must fail closed on it. Tests that need that lineage write the row like the importer,
which also stores its conversation root (`recallql.sessions.roots.refresh`). `forget_roots`
clears the stored roots, as a tool writing rows behind recallql's back leaves them: statements
then fall back to the query-time walk, under the lineage budget.
"""

from __future__ import annotations

from recallql.sessions import roots
from recallql.sessions.lifecycle import to_epoch


def write_session_row(db, sid: str, agent_id: str = "agent-1", *, parent: str | None = None,
                      source: str = "cli", branched_from: str | None = None,
                      delegate_from: str | None = None, started_at: float = 0.0) -> None:
    """Insert an open session row directly (`parent` may be missing, or `sid` itself)."""
    with db.store.transaction() as conn:
        conn.execute(
            "INSERT INTO sessions (id, agent_id, status, parent_session_id, source, "
            "branched_from, delegate_from, started_at) VALUES (?, ?, 'open', ?, ?, ?, ?, ?)",
            (sid, agent_id, parent, source, branched_from, delegate_from,
             to_epoch(started_at, 0.0, "started_at")))
        roots.refresh(conn, [sid])


def forget_roots(db) -> None:
    """Clear every stored conversation root (the rows look never maintained)."""
    with db.store.transaction() as conn:
        conn.execute("UPDATE sessions SET conversation_root = NULL, lineage_status = NULL, "
                     "lineage_depth = NULL")


def needs_raw_row(db, sid: str, parent: str | None) -> bool:
    """True when `create` would refuse `parent` (the session itself, or not there yet)."""
    return parent is not None and (parent == sid or db.sessions.get(parent) is None)
