"""Boost operators: recency (SPEC §4.5), session (§4.3) and cross-session signal (§4.4).

Each adds one or more contribution columns to the candidates; none changes a leg's raw scores.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates
from recallql.engine.keywords import keyword_matches
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.rowdata import row_entities, row_timestamps
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
    """`keywords·hint + velocity·v/(v+1) + entities·e/(e+1)` for the FOR SESSION session
    (SPEC §4.3).

    `hint` = matched/total over the session's keywords, a keyword matching when any of the row's
    string metadata values (declared `str` and `list[str]` fields, and the entity) contains it,
    case-insensitively; no keywords → exactly 0. `v` is the session's reward velocity: uniform
    over rows, so it never reorders. `e` is the session's decayed signal sum on the row's entity
    (never signalled → 0; negative → 0). When the session was not found (`ctx.session` is None)
    the operator adds nothing: rows and scores are those of the plan without it.

    Attributes:
        child: the input operator.
        session_id: the FOR SESSION id (for EXPLAIN; the state comes from `ctx.session`).
        keywords, velocity, entities: the weights (≥ 0; defaults 0.3 / 0.2 / 0.2).
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
        if session is None:
            return cands
        m, total = len(cands), len(session.keywords)
        names = row_entities(ctx.snapshot, cands.rowid)
        matched = keyword_matches(ctx.snapshot, cands.rowid, session.keywords)
        hint = matched / total if total else np.zeros(m)
        get = session.entities.get
        e = np.fromiter(map(get, names, itertools.repeat(0.0)), np.float64, m) \
            if session.entities else np.zeros(m)
        v = float(saturate(session.velocity))
        cands = cands.with_part("session_keywords", self.keywords * hint,
                                kw_matched=matched, kw_total=np.full(m, total))
        cands = cands.with_part("session_velocity", np.full(m, self.velocity * v),
                                velocity=np.full(m, session.velocity))
        return cands.with_part("session_entity", self.entities * saturate(e),
                               entity=names, entity_sum=e)


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
        entity_names = cands.details.get("entity")  # set by SessionBoost on the same rows
        if entity_names is None:
            entity_names = row_entities(ctx.snapshot, cands.rowid)
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
