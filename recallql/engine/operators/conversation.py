"""Conversation operators on `messages` (SPEC §6): live-context hiding and GROUP BY CONVERSATION.

Both walk their input in the total order (SPEC §4.7) and decide each hit's fate through the
statement's resolver (one per merge, with its memo; `ctx.lineage`: `StoredRoots`, the roots
stored at write time; a `LineageResolver` walk with its budget on a store whose roots are not
stored) and, under `FOR SESSION`, its `LiveContext` (`ctx.live_context`). The hits' sessions and
`compacted` flags come from the candidates' features.

Both sit above the boosts (final scores) and below grouping/TopK, so "a safe ranked prefix" is a
prefix of the order the user sees. A resolution that runs out of budget stops the walk: the rows
decided so far are returned, the output is `truncated` and `LINEAGE_BUDGET_TRUNCATED` is noticed.
When the current session's own resolution ran out of budget, nothing can be proven outside its
live context and both operators return no rows (fail closed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates, LineageDetail
from recallql.engine.metrics import Output, WalkMetrics
from recallql.engine.operators.base import ExecutionContext, Operator, UnaryOperator
from recallql.engine.ordering import total_order
from recallql.engine.reasons import Reason
from recallql.sessions.lineage import Resolution, ResolutionStatus
from recallql.sessions.live_context import SHOWN_END_REASONS, LiveContext
from recallql.sessions.stored import RootResolver


@dataclass(slots=True)
class _Tally:
    """What one walk saw (printed under `conversation` / `live_context` in the stats)."""

    candidates: int
    scanned: int = 0
    sessions: set[str] = field(default_factory=set)
    kept: int = 0
    dropped: int = 0
    hidden: int = 0
    budget_hit: bool = False


class _Walk:
    """A statement's per-hit lineage decisions over candidates in the total order.

    The order is built lazily: first only a head of `1.25 · need + 16` rows (rows whose score
    reaches that rank's, ties kept: room for a fifth of the hits to be dropped, hidden or of a
    conversation already kept), then twice as deep whenever the walk runs past it (ordering is
    most of the operator's cost once roots are stored; doubling orders at most about twice the
    rows a walk needs, 4 × in all with the re-orders). Each deeper order starts with the
    previous one (score is the first key of the total order), so walk positions stay valid.
    Positions `j` index `order`, `session_ids` and `compacted`; `order[j]` indexes the
    input candidates.
    """

    def __init__(self, ctx: ExecutionContext, cands: Candidates, need: int) -> None:
        if ctx.lineage is None:
            raise ValueError("a lineage walk needs the statement's lineage resolver")
        feat = cands.features
        if feat.session_ids is None or feat.compacted is None:
            raise ValueError("the candidates carry no session ids (plan features)")
        self.cands = cands
        self.resolver: RootResolver = ctx.lineage
        self.live: LiveContext | None = ctx.live_context
        self.tally = _Tally(candidates=len(cands))
        self.notices: list[tuple[Reason, str]] = []
        self._score = cands.score()
        self._depth = need + need // 4 + 16 if need else len(cands)
        self.order: list[int] = []
        self.session_ids: list[str] = []
        self.compacted: list[bool] = []

    def positions(self) -> Iterator[int]:
        """Walk positions 0, 1, … in the total order, deepening the order as needed."""
        j = 0
        while j < len(self.order) or self._deepen():
            yield j
            j += 1

    def _deepen(self) -> bool:
        """Order the next, deeper head; False when every candidate has been ordered. A deeper
        head that adds no row (its cut falls in the same run of tied scores as the last one)
        is skipped for the next depth, so the walk never stops before the candidates end."""
        done, m = len(self.order), len(self.cands)
        order: list[int] = []
        while not order:
            if done == m:
                return False
            need = None if self._depth >= m else self._depth
            order = total_order(self.cands, self._score, need)[done:].tolist()
            self._depth *= 2
        feat = self.cands.features
        assert feat.session_ids is not None and feat.compacted is not None
        taken = np.asarray(order, np.int64)
        self.order += order
        self.session_ids += feat.session_ids.take(taken).tolist()
        self.resolver.prefetch(self.session_ids[done:])
        self.compacted += feat.compacted[taken].tolist()
        return True

    def take(self, keep: list[int]) -> Candidates:
        """The input candidates at walk positions `keep`, in that order."""
        return self.cands.take(np.asarray([self.order[j] for j in keep], dtype=np.int64))

    def visit(self, i: int) -> None:
        """Count hit `i` as walked."""
        self.tally.scanned += 1
        self.tally.sessions.add(self.session_ids[i])

    def resolve(self, i: int) -> Resolution | None:
        """The hit's resolution; None (and the walk must stop) when the budget ran out."""
        res = self.resolver.resolve(self.session_ids[i])
        if res.status is ResolutionStatus.BUDGET_EXHAUSTED:
            self.stop_for_budget()
            return None
        return res

    def hidden(self, i: int, root: str | None) -> bool:
        """Whether hit `i` is still in the current session's live context (SPEC §6)."""
        live = self.live
        if live is None or self.compacted[i]:
            return False
        row = self.resolver.row(self.session_ids[i])
        if row is None:  # no session row: only the current id itself can be live
            return live.is_live(self.session_ids[i], None)
        return live.is_hidden(row, root, compacted=False)

    def needs_root(self, i: int) -> bool:
        """Whether the live-context decision for hit `i` depends on its conversation root."""
        live = self.live
        if live is None or self.compacted[i] or live.current_root is None:
            return False
        row = self.resolver.row(self.session_ids[i])
        return row is None or row.end_reason not in SHOWN_END_REASONS

    def blind(self) -> bool:
        """True (and the statement truncated) when the current conversation is unknown."""
        if self.live is not None and self.live.exhausted:
            self.stop_for_budget()
            return True
        return False

    def stop_for_budget(self) -> None:
        self.tally.budget_hit = True
        self.notices.append((
            Reason.LINEAGE_BUDGET_TRUNCATED,
            f"lineage budget of {self.resolver.stats.budget} session-row fetches ran out; the "
            "result is a safe ranked prefix (raise it with GROUP BY CONVERSATION (budget = n))"))

    def output(self, key: str, need: int, out: Candidates) -> Output[Candidates]:
        """`out` with the walk's metrics, notices and truncation."""
        t = self.tally
        if t.dropped:
            self.notices.append((Reason.LINEAGE_UNRESOLVED_DROPPED,
                                 f"{t.dropped} hit(s) dropped: their session's lineage has a "
                                 "cycle or a missing session row"))
        if t.hidden and self.live is not None:
            self.notices.append((Reason.LIVE_CONTEXT_HIDDEN,
                                 f"{t.hidden} hit(s) hidden: still in the live context of "
                                 f"session '{self.live.current_id}'"))
        metrics = WalkMetrics(
            key=key, candidates=t.candidates, scanned=t.scanned, sessions=len(t.sessions),
            kept=t.kept, unresolved_dropped=t.dropped, live_hidden=t.hidden,
            budget_hit=t.budget_hit, lineage=self.resolver.stats.describe(), need=need)
        return Output(out, metrics, tuple(self.notices), truncated=t.budget_hit)


