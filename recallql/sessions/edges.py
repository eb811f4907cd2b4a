"""The edge rule of conversation lineage (SPEC §6): session rows, edge verdicts, resolutions.

A long conversation rotated by context compression is a chain of sessions ``root ← mid ← tip``;
it is one conversation. Only a **compression continuation** edge carries conversation identity:

    child → parent is a compression continuation iff the parent exists, the parent's
    ``end_reason = 'compression'``, the child's source is not ``tool``, and neither
    ``branched_from`` nor ``delegate_from`` of the child equals that parent (markers pointing
    elsewhere do not block).

Any other parent link (branch, delegate/subagent, tool, reset) is not conversation identity: the
child is the root of its own conversation. recallql adds one case the rule leaves open: a child
whose markers could not be read (an imported session whose ``model_config`` is not JSON) has no
proven edge, so it is the root of its own conversation too (``markers_unreadable``).

This module does no I/O. `recallql.sessions.lineage` walks these edges at query time;
`recallql.sessions.roots` keeps every session's root at write time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Final, NamedTuple

COMPRESSION: Final = "compression"
BRANCHED: Final = "branched"
TOOL_SOURCE: Final = "tool"
SUBAGENT_SOURCE: Final = "subagent"
#: End reasons of a fresh reset (SPEC §6): the next session starts with an empty context.
FRESH_RESET_REASONS: Final = frozenset(
    {"new_session", "session_reset", "session_switch", "idle", "daily", "suspended",
     "resume_pending_expired"}
)
#: The end reasons agents and the CLI know (SPEC §6; `archived` is `archive`'s), in the order
#: `recallql sessions close --help` lists them: a typo (``compresion``) would silently end a
#: conversation, so the CLI and the MCP server refuse others unless asked to record one.
END_REASONS: Final = ("compression", "branched", "new_session", "session_reset",
                      "session_switch", "resumed_other", "cli_close", "agent_close",
                      "cron_complete", "idle", "daily", "suspended", "resume_pending_expired",
                      "user_exit", "archived")
DEFAULT_BUDGET: Final = 2000
DEFAULT_MAX_STEPS: Final = 10_000


class SessionRow(NamedTuple):
    """The fields of one session that lineage needs (an immutable named tuple: lineage walks
    build one per session read, so construction cost matters).

    Attributes:
        id: Session id.
        parent_session_id: Parent link of any kind, or None.
        source: Where the session came from (``cli``, ``tool``, ``subagent``, ...).
        end_reason: Why the session ended (``compression``, ``branched``, ...), None while open.
        branched_from: ``/branch`` marker: the session this one was branched from.
        delegate_from: Delegation marker: the session that spawned this subagent.
        status: ``open`` | ``closed`` | ``archived``.
        started_at: Epoch seconds UTC, or None.
        ended_at: Epoch seconds UTC, or None while open.
        markers_unreadable: True when the session's markers could not be read (an imported
            Hermes session whose ``model_config`` is not a JSON object): its parent link is
            then no proven continuation.
        agent_id: The agent the session belongs to (None when the reader did not select it).
    """

    id: str
    parent_session_id: str | None = None
    source: str = "cli"
    end_reason: str | None = None
    branched_from: str | None = None
    delegate_from: str | None = None
    status: str = "open"
    started_at: float | None = None
    ended_at: float | None = None
    markers_unreadable: bool = False
    agent_id: str | None = None

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> SessionRow:
        """Build a row from a mapping such as a Hermes session dict or a SQLite row.

        Missing keys take the defaults. Without a ``status`` key the status is derived:
        ``archived`` when ``archived`` is truthy, ``closed`` when ``ended_at`` is set, else
        ``open``.

        Raises:
            KeyError: ``id`` is missing.
        """
        status = row.get("status")
        if status is None:
            if row.get("archived"):
                status = "archived"
            else:
                status = "closed" if row.get("ended_at") is not None else "open"
        return cls(
            id=row["id"], parent_session_id=row.get("parent_session_id"),
            source=row.get("source") or "cli", end_reason=row.get("end_reason"),
            branched_from=row.get("branched_from"), delegate_from=row.get("delegate_from"),
            status=status, started_at=row.get("started_at"), ended_at=row.get("ended_at"),
            markers_unreadable=bool(row.get("markers_unreadable")), agent_id=row.get("agent_id"),
        )


Fetch = Callable[[str], SessionRow | None]


class EdgeVerdict(StrEnum):
    """What a child → parent link is (SHOW LINEAGE prints these)."""

    CONTINUATION = "continuation"
    BRANCH = "branch"
    DELEGATE = "delegate"
    TOOL = "tool"
    MARKERS_UNREADABLE = "markers_unreadable"
    RESET = "reset"
    NOT_COMPRESSION = "not_compression"
    MISSING = "missing"
    CYCLE = "cycle"
    ROOT = "root"


def edge_verdict(child: SessionRow, parent: SessionRow | None) -> EdgeVerdict:
    """Classify the link from ``child`` to its parent (SPEC §6).

    ``CONTINUATION`` exactly when the SPEC §6 rule holds (see the module docstring). Otherwise the
    most informative reason, first match wins:

    1. ``ROOT``: the child has no parent link.
    2. ``MISSING``: the parent row is absent (``parent is None``).
    3. ``CYCLE``: the child is its own parent (a self-loop is never a valid lineage).
    4. ``TOOL``: the child's source is ``tool``.
    5. ``MARKERS_UNREADABLE``: the child's markers could not be read, so no edge is proven
       (recallql's reading of the rule for a malformed Hermes ``model_config``).
    6. ``BRANCH``: ``child.branched_from`` is the parent, or the parent ended ``branched``.
    7. ``DELEGATE``: ``child.delegate_from`` is the parent, or the child's source is ``subagent``
       and the parent did not end by compression.
    8. ``RESET``: the parent ended by a fresh reset (:data:`FRESH_RESET_REASONS`).
    9. ``NOT_COMPRESSION``: the parent ended for another reason or is still open.

    Args:
        child: The child session.
        parent: The row of ``child.parent_session_id``, or None when absent.

    Raises:
        ValueError: ``parent`` is not the row of ``child.parent_session_id``.
    """
    pid = child.parent_session_id
    if pid is None:
        return EdgeVerdict.ROOT
    if parent is None:
        return EdgeVerdict.MISSING
    if parent.id != pid:
        raise ValueError(f"parent row {parent.id!r} is not the parent {pid!r} of {child.id!r}")
    if pid == child.id:
        return EdgeVerdict.CYCLE
    reason = parent.end_reason
    if child.source == TOOL_SOURCE:
        return EdgeVerdict.TOOL
    if child.markers_unreadable:
        return EdgeVerdict.MARKERS_UNREADABLE
    if child.branched_from == pid or reason == BRANCHED:
        return EdgeVerdict.BRANCH
    if child.delegate_from == pid or (child.source == SUBAGENT_SOURCE and reason != COMPRESSION):
        return EdgeVerdict.DELEGATE
    if reason == COMPRESSION:
        return EdgeVerdict.CONTINUATION
    if reason in FRESH_RESET_REASONS:
        return EdgeVerdict.RESET
    return EdgeVerdict.NOT_COMPRESSION


class ResolutionStatus(StrEnum):
    """Outcome of resolving one session to its conversation root."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    BUDGET_EXHAUSTED = "budget_exhausted"


class UnresolvedReason(StrEnum):
    """Why a session is unresolved (fail closed: its hits are dropped and counted)."""

    CYCLE = "cycle"
    MISSING_PARENT = "missing_parent"
    MISSING_SESSION = "missing_session"


class Resolution(NamedTuple):
    """Where a session's conversation starts.

    Attributes:
        root: The conversation root's session id; None unless resolved.
        status: Resolved, unresolved or budget exhausted.
        reason: Why unresolved; None otherwise.
        depth: Continuation edges from the session to its root (resolved), or walked before the
            failure was proven (unresolved); 0 when the budget ran out.
    """

    root: str | None
    status: ResolutionStatus
    reason: UnresolvedReason | None = None
    depth: int = 0

    @property
    def resolved(self) -> bool:
        """True when the session has a conversation root."""
        return self.status is ResolutionStatus.RESOLVED


