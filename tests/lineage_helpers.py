"""Builders shared by the lineage and live-context unit tests."""

from __future__ import annotations

from recallql.sessions.lineage import SessionRow


def row(sid, parent=None, reason=None, source="cli", branched=None, delegate=None) -> SessionRow:
    return SessionRow(id=sid, parent_session_id=parent, source=source, end_reason=reason,
                      branched_from=branched, delegate_from=delegate)


class Store:
    """A dict-backed ``fetch`` that records every call."""

    def __init__(self, rows) -> None:
        self.rows = {r.id: r for r in rows}
        self.calls: list[str] = []

    def __call__(self, sid: str) -> SessionRow | None:
        self.calls.append(sid)
        return self.rows.get(sid)
