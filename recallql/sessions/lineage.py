"""Conversation lineage at query time: the walk that defines conversation roots (SPEC §6).

The edge rule is `recallql.sessions.edges` (re-exported here). A :class:`LineageResolver` walks
continuation edges upward from a session to its conversation root, reading session rows through
a ``fetch(session_id) -> SessionRow | None`` callable. recallql keeps every session's root at write
time (`recallql.sessions.roots`), so statements read stored roots
(`recallql.sessions.stored.StoredRoots`); this walk is what defines them, what `SHOW LINEAGE` and
:func:`verify` check them against, and what a statement falls back to for a session whose root
is not stored (a database written by an older version and opened read-only).

This module does no I/O of its own.

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from pydantic import BaseModel, ConfigDict, Field

from recallql.sessions.edges import (
    BRANCHED,
    COMPRESSION,
    DEFAULT_BUDGET,
    DEFAULT_MAX_STEPS,
    FRESH_RESET_REASONS,
    SUBAGENT_SOURCE,
    TOOL_SOURCE,
    EdgeVerdict,
    Fetch,
    Resolution,
    ResolutionStatus,
    SessionRow,
    UnresolvedReason,
    edge_verdict,
)

__all__ = ["BRANCHED", "COMPRESSION", "DEFAULT_BUDGET", "DEFAULT_MAX_STEPS", "FRESH_RESET_REASONS",
           "SUBAGENT_SOURCE", "TOOL_SOURCE", "EdgeVerdict", "Fetch", "LineageReport",
           "LineageResolver", "LineageStats", "Resolution", "ResolutionStatus", "RootMismatch",
           "SessionRow", "UnresolvedReason", "agrees", "describe_resolution", "edge_verdict",
           "verify"]

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
        stored: Resolutions read from the stored roots (`recallql.sessions.stored`; no walk,
            no budget).
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
    stored: int = 0

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
            "stored": self.stored,
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

    def ancestors(self, session_id: str, max_steps: int = DEFAULT_MAX_STEPS) -> frozenset[str]:
        """The generic ancestors of a session (parent links of any kind, at most ``max_steps``
        links up, cycle-safe), read with :meth:`chain`: outside the budget, and cached, so a
        later :meth:`resolve` of the session reads no row it has already seen."""
        links = self.chain(session_id, max_steps=max_steps + 1)
        return frozenset(row.id for row, _ in links[1:] if row is not None)

    def prefetch(self, session_ids: Sequence[str]) -> None:
        """Accepted for the resolver interface; a walk reads rows as it needs them (each read
        is budgeted), so it reads nothing ahead."""

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
        return record(self.stats, res)

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


def record(stats: LineageStats, res: Resolution) -> Resolution:
    """Count one ``resolve`` outcome in ``stats``; returns ``res``."""
    if res.status is ResolutionStatus.RESOLVED:
        stats.resolved += 1
        stats.max_depth = max(stats.max_depth, res.depth)
    elif res.status is ResolutionStatus.UNRESOLVED:
        reason = cast(UnresolvedReason, res.reason)  # set on every unresolved outcome
        stats.unresolved[reason] = stats.unresolved.get(reason, 0) + 1
    else:
        stats.exhausted += 1
    return res


def _unresolved(reason: UnresolvedReason) -> Resolution:
    return Resolution(None, ResolutionStatus.UNRESOLVED, reason)


def describe_resolution(res: Resolution | None) -> str:
    """A resolution as SHOW LINEAGE and :func:`verify` print it: the root's id,
    ``unresolved: <reason>``, or ``not stored`` for None."""
    if res is None:
        return "not stored"
    if res.resolved:
        return str(res.root)
    return f"unresolved: {res.reason or res.status}"


def agrees(stored: Resolution, walked: Resolution) -> bool:
    """Whether a stored root says what the walk says: the same root and depth, or the same
    unresolved reason (the depth of an unresolved session is not part of the contract)."""
    if walked.resolved:
        return stored.resolved and (stored.root, stored.depth) == (walked.root, walked.depth)
    return stored.status is walked.status and stored.reason == walked.reason


class RootMismatch(BaseModel):
    """One session whose stored root disagrees with the walk (see :func:`verify`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    stored: str
    walked: str


class LineageReport(BaseModel):
    """What :func:`verify` found: the lineage section of a store check.

    Attributes:
        sessions: Sessions checked.
        stored: Sessions with a stored root (the rest are ``unmaintained``).
        mismatches: Sessions whose stored root disagrees with the walk, by id.
        unmaintained: Ids of sessions with no stored root (statements walk for them).
        max_depth: Deepest continuation chain found by the walk.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    sessions: int = 0
    stored: int = 0
    mismatches: list[RootMismatch] = Field(default_factory=list)
    unmaintained: list[str] = Field(default_factory=list)
    max_depth: int = 0

    @property
    def ok(self) -> bool:
        """True when every session has a stored root and every stored root agrees."""
        return not self.mismatches and not self.unmaintained

    def to_text(self) -> str:
        """A short human summary."""
        head = (f"lineage: {self.sessions} session(s), {self.stored} stored root(s), "
                f"deepest chain {self.max_depth}: " + ("ok" if self.ok else "PROBLEMS"))
        lines = [head]
        lines += [f"  {m.session_id}: stored {m.stored}, walk gives {m.walked}"
                  for m in self.mismatches[:_SHOWN]]
        if len(self.mismatches) > _SHOWN:
            lines.append(f"  ... and {len(self.mismatches) - _SHOWN} more mismatch(es)")
        if self.unmaintained:
            lines.append(f"  {len(self.unmaintained)} session(s) without a stored root, e.g. "
                         + ", ".join(self.unmaintained[:5]))
        return "\n".join(lines)


_SHOWN: Final = 20


def verify(rows: Iterable[SessionRow], stored: Mapping[str, Resolution | None]
           ) -> LineageReport:
    """Walk every session's edges and compare the outcome with its stored root (SPEC §6).

    Pure: the caller reads the rows and the stored roots (`Sessions.verify_lineage` does, in one
    read transaction). The walk has no budget (every row is read at most once) and no step
    limit, so it is the query-time contract with an unlimited budget.

    Args:
        rows: Every session's row.
        stored: Each session's stored root by id; None (or absent) when it has none.

    Returns:
        The `LineageReport`.
    """
    by_id = {r.id: r for r in rows}
    resolver = LineageResolver(by_id.get, budget=len(by_id) + 1)
    mismatches, unmaintained, kept = [], [], 0
    for sid in sorted(by_id):
        walked = resolver.resolve(sid)
        mine = stored.get(sid)
        if mine is None:
            unmaintained.append(sid)
            continue
        kept += 1
        if not agrees(mine, walked):
            mismatches.append(RootMismatch(session_id=sid, stored=describe_resolution(mine),
                                           walked=describe_resolution(walked)))
    return LineageReport(sessions=len(by_id), stored=kept, mismatches=mismatches,
                         unmaintained=unmaintained, max_depth=resolver.stats.max_depth)
