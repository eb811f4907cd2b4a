"""Result rows' reasons and the executed plan tree (SPEC §5, STYLE §8).

Reasons are built from the executed `Candidates`: the same arrays the executor summed, so each
row's contributions add up (left to right) to exactly its score. They carry typed fields at full
precision; the text rendering is `ReasonEntry.detail` and `recallql.engine.explain_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from recallql.engine.candidates import (
    Candidates,
    ContextDetail,
    LegColumn,
    LineageDetail,
    RecencyDetail,
    SessionDetail,
    SignalDetail,
)
from recallql.engine.metrics import MetricsNode
from recallql.engine.models import PlanNode, ReasonEntry
from recallql.engine.operators.base import Operator
from recallql.engine.plan import LegKind
from recallql.engine.reasons import Reason
from recallql.grammar.construct import trusted

if TYPE_CHECKING:
    from recallql.engine.models import Explain
    from recallql.engine.plan import QueryPlan
    from recallql.index.snapshot import CollectionSnapshot


def rows_reasons(cands: Candidates) -> list[list[ReasonEntry]]:
    """Each row's reasons: the legs in plan order, then the boosts, then lineage. Built column
    by column from the arrays as Python values (one `tolist()` per column, not per row)."""
    m = len(cands)
    if m == 0:
        return []
    columns: list[Sequence[ReasonEntry | None]] = [
        _context_reasons(cands, leg) if leg.kind is LegKind.CONTEXT
        else _leg_reasons(cands, leg) for leg in cands.legs]
    if not cands.legs:
        columns.append([ReasonEntry(code=Reason.NO_RELEVANCE, contribution=0.0)] * m)
    columns += _session_reasons(cands)
    signal = cands.details.get("signal")
    if isinstance(signal, SignalDetail):
        columns.append([
            ReasonEntry(code=Reason.SIGNAL_BOOST, contribution=c, entity=str(e),
                        sums=dict(zip(signal.names, sums, strict=True)))
            for c, e, sums in zip(cands.parts["signal"].tolist(), signal.entity.tolist(),
                                  signal.sums.tolist(), strict=True)])
    recency = cands.details.get("recency")
    if isinstance(recency, RecencyDetail):
        columns.append(_recency_reasons(cands, recency))
    lineage = cands.details.get("lineage")
    if isinstance(lineage, LineageDetail):
        columns.append([ReasonEntry(code=Reason.LINEAGE, contribution=0.0, root=str(r),
                                    anchor=str(a))
                        for r, a in zip(lineage.root.tolist(), lineage.anchor.tolist(),
                                        strict=True)])
    return [[r for r in row if r is not None] for row in zip(*columns, strict=True)]


def _leg_reasons(cands: Candidates, leg: LegColumn) -> list[ReasonEntry | None]:
    code = Reason.LEXICAL_MATCH if leg.kind is LegKind.LEXICAL else Reason.SEMANTIC_MATCH
    score = "bm25" if leg.kind is LegKind.LEXICAL else "cosine"
    norms = [None] * len(cands) if leg.norm is None else leg.norm.tolist()
    name = leg.name
    return [trusted(ReasonEntry, {"code": Reason.LEG_ABSENT, "contribution": share, "leg": name})
            if rank == 0 else trusted(ReasonEntry, {
                "code": code, "contribution": share, "leg": name, "rank": rank, "norm": norm,
                score: raw})
            for share, rank, raw, norm in zip(cands.parts[name].tolist(), leg.rank.tolist(),
                                              leg.raw.tolist(), norms, strict=True)]


_SIDES = {-1: "before", 1: "after"}


def _context_reasons(cands: Candidates, leg: LegColumn) -> list[ReasonEntry | None]:
    """`CONTEXT_MATCH` for the rows a neighbour credited; nothing for the others (their
    context part is 0)."""
    det = cands.details.get(leg.name)
    if not isinstance(det, ContextDetail):
        return [None] * len(cands)
    name, weight = leg.name, float(det.weight)
    return [None if side == 0 else trusted(ReasonEntry, {
                "code": Reason.CONTEXT_MATCH, "contribution": c, "leg": name,
                "neighbour": str(nb), "side": _SIDES[side], "distance": d, "relevance": rel,
                "weight": weight})
            for c, side, nb, rel, d in zip(cands.parts[leg.name].tolist(), det.side.tolist(),
                                           det.neighbour.tolist(), det.relevance.tolist(),
                                           det.distance.tolist(), strict=True)]


def _session_reasons(cands: Candidates) -> list[list[ReasonEntry]]:
    det = cands.details.get("session")
    if not isinstance(det, SessionDetail):
        return []
    parts = cands.parts
    return [
        [ReasonEntry(code=Reason.SESSION_KEYWORDS, contribution=c, matched=k, total=det.total)
         for c, k in zip(parts["session_keywords"].tolist(), det.matched.tolist(), strict=True)],
        [ReasonEntry(code=Reason.SESSION_VELOCITY, contribution=c, velocity=float(det.velocity))
         for c in parts["session_velocity"].tolist()],
        [ReasonEntry(code=Reason.SESSION_ENTITY, contribution=c, entity=str(e), entity_sum=s)
         for c, e, s in zip(parts["session_entity"].tolist(), det.entity.tolist(),
                            det.entity_sum.tolist(), strict=True)],
    ]


def _recency_reasons(cands: Candidates, det: RecencyDetail) -> list[ReasonEntry]:
    out = []
    for value, age, future, missing in zip(cands.parts["recency"].tolist(), det.age.tolist(),
                                           det.future.tolist(), det.missing.tolist(),
                                           strict=True):
        if missing:
            out.append(trusted(ReasonEntry, {"code": Reason.RECENCY_MISSING_DATE,
                                             "contribution": value}))
        elif future:
            out.append(trusted(ReasonEntry, {"code": Reason.RECENCY_FUTURE_CLAMPED,
                                             "contribution": value, "age_days": 0.0}))
        else:
            out.append(trusted(ReasonEntry, {"code": Reason.RECENCY, "contribution": value,
                                             "age_days": age}))
    return out


# -- plan tree ---------------------------------------------------------------------------------


def plan_node(op: Operator, metrics: MetricsNode | None, analyze: bool) -> PlanNode:
    """The executed plan as a `PlanNode` tree; rows and times only with ANALYZE."""
    kids = op.children
    child_metrics = metrics.children if metrics is not None else (None,) * len(kids)
    shown = analyze and metrics is not None
    extra = metrics.metrics.properties() if metrics is not None else {}
    return PlanNode(
        operator=op.name,
        properties={**op.describe(), **extra},
        rows_in=metrics.rows_in if shown and metrics else None,
        rows_out=metrics.rows_out if shown and metrics else None,
        time_ms=round(metrics.time_ns / 1e6, 3) if shown and metrics else None,
        children=[plan_node(c, m, analyze) for c, m in zip(kids, child_metrics, strict=True)],
    )


def bm25_note(out: Explain, snapshot: CollectionSnapshot, plan: QueryPlan) -> Explain:
    """`out` with a note when its lexical leg's BM25 statistics (N, n(t), average length) still
    count deleted or replaced rows: the Lucene rule (`recallql.index.text`), until a merge or
    ``recallql optimize`` rebuilds the text index from the live rows. Not for AS OF (the
    statistics then also count rows committed later)."""
    if plan.as_of is not None or not plan.lexical_terms():
        return out
    counted = snapshot.bm25_documents()
    live = int(np.count_nonzero(snapshot.live))
    if counted is None or counted <= live:
        return out
    stale = counted - live
    note = (f"BM25 statistics count {stale} deleted or replaced row{'s' if stale != 1 else ''} "
            f"(N={counted}, "
            f"{live} live); `recallql optimize` (Python: `db.reindex(only_needed=True)`) "
            "makes them exact")
    return out.model_copy(update={"notes": [*out.notes, note]})
