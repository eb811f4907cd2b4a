"""Result rows' reasons and the executed plan tree (SPEC §5, STYLE §8).

Reasons are built from the executed `Candidates`: the same arrays the executor summed, so each
row's contributions add up (left to right) to exactly its score. They carry typed fields at full
precision; the text rendering is `ReasonEntry.detail` and `recallql.engine.explain_text`.
"""

from __future__ import annotations

from recallql.engine.candidates import (
    Candidates,
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


def row_reasons(cands: Candidates, i: int) -> list[ReasonEntry]:
    """The reasons of row `i`: the legs in plan order, then the boosts, then lineage."""
    out = [_leg_reason(cands, leg, i) for leg in cands.legs]
    if not cands.legs:
        out.append(ReasonEntry(code=Reason.NO_RELEVANCE, contribution=0.0))
    out.extend(_session_reasons(cands, i))
    signal = cands.details.get("signal")
    if isinstance(signal, SignalDetail):
        sums = {name: float(s) for name, s in zip(signal.names, signal.sums[i].tolist(),
                                                   strict=True)}
        out.append(ReasonEntry(code=Reason.SIGNAL_BOOST,
                               contribution=float(cands.parts["signal"][i]),
                               entity=str(signal.entity[i]), sums=sums))
    recency = cands.details.get("recency")
    if isinstance(recency, RecencyDetail):
        out.append(_recency_reason(cands, recency, i))
    lineage = cands.details.get("lineage")
    if isinstance(lineage, LineageDetail):
        out.append(ReasonEntry(code=Reason.LINEAGE, contribution=0.0,
                               root=str(lineage.root[i]), anchor=str(lineage.anchor[i])))
    return out


def _leg_reason(cands: Candidates, leg: LegColumn, i: int) -> ReasonEntry:
    share = float(cands.parts[leg.name][i])
    rank = int(leg.rank[i])
    if rank == 0:
        return ReasonEntry(code=Reason.LEG_ABSENT, contribution=share, leg=leg.name)
    raw = float(leg.raw[i])
    if leg.kind is LegKind.LEXICAL:
        return ReasonEntry(code=Reason.LEXICAL_MATCH, contribution=share, leg=leg.name,
                           rank=rank, bm25=raw)
    return ReasonEntry(code=Reason.SEMANTIC_MATCH, contribution=share, leg=leg.name, rank=rank,
                       cosine=raw)


def _session_reasons(cands: Candidates, i: int) -> list[ReasonEntry]:
    det = cands.details.get("session")
    if not isinstance(det, SessionDetail):
        return []
    parts = cands.parts
    return [
        ReasonEntry(code=Reason.SESSION_KEYWORDS, contribution=float(parts["session_keywords"][i]),
                    matched=int(det.matched[i]), total=det.total),
        ReasonEntry(code=Reason.SESSION_VELOCITY, contribution=float(parts["session_velocity"][i]),
                    velocity=float(det.velocity)),
        ReasonEntry(code=Reason.SESSION_ENTITY, contribution=float(parts["session_entity"][i]),
                    entity=str(det.entity[i]), entity_sum=float(det.entity_sum[i])),
    ]


def _recency_reason(cands: Candidates, det: RecencyDetail, i: int) -> ReasonEntry:
    value = float(cands.parts["recency"][i])
    if det.missing[i]:
        return ReasonEntry(code=Reason.RECENCY_MISSING_DATE, contribution=value)
    if det.future[i]:
        return ReasonEntry(code=Reason.RECENCY_FUTURE_CLAMPED, contribution=value, age_days=0.0)
    return ReasonEntry(code=Reason.RECENCY, contribution=value, age_days=float(det.age[i]))


# -- plan tree ---------------------------------------------------------------------------------


def plan_node(op: Operator, metrics: MetricsNode | None, analyze: bool) -> PlanNode:
    """The executed plan as a `PlanNode` tree; rows and times only with ANALYZE."""
    kids = op.children
    child_metrics = metrics.children if metrics is not None else (None,) * len(kids)
    shown = analyze and metrics is not None
    return PlanNode(
        operator=op.name,
        properties=op.describe(),
        rows_in=metrics.rows_in if shown and metrics else None,
        rows_out=metrics.rows_out if shown and metrics else None,
        time_ms=round(metrics.time_ns / 1e6, 3) if shown and metrics else None,
        children=[plan_node(c, m, analyze) for c, m in zip(kids, child_metrics, strict=True)],
    )
