"""The analyzer's part for fusion and context: `FUSE RRF | CONVEX (...)` and `WITH CONTEXT`
→ checked values with the defaults applied (docs/language.md, docs/scoring.md).

Defaults, each chosen by a principle rather than fitted to a benchmark (benchmarks/FINDINGS.md):

- fusion `convex`, normalisation `minmax`, equal weights (α = 0.5: no preference between the
  legs) — Bruch, Gai & Ingber (TOIS 2023) find the convex combination of min-max normalised
  scores at least as good as RRF in and out of domain, and it uses the scores RRF throws away;
- window N = 100 per leg (10× the default page; the depth at which Bruch et al. and Vespa's
  global-phase re-ranking stop), RRF k = 60 (Cormack et al.'s constant, fixed on held-out data);
- context weight 0.5: an item next to a match gets half its relevance, two items away a
  quarter (credit halves per step away from a match; below a direct match by construction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from recallql.engine.plan import LegKind
from recallql.grammar import nodes as n
from recallql.grammar import statements as s
from recallql.grammar.errors import QueryError, QuerySemanticError
from recallql.grammar.suggest import did_you_mean

DEFAULT_FUSION: Literal["rrf", "convex"] = "convex"
DEFAULT_NORMALIZATION: Literal["minmax", "tmm"] = "minmax"
DEFAULT_WINDOW = 100
DEFAULT_RRF_K = 60.0
DEFAULT_CONTEXT_WEIGHT = 0.5
#: `WITH CONTEXT` without options: one item before and one after each hit.
DEFAULT_CONTEXT = (1, 1)
#: At most this many items before and after each hit.
MAX_CONTEXT = 100

#: The legs a statement runs for each USING mode (their names are what FUSE weights name).
USING_LEGS = {"hybrid": (LegKind.LEXICAL.value, LegKind.SEMANTIC.value),
              "lexical": (LegKind.LEXICAL.value,), "semantic": (LegKind.SEMANTIC.value,)}
CONTEXT_LEG = LegKind.CONTEXT.value


@dataclass(frozen=True)
class FusionOptions:
    """The checked FUSE clause: method, RRF k, window, normalisation, the direct legs' weights
    as written (or from α) and the context leg's weight."""

    method: Literal["rrf", "convex"]
    k: float
    window: int
    normalization: Literal["minmax", "tmm"]
    weights: tuple[tuple[str, float], ...]
    context_weight: float


def fail(stmt: s.StatementBase, node: n.Node, message: str, hint: str | None = None,
         cls: type[QueryError] = QuerySemanticError) -> NoReturn:
    """Raise `cls` with the caret under `node`."""
    raise cls(message, text=stmt.source, span=node.span, hint=hint)


def number(stmt: s.StatementBase, node: Any, what: str) -> float | None:
    """A finite number option, or None when not written."""
    if node is None:
        return None
    value = getattr(node, "value", None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        fail(stmt, node, f"{what} must be a number")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        fail(stmt, node, f"{what} must be a finite number")
    return out


def whole(stmt: s.StatementBase, node: Any, what: str, default: int) -> int:
    """A whole-number option (window, budget), as a Python int (no float rounding)."""
    if node is None:
        return default
    value = getattr(node, "value", None)
    if isinstance(value, bool) or not isinstance(value, int):
        fail(stmt, node, f"{what} must be a whole number")
    return value


def fusion_options(stmt: s.Search | s.Retrieve) -> FusionOptions:
    """The FUSE clause with defaults applied.

    Raises:
        QuerySemanticError: an unknown leg, weights that sum to 0 or overflow, a context weight
            above 1, `alpha` together with weights of the legs it sets.
    """
    fuse = stmt.fuse
    method = fuse.method if fuse is not None else DEFAULT_FUSION
    norm = fuse.normalization if fuse is not None else None
    normalization: Literal["minmax", "tmm"] = DEFAULT_NORMALIZATION if norm is None \
        else ("tmm" if getattr(norm, "name", "") == "tmm" else "minmax")
    weights, context = _weights(stmt)
    return FusionOptions(
        method=method, k=number(stmt, fuse.k if fuse else None, "k") or DEFAULT_RRF_K,
        window=whole(stmt, fuse.window if fuse else None, "window", DEFAULT_WINDOW),
        normalization=normalization, weights=weights, context_weight=context)


def _weights(stmt: s.Search | s.Retrieve) -> tuple[tuple[tuple[str, float], ...], float]:
    """`weights = (leg = w, ...)` (and `alpha`) as the direct legs' `(leg, w)` pairs in the
    order written, and the context leg's weight.

    Leg names are those of the language's legs (`lexical`, `semantic`, `context`); a direct leg
    not named weighs 1. A weight for a leg the statement does not run (USING) is allowed and
    unused.
    """
    fuse = stmt.fuse
    node = fuse.weights if fuse else None
    known = [*USING_LEGS["hybrid"], CONTEXT_LEG]
    weights: list[tuple[str, float]] = []
    context = DEFAULT_CONTEXT_WEIGHT
    items = node.items if isinstance(node, s.OptionList) else ()
    for item in items:
        name = item.name.name
        if name not in known:
            fail(stmt, item.name, f"unknown leg '{name}' in FUSE weights",
                 did_you_mean(name, known))
        value = number(stmt, item.value, "FUSE weight") or 0.0
        if name == CONTEXT_LEG:
            if value > 1.0:
                fail(stmt, item.value, "the context weight must be at most 1: a neighbour's "
                     "match cannot count more than a direct one", "e.g. context = 0.5; 0 "
                     "turns context credit off")
            context = value
        else:
            weights.append((name, value))
    alpha = number(stmt, fuse.alpha if fuse else None, "alpha")
    if alpha is not None:
        if weights:
            fail(stmt, items[0].name, "give alpha or the lexical/semantic weights, not both",
                 "alpha = a means weights = (lexical = 1 - a, semantic = a)")
        weights = [(LegKind.LEXICAL.value, 1.0 - alpha), (LegKind.SEMANTIC.value, alpha)]
    _check_weights(stmt, node if node is not None else fuse, weights)
    return tuple(weights), context


def _check_weights(stmt: s.Search | s.Retrieve, node: Any,
                   weights: list[tuple[str, float]]) -> None:
    running = USING_LEGS[stmt.using.mode if stmt.using else "hybrid"]
    total = sum(dict(weights).get(leg, 1.0) for leg in running)
    if total == 0.0:
        fail(stmt, node, "every leg this statement runs has FUSE weight 0; relevance would be "
             "0/0", "give some leg a weight > 0, or drop the weights")
    if not math.isfinite(total):
        fail(stmt, node, "the FUSE weights add up to more than the largest float",
             "use weights of a sensible size, e.g. (lexical = 2, semantic = 1)")


def context_window(stmt: s.Search | s.Retrieve) -> tuple[int, int] | None:
    """`WITH CONTEXT (before = n, after = m)` as `(n, m)`, or None without the clause.

    Raises:
        QuerySemanticError: more than `MAX_CONTEXT` items on a side.
    """
    clause = stmt.context
    if clause is None:
        return None
    out = []
    for node, what, default in ((clause.before, "before", DEFAULT_CONTEXT[0]),
                                (clause.after, "after", DEFAULT_CONTEXT[1])):
        value = whole(stmt, node, what, default)
        if value > MAX_CONTEXT:
            fail(stmt, node if isinstance(node, n.Node) else clause,
                 f"{what} must be at most {MAX_CONTEXT}",
                 "WITH CONTEXT returns a few items around each hit, e.g. (before = 2, after = 2)")
        out.append(value)
    return out[0], out[1]
