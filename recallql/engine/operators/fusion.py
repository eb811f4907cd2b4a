"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009), weighted and normalised
(SPEC §4.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from recallql.engine.candidates import Candidates, LegColumn
from recallql.engine.features import Features, empty_features
from recallql.engine.metrics import FusionMetrics, LegMetrics, Output
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.scoring import rrf_share

if TYPE_CHECKING:
    from recallql.engine.legs import LegBatch


@dataclass(frozen=True, slots=True, eq=False)
class LegHits:
    """A leg's gathered output as fusion reads it: the batch and the features of the run."""

    batch: LegBatch
    features: Features

    def __len__(self) -> int:
        return len(self.batch)


@dataclass(frozen=True, eq=False)
class RrfFusion(Operator):
    """Fuse the legs' ranked lists:
    `relevance = Σ_legs w/(k + rank) / (Σ_legs w / (k + 1))`.

    Ranks are 1-based; rows with equal leg scores share a rank (`competition_ranks`). A row absent
    from a leg gets nothing from it. With equal weights this is `Σ 1/(k + rank) / (L/(k + 1))`;
    a row ranked first by every leg has relevance exactly 1. Attributes: `k` (> 0), the leg
    operators as `children` (plan order) and `weights` (`(leg, w ≥ 0)` as written; others 1).
    """

    k: float
    children: tuple[Operator, ...]
    weights: tuple[tuple[str, float], ...] = ()
    name = "RrfFusion"

    def describe(self) -> dict[str, Any]:
        props: dict[str, Any] = {"k": _num(self.k), "legs": len(self.children)}
        if self.weights:
            props["weights"] = {leg: _num(w) for leg, w in self.weights}
        return props

    def weight(self, leg: str) -> float:
        return dict(self.weights).get(leg, 1.0)

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        hits: list[LegHits] = inputs
        features = hits[0].features if hits else empty_features()
        m = len(features)
        covered = np.zeros(m, dtype=bool)
        legs = []
        for h in hits:
            pos = _positions(features.rowid, h.batch.rowids)
            rank, raw = np.zeros(m, np.int64), np.full(m, np.nan)
            rank[pos] = h.batch.ranks
            raw[pos] = h.batch.scores
            covered[pos] = True
            legs.append(LegColumn(h.batch.name, h.batch.kind, rank, raw))
        cands = Candidates(features=features, legs=tuple(legs))
        if not covered.all():  # features of rows no leg kept (a coordinator's cut)
            cands = cands.take(np.flatnonzero(covered))
        total = sum(self.weight(leg.name) for leg in cands.legs)
        shares = {leg.name: rrf_share(leg.rank, self.k, total, self.weight(leg.name))
                  for leg in cands.legs}
        metrics = FusionMetrics(tuple(LegMetrics(h.batch.name, len(h), h.batch.window,
                                                  h.batch.method, h.batch.why)
                                      for h in hits))
        return Output(cands.with_parts(shares), metrics)


def _positions(rowid: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Positions of `wanted` in the ascending `rowid`.

    Raises:
        ValueError: some wanted rowid has no features.
    """
    pos = np.searchsorted(rowid, wanted)
    if pos.shape[0] and (pos.max() >= rowid.shape[0] or (rowid[pos] != wanted).any()):
        raise ValueError("the features do not cover every leg's candidates")
    return pos


def _num(x: float) -> Any:
    return int(x) if float(x).is_integer() else x
