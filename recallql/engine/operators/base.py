"""Operator base class and the per-statement execution contexts (STYLE §4).

Operators are small immutable objects: `describe()` gives the `key=value` pairs EXPLAIN prints and
`execute(ctx, inputs)` turns the children's outputs into this operator's `Output` (value, typed
metrics, notices, truncation). They never modify their inputs. Everything that varies per
statement comes in through a frozen context with explicit fields, so operators are deterministic:

- `LegContext` (the legs, in `run_legs`): the snapshot and the pushed-down filters' masks;
- `ExecutionContext` (everything above the legs, in `merge`): `now`, the session state, the
  signal source, the lineage resolver and the live context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from recallql.engine.metrics import Output
from recallql.index.rowsets import RowSet
from recallql.index.snapshot import CollectionSnapshot
from recallql.sessions.live_context import LiveContext
from recallql.sessions.models import SessionState
from recallql.sessions.stored import RootResolver


class SignalSource(Protocol):
    """Decayed signal sums across all sessions (the cross-session signal boost)."""

    def entity_sums(self, entities: list[str], names: list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        """`{name: {entity: decayed sum}}` for the given entities and signal names at `now_ts`."""
        ...


@dataclass(frozen=True, eq=False)
class ExecutionContext:
    """What the operators above the legs may read while a statement is merged.

    Attributes:
        now_ts: "now" in epoch seconds UTC, read once per statement (or `AS OF`).
        session: the `FOR SESSION` session's state, None when absent or not found.
        signals: the cross-session signal store.
        lineage: the statement's lineage resolver (messages only; one memo and budget).
        live_context: the FOR SESSION session's live context (messages only), or None.
    """

    now_ts: float
    session: SessionState | None = None
    signals: SignalSource | None = None
    lineage: RootResolver | None = None
    live_context: LiveContext | None = None


@dataclass(frozen=True, eq=False)
class LegContext:
    """What a retrieval leg may read.

    Attributes:
        snapshot: the collection snapshot (docs/architecture.md).
        masks: the rows of the plan's pushed-down filters (`CollectionSnapshot.filter_rows`:
            sparse when they resolve through postings), computed once per run.
    """

    snapshot: CollectionSnapshot
    masks: Mapping[Any, RowSet] = field(default_factory=dict)
    #: What a leg reports about how it ran, by leg name (the semantic leg: its method and why).
    notes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: How each leg applied the statement's filter, by leg name (EXPLAIN's ``filter=``).
    filters: dict[str, str] = field(default_factory=dict)

    def mask(self, expr: Any) -> np.ndarray | None:
        """The bool[size] mask of a filter expression (None: no filter; O(size) for a filter
        resolved through postings: prefer `rows`)."""
        return None if expr is None else self.masks[expr].mask

    def rows(self, expr: Any) -> RowSet | None:
        """The rows of a filter expression (None: no filter)."""
        return None if expr is None else self.masks[expr]

    def fetch_size(self, window: int) -> int:
        """The window, capped at the collection's row count: a leg cannot return more rows than
        exist, so results are the same and `LIMIT 9223372036854775807` costs nothing."""
        return min(window, max(int(self.snapshot.size), 1))


class Operator:
    """Base of all plan operators. Subclasses are frozen dataclasses with a `children` tuple."""

    name: ClassVar[str] = "Operator"
    children: tuple[Operator, ...] = ()

    def describe(self) -> dict[str, Any]:
        """The `key=value` properties EXPLAIN prints for this operator."""
        return {}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Output[Any]:
        """Compute this operator's output from its children's outputs."""
        raise NotImplementedError


class UnaryOperator(Operator):
    """An operator with one input, `child`."""

    child: Operator

    @property
    def children(self) -> tuple[Operator, ...]:  # type: ignore[override]
        return (self.child,)
