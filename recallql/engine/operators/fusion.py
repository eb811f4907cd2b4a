"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009), normalised (SPEC §4.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates, LegHits
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.scoring import rrf_share


@dataclass(frozen=True, eq=False)
class RrfFusion(Operator):
    """Fuse the legs' ranked lists: `relevance = Σ_legs 1/(k + rank) / (L/(k + 1))`.

    A row absent from a leg gets nothing from it. With one leg this is that leg's normalised
    reciprocal rank. Attributes: `k` (> 0) and the leg operators as `children`.
    """

    k: float
    children: tuple[Operator, ...]
    name = "RrfFusion"

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
            ranks[h.leg][pos] = np.arange(1, len(h) + 1)
            raw[h.leg][pos] = h.scores
        cands = Candidates(rowid=rowid.astype(np.int64), lex_rank=ranks["lexical"],
                           sem_rank=ranks["semantic"], bm25=raw["lexical"],
                           cosine=raw["semantic"], legs=tuple(h.leg for h in hits))
        for h in hits:
            cands = cands.with_part(h.leg, rrf_share(ranks[h.leg], self.k, legs))
        ctx.stats["legs"] = {h.leg: {"rows": len(h), "window": h.window} for h in hits}
        return cands
