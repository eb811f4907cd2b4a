"""Boost operators: recency (SPEC §4.5), session (§4.3) and cross-session signal (§4.4).

Each adds one or more contribution columns to the candidates; none changes a leg's raw scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.rowdata import row_strings, row_timestamps
from recallql.engine.scoring import DecayShape, recency_boost, saturate


def _fmt(x: float) -> Any:
    return int(x) if float(x).is_integer() else x


@dataclass(frozen=True, eq=False)
class RecencyBoost(Operator):
    """`weight · f(age)`, `age = max(0, now − field)` in days; missing dates get 0.

    Attributes:
        child: the input operator.
        weight: ≥ 0 (0 is the kill switch: exact zeros).
        half_life_days: > 0.
        field: the timestamp field (default `created_at`).
        shape: EXP, GAUSS or LINEAR.
    """

    child: Operator
    weight: float
    half_life_days: float
    field: str = "created_at"
    shape: DecayShape = DecayShape.EXP
    name = "RecencyBoost"

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)

    def describe(self) -> dict[str, Any]:
        return {"field": self.field, "weight": _fmt(self.weight),
                "half_life": f"{_fmt(self.half_life_days)}d", "shape": self.shape.name}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        cands: Candidates = inputs[0]
        dates = row_timestamps(ctx.snapshot, self.field, cands.rowid)
        boost, age, future, missing = recency_boost(
            dates, ctx.now_ts, self.weight, self.half_life_days, self.shape
        )
        return cands.with_part("recency", boost, recency_age=age, recency_future=future,
                               recency_missing=missing)


@dataclass(frozen=True, eq=False)
class SessionBoost(Operator):
    """`keywords·hint + velocity·v/(v+1) + entities·e/(e+1)` for the FOR SESSION session.

    `hint` = matched/total over the session's keywords, a keyword matching when any of the row's
    string metadata values contains it (case-insensitive); no keywords → 0. `v` is the session's
    reward velocity (uniform over rows: it never reorders). `e` is the session's decayed signal
    sum on the row's entity (negative → 0).
    """

    child: Operator
    session_id: str
    keywords: float = 0.3
    velocity: float = 0.2
    entities: float = 0.2
    name = "SessionBoost"

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)

    def describe(self) -> dict[str, Any]:
        return {"session": self.session_id, "keywords": _fmt(self.keywords),
                "velocity": _fmt(self.velocity), "entities": _fmt(self.entities)}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        cands: Candidates = inputs[0]
        session = ctx.session
        if session is None:  # not found: the planner keeps the operator; it adds nothing
            return cands
        m = len(cands)
        matched = _keyword_matches(ctx, cands.rowid, session.keywords)
        total = len(session.keywords)
        hint = matched / total if total else np.zeros(m)
        entity_names = [ctx.snapshot.entities[r] for r in cands.rowid]
        e = np.array([session.entities.get(name, 0.0) for name in entity_names], dtype=np.float64)
        v = float(saturate(session.velocity))
        cands = cands.with_part("session_keywords", self.keywords * hint,
                                kw_matched=matched, kw_total=np.full(m, total))
        cands = cands.with_part("session_velocity", np.full(m, self.velocity * v),
                                velocity=np.full(m, session.velocity))
        return cands.with_part("session_entity", self.entities * saturate(e),
                               entity=entity_names, entity_sum=e)


def _keyword_matches(ctx: ExecutionContext, rowids: np.ndarray, keywords: tuple[str, ...]
                     ) -> np.ndarray:
    """int64[m]: how many of `keywords` (lower-cased) each row's string metadata contains."""
    counts = np.zeros(rowids.shape[0], dtype=np.int64)
    if not keywords or rowids.shape[0] == 0:
        return counts
    for i, values in enumerate(row_strings(ctx.snapshot, rowids)):
        haystack = [v.lower() for v in values]
        counts[i] = sum(1 for kw in keywords if any(kw in h for h in haystack))
    return counts


@dataclass(frozen=True, eq=False)
class SignalBoost(Operator):
    """Cross-session preference: `Σ_name w_name · s/(s+1)`, `s` the entity's decayed sum of
    accepted `name` signals over all sessions (negative sums count as 0; SPEC §4.4)."""

    child: Operator
    weights: tuple[tuple[str, float], ...] = (("reward", 0.1),)
    name = "SignalBoost"

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)

    def describe(self) -> dict[str, Any]:
        return {name: _fmt(w) for name, w in self.weights}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Candidates:
        cands: Candidates = inputs[0]
        m = len(cands)
        entity_names = [ctx.snapshot.entities[r] for r in cands.rowid]
        names = [name for name, _ in self.weights]
        sums = ctx.signals.entity_sums(sorted(set(entity_names)), names, ctx.now_ts) \
            if ctx.signals is not None and m else {}
        total = np.zeros(m, dtype=np.float64)
        per_name: dict[str, np.ndarray] = {}
        for name, weight in self.weights:
            by_entity = sums.get(name, {})
            s = np.array([by_entity.get(e, 0.0) for e in entity_names], dtype=np.float64)
            per_name[name] = s
            total = total + weight * saturate(s)
        return cands.with_part("signal", total, signal_sums=[
            {name: float(per_name[name][i]) for name in names} for i in range(m)
        ], signal_entity=entity_names)
