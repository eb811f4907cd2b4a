"""Operator base class and the per-statement execution context (STYLE §4).

Operators are small immutable objects: `describe()` gives the `key=value` pairs EXPLAIN prints and
`execute(ctx, inputs)` turns the children's outputs into this operator's output. They never modify
their inputs. Everything that varies per statement (`now`, the snapshot, the session, the signal
store, the embedder) comes in through the `ExecutionContext`, so operators are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from recallql.engine.reasons import Reason
from recallql.grammar.errors import QuerySemanticError
from recallql.index.errors import FilterError
from recallql.sessions.models import SessionState


class SignalSource(Protocol):
    """Decayed signal sums across all sessions (the cross-session signal boost)."""

    def entity_sums(self, entities: list[str], names: list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        """`{name: {entity: decayed sum}}` for the given entities and signal names at `now_ts`."""
        ...


@dataclass(eq=False)
class ExecutionContext:
    """Everything an operator may read while a statement runs.

    Attributes:
        snapshot: the collection snapshot (see docs/architecture.md).
        now_ts: "now" in epoch seconds UTC, read once per statement (or `AS OF`).
        session: the `FOR SESSION` session's state, None when absent or not found.
        signals: the cross-session signal store.
        embed: text -> float32[d] query embedding with the collection's embedder.
        services: extra per-statement services by name (e.g. the lineage resolver factory).
    """

    snapshot: Any
    now_ts: float
    session: SessionState | None = None
    signals: SignalSource | None = None
    embed: Callable[[str], np.ndarray] | None = None
    services: dict[str, Any] = field(default_factory=dict)
    notices: dict[Reason, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    _masks: dict[Any, np.ndarray] = field(default_factory=dict)

    def notice(self, code: Reason, message: str) -> None:
        """Record a statement-level warning (the first message for a code wins)."""
        self.notices.setdefault(code, message)

    def filter_mask(self, expr: Any) -> np.ndarray | None:
        """The snapshot's bool[size] mask for a filter expression, computed once per statement."""
        if expr is None:
            return None
        mask = self._masks.get(expr)
        if mask is None:
            try:
                mask = self.snapshot.filter_mask(expr)
            except FilterError as exc:  # the analyzer checks names and types; this is a net
                raise QuerySemanticError(f"WHERE cannot be evaluated: {exc}") from None
            self._masks[expr] = mask
        return mask


class Operator:
    """Base of all plan operators. Subclasses are frozen dataclasses with a `children` tuple."""

    name: ClassVar[str] = "Operator"
    children: tuple[Operator, ...] = ()

    def describe(self) -> dict[str, Any]:
        """The `key=value` properties EXPLAIN prints for this operator."""
        return {}

    def execute(self, ctx: ExecutionContext, inputs: list[Any]) -> Any:
        """Compute this operator's output from its children's outputs."""
        raise NotImplementedError
