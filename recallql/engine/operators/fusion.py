"""Fusion of the retrieval legs (SPEC §4.2): reciprocal rank fusion or the convex combination of
normalised scores, weighted per leg and normalised so the best possible relevance is 1; then the
context leg's credit for ordered items.

- `RrfFusion`: `Σ w/(k + rank) / (W/(k + 1))` (Cormack, Clarke & Büttcher, SIGIR 2009).
- `ConvexFusion`: `Σ w·φ(score) / W`, `φ` min-max over each leg's window or theoretical min-max
  (Bruch, Gai & Ingber, TOIS 2023, "An Analysis of Fusion Functions for Hybrid Retrieval"); a
  lexical leg that holds fewer rows than its window holds every match, and the rest of its
  window are rows of BM25 0, so its lower bound is 0 (`scoring.NO_MATCH_SCORE`).

`W` sums the weights of the direct legs (lexical, semantic, ...). A `context`-kind leg adds, to
each of its rows, `weight^d ·` the relevance of the direct candidate d eligible items away in
its document that gives most (`scoring.context_credit`): a neighbour's match counts, below a
direct one, halving per step away.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from recallql.engine.candidates import Candidates, ContextDetail, LegColumn
from recallql.engine.features import Features, empty_features
from recallql.engine.metrics import FusionMetrics, LegMetrics, Output
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.operators.scan import LegScan
from recallql.engine.plan import LegKind
from recallql.engine.scoring import (
    NO_MATCH_SCORE,
    THEORETICAL_MIN,
    context_credit,
    convex_share,
    normalised,
    rrf_share,
    score_bounds,
)

if TYPE_CHECKING:
    from recallql.engine.legs import LegBatch

#: The context leg's default weight: a neighbour's match counts half as much as a direct one
#: (credit halves per step away from the match).
DEFAULT_CONTEXT_WEIGHT = 0.5


@dataclass(frozen=True, slots=True, eq=False)
class LegHits:
    """A leg's gathered output as fusion reads it: the batch and the features of the run."""

    batch: LegBatch
    features: Features

    def __len__(self) -> int:
        return len(self.batch)


Shares = tuple[tuple[LegColumn, ...], dict[str, np.ndarray], tuple[tuple[str, float, float], ...]]


@dataclass(frozen=True, eq=False)
class Fusion(Operator):
    """Base of the fusion operators: the leg operators as `children` (plan order), the candidate
    window N they were run with, and `weights` (`(leg, w ≥ 0)` of the direct legs as written;
    others 1)."""

    children: tuple[Operator, ...]
    window: int = 0
    weights: tuple[tuple[str, float], ...] = ()
    name = "Fusion"

    def weight(self, leg: str) -> float:
        return dict(self.weights).get(leg, 1.0)

    def context_weight(self, leg: str) -> float:
        """The context leg's weight (its spec's `weight` option)."""
        for op in self.children:
            if isinstance(op, LegScan) and op.leg == leg:
                return float(op.spec.options.get("weight", DEFAULT_CONTEXT_WEIGHT))
        return DEFAULT_CONTEXT_WEIGHT

    def common(self) -> dict[str, Any]:
        direct = [op for op in self.children
                  if not (isinstance(op, LegScan) and op.spec.kind is LegKind.CONTEXT)]
        props: dict[str, Any] = {"window": self.window, "legs": len(direct)}
        if self.weights:
            props["weights"] = {leg: _num(w) for leg, w in self.weights}
        return props

    def shares(self, cands: Candidates, direct: list[LegColumn], total: float,
               complete: frozenset[str] = frozenset()) -> Shares:
        """The direct legs' columns (with φ for the convex combination), their shares and the
        bounds used (`(leg, lo, hi)`); `complete` names the legs that returned fewer rows than
        their window (every match they have)."""
        raise NotImplementedError

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        hits: list[LegHits] = inputs
        cands = _placed(hits)
        direct = [leg for leg in cands.legs if leg.kind is not LegKind.CONTEXT]
        total = sum(self.weight(leg.name) for leg in direct)
        complete = frozenset(h.batch.name for h in hits
                             if h.batch.kind is not LegKind.CONTEXT and not h.batch.cut)
        columns, parts, bounds = self.shares(cands, direct, total, complete)
        by_name = {c.name: c for c in columns}
        cands = cands.with_legs(tuple(by_name.get(leg.name, leg) for leg in cands.legs))
        cands = cands.with_parts(parts)
        relevance = np.zeros(len(cands), dtype=np.float64)
        for leg in direct:
            relevance = relevance + parts[leg.name]
        for h in hits:
            if h.batch.kind is LegKind.CONTEXT:
                cands = _credit(cands, h.batch, relevance, self.context_weight(h.batch.name))
        metrics = FusionMetrics(tuple(LegMetrics(h.batch.name, len(h), h.batch.window,
                                                 h.batch.method, h.batch.why, h.batch.filter)
                                      for h in hits), bounds)
        return Output(cands, metrics)


@dataclass(frozen=True, eq=False)
class RrfFusion(Fusion):
    """Reciprocal rank fusion: `relevance = Σ_legs w/(k + rank) / (Σ_legs w / (k + 1))`.

    Ranks are 1-based; rows with equal leg scores share a rank (`competition_ranks`). A row absent
    from a leg gets nothing from it. With equal weights this is `Σ 1/(k + rank) / (L/(k + 1))`;
    a row ranked first by every leg has relevance exactly 1. `k` > 0.
    """

    k: float = 60.0
    name = "RrfFusion"

    def describe(self) -> dict[str, Any]:
        return {"k": _num(self.k), **self.common()}

    def shares(self, cands: Candidates, direct: list[LegColumn], total: float,
               complete: frozenset[str] = frozenset()) -> Shares:
        return (), {leg.name: rrf_share(leg.rank, self.k, total, self.weight(leg.name))
                    for leg in direct}, ()


