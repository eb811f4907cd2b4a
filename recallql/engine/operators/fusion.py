"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009), normalised (SPEC §4.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates, LegHits
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.scoring import rrf_share


def competition_ranks(scores: np.ndarray) -> np.ndarray:
    """int64[m] 1-based ranks of a leg's scores (sorted best first), ties sharing the best rank
    of their group ("1224" standard competition ranking).

    A leg orders tied rows by item id, but that order is a tie-break, not evidence: rows with equal
    BM25 or cosine get equal RRF shares, so an exact tie is decided by the boosts (the newer
    document wins it under recency) and then by the total order.
    """
    m = scores.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.r_[True, scores[1:] != scores[:-1]]
    return np.maximum.accumulate(np.where(starts, np.arange(1, m + 1), 0)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class RrfFusion(Operator):
    """Fuse the legs' ranked lists: `relevance = Σ_legs 1/(k + rank) / (L/(k + 1))`.

    Ranks are 1-based; rows with equal leg scores share a rank (`competition_ranks`). A row absent
    from a leg gets nothing from it. With one leg this is that leg's normalised
    reciprocal rank. Attributes: `k` (> 0) and the leg operators as `children`.
    """

    k: float
    children: tuple[Operator, ...]
    name = "RrfFusion"
    parallel = True  # the legs are independent: the executor runs them concurrently

    def describe(self) -> dict[str, Any]:
        k = int(self.k) if float(self.k).is_integer() else self.k
        return {"k": k, "legs": len(self.children)}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        hits: list[LegHits] = inputs
        legs = len(hits)
        rowid = (np.unique(np.concatenate([h.rowids for h in hits])) if hits
                 else np.zeros(0, np.int64))
        m = rowid.shape[0]
        ranks = {"lexical": np.zeros(m, np.int64), "semantic": np.zeros(m, np.int64)}
        raw = {"lexical": np.full(m, np.nan), "semantic": np.full(m, np.nan)}
        for h in hits:
            pos = np.searchsorted(rowid, h.rowids)
            ranks[h.leg][pos] = competition_ranks(h.scores)
            raw[h.leg][pos] = h.scores
        cands = Candidates(rowid=rowid.astype(np.int64), lex_rank=ranks["lexical"],
                           sem_rank=ranks["semantic"], bm25=raw["lexical"],
                           cosine=raw["semantic"], legs=tuple(h.leg for h in hits))
        for h in hits:
            cands = cands.with_part(h.leg, rrf_share(ranks[h.leg], self.k, legs))
        ctx.stats["legs"] = {h.leg: {"rows": len(h), "window": h.window} for h in hits}
        return cands
