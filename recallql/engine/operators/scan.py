"""Leaf operators: the retrieval legs and the boosts-only scan.

Each leg returns its top-N *eligible* rows (SPEC §4.1): the statement's filters are pushed into
the index as a bool mask, so nothing filtered out can come back through another leg (SPEC §3.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates, LegHits
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.reasons import Reason


def fetch_size(ctx: ExecutionContext, window: int) -> int:
    """The window, capped at the collection's row count: a leg cannot return more rows than
    exist, so results are the same and `LIMIT 9223372036854775807` costs nothing."""
    return min(window, max(int(ctx.snapshot.size), 1))


@dataclass(frozen=True, eq=False)
class LexicalScan(Operator):
    """BM25 top-N over the collection's text field (tantivy; k1 = 1.2, b = 0.75).

    Attributes:
        fields: the text fields concatenated into the BM25 field (for EXPLAIN).
        terms: distinct analysed query terms; the query is a boolean SHOULD of term queries
            built by the index, never a query string.
        window: the candidate window N.
        filter: the pushed-down filter expression, or None.
        weights: how often each term occurs in the query text (its BM25 score counts that many
            times); empty when every term occurs once.
    """

    fields: tuple[str, ...]
    terms: tuple[str, ...]
    window: int
    filter: Any = None
    weights: tuple[int, ...] = ()
    name = "LexicalScan"

    def describe(self) -> dict[str, Any]:
        props: dict[str, Any] = {"fields": list(self.fields), "terms": list(self.terms)}
        if self.weights:
            props["weights"] = list(self.weights)
        props["window"] = self.window
        if self.filter is not None:
            props["filter"] = "pushed"
        return props

    def query_terms(self) -> list[str]:
        """The terms as the index takes them: each repeated by its weight."""
        if not self.weights:
            return list(self.terms)
        return [t for t, w in zip(self.terms, self.weights, strict=True) for _ in range(w)]

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> LegHits:
        rowids, scores = ctx.snapshot.lexical_topn(
            self.query_terms(), fetch_size(ctx, self.window), ctx.filter_mask(self.filter)
        )
        return LegHits("lexical", np.asarray(rowids, np.int64), np.asarray(scores, np.float64),
                       self.window)


@dataclass(frozen=True, eq=False)
class SemanticScan(Operator):
    """Exact cosine top-N over L2-normalised float32 vectors.

    Attributes:
        dim: the collection's vector dimension.
        window: the candidate window N.
        text: text to embed with the collection's embedder, when `vector` is None.
        vector: float32[dim] query vector (from `NEAR :v`), or None.
        filter: the pushed-down filter expression, or None.
    """

    dim: int
    window: int
    text: str | None = None
    vector: np.ndarray | None = None
    filter: Any = None
    name = "SemanticScan"

    def describe(self) -> dict[str, Any]:
        props: dict[str, Any] = {"metric": "cosine", "dim": self.dim, "window": self.window}
        if self.vector is not None:
            props["query"] = "vector"
        else:
            text = self.text or ""
            props["text"] = text if len(text) <= 40 else text[:39] + "…"
        if self.filter is not None:
            props["filter"] = "pushed"
        return props

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> LegHits:
        vector = self.vector
        if vector is None:
            if ctx.embed is None:  # the planner only plans this leg when it can embed
                raise RuntimeError("no embedder available for the semantic leg")
            vector = ctx.embed(self.text or "")
        allowed = ctx.filter_mask(self.filter)
        rowids, scores = ctx.snapshot.semantic_topn(vector, fetch_size(ctx, self.window), allowed)
        for file, count in ctx.snapshot.skipped_vectors().items():
            ctx.notice(Reason.VECTORS_NOT_FINITE,
                       f"{count} stored vector(s) of segment {file} are not finite (NaN or "
                       "infinity: the file is damaged) and were skipped; run `recallql check`")
        return LegHits("semantic", np.asarray(rowids, np.int64), np.asarray(scores, np.float64),
                       self.window)


@dataclass(frozen=True, eq=False)
class EligibleScan(Operator):
    """Every live row that passes the filter, with relevance 0 (RETRIEVE without MATCHING)."""

    filter: Any = None
    name = "EligibleScan"

    def describe(self) -> dict[str, Any]:
        return {"filter": "pushed"} if self.filter is not None else {}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        mask = np.asarray(ctx.snapshot.live, dtype=bool)
        allowed = ctx.filter_mask(self.filter)
        if allowed is not None:
            mask = mask & allowed
        rowids = np.flatnonzero(mask).astype(np.int64)
        m = rowids.shape[0]
        nan = np.full(m, np.nan)
        zeros = np.zeros(m, dtype=np.int64)
        return Candidates(rowid=rowids, lex_rank=zeros, sem_rank=zeros.copy(), bm25=nan,
                          cosine=nan.copy(), legs=())
