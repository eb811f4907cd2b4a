"""Columnar candidates: the rows flowing between operators (STYLE §5).

A `Candidates` holds numpy arrays of equal length `m`: the rowids, each leg's 1-based rank and raw
score, and one float64 contribution column per scoring component that the plan has. Operators
never modify a `Candidates`; they return a new one (`with_part`, `take`).

The score of a row is the left-to-right sum of its contributions in `COMPONENTS` order; EXPLAIN
lists the same contributions in the same order, so they sum to exactly the score (SPEC §5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

#: Scoring components, in the order they are summed (and listed by EXPLAIN).
COMPONENTS: tuple[str, ...] = (
    "lexical",
    "semantic",
    "session_keywords",
    "session_velocity",
    "session_entity",
    "signal",
    "recency",
)


def _empty_int() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


def _empty_float() -> np.ndarray:
    return np.zeros(0, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class LegHits:
    """One retrieval leg's ranked output: ranks are positions + 1.

    Attributes:
        leg: "lexical" or "semantic".
        rowids: int64[m], best first.
        scores: float64[m], BM25 scores or cosine similarities, aligned with `rowids`.
        window: the candidate window N the leg was asked for (m ≤ N).
    """

    leg: str
    rowids: np.ndarray
    scores: np.ndarray
    window: int

    def __len__(self) -> int:
        return int(self.rowids.shape[0])

    @property
    def cut(self) -> bool:
        """True when the leg filled its window, so deeper windows could hold more rows."""
        return len(self) >= self.window


@dataclass(frozen=True, slots=True)
class Candidates:
    """Columnar candidate rows.

    Attributes:
        rowid: int64[m].
        lex_rank, sem_rank: int64[m], 1-based ranks in each leg, 0 when absent.
        bm25, cosine: float64[m] raw leg scores, NaN when absent.
        parts: contribution columns by component name (float64[m]).
        details: per-row extras used to render reasons (arrays or lists of length m).
        legs: the legs that were part of the plan (for LEG_ABSENT reasons).
    """

    rowid: np.ndarray = field(default_factory=_empty_int)
    lex_rank: np.ndarray = field(default_factory=_empty_int)
    sem_rank: np.ndarray = field(default_factory=_empty_int)
    bm25: np.ndarray = field(default_factory=_empty_float)
    cosine: np.ndarray = field(default_factory=_empty_float)
    parts: Mapping[str, np.ndarray] = field(default_factory=dict)
    details: Mapping[str, Sequence] = field(default_factory=dict)
    legs: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.rowid.shape[0])

    def score(self) -> np.ndarray:
        """float64[m]: the left-to-right sum of the contributions in `COMPONENTS` order."""
        total = np.zeros(len(self), dtype=np.float64)
        for name in COMPONENTS:
            part = self.parts.get(name)
            if part is not None:
                total = total + part
        return total

    def with_part(self, name: str, values: np.ndarray, **details: Sequence) -> Candidates:
        """A copy with contribution column `name` set and extra per-row details."""
        if name not in COMPONENTS:
            raise ValueError(f"unknown scoring component {name!r}")
        parts = dict(self.parts)
        parts[name] = np.asarray(values, dtype=np.float64)
        merged = dict(self.details)
        merged.update(details)
        return replace(self, parts=parts, details=merged)

    def take(self, index: np.ndarray) -> Candidates:
        """A copy holding the rows at `index` (int positions or a bool mask), in that order."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        details = {
            key: (val[index] if isinstance(val, np.ndarray) else [val[i] for i in index])
            for key, val in self.details.items()
        }
        return Candidates(
            rowid=self.rowid[index],
            lex_rank=self.lex_rank[index],
            sem_rank=self.sem_rank[index],
            bm25=self.bm25[index],
            cosine=self.cosine[index],
            parts={key: val[index] for key, val in self.parts.items()},
            details=details,
            legs=self.legs,
        )
