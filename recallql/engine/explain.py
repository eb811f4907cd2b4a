"""Result rows with reasons, and EXPLAIN rendering (SPEC §5, STYLE §8).

Rows and their reasons are built from the executed `Candidates`: the same arrays the executor
summed, so each row's contributions add up (left to right) to exactly its score. The text format
is deterministic (fixed float precision) so golden files can hold it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates
from recallql.engine.executor import OperatorStats
from recallql.engine.models import Explain, PlanNode, ReasonEntry
from recallql.engine.operators.base import Operator
from recallql.engine.reasons import Reason

SCORE_PRECISION = 5
#: Stats keys of the conversation operators, printed by EXPLAIN even without ANALYZE.
LINEAGE_STATS = ("conversation", "live_context")


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


_BARE = re.compile(r"[A-Za-z0-9_.:]+")


def _value(v: Any) -> str:
    if isinstance(v, str):
        return v if _BARE.fullmatch(v) else "'" + v.replace("'", "''") + "'"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _plan_lines(node: PlanNode, depth: int, out: list[str]) -> None:
    props = " ".join(f"{k}={_value(v)}" for k, v in node.properties.items())
    line = "  " * depth + f"{node.operator}:" + (f" {props}" if props else "")
    if node.rows_out is not None:
        rows = f"rows={node.rows_in}→{node.rows_out}" if node.children else f"rows={node.rows_out}"
        line += f"  {rows} time={node.time_ms:.3f}ms"
    out.append(line)
    for child in node.children:
        _plan_lines(child, depth + 1, out)


def _reason_lines(reasons: Sequence[ReasonEntry]) -> list[str]:
    legs = [r for r in reasons if r.code in (Reason.LEXICAL_MATCH, Reason.SEMANTIC_MATCH,
                                             Reason.LEG_ABSENT, Reason.NO_RELEVANCE)]
    rest = [r for r in reasons if r not in legs]
    lines = ["   " + "  ".join(r.render(SCORE_PRECISION) for r in legs)] if legs else []
    if rest:
        lines.append("   " + "  ".join(r.render(SCORE_PRECISION) for r in rest))
    return lines


def render_text(explain: Explain) -> str:
    """EXPLAIN's text format: the plan root first, then one block per result row."""
    lines: list[str] = []
    _plan_lines(explain.plan, 0, lines)
    result = explain.result
    for notice in result.warnings:
        lines.append(f"warning: {notice.code.value}: {notice.message}")
    if explain.analyze and result.stats:
        lines.append("stats: " + " ".join(f"{k}={_value(v)}" for k, v in _flat(result.stats)))
    else:  # lineage work is part of the plan's story: shown without ANALYZE too
        for key in LINEAGE_STATS:
            if key in result.stats:
                pairs = _flat(result.stats[key], f"{key}.")
                lines.append("stats: " + " ".join(f"{k}={_value(v)}" for k, v in pairs))
    for rank, row in enumerate(result.rows, start=1):
        extra = f"  session={row.session_id}" if row.session_id else ""
        lines.append(f"#{rank} {row.id}  score={row.score:.{SCORE_PRECISION}f}{extra}")
        lines.extend(_reason_lines(row.reasons))
        detail = explain.verbose_details.get(row.id)
        if detail:
            lines.extend("      " + d for d in bm25_tree(detail))
    if not result.rows:
        lines.append("(no rows)")
    return "\n".join(lines)


def bm25_tree(detail: str) -> list[str]:
    """tantivy's BM25 `Explanation` JSON as compact lines: `value  description`, indented."""
    try:
        root = json.loads(detail)
    except ValueError:
        return detail.splitlines()
    out: list[str] = []
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        out.append(f"{'  ' * depth}{node.get('value', 0.0):.4f}  {node.get('description', '')}")
        stack.extend((child, depth + 1) for child in reversed(node.get("details", [])))
    return out


def _flat(stats: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in stats.items():
        if isinstance(value, dict):
            out.extend(_flat(value, f"{prefix}{key}."))
        elif isinstance(value, float) and not math.isfinite(value):
            out.append((prefix + key, str(value)))
        elif isinstance(value, np.generic):
            out.append((prefix + key, value.item()))
        else:
            out.append((prefix + key, value))
    return out
