"""Ordering, grouping and pagination (SPEC §4.7, §4.8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.ordering import total_order


def ordered(ctx: ExecutionContext, cands: Candidates, need: int | None = None) -> Candidates:
    """`cands` sorted by the total order (only the first `need` rows exact when given)."""
    snap = ctx.snapshot
    order = total_order(cands, cands.score(), snap.doc_ids, snap.positions, snap.ids, need)
    return cands.take(order)


@dataclass(frozen=True, eq=False)
class GroupByDocument(Operator):
    """Keep each document's best chunk (by the total order). Output is in total order.

    When fewer documents than `need` survive and a leg filled its window, the executor re-runs the
    plan with a deeper window (SPEC §4.8).
    """

    child: Operator
    need: int
    name = "GroupByDocument"

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)

    def describe(self) -> dict[str, Any]:
        return {"key": "doc_id"}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        cands = ordered(ctx, inputs[0])
        seen: set[str] = set()
        keep: list[int] = []
        doc_ids = ctx.snapshot.doc_ids
        for i, rowid in enumerate(cands.rowid):
            doc = doc_ids[rowid]
            if doc not in seen:
                seen.add(doc)
                keep.append(i)
        if len(keep) < self.need:
            ctx.stats["underfilled"] = True
        ctx.stats["groups"] = len(keep)
        return cands.take(np.asarray(keep, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class TopK(Operator):
    """Slice the total order: rows `offset … offset + k − 1`."""

    child: Operator
    k: int
    offset: int = 0
    name = "TopK"

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)

    def describe(self) -> dict[str, Any]:
        return {"k": self.k, "offset": self.offset}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        need = self.offset + self.k
        cands = ordered(ctx, inputs[0], need)
        return cands.take(np.arange(self.offset, min(need, len(cands)), dtype=np.int64))
