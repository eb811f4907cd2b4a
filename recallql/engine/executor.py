"""Run an operator tree (STYLE §4): post-order, timing each operator and counting its rows.

Each operator returns an `Output` (value, typed metrics, notices, truncation); `run` returns the
root's value, the `MetricsNode` tree, the notices in the order they were raised and whether the
result was truncated. The leaves that ran elsewhere — the legs and the eligible-row scan, run by
`run_legs` — are handed in as `Gathered` outputs and are not executed again.

A failure inside an operator that is not a `QueryError` is re-raised as `ExecutionError` naming
the operator, so a bug shows where it happened instead of a bare numpy or tantivy traceback.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recallql.engine.metrics import NO_METRICS, MetricsNode, Output
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.reasons import Reason
from recallql.grammar.errors import QueryError


class ExecutionError(RuntimeError):
    """An operator failed while executing; `operator` names it."""

    def __init__(self, operator: str, cause: BaseException) -> None:
        super().__init__(f"{operator} failed: {type(cause).__name__}: {cause}")
        self.operator = operator

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its operator and message (a cluster shard's error crosses Ray so): the
        default would call ``ExecutionError(message)`` and fail for want of `cause`."""
        return (_rebuild_execution_error, (self.operator, str(self)))


def _rebuild_execution_error(operator: str, message: str) -> ExecutionError:
    err = ExecutionError.__new__(ExecutionError)
    RuntimeError.__init__(err, message)
    err.operator = operator
    return err


@dataclass(frozen=True, slots=True)
class Gathered:
    """The output of a leaf that ran before the tree (a leg), with its wall time."""

    output: Output[Any]
    time_ns: int = 0


@dataclass(frozen=True, slots=True)
class Execution:
    """What `run` returns.

    Attributes:
        value: the root's output value.
        metrics: the metrics tree, mirroring the plan.
        notices: `(code, message)` statement warnings, in the order operators raised them.
        truncated: some operator cut the result short (a safe ranked prefix).
        underfilled: some operator kept fewer rows than the page needs.
        stats: the metrics records' sections in the order the operators ran
            (`MetricsNode.stats()`, gathered during the run).
    """

    value: Any
    metrics: MetricsNode
    notices: tuple[tuple[Reason, str], ...] = ()
    truncated: bool = False
    underfilled: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Run:
    ctx: ExecutionContext
    gathered: Mapping[Operator, Gathered]
    notices: list[tuple[Reason, str]] = field(default_factory=list)
    truncated: bool = False
    underfilled: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


def _rows(value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        return 0


def run(op: Operator, ctx: ExecutionContext,
        gathered: Mapping[Operator, Gathered] | None = None) -> Execution:
    """Execute `op` and its subtree.

    Args:
        op: the root operator.
        ctx: the statement's context.
        gathered: outputs of leaves that already ran (by operator object).

    Raises:
        QueryError: a user-facing error raised by an operator, unchanged.
        ExecutionError: any other failure, naming the operator.
    """
    state = _Run(ctx, gathered or {})
    value, node = _run(op, state)
    return Execution(value, node, tuple(state.notices), state.truncated, state.underfilled,
                     state.stats)


def _run(op: Operator, state: _Run) -> tuple[Any, MetricsNode]:
    done = state.gathered.get(op)
    inputs: list[Any] = []
    kids: list[MetricsNode] = []
    if done is not None:
        out, elapsed = done.output, done.time_ns
    else:
        for child in op.children:
            value, node = _run(child, state)
            inputs.append(value)
            kids.append(node)
        start = time.perf_counter_ns()
        out = _execute(op, state.ctx, inputs)
        elapsed = time.perf_counter_ns() - start
    metrics = out.metrics
    if out.notices:
        state.notices.extend(out.notices)
    state.truncated = state.truncated or out.truncated
    if metrics is not NO_METRICS:
        state.underfilled = state.underfilled or metrics.underfilled
        state.stats.update(metrics.stats())
    rows_in = sum(_rows(x) for x in inputs)
    return out.value, MetricsNode(op.name, rows_in, _rows(out.value), elapsed, metrics,
                                  tuple(kids))


def _execute(op: Operator, ctx: ExecutionContext, inputs: list[Any]) -> Output[Any]:
    try:
        return op.execute(ctx, inputs)
    except (QueryError, ExecutionError):
        raise
    except Exception as exc:  # noqa: BLE001 - wrapped with the operator's name
        raise ExecutionError(op.name, exc) from exc
