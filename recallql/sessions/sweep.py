"""Sweeping sessions past their retention (`Sessions.sweep`): which sessions go, the SQL that
removes their rows, and the report.
"""

from __future__ import annotations

from typing import Any

from recallql.sessions import state


class SweepReport(int):
    """What `Sessions.sweep` removed: an `int`, the number of sessions (as `sweep` always
    returned), with the number of their messages deleted in the same batch in `messages`."""

    messages: int

    def __new__(cls, sessions: int, messages: int = 0) -> SweepReport:
        report = super().__new__(cls, sessions)
        report.messages = messages
        return report

    @property
    def sessions(self) -> int:
        """The number of sessions removed."""
        return int(self)

    def __repr__(self) -> str:
        return f"SweepReport(sessions={int(self)}, messages={self.messages})"

    __str__ = int.__repr__


SWEEP_SQL = (
    "SELECT s.id FROM sessions s WHERE COALESCE(s.ended_at, MAX(s.started_at, "
    "COALESCE((SELECT MAX(at) FROM signals WHERE session_id = s.id), 0), "
    "COALESCE((SELECT MAX(at) FROM annotations WHERE session_id = s.id), 0))) < ? ORDER BY s.id")


def delete_sessions(ids: list[str], conn: Any) -> None:
    """Delete the rows of these sessions and their signals and annotations (inside the sweep's
    batch)."""
    for start in range(0, len(ids), state.IN_CHUNK):
        chunk = ids[start:start + state.IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        for table, col in (("signals", "session_id"), ("annotations", "session_id"),
                           ("sessions", "id")):
            conn.execute(f"DELETE FROM {table} WHERE {col} IN ({marks})", chunk)
