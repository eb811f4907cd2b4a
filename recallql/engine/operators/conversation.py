"""Conversation operators on `messages` (SPEC §6): live-context hiding and GROUP BY CONVERSATION.

Both read the hits' sessions through the statement's `LineageResolver` (one per statement, with
its memo and budget) and, under `FOR SESSION`, its `LiveContext`. Both are built lazily by the
engine and reached through `ctx.services`:

- `ctx.services["resolver"]`: the statement's `LineageResolver`;
- `ctx.services["live_context"]`: a `LiveContext` for the FOR SESSION session, or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates
from recallql.engine.lineage import LineageResolver, ResolutionStatus
from recallql.engine.live_context import LiveContext
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.operators.topk import ordered
from recallql.engine.reasons import Reason


@dataclass
class _Hit:
    """A message hit's lineage facts, looked up once."""

    session_id: str
    active: bool
    compacted: bool


def _hits(ctx: ExecutionContext, rowids: np.ndarray) -> list[_Hit]:
    snap = ctx.snapshot
    sessions = snap.values("session_id", rowids)
    active = snap.values("active", rowids)
    compacted = snap.values("compacted", rowids)
    return [_Hit(s or "", a is not False, bool(c))
            for s, a, c in zip(sessions, active, compacted, strict=True)]


def _hidden(live: LiveContext | None, resolver: LineageResolver, hit: _Hit, root: str | None
            ) -> bool:
    if live is None:
        return False
    row = resolver.row(hit.session_id)
    if row is None:
        return hit.session_id == live.current_id
    return live.is_hidden(row, root, compacted=hit.compacted)


@dataclass(frozen=True, eq=False)
class LiveContextFilter(Operator):
    """Hide hits still in the FOR SESSION session's live context (no grouping).

    A hidden hit is removed; later hits of the same session still serve.
    """

    child: Operator
    session_id: str
    name = "LiveContextFilter"

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)

    def describe(self) -> dict[str, Any]:
        return {"session": self.session_id}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        cands: Candidates = inputs[0]
        live: LiveContext | None = ctx.services.get("live_context")
        if live is None:
            return cands
        resolver: LineageResolver = ctx.services["resolver"]
        keep = []
        for hit in _hits(ctx, cands.rowid):
            res = resolver.resolve(hit.session_id) if hit.session_id else None
            root = res.root if res is not None and res.resolved else None
            keep.append(not _hidden(live, resolver, hit, root))
        hidden = len(keep) - sum(keep)
        ctx.stats["live_context_hidden"] = hidden
        if hidden and sum(keep) < len(keep):
            ctx.stats["underfilled"] = True
        return cands.take(np.asarray(keep, dtype=bool))


@dataclass(frozen=True, eq=False)
class GroupByConversation(Operator):
    """One row per conversation, ranked by its best displayable hit (SPEC §6).

    Walks hits in the total order; resolves each hit's session to its conversation root (fail
    closed: unresolved hits are dropped and counted); skips hits hidden by the live context;
    keeps the first hit of each root, with its own `session_id` and the root as
    `conversation_root`. Stops once `need` conversations are found (they are final: later hits
    rank lower), or when the lineage budget runs out (a safe ranked prefix, `truncated`).
    """

    child: Operator
    need: int
    budget: int
    name = "GroupByConversation"

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)

    def describe(self) -> dict[str, Any]:
        return {"key": "conversation_root", "budget": self.budget}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        cands = ordered(ctx, inputs[0])
        resolver: LineageResolver = ctx.services["resolver"]
        live: LiveContext | None = ctx.services.get("live_context")
        keep: list[int] = []
        roots: list[str] = []
        anchors: list[str] = []
        seen: set[str] = set()
        dropped = hidden = 0
        for i, hit in enumerate(_hits(ctx, cands.rowid)):
            res = resolver.resolve(hit.session_id)
            if res.status is ResolutionStatus.BUDGET_EXHAUSTED:
                ctx.truncated = True
                ctx.notice(Reason.LINEAGE_BUDGET_TRUNCATED,
                           f"lineage budget of {self.budget} session fetches ran out; the "
                           "result is a safe ranked prefix (raise it with GROUP BY "
                           "CONVERSATION (budget = n))")
                break
            if not res.resolved:
                dropped += 1
                continue
            if _hidden(live, resolver, hit, res.root):
                hidden += 1
                continue
            if res.root in seen:
                continue
            seen.add(res.root)
            keep.append(i)
            roots.append(res.root)
            anchors.append(hit.session_id)
            if len(keep) >= self.need:
                break
        self._record(ctx, cands, keep, dropped, hidden, resolver)
        out = cands.take(np.asarray(keep, dtype=np.int64))
        return Candidates(out.rowid, out.lex_rank, out.sem_rank, out.bm25, out.cosine, out.parts,
                          {**out.details, "lineage_root": roots, "lineage_anchor": anchors},
                          out.legs)

    def _record(self, ctx: ExecutionContext, cands: Candidates, keep: list[int], dropped: int,
                hidden: int, resolver: LineageResolver) -> None:
        if dropped:
            ctx.notice(Reason.LINEAGE_UNRESOLVED_DROPPED,
                       f"{dropped} hit(s) dropped: their session's lineage has a cycle or a "
                       "missing row")
        if len(keep) < self.need and not ctx.truncated:
            ctx.stats["underfilled"] = True
        ctx.stats["conversation"] = {
            "candidates": len(cands), "conversations": len(keep),
            "unresolved_dropped": dropped, "live_hidden": hidden,
            **resolver.stats.describe(),
        }
