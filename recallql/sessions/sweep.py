"""Sweeping sessions past their retention (`Sessions.sweep`): the rule, in one place.

**Activity.** A session's last activity is the latest of its start, its end, its signals, its
annotations and its messages (the items of `messages` with its `session_id`, by `created_at`).

**Conversations go as a whole.** A compression chain is one conversation (SPEC §6), so a session
is swept only when its whole conversation — every session with the same stored root — has been
inactive for longer than the retention: the old root of a chain whose tip is still in use stays,
and the live conversation keeps all its hits under GROUP BY CONVERSATION. A session whose lineage
is unresolved (cycle, missing parent) has no known conversation and is judged on its own.

**Surviving links.** A session that survives while its parent goes (a branch, a subagent, a tool
run or a reset under a swept conversation: never a continuation, which shares its parent's
conversation) loses its parent link, as a foreign key ``ON DELETE SET NULL`` would: it stays the
root of its own conversation instead of becoming unresolved (``missing_parent``), and its markers
(``branched_from``, ``delegate_from``) keep the old id as a record. Its root is recomputed in the
same batch (`recallql.sessions.roots.refresh`).

`plan` decides; `Sessions.sweep` deletes the planned sessions with their annotations, signals and
messages in one all-or-nothing batch, or (``dry_run=True``) only reports them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from recallql.sessions import roots, state
from recallql.sessions.lineage import LineageResolver, SessionRow


@dataclass(frozen=True, slots=True)
class SweptSession:
    """One session a sweep removes (or would remove).

    Attributes:
        id: The session.
        last_active: Its last activity, epoch seconds UTC.
        conversation: Its conversation root (its own id when unresolved).
        messages: Its live messages, deleted with it.
    """

    id: str
    last_active: float
    conversation: str
    messages: int


class SweepReport(int):
    """What `Sessions.sweep` removed: an `int`, the number of sessions (as `sweep` always
    returned), with details.

    Attributes:
        messages: Messages deleted with them.
        swept: The sessions, ordered by id (`SweptSession`).
        kept: Ids of sessions inactive past the retention but kept because another session of
            their conversation is still active.
        detached: Ids of surviving sessions whose parent was swept (their parent link cleared).
        dry_run: True when nothing was written (`Sessions.sweep(..., dry_run=True)`).
    """

    messages: int
    swept: tuple[SweptSession, ...]
    kept: tuple[str, ...]
    detached: tuple[str, ...]
    dry_run: bool

    def __new__(cls, sessions: int, messages: int = 0, *,
                swept: tuple[SweptSession, ...] = (), kept: tuple[str, ...] = (),
                detached: tuple[str, ...] = (), dry_run: bool = False) -> SweepReport:
        report = super().__new__(cls, sessions)
        report.messages = messages
        report.swept, report.kept, report.detached = swept, kept, detached
        report.dry_run = dry_run
        return report

    @property
    def sessions(self) -> int:
        """The number of sessions removed."""
        return int(self)

    @property
    def ids(self) -> list[str]:
        """Ids of the sessions removed, sorted."""
        return [s.id for s in self.swept]

    def __repr__(self) -> str:
        extra = "".join(f", {name}={len(value)}" for name, value in
                        (("kept", self.kept), ("detached", self.detached)) if value)
        extra += ", dry_run=True" if self.dry_run else ""
        return f"SweepReport(sessions={int(self)}, messages={self.messages}{extra})"

    __str__ = int.__repr__


#: Each session's own activity without its messages: the latest of start, end, signals and
#: annotations (epoch seconds UTC), with what grouping needs (`ROOT_SELECT` is replaced by the
#: stored root columns, or NULLs on a store whose roots are not stored).
ACTIVITY_SQL: Final = (
    "SELECT s.id, {roots}, MAX(s.started_at, COALESCE(s.ended_at, s.started_at), "
    "COALESCE((SELECT MAX(at) FROM signals WHERE session_id = s.id), s.started_at), "
    "COALESCE((SELECT MAX(at) FROM annotations WHERE session_id = s.id), s.started_at)) "
    "FROM sessions s ORDER BY s.id")


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """Which sessions a sweep at `cutoff` removes (`swept`) and which past-retention sessions
    it keeps because their conversation is active (`kept`)."""

    swept: tuple[SweptSession, ...]
    kept: tuple[str, ...]


def plan(conn: Any, messages: Mapping[str, tuple[float | None, int]], cutoff: float,
         stored_roots: bool) -> SweepPlan:
    """Apply the rule (module docstring) at `cutoff` (epoch seconds UTC).

    Args:
        conn: A read (or the sweep's write) connection.
        messages: ``{session_id: (latest message time or None, live message count)}``.
        cutoff: Sessions whose conversation was last active before this go.
        stored_roots: Whether the store has stored roots; without them (a store an older
            version wrote, opened read-only for a dry run) the roots are walked here.
    """
    columns = "s.conversation_root, s.lineage_status" if stored_roots else "NULL, NULL"
    activity: dict[str, float] = {}
    conversation: dict[str, str] = {}
    for sid, root, status, own in conn.execute(ACTIVITY_SQL.format(roots=columns)):
        latest = messages.get(sid, (None, 0))[0]
        activity[sid] = own if latest is None or not math.isfinite(latest) else max(own, latest)
        if status is not None:
            conversation[sid] = root if status == "resolved" else sid
    if not stored_roots:
        conversation = _walked_roots(conn)
    newest: dict[str, float] = {}
    for sid, when in activity.items():
        key = conversation.get(sid, sid)
        newest[key] = max(newest.get(key, when), when)
    swept, kept = [], []
    for sid, when in activity.items():
        key = conversation.get(sid, sid)
        if newest[key] < cutoff:
            swept.append(SweptSession(sid, when, key, messages.get(sid, (None, 0))[1]))
        elif when < cutoff:
            kept.append(sid)
    return SweepPlan(tuple(swept), tuple(kept))


def _walked_roots(conn: Any) -> dict[str, str]:
    """Every session's conversation key by the query-time walk (unlimited budget)."""
    rows = {r[0]: SessionRow._make(r) for r in conn.execute(
        f"SELECT {state.LEGACY_ROW_COLUMNS} FROM sessions")}
    resolver = LineageResolver(rows.get, budget=len(rows) + 1)
    out = {}
    for sid in rows:
        res = resolver.resolve(sid)
        out[sid] = res.root if res.resolved and res.root is not None else sid
    return out


def delete_sessions(ids: list[str], conn: Any) -> list[str]:
    """Delete the rows of these sessions and their signals and annotations, clear the parent
    link of every surviving child and recompute those children's roots (inside the sweep's
    batch).

    Returns:
        The ids of the surviving children whose parent link was cleared, sorted.
    """
    detached: set[str] = set()
    for start in range(0, len(ids), state.IN_CHUNK):
        chunk = ids[start:start + state.IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        for table, col in (("signals", "session_id"), ("annotations", "session_id"),
                           ("sessions", "id")):
            conn.execute(f"DELETE FROM {table} WHERE {col} IN ({marks})", chunk)
        detached.update(sid for (sid,) in conn.execute(
            f"UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id IN ({marks}) "
            "RETURNING id", chunk))
    roots.refresh(conn, sorted(detached))
    return sorted(detached)
