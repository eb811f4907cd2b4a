"""Columnar candidates: the rows flowing between operators above the legs (STYLE §5).

A `Candidates` holds, for m rows: their `Features`; one `LegColumn` per retrieval leg of the plan
(1-based rank and raw score, in plan order); one float64 contribution column per scoring
component the plan has; and typed per-component details for the reasons. Operators never modify a
`Candidates`; they return a new one (`with_parts`, `take`).

The score of a row is the left-to-right sum of its contributions: the legs' RRF shares in plan
order, then `BOOSTS` in order. EXPLAIN lists the same contributions in the same order, so they sum
to exactly the score (SPEC §5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from recallql.engine.features import Features, Strings, empty_features
from recallql.engine.plan import LegKind

#: Boost components, in the order they are summed after the legs (and listed by EXPLAIN).
BOOSTS: tuple[str, ...] = (
    "session_keywords",
    "session_velocity",
    "session_entity",
    "signal",
    "recency",
)


@dataclass(frozen=True, slots=True, eq=False)
class Detail:
    """Base of the per-component detail records: numpy fields are per row (first axis m);
    other fields are shared by every row."""

    def take(self, index: np.ndarray) -> Any:
        return replace(self, **{name: value[index] for name in _field_names(type(self))
                                if isinstance(value := getattr(self, name), np.ndarray)})


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


@dataclass(frozen=True, slots=True, eq=False)
class RecencyDetail(Detail):
    """age (float64 days, NaN when missing), future (bool: clamped to 0), missing (bool)."""

    age: np.ndarray
    future: np.ndarray
    missing: np.ndarray

    def take(self, index: np.ndarray) -> RecencyDetail:
        return RecencyDetail(self.age[index], self.future[index], self.missing[index])


@dataclass(frozen=True, slots=True, eq=False)
class SessionDetail(Detail):
    """Keyword hints matched of `total`, the session's velocity, each row's entity and the
    session's decayed sum on it (`e`)."""

    matched: np.ndarray
    total: int
    velocity: float
    entity: np.ndarray
    entity_sum: np.ndarray


@dataclass(frozen=True, slots=True, eq=False)
class SignalDetail(Detail):
    """Each row's entity and its decayed sum per signal name (float64[m, len(names)])."""

    names: tuple[str, ...]
    entity: np.ndarray
    sums: np.ndarray


@dataclass(frozen=True, slots=True, eq=False)
class LineageDetail(Detail):
    """Each row's conversation root and the session of the hit that represents it."""

    root: np.ndarray
    anchor: np.ndarray


@dataclass(frozen=True, slots=True, eq=False)
class ContextDetail(Detail):
    """The context leg's credit per row: the item that gave it (its item id, lazy: read only
    for the rows a result shows; meaningless where `side` is 0), which side it is on (−1
    before, +1 after, 0 none), its fused relevance (NaN: none), the leg's weight and the
    distance d in eligible items (int64; 0: none)."""

    neighbour: Strings
    side: np.ndarray
    relevance: np.ndarray
    weight: float
    distance: np.ndarray

    def take(self, index: np.ndarray) -> ContextDetail:
        return ContextDetail(self.neighbour.take(index), self.side[index],
                             self.relevance[index], self.weight, self.distance[index])


@dataclass(frozen=True, slots=True, eq=False)
class LegColumn:
    """One leg's columns: int64[m] 1-based ranks (0: absent), float64[m] raw scores (NaN), and
    under the convex combination float64[m] normalised scores φ (NaN: absent; None under RRF).
    The context leg's rank is 0 and its raw score NaN (it matches nothing itself)."""

    name: str
    kind: LegKind
    rank: np.ndarray
    raw: np.ndarray
    norm: np.ndarray | None = None

    def take(self, index: np.ndarray) -> LegColumn:
        return LegColumn(self.name, self.kind, self.rank[index], self.raw[index],
                         None if self.norm is None else self.norm[index])


@dataclass(frozen=True, slots=True, eq=False)
class Candidates:
    """Columnar candidate rows.

    Attributes:
        features: the rows' features (their `rowid` is the candidates' rowid).
        legs: the plan's legs, in plan order (empty: RETRIEVE without MATCHING).
        parts: contribution columns (float64[m]) by component: leg names, then `BOOSTS`.
        details: typed detail records by name (`context`, `recency`, `session`, `signal`,
            `lineage`).
    """

    features: Features = field(default_factory=empty_features)
    legs: tuple[LegColumn, ...] = ()
    parts: Mapping[str, np.ndarray] = field(default_factory=dict)
    details: Mapping[str, Detail] = field(default_factory=dict)

    @property
    def rowid(self) -> np.ndarray:
        """int64[m]."""
        return self.features.rowid

    def __len__(self) -> int:
        return len(self.features)

    def score(self) -> np.ndarray:
        """float64[m]: the left-to-right sum of the contributions (legs, then `BOOSTS`)."""
        total = np.zeros(len(self), dtype=np.float64)
        for name in (*(leg.name for leg in self.legs), *BOOSTS):
            part = self.parts.get(name)
            if part is not None:
                total = total + part
        return total

    def leg(self, name: str) -> LegColumn:
        """The columns of leg `name`.

        Raises:
            KeyError: the plan has no such leg.
        """
        for leg in self.legs:
            if leg.name == name:
                return leg
        raise KeyError(name)

    def best(self, kind: LegKind) -> np.ndarray:
        """float64[m]: the best raw score over the legs of `kind`, NaN when in none of them."""
        raws = [leg.raw for leg in self.legs if leg.kind is kind]
        if not raws:
            return np.full(len(self), np.nan)
        best = raws[0]
        for raw in raws[1:]:
            best = np.fmax(best, raw)
        return best

    def with_parts(self, parts: Mapping[str, np.ndarray], detail: tuple[str, Detail] | None = None
                   ) -> Candidates:
        """A copy with contribution columns set (and a detail record stored under its name)."""
        known = {*BOOSTS, *(leg.name for leg in self.legs)}
        unknown = set(parts) - known
        if unknown:
            raise ValueError(f"unknown scoring component(s) {sorted(unknown)}")
        merged = {**self.parts, **{k: np.asarray(v, dtype=np.float64) for k, v in parts.items()}}
        details = self.details if detail is None else {**self.details, detail[0]: detail[1]}
        return Candidates(self.features, self.legs, merged, details)

    def with_legs(self, legs: tuple[LegColumn, ...]) -> Candidates:
        """A copy with the leg columns replaced (same legs, e.g. with normalised scores)."""
        return Candidates(self.features, legs, self.parts, self.details)

    def with_detail(self, name: str, detail: Detail) -> Candidates:
        """A copy with one more detail record."""
        return Candidates(self.features, self.legs, self.parts, {**self.details, name: detail})

    def take(self, index: np.ndarray) -> Candidates:
        """A copy holding the rows at `index` (int positions or a bool mask), in that order."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        index = index.astype(np.int64, copy=False)
        return Candidates(
            features=self.features.take(index),
            legs=tuple(leg.take(index) for leg in self.legs),
            parts={key: val[index] for key, val in self.parts.items()},
            details={key: val.take(index) for key, val in self.details.items()},
        )
