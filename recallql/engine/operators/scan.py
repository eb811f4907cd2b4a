"""Leaf operators: the retrieval legs, their registry, and the boosts-only scan.

Each leg returns its top-N *eligible* rows (SPEC §4.1): the statement's filters are pushed into
the index as a bool mask, so nothing filtered out can come back through another leg (SPEC §3.3).
Legs run in `run_legs` (`recallql.engine.legs`), never inside `merge`: there the executor is
handed their gathered output.

A leg is a `LegScan` subclass registered with `register_leg`; a plan names it in
`LegSpec.operator`. `search(ctx)` returns `(rowids int64[m], scores float64[m])`, best first,
ties ordered by item id, m ≤ `ctx.fetch_size(spec.window)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from recallql.engine.metrics import Output
from recallql.engine.operators.base import ExecutionContext, LegContext, Operator
from recallql.engine.plan import LegSpec
from recallql.index.analysis import shown
from recallql.index.neighbours import Places

L = TypeVar("L", bound="type[LegScan]")

LEG_OPERATORS: dict[str, type[LegScan]] = {}


def register_leg(cls: L) -> L:
    """Class decorator: make a `LegScan` subclass available to plans as `cls.name`.

    Raises:
        ValueError: another leg operator already has that name.
    """
    known = LEG_OPERATORS.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"a leg operator named {cls.name!r} is already registered")
    LEG_OPERATORS[cls.name] = cls
    return cls


def leg_operator(spec: LegSpec) -> LegScan:
    """The operator that runs leg `spec`.

    Raises:
        ValueError: no leg operator of that name is registered.
    """
    cls = LEG_OPERATORS.get(spec.operator)
    if cls is None:
        raise ValueError(f"unknown leg operator {spec.operator!r} (registered: "
                         f"{', '.join(sorted(LEG_OPERATORS))})")
    return cls(spec)


@dataclass(frozen=True, eq=False)
class LegScan(Operator):
    """Base of the retrieval legs: one `LegSpec` of the plan."""

    spec: LegSpec

    @property
    def leg(self) -> str:
        """The leg's name in the plan."""
        return self.spec.name

    def named(self, props: dict[str, Any]) -> dict[str, Any]:
        """`props` with `leg=` first when the leg's name is not its kind (EXPLAIN)."""
        return props if self.spec.name == self.spec.kind.value else {"leg": self.spec.name,
                                                                     **props}

    def search(self, ctx: LegContext) -> tuple[np.ndarray, np.ndarray]:
        """`(rowids int64[m], scores float64[m])`, best first, ties by item id."""
        raise NotImplementedError

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Any]:
        raise RuntimeError(f"{self.name} runs in run_legs, not in merge")


@register_leg
@dataclass(frozen=True, eq=False)
class LexicalScan(LegScan):
    """BM25 top-N over the collection's text field (tantivy; k1 = 1.2, b = 0.75).

    The spec gives `fields` (concatenated into the BM25 field; for EXPLAIN), the distinct
    analysed `terms` (a boolean SHOULD of term queries built by the index, never a query string)
    and `term_counts` (how often each term occurs in the query text: its BM25 score counts that
    many times; empty when every term occurs once).
    """

    name = "LexicalScan"

    def describe(self) -> dict[str, Any]:
        spec = self.spec
        props: dict[str, Any] = {"fields": list(spec.fields),
                                 "terms": [shown(t) for t in spec.terms]}
        if spec.term_counts:
            props["weights"] = list(spec.term_counts)
        props["window"] = spec.window
        if spec.filter is not None:
            props["filter"] = "pushed"
        return self.named(props)

    def search(self, ctx: LegContext) -> tuple[np.ndarray, np.ndarray]:
        expr = self.spec.filter
        rowids, scores, how = ctx.snapshot.lexical_search(
            query_terms(self.spec), ctx.fetch_size(self.spec.window), ctx.rows(expr), expr)
        if how:
            ctx.filters[self.spec.name] = how
        return np.asarray(rowids, np.int64), np.asarray(scores, np.float64)


def query_terms(spec: LegSpec) -> list[str]:
    """A lexical leg's terms as the index takes them: each repeated by its count."""
    if not spec.term_counts:
        return list(spec.terms)
    return [t for t, w in zip(spec.terms, spec.term_counts, strict=True) for _ in range(w)]


