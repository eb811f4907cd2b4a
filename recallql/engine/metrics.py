"""Typed execution metrics (modelled on DataFusion's `ExecutionPlan::metrics`).

Every operator returns an `Output`: its value, its own frozen metrics record, the statement-level
notices it raised and whether it truncated the result. The executor adds rows in/out and wall
time and builds a `MetricsNode` tree mirroring the plan. Nothing travels through a shared dict:
`Result.stats` is rendered from the tree (`MetricsNode.stats`), and the refill policy reads
`underfilled` from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from recallql.engine.reasons import Reason

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Metrics:
    """An operator's own metrics. The base record: nothing beyond rows and time."""

    @property
    def underfilled(self) -> bool:
        """True when the operator kept fewer rows than the page needs (grouping, walks)."""
        return False

    def stats(self) -> dict[str, Any]:
        """What `Result.stats` shows of this record (keyed by section)."""
        return {}

    def properties(self) -> dict[str, Any]:
        """Run-time properties EXPLAIN prints on the operator's line, with or without ANALYZE
        (the convex combination's per-leg score bounds)."""
        return {}


NO_METRICS = Metrics()


@dataclass(frozen=True, slots=True)
class LegMetrics(Metrics):
    """A retrieval leg: rows returned out of the candidate window asked for.

    Attributes:
        leg: the leg's name (`lexical`, `semantic`, ...).
        rows: candidates returned (≤ window).
        window: the candidate window N.
    """

    leg: str
    rows: int
    window: int
    method: str = ""
    why: str = ""
    filter: str = ""

    def properties(self) -> dict[str, Any]:
        """What EXPLAIN adds to the leg's operator line: how it applied the filter, how it
        searched and why."""
        out: dict[str, Any] = {"filter": self.filter} if self.filter else {}
        return {**out, "method": self.method, "why": self.why} if self.method else out

    @property
    def cut(self) -> bool:
        """True when the leg filled its window, so a deeper window could hold more rows."""
        return self.rows >= self.window


@dataclass(frozen=True, slots=True)
class FusionMetrics(Metrics):
    """Fusion: the legs it fused, in plan order, and under the convex combination each direct
    leg's normalisation bounds `(leg, lo, hi)` (NaN for an empty leg, which EXPLAIN prints as
    ``empty``)."""

    legs: tuple[LegMetrics, ...]
    bounds: tuple[tuple[str, float, float], ...] = ()

    def stats(self) -> dict[str, Any]:
        return {"legs": {leg.leg: {"rows": leg.rows, "window": leg.window,
                                   **leg.properties()} for leg in self.legs}}

    def properties(self) -> dict[str, Any]:
        if not self.bounds:
            return {}
        return {"bounds": {leg: _shown(lo, hi) for leg, lo, hi in self.bounds}}


def _shown(lo: float, hi: float) -> list[float] | str:
    """A leg's bounds as EXPLAIN prints them: ``[lo, hi]`` to 4 decimals, or ``empty`` for a
    leg that returned no rows (its bounds are NaN)."""
    return "empty" if lo != lo or hi != hi else [round(lo, 4), round(hi, 4)]


@dataclass(frozen=True, slots=True)
class GroupMetrics(Metrics):
    """GROUP BY DOCUMENT: the groups kept, against the rows the page needs."""

    groups: int
    need: int

    @property
    def underfilled(self) -> bool:
        return self.groups < self.need

    def stats(self) -> dict[str, Any]:
        return {"groups": self.groups}


@dataclass(frozen=True, slots=True)
class WalkMetrics(Metrics):
    """A lineage walk (GROUP BY CONVERSATION, live-context hiding), shown under `key`.

    Attributes:
        key: `conversation` or `live_context`.
        candidates, scanned, sessions, kept: hits in, hits walked, distinct sessions walked,
            rows kept.
        unresolved_dropped, live_hidden: hits dropped (lineage unresolved) and hidden (live).
        budget_hit: the lineage budget ran out (the result is a safe ranked prefix).
        lineage: the resolver's counters (`LineageStats.describe()`).
        need: rows the page needs (0: walk everything).
    """

    key: str
    candidates: int
    scanned: int
    sessions: int
    kept: int
    unresolved_dropped: int
    live_hidden: int
    budget_hit: bool
    lineage: Mapping[str, Any]
    need: int

    @property
    def underfilled(self) -> bool:
        return bool(self.need) and self.kept < self.need and not self.budget_hit

    def stats(self) -> dict[str, Any]:
        return {self.key: {
            "candidates": self.candidates, "scanned": self.scanned, "sessions": self.sessions,
            "kept": self.kept, "unresolved_dropped": self.unresolved_dropped,
            "live_hidden": self.live_hidden, "budget_hit": self.budget_hit,
            "lineage": dict(self.lineage)}}


@dataclass(frozen=True, slots=True)
class Output(Generic[T]):
    """What an operator returns.

    Attributes:
        value: the operator's output (usually `Candidates`).
        metrics: its metrics record.
        notices: statement-level warnings it raised, `(code, message)` in the order raised.
        truncated: whether it cut the result short (a safe ranked prefix).
    """

    value: T
    metrics: Metrics = NO_METRICS
    notices: tuple[tuple[Reason, str], ...] = ()
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class MetricsNode:
    """One executed operator: rows in and out, its own wall time, its metrics, its children."""

    operator: str
    rows_in: int
    rows_out: int
    time_ns: int
    metrics: Metrics = NO_METRICS
    children: tuple[MetricsNode, ...] = ()

    def post_order(self) -> list[MetricsNode]:
        """Every node of the subtree, children first (the order operators ran)."""
        out: list[MetricsNode] = []
        stack: list[tuple[MetricsNode, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                out.append(node)
            else:
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(node.children))
        return out

    @property
    def underfilled(self) -> bool:
        """True when some operator of the subtree under-filled the page."""
        return any(node.metrics.underfilled for node in self.post_order())

    def stats(self) -> dict[str, Any]:
        """The metrics records' sections, in the order the operators ran."""
        out: dict[str, Any] = {}
        for node in self.post_order():
            out.update(node.metrics.stats())
        return out
