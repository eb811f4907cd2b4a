"""Result rows with reasons, and the executed plan tree (SPEC §5, STYLE §8).

Rows and their reasons are built from the executed `Candidates`: the same arrays the executor
summed, so each row's contributions add up (left to right) to exactly its score. The text
rendering is `recallql.engine.explain_text`.
"""

from __future__ import annotations

from recallql.engine.candidates import Candidates
from recallql.engine.executor import OperatorStats
from recallql.engine.models import PlanNode, ReasonEntry
from recallql.engine.operators.base import Operator
from recallql.engine.reasons import Reason


def _age(days: float) -> str:
    return f"{days:.0f}d" if days >= 10 else f"{days:.2f}d"


def _num(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def row_reasons(cands: Candidates, i: int) -> list[ReasonEntry]:
    """The reasons of row `i`, in `COMPONENTS` order, contributions exactly as summed."""
    out: list[ReasonEntry] = []
    parts, det = cands.parts, cands.details
    for leg in cands.legs:
        rank = int((cands.lex_rank if leg == "lexical" else cands.sem_rank)[i])
        if rank == 0:
            out.append(ReasonEntry(code=Reason.LEG_ABSENT, contribution=float(parts[leg][i]),
                                   detail=f"leg={leg}"))
        elif leg == "lexical":
            out.append(ReasonEntry(code=Reason.LEXICAL_MATCH, contribution=float(parts[leg][i]),
                                   detail=f"rank={rank}, bm25={_num(cands.bm25[i])}"))
        else:
            out.append(ReasonEntry(code=Reason.SEMANTIC_MATCH, contribution=float(parts[leg][i]),
                                   detail=f"rank={rank}, cosine={_num(cands.cosine[i])}"))
    if not cands.legs:
        out.append(ReasonEntry(code=Reason.NO_RELEVANCE, contribution=0.0, detail="boosts only"))
    out.extend(_session_reasons(cands, i))
    if "signal" in parts:
        sums = det["signal_sums"][i]
        detail = ", ".join(f"{name}={_num(s)}" for name, s in sums.items())
        out.append(ReasonEntry(code=Reason.SIGNAL_BOOST, contribution=float(parts["signal"][i]),
                               detail=f"entity={det['signal_entity'][i]}, {detail}"))
    if "recency" in parts:
        out.append(_recency_reason(cands, i))
    if "lineage_root" in det:
        out.append(ReasonEntry(code=Reason.LINEAGE, contribution=0.0,
                               detail=f"root={det['lineage_root'][i]}, "
                                      f"anchor={det['lineage_anchor'][i]}"))
    return out


def _session_reasons(cands: Candidates, i: int) -> list[ReasonEntry]:
    parts, det = cands.parts, cands.details
    if "session_keywords" not in parts:
        return []
    return [
        ReasonEntry(code=Reason.SESSION_KEYWORDS, contribution=float(parts["session_keywords"][i]),
                    detail=f"{int(det['kw_matched'][i])}/{int(det['kw_total'][i])}"),
        ReasonEntry(code=Reason.SESSION_VELOCITY, contribution=float(parts["session_velocity"][i]),
                    detail=f"uniform, v={_num(det['velocity'][i])}"),
        ReasonEntry(code=Reason.SESSION_ENTITY, contribution=float(parts["session_entity"][i]),
                    detail=f"entity={det['entity'][i]}, e={_num(det['entity_sum'][i])}"),
    ]


def _recency_reason(cands: Candidates, i: int) -> ReasonEntry:
    value = float(cands.parts["recency"][i])
    det = cands.details
    if det["recency_missing"][i]:
        return ReasonEntry(code=Reason.RECENCY_MISSING_DATE, contribution=value, detail="")
    if det["recency_future"][i]:
        return ReasonEntry(code=Reason.RECENCY_FUTURE_CLAMPED, contribution=value, detail="age=0d")
    return ReasonEntry(code=Reason.RECENCY, contribution=value,
                       detail=f"age={_age(float(det['recency_age'][i]))}")


# -- plan tree ---------------------------------------------------------------------------------


def plan_node(op: Operator, stats: OperatorStats | None, analyze: bool) -> PlanNode:
    """The executed plan as a `PlanNode` tree; rows and times only with ANALYZE."""
    kids = op.children
    child_stats = stats.children if stats is not None else [None] * len(kids)
    return PlanNode(
        operator=op.name,
        properties=op.describe(),
        rows_in=stats.rows_in if analyze and stats else None,
        rows_out=stats.rows_out if analyze and stats else None,
        time_ms=round(stats.time_ns / 1e6, 3) if analyze and stats else None,
        children=[plan_node(c, s, analyze) for c, s in zip(kids, child_stats, strict=True)],
    )