@register_leg
@dataclass(frozen=True, eq=False)
class SemanticScan(LegScan):
    """Cosine top-N over L2-normalised float32 vectors, for the spec's `vector` (from
    `NEAR :v`, or the MATCHING `text` embedded at plan time). The index chooses the method
    per statement (`recallql.index.semantic.choose`: exact for a small eligible set, ANN with
    oversampling for a large one, exact again where a filtered ANN search under-fills), or
    the spec's ``options["method"]`` forces it (``USING SEMANTIC (exact)``); every returned
    cosine is exact. EXPLAIN shows ``method=`` and ``why=``."""

    name = "SemanticScan"

    def describe(self) -> dict[str, Any]:
        spec = self.spec
        dim = spec.options.get("dim", 0 if spec.vector is None else spec.vector.shape[0])
        props: dict[str, Any] = {"metric": "cosine", "dim": dim, "window": spec.window}
        if spec.text is None:
            props["query"] = "vector"
        else:
            props["text"] = spec.text if len(spec.text) <= 40 else spec.text[:39] + "…"
        if spec.filter is not None:
            props["filter"] = "pushed"
        if "method" in spec.options:
            props["method"] = spec.options["method"]
        if "ef" in spec.options:
            props["ef"] = spec.options["ef"]
        return self.named(props)

    def search(self, ctx: LegContext) -> tuple[np.ndarray, np.ndarray]:
        if self.spec.vector is None:
            raise ValueError("the semantic leg has no query vector (plan it with db.plan())")
        allowed = ctx.rows(self.spec.filter)
        rowids, scores, stats = ctx.snapshot.semantic_search(
            self.spec.vector, ctx.fetch_size(self.spec.window), allowed,
            method=str(self.spec.options.get("method", "auto")), ef=_ef(self.spec.options))
        ctx.notes[self.spec.name] = (stats.method, stats.why)
        if allowed is not None:  # a sparse set is gathered row by row when scanned exactly
            ctx.filters[self.spec.name] = (
                f"posting rows={stats.eligible}" if allowed.sparse and stats.method == "exact"
                else f"mask rows={stats.eligible}")
        return np.asarray(rowids, np.int64), np.asarray(scores, np.float64)


def _ef(options: dict[str, Any]) -> int | None:
    """The ``ef`` of ``USING SEMANTIC (ann, ef = N)`` in a semantic leg's options."""
    ef = options.get("ef")
    return None if ef is None else int(ef)


@register_leg
@dataclass(frozen=True, eq=False)
class ContextScan(LegScan):
    """The context leg: the direct legs' candidates of documents of several items, and their
    eligible neighbours.

    For every candidate of the other legs, the nearest eligible item before and after it in its
    document (messages: the session by seq; chunks: the document by position;
    `CollectionSnapshot.neighbours`) joins the candidates. Each row of the leg carries its
    document code and its place among the eligible items in document order
    (`Neighbours.places`); fusion credits it with `weight^d ·` the relevance of a direct
    candidate d eligible items away in its document (`scoring.context_credit`). Documents of one
    item have no neighbours, so on such collections the leg is empty. Its `search` is `around`
    (it runs after the direct legs, on their rows).
    """

    name = "ContextScan"

    def describe(self) -> dict[str, Any]:
        weight = self.spec.options.get("weight", 0.5)
        props: dict[str, Any] = {"weight": weight}
        if self.spec.filter is not None:
            props["filter"] = "pushed"
        return self.named(props)

    def search(self, ctx: LegContext) -> tuple[np.ndarray, np.ndarray]:
        raise RuntimeError("the context leg runs on the other legs' rows (ContextScan.around)")

    def around(self, ctx: LegContext, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`(rowids int64[m] ascending, places int64[m, 2])` for the direct candidates `found`
        (ascending): the candidates that share a document with other items and every eligible
        row next to one, each with its document code and eligible place."""
        nb = ctx.snapshot.neighbours
        if not len(nb) or not found.shape[0]:
            return _NO_CONTEXT
        allowed = ctx.rows(self.spec.filter)
        eligible: np.ndarray | Places = np.asarray(ctx.snapshot.live, dtype=bool)
        if allowed is not None:
            kept = allowed.keep(ctx.snapshot.live)
            eligible = nb.places(kept) if kept.sparse else kept.mask
        near = np.concatenate([nb.step(found, -1, eligible), nb.step(found, 1, eligible)])
        near = near[near >= 0]
        if not near.shape[0]:
            return _NO_CONTEXT
        doc, _ = nb.document_places(found)
        rows = np.unique(np.concatenate([near, found[doc >= 0]]))
        doc, place = nb.document_places(rows, None if allowed is None else eligible)
        places = np.empty((rows.shape[0], 2), np.int64)
        places[:, 0], places[:, 1] = doc, place
        return rows, places


def _empty_context() -> tuple[np.ndarray, np.ndarray]:
    rows, places = np.zeros(0, np.int64), np.zeros((0, 2), np.int64)
    rows.setflags(write=False)
    places.setflags(write=False)
    return rows, places


#: The context leg's output when no candidate has a neighbour (read-only, shared).
_NO_CONTEXT = _empty_context()


@dataclass(frozen=True, eq=False)
class EligibleScan(Operator):
    """Every live row that passes the filter, with relevance 0 (RETRIEVE without MATCHING).

    Runs in `run_legs` (`eligible_rows`); merge is handed the rows' features."""

    filter: Any = None
    name = "EligibleScan"

    def describe(self) -> dict[str, Any]:
        return {"filter": "pushed"} if self.filter is not None else {}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Any]:
        raise RuntimeError("EligibleScan runs in run_legs, not in merge")


def eligible_rows(ctx: LegContext, expr: Any) -> np.ndarray:
    """int64 rowids of the live rows passing `expr`, ascending."""
    allowed = ctx.rows(expr)
    if allowed is None:
        return np.flatnonzero(ctx.snapshot.live).astype(np.int64)
    return allowed.keep(ctx.snapshot.live).rows
