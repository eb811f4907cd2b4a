"""Conversation lineage: which sessions form one conversation (SPEC §6).

A long conversation rotated by context compression is a chain of sessions ``root ← mid ← tip``;
it is one conversation. Only a **compression continuation** edge carries conversation identity:

    child → parent is a compression continuation iff the parent exists, the parent's
    ``end_reason = 'compression'``, the child's source is not ``tool``, and neither
    ``branched_from`` nor ``delegate_from`` of the child equals that parent (markers pointing
    elsewhere do not block).

Any other parent link (branch, delegate/subagent, tool, reset) is not conversation identity: the
child is the root of its own conversation.

This module does no I/O of its own. A :class:`LineageResolver` reads session rows through a
``fetch(session_id) -> SessionRow | None`` callable (the engine passes one backed by SQLite).

Budget accounting (one resolver = one statement):
    The budget ``B`` counts **successful uncached row fetches**: a call of ``fetch`` that returns
    a row for an id this resolver has not read before. Memo hits, rows already cached, fetches
    that return ``None`` (absent rows) and cycle checks cost nothing. The starting session's own
    row counts like any other. Before every uncached fetch the resolver checks the budget: when
    ``B`` successful fetches have been made, the fetch is *not* made (not even one that might have
    returned ``None``) and the resolution returns ``budget_exhausted``. So ``fetch`` returns a
    row at most ``B`` times per resolver. Resolving a continuation chain of depth ``d`` (``d``
    edges, ``d + 1`` sessions) from scratch costs ``d + 1`` fetches when the root has no parent
    link, and ``d + 2`` when the root has a non-continuation parent link (that parent's row is
    read to see that the edge is not a continuation). It succeeds with ``B = d + 1`` (resp.
    ``d + 2``) and is ``budget_exhausted`` with one less. A cycle needs no fetch to be proven
    once its rows are read, so a cycle whose last row is fetch number ``B`` is a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, NamedTuple, cast

COMPRESSION: Final = "compression"
BRANCHED: Final = "branched"
TOOL_SOURCE: Final = "tool"
SUBAGENT_SOURCE: Final = "subagent"
#: End reasons of a fresh reset (SPEC §6): the next session starts with an empty context.
FRESH_RESET_REASONS: Final = frozenset(
    {"new_session", "session_reset", "session_switch", "idle", "daily", "suspended",
     "resume_pending_expired"}
)
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
        )


Fetch = Callable[[str], SessionRow | None]


class EdgeVerdict(StrEnum):
    """What a child → parent link is (SHOW LINEAGE prints these)."""

    CONTINUATION = "continuation"
    BRANCH = "branch"
    DELEGATE = "delegate"
    TOOL = "tool"
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
    5. ``BRANCH``: ``child.branched_from`` is the parent, or the parent ended ``branched``.
    6. ``DELEGATE``: ``child.delegate_from`` is the parent, or the child's source is ``subagent``
       and the parent did not end by compression.
    7. ``RESET``: the parent ended by a fresh reset (:data:`FRESH_RESET_REASONS`).
    8. ``NOT_COMPRESSION``: the parent ended for another reason or is still open.

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


_EXHAUSTED: Final = Resolution(None, ResolutionStatus.BUDGET_EXHAUSTED)


@dataclass(slots=True)
class LineageStats:
    """Counters of one resolver, printed by EXPLAIN.

    Attributes:
        budget: The budget B (successful uncached fetches allowed).
        fetches: Successful uncached fetches made by :meth:`LineageResolver.resolve` (≤ budget).
        absent: Fetches that returned None (free).
        chain_fetches: Successful uncached fetches made by :meth:`LineageResolver.chain`
            (bounded by its step limit, not by the budget).
        memo_hits: Resolutions answered (entirely or from some ancestor on) by the memo.
        resolved: ``resolve`` calls that returned a root.
        unresolved: ``resolve`` calls that returned unresolved, by reason.
        exhausted: ``resolve`` calls that ran out of budget.
        max_depth: Deepest resolved chain seen (continuation edges).
    """

    budget: int
    fetches: int = 0
    absent: int = 0
    chain_fetches: int = 0
    memo_hits: int = 0
    resolved: int = 0
    unresolved: dict[UnresolvedReason, int] = field(default_factory=dict)
    exhausted: int = 0
    max_depth: int = 0

    @property
    def budget_exhausted(self) -> bool:
        """True once any resolution ran out of budget."""
        return self.exhausted > 0

    def describe(self) -> dict[str, Any]:
        """Plain values for EXPLAIN (``unresolved`` keys sorted)."""
        return {
            "budget": self.budget, "fetches": self.fetches, "absent": self.absent,
            "chain_fetches": self.chain_fetches, "memo_hits": self.memo_hits,
            "resolved": self.resolved,
            "unresolved": {str(k): self.unresolved[k] for k in sorted(self.unresolved)},
            "budget_exhausted": self.budget_exhausted, "max_depth": self.max_depth,
        }


class LineageResolver:
    """Resolve sessions to conversation roots, once per statement.

    One memo per resolver with path compression: every session on a walked path memoises its
    outcome (root or unresolved reason), so resolving the tip and then the mid of a chain costs
    no extra fetch. Walks are iterative (no recursion), so chains of any depth resolve. A cycle or
    a missing parent row makes every session on the path unresolved (fail closed). A walk that
    runs out of budget memoises nothing, but the rows it read stay cached in this resolver.
    See the module docstring for the budget accounting.

    Args:
        fetch: ``fetch(session_id) -> SessionRow | None``; None when the row is absent.
        budget: B, successful uncached fetches allowed (``GROUP BY CONVERSATION (budget = n)``).

    Raises:
        ValueError: ``budget`` is negative.
    """

    def __init__(self, fetch: Fetch, budget: int = DEFAULT_BUDGET) -> None:
        if budget < 0:
            raise ValueError(f"lineage budget must be >= 0, got {budget}")
        self._fetch = fetch
        self._rows: dict[str, SessionRow | None] = {}
        self._memo: dict[str, Resolution] = {}
        self.stats = LineageStats(budget=budget)

    def resolve(self, session_id: str) -> Resolution:
        """Resolve one session to its conversation root.

        Returns:
            The resolution; ``missing_session`` when the session's own row is absent.

        Raises:
            ValueError: ``fetch`` returned a row with a different id.
        """
        hit = self._memo.get(session_id)
        if hit is not None:
            self.stats.memo_hits += 1
            return self._record(hit)
        row = self._budgeted_row(session_id)
        if isinstance(row, Resolution):  # _EXHAUSTED
            return self._record(row)
        if row is None:
            res = Resolution(None, ResolutionStatus.UNRESOLVED, UnresolvedReason.MISSING_SESSION)
            self._memo[session_id] = res
            return self._record(res)
        return self._record(self._walk(row))

    def row(self, session_id: str) -> SessionRow | None:
        """The session's row if this resolver has already read it (no fetch, no budget)."""
        return self._rows.get(session_id)

    def chain(
        self, session_id: str, max_steps: int = DEFAULT_MAX_STEPS
    ) -> list[tuple[SessionRow | None, EdgeVerdict]]:
        """Walk parent links of any kind upward, for SHOW LINEAGE.

        Each entry is a session row and the verdict of the link to its parent. The walk stops at a
        root (``ROOT``), an absent parent (``MISSING``) or a parent already listed (``CYCLE``,
        replacing the link's own verdict). An absent starting session gives
        ``[(None, MISSING)]``. After ``max_steps`` entries the walk stops; the last verdict is then
        not one of ROOT/MISSING/CYCLE. Reads through this resolver's row cache; not budgeted.
        """
        row = self._chain_row(session_id)
        if row is None:
            return [(None, EdgeVerdict.MISSING)]
        out: list[tuple[SessionRow | None, EdgeVerdict]] = []
        seen = {row.id}
        while len(out) < max_steps:
            pid = row.parent_session_id
            parent = None if pid is None else self._chain_row(pid)
            verdict = edge_verdict(row, parent)
            if parent is not None and parent.id in seen:
                verdict = EdgeVerdict.CYCLE
            out.append((row, verdict))
            if parent is None or verdict is EdgeVerdict.CYCLE:
                break
            seen.add(parent.id)
            row = parent
        return out

    def _walk(self, row: SessionRow) -> Resolution:
        """Follow continuation edges from ``row`` up to a root, a failure or the budget."""
        path = [row.id]
        on_path = {row.id}
        while True:
            pid = row.parent_session_id
            if pid is None:
                return self._settle(path, Resolution(row.id, ResolutionStatus.RESOLVED))
            parent = self._budgeted_row(pid)
            if isinstance(parent, Resolution):  # _EXHAUSTED
                return parent
            verdict = edge_verdict(row, parent)
            if verdict is not EdgeVerdict.CONTINUATION:
                return self._settle(path, self._stop(row, verdict))
            if pid in on_path:
                return self._settle(path, _unresolved(UnresolvedReason.CYCLE))
            hit = self._memo.get(pid)
            if hit is not None:
                self.stats.memo_hits += 1
                return self._settle(path, hit, base=hit.depth + 1)
            path.append(pid)
            on_path.add(pid)
            row = cast(SessionRow, parent)  # a continuation edge has a parent row

    @staticmethod
    def _stop(row: SessionRow, verdict: EdgeVerdict) -> Resolution:
        """Outcome at the first non-continuation edge above ``row``."""
        if verdict is EdgeVerdict.MISSING:
            return _unresolved(UnresolvedReason.MISSING_PARENT)
        if verdict is EdgeVerdict.CYCLE:
            return _unresolved(UnresolvedReason.CYCLE)
        return Resolution(row.id, ResolutionStatus.RESOLVED)

    def _settle(self, path: list[str], outcome: Resolution, base: int = 0) -> Resolution:
        """Memoise ``outcome`` for every session on ``path`` (path compression)."""
        root, status, reason, _ = outcome
        memo = self._memo
        depth = base + len(path) - 1
        for sid in path:
            memo[sid] = Resolution(root, status, reason, depth)
            depth -= 1
        return memo[path[0]]

    def _record(self, res: Resolution) -> Resolution:
        """Count one ``resolve`` outcome in the stats."""
        stats = self.stats
        if res.status is ResolutionStatus.RESOLVED:
            stats.resolved += 1
            stats.max_depth = max(stats.max_depth, res.depth)
        elif res.status is ResolutionStatus.UNRESOLVED:
            reason = cast(UnresolvedReason, res.reason)  # set on every unresolved outcome
            stats.unresolved[reason] = stats.unresolved.get(reason, 0) + 1
        else:
            stats.exhausted += 1
        return res

    def _budgeted_row(self, session_id: str) -> SessionRow | None | Resolution:
        """A row from the cache, or fetched within budget; ``_EXHAUSTED`` when out of budget."""
        try:
            return self._rows[session_id]
        except KeyError:
            pass
        if self.stats.fetches >= self.stats.budget:
            return _EXHAUSTED
        row = self._read(session_id)
        if row is not None:
            self.stats.fetches += 1
        return row

    def _chain_row(self, session_id: str) -> SessionRow | None:
        """A row from the cache, or fetched outside the budget (counted as a chain fetch)."""
        try:
            return self._rows[session_id]
        except KeyError:
            pass
        row = self._read(session_id)
        if row is not None:
            self.stats.chain_fetches += 1
        return row

    def _read(self, session_id: str) -> SessionRow | None:
        """Call ``fetch`` once for an uncached id and cache the answer (None included)."""
        row = self._fetch(session_id)
        if row is None:
            self.stats.absent += 1
        elif row.id != session_id:
            raise ValueError(f"fetch({session_id!r}) returned the row of {row.id!r}")
        self._rows[session_id] = row
        return row


def _unresolved(reason: UnresolvedReason) -> Resolution:
    return Resolution(None, ResolutionStatus.UNRESOLVED, reason)
