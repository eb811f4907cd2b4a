"""Ordering, grouping and pagination (SPEC §4.7, §4.8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates
from recallql.engine.metrics import GroupMetrics, Output
from recallql.engine.operators.base import ExecutionContext, Operator, UnaryOperator
from recallql.engine.ordering import total_order


@dataclass(frozen=True, eq=False)
class GroupByDocument(UnaryOperator):
    """Keep each document's best chunk (by the total order). Output is in total order.

    Reports `underfilled` when fewer documents than `need` survive; the refill policy then runs
    the legs again with a deeper window if some leg filled its window (SPEC §4.8).
    """

    child: Operator
    need: int
    name = "GroupByDocument"

    def describe(self) -> dict[str, Any]:
        return {"key": "doc_id"}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        cands: Candidates = inputs[0]
        order = total_order(cands, cands.score())
        docs = cands.features.doc_ids.take(order).tolist()
        m = len(docs)
        # reversed, so each document keeps the position of its first (best) chunk
        first = dict(zip(reversed(docs), range(m - 1, -1, -1), strict=True))
        keep = np.sort(np.fromiter(first.values(), np.int64, len(first)))
        return Output(cands.take(order[keep]), GroupMetrics(groups=len(first), need=self.need))


@dataclass(frozen=True, eq=False)
class TopK(UnaryOperator):
    """Slice the total order: rows `offset … offset + k − 1`."""

    child: Operator
    k: int
    offset: int = 0
    name = "TopK"

    def describe(self) -> dict[str, Any]:
        return {"k": self.k, "offset": self.offset}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        cands: Candidates = inputs[0]
        need = self.offset + self.k
        order = total_order(cands, cands.score(), need)
        return Output(cands.take(order[self.offset:need]))
