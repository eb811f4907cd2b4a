"""Boost operators: recency (SPEC §4.5), session (§4.3) and cross-session signal (§4.4).

Each adds one or more contribution columns to the candidates; none changes a leg's raw scores.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from recallql.engine.candidates import Candidates, RecencyDetail, SessionDetail, SignalDetail
from recallql.engine.keywords import keyword_matches
from recallql.engine.metrics import Output
from recallql.engine.operators.base import ExecutionContext, Operator, UnaryOperator
from recallql.engine.scoring import DecayShape, recency_boost, saturate


def _fmt(x: float) -> Any:
    """A whole number as an int (`60`, not `60.0`) while every digit of it is exact; larger
    floats stay floats (`1e+300`, not three hundred digits)."""
    return int(x) if float(x).is_integer() and abs(x) <= _EXACT else x


#: Below 2**53 every whole float is exact, and its int has at most 16 digits.
_EXACT = 2.0**53


@dataclass(frozen=True, eq=False)
class RecencyBoost(UnaryOperator):
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

    def describe(self) -> dict[str, Any]:
        return {"field": self.field, "weight": _fmt(self.weight),
                "half_life": f"{_fmt(self.half_life_days)}d", "shape": self.shape.name}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        cands: Candidates = inputs[0]
        dates = cands.features.recency
        if dates is None:
            raise ValueError(f"the candidates carry no '{self.field}' dates (plan features)")
        boost, age, future, missing = recency_boost(
            dates, ctx.now_ts, self.weight, self.half_life_days, self.shape
        )
        return Output(cands.with_parts({"recency": boost},
                                       ("recency", RecencyDetail(age, future, missing))))


@dataclass(frozen=True, eq=False)
class SessionBoost(UnaryOperator):
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

    def describe(self) -> dict[str, Any]:
        return {"session": self.session_id, "keywords": _fmt(self.keywords),
                "velocity": _fmt(self.velocity), "entities": _fmt(self.entities)}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        cands: Candidates = inputs[0]
        session = ctx.session
        if session is None:
            return Output(cands)
        m, total = len(cands), len(session.keywords)
        names = entities(cands)
        matched = keyword_matches(cands.features.strings, m, session.keywords)
        hint = matched / total if total else np.zeros(m)
        get = session.entities.get
        e = np.fromiter(map(get, names, itertools.repeat(0.0)), np.float64, m) \
            if session.entities else np.zeros(m)
        v = float(saturate(session.velocity))
        detail = SessionDetail(matched, total, session.velocity, np.asarray(names, dtype=object),
                               e)
        return Output(cands.with_parts({"session_keywords": self.keywords * hint,
                                        "session_velocity": np.full(m, self.velocity * v),
                                        "session_entity": self.entities * np.asarray(
                                            saturate(e))},
                                       ("session", detail)))


def entities(cands: Candidates) -> list[str]:
    """Each candidate's entity (which defaults to its doc_id, which defaults to its id)."""
    column = cands.features.entities
    if column is None:
        raise ValueError("the candidates carry no entities (plan features)")
    return column.tolist()


@dataclass(frozen=True, eq=False)
class SignalBoost(UnaryOperator):
    """Cross-session preference: `Σ_name w_name · s/(s+1)`, `s` the entity's decayed sum of
    accepted `name` signals over all sessions (negative sums count as 0; SPEC §4.4)."""

    child: Operator
    weights: tuple[tuple[str, float], ...] = (("reward", 0.1),)
    name = "SignalBoost"

    def describe(self) -> dict[str, Any]:
        return {name: _fmt(w) for name, w in self.weights}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Candidates]:
        cands: Candidates = inputs[0]
        m = len(cands)
        session = cands.details.get("session")  # SessionBoost read the same rows' entities
        names = session.entity if isinstance(session, SessionDetail) else \
            np.asarray(entities(cands), dtype=object)
        wanted = [name for name, _ in self.weights]
        sums = ctx.signals.entity_sums(sorted(set(names.tolist())), wanted, ctx.now_ts) \
            if ctx.signals is not None and m else {}
        total = np.zeros(m, dtype=np.float64)
        per_name = np.zeros((m, len(self.weights)), dtype=np.float64)
        for j, (name, weight) in enumerate(self.weights):
            by_entity = sums.get(name, {})
            s = np.fromiter(map(by_entity.get, names, itertools.repeat(0.0)), np.float64, m)
            per_name[:, j] = s
            total = total + weight * saturate(s)
        detail = SignalDetail(tuple(wanted), names, per_name)
        return Output(cands.with_parts({"signal": total}, ("signal", detail)))
