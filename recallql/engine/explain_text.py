"""EXPLAIN's text format (SPEC §5, STYLE §8): the plan tree root first, then each row's reasons.

Deterministic (fixed float precision) so golden files can hold it. `Explain.to_text()` calls
`render_text`; this module reads the models only for their types.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from recallql.engine.reasons import LEG_CODES
from recallql.grammar.errors import printable

if TYPE_CHECKING:
    from recallql.engine.models import Explain, PlanNode, ReasonEntry

SCORE_PRECISION = 5
#: Stats keys of the conversation operators, printed by EXPLAIN even without ANALYZE.
LINEAGE_STATS = ("conversation", "live_context")

_BARE = re.compile(r"[A-Za-z0-9_.:]+")


def _value(v: Any) -> str:
    if isinstance(v, str):
        return v if _BARE.fullmatch(v) else "'" + v.replace("'", "''") + "'"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    if isinstance(v, dict):
        return "(" + ", ".join(f"{k}={_value(x)}" for k, x in v.items()) + ")"
    if isinstance(v, float):  # shortest text of 12 significant digits: 1 - 0.7 prints 0.3
        return repr(float(f"{v:.12g}"))
    return str(v)


def _plan_lines(node: PlanNode, depth: int, out: list[str]) -> None:
    props = " ".join(f"{k}={_value(v)}" for k, v in node.properties.items())
    line = "  " * depth + node.operator + (f": {props}" if props else "")  # no bare colon
    if node.rows_out is not None:
        rows = f"rows={node.rows_in}→{node.rows_out}" if node.children else f"rows={node.rows_out}"
        line += f"  {rows} time={node.time_ms:.3f}ms"
    out.append(line)
    for child in node.children:
        _plan_lines(child, depth + 1, out)


def _reason_lines(reasons: Sequence[ReasonEntry]) -> list[str]:
    legs = [r for r in reasons if r.code in LEG_CODES]
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
    lines.extend(f"note: {note}" for note in explain.notes)
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
    # values of the statement (a MATCHING text, a session id) are shown, never obeyed: an
    # ESC sequence or a bidi override in them is escaped, as in an error's excerpt
    return printable("\n".join(lines))


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