@dataclass(frozen=True, eq=False)
class LiveContextFilter(UnaryOperator):
    """Hide hits still in the FOR SESSION session's live context (no conversation grouping).

    Walks the hits in the total order and removes hidden ones; later hits of the same session
    still serve. A hit's lineage is resolved only when its visibility depends on it. Stops once
    `need` rows are kept (`need = 0`: walk everything, e.g. under GROUP BY DOCUMENT) or when the
    lineage budget runs out (a safe ranked prefix, `truncated`). Output is in the total order.
    """

    child: Operator
    session_id: str
    need: int = 0
    name = "LiveContextFilter"

    def describe(self) -> dict[str, Any]:
        return {"session": self.session_id}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        if ctx.live_context is None:
            return Output(inputs[0])
        walk = _Walk(ctx, inputs[0], self.need)
        keep: list[int] = []
        for i in () if walk.blind() else walk.positions():
            walk.visit(i)
            root = None
            if walk.needs_root(i):
                res = walk.resolve(i)
                if res is None:
                    break
                root = res.root
            if walk.hidden(i, root):
                walk.tally.hidden += 1
                continue
            keep.append(i)
            if len(keep) == self.need:
                break
        walk.tally.kept = len(keep)
        return walk.output("live_context", self.need, walk.take(keep))


@dataclass(frozen=True, eq=False)
class GroupByConversation(UnaryOperator):
    """One row per conversation, ranked by its best displayable hit (SPEC §6).

    Walks hits in the total order; resolves each hit's session to its conversation root (fail
    closed: unresolved hits are dropped and counted); skips hits hidden by the live context (a
    later hit of the same conversation may then serve, at its own rank); keeps the first hit of
    each root, with its own `session_id` and the root as `conversation_root`. Stops once `need`
    conversations are found (they are final: later hits rank lower), or when the lineage budget
    runs out (a safe ranked prefix, `truncated`). Adds the `lineage` detail (root, and the hit's
    session as anchor) for the `LINEAGE(root=…, anchor=…)` reason.
    """

    child: Operator
    need: int
    budget: int
    name = "GroupByConversation"

    def describe(self) -> dict[str, Any]:
        return {"key": "conversation_root", "budget": self.budget}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        walk = _Walk(ctx, inputs[0], self.need)
        keep: list[int] = []
        roots: list[str] = []
        seen: set[str] = set()
        for i in () if walk.blind() else walk.positions():
            walk.visit(i)
            res = walk.resolve(i)
            if res is None:
                break
            root = res.root
            if not res.resolved or root is None:
                walk.tally.dropped += 1
            elif walk.hidden(i, root):
                walk.tally.hidden += 1
            elif root not in seen:
                seen.add(root)
                keep.append(i)
                roots.append(root)
                if len(keep) >= self.need:
                    break
        walk.tally.kept = len(keep)
        anchors = [walk.session_ids[i] for i in keep]
        detail = LineageDetail(np.asarray(roots, dtype=object), np.asarray(anchors, dtype=object))
        out = walk.take(keep).with_detail("lineage", detail)
        return walk.output("conversation", self.need, out)