@dataclass(frozen=True, eq=False)
class ConvexFusion(Fusion):
    """The convex combination of normalised scores: `relevance = Σ_legs w·φ(score) / Σ_legs w`.

    `φ(s) = (s − lo)/(hi − lo)` per leg, over the scores of its window: `minmax` takes `lo` and
    `hi` as the lowest and highest (a leg whose scores are all equal gives each φ = 1); `tmm`
    takes `lo` as the leg kind's theoretical minimum (BM25 0, cosine −1). A lexical leg with
    fewer rows than its window N returned every match: the other rows of its window would be
    non-matching rows of BM25 0, so under `minmax` its `lo` is 0 (the weakest match is not
    scored as a non-match). A row absent from a leg gets nothing from it; one at the top of
    every leg has relevance 1. With two legs of weights `1 − α`, `α` this is
    `α·φ_sem + (1 − α)·φ_lex` (Bruch et al., TOIS 2023).
    """

    normalization: str = "minmax"
    name = "ConvexFusion"

    def describe(self) -> dict[str, Any]:
        return {"normalization": self.normalization, **self.common()}

    def shares(self, cands: Candidates, direct: list[LegColumn], total: float,
               complete: frozenset[str] = frozenset()) -> Shares:
        columns, parts, bounds = [], {}, []
        for leg in direct:
            present = leg.raw[leg.rank > 0]
            floor = THEORETICAL_MIN.get(leg.kind.value) if self.normalization == "tmm" \
                else NO_MATCH_SCORE.get(leg.kind.value) if leg.name in complete else None
            lo, hi = score_bounds(present, floor)
            norm = normalised(leg.raw, lo, hi)  # raw is NaN where the row is absent
            columns.append(LegColumn(leg.name, leg.kind, leg.rank, leg.raw, norm))
            parts[leg.name] = convex_share(norm, total, self.weight(leg.name))
            bounds.append((leg.name, lo, hi))
        return tuple(columns), parts, tuple(bounds)


def _placed(hits: list[LegHits]) -> Candidates:
    """The candidates of the run's features with one column per leg (rows no leg kept — a
    coordinator's cut — left out)."""
    features = hits[0].features if hits else empty_features()
    m = len(features)
    covered = np.zeros(m, dtype=bool)
    legs = []
    for h in hits:
        pos = _positions(features.rowid, h.batch.rowids)
        rank, raw = np.zeros(m, np.int64), np.full(m, np.nan)
        if h.batch.kind is not LegKind.CONTEXT:
            rank[pos] = h.batch.ranks
            raw[pos] = h.batch.scores
        covered[pos] = True
        legs.append(LegColumn(h.batch.name, h.batch.kind, rank, raw))
    cands = Candidates(features=features, legs=tuple(legs))
    return cands if covered.all() else cands.take(np.flatnonzero(covered))


def _credit(cands: Candidates, batch: LegBatch, relevance: np.ndarray, weight: float
            ) -> Candidates:
    """The context leg's part: each of its rows gets `weight^d ·` the relevance of the direct
    candidate of its document that gives it most (`scoring.context_credit`); that candidate's
    item id, side and distance go into the `context` detail."""
    m = len(cands)
    rowid = cands.rowid
    places = batch.places if batch.places is not None \
        else np.full((len(batch), 2), -1, np.int64)
    rows = np.searchsorted(rowid, batch.rowids)
    keep = (rows < m) & (rowid[np.minimum(rows, m - 1)] == batch.rowids) if m \
        else np.zeros(len(batch), bool)
    rows, places = rows[keep], places[keep]
    giver = np.zeros(rows.shape[0], bool)
    for leg in cands.legs:
        if leg.kind is not LegKind.CONTEXT:
            giver |= leg.rank[rows] > 0
    doc, place = places[:, 0], places[:, 1]
    credit, source, distance = context_credit(weight, doc, place, relevance[rows], giver)
    has = np.flatnonzero(source >= 0)
    given, giving = rows[has], rows[source[has]]
    part = np.zeros(m, dtype=np.float64)
    part[rows] = credit
    at = np.arange(m, dtype=np.int64)  # rows without credit point at themselves (unread)
    at[given] = giving
    full_side, rel = np.zeros(m, np.int8), np.full(m, np.nan)
    full_side[given] = np.where(place[source[has]] < place[has], -1, 1)
    rel[given] = relevance[giving]
    steps = np.zeros(m, np.int64)
    steps[rows] = distance
    return cands.with_parts({batch.name: part}, (batch.name, ContextDetail(
        neighbour=cands.features.ids.take(at), side=full_side, relevance=rel, weight=weight,
        distance=steps)))


def _positions(rowid: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Positions of `wanted` in the ascending `rowid`.

    Raises:
        ValueError: some wanted rowid has no features.
    """
    pos = np.searchsorted(rowid, wanted)
    if pos.shape[0] and (not rowid.shape[0] or (rowid.take(pos, mode="clip") != wanted).any()):
        raise ValueError("the features do not cover every leg's candidates")
    return pos


def _num(x: float) -> Any:
    """A whole number as an int (`60`, not `60.0`) while every digit of it is exact; larger
    floats stay floats (`1e+300`, not three hundred digits)."""
    return int(x) if float(x).is_integer() and abs(x) <= _EXACT else x


#: Below 2**53 every whole float is exact, and its int has at most 16 digits.
_EXACT = 2.0**53
