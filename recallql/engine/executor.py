"""Run an operator tree (STYLE §4): post-order, timing each operator and counting its rows.

A failure inside an operator that is not a `QueryError` is re-raised as `ExecutionError` naming
the operator, so a bug shows where it happened instead of a bare numpy or tantivy traceback.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.grammar.errors import QueryError


class ExecutionError(RuntimeError):
    """An operator failed while executing; `operator` names it."""

    def __init__(self, operator: str, cause: BaseException) -> None:
        super().__init__(f"{operator} failed: {type(cause).__name__}: {cause}")
        self.operator = operator


@dataclass
class OperatorStats:
    """Rows in and out and wall time of one operator execution."""

    rows_in: int = 0
    rows_out: int = 0
    time_ns: int = 0
    children: list[OperatorStats] = field(default_factory=list)


def _rows(value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        return 0


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recallql-leg")
    return _POOL


def _run_children(op: Operator, ctx: ExecutionContext) -> list[tuple[Any, OperatorStats]]:
    """The children's outputs, in order. An operator with `parallel = True` (RRF fusion: its
    children are the independent retrieval legs) runs its children concurrently — tantivy and
    numpy release the GIL while they search — the first in this thread, the rest in a small pool.
    Outputs do not depend on the interleaving."""
    kids = op.children
    if not getattr(op, "parallel", False) or len(kids) < 2:
        return [run(child, ctx) for child in kids]
    futures = [_pool().submit(run, child, ctx) for child in kids[1:]]
    try:
        first = run(kids[0], ctx)
    finally:
        rest = [f.result() for f in futures]
    return [first, *rest]


def run(op: Operator, ctx: ExecutionContext) -> tuple[Any, OperatorStats]:
    """Execute `op` and its subtree.

    Returns:
        `(output, stats)`: the root's output and a stats tree mirroring the plan.

    Raises:
        QueryError: a user-facing error raised by an operator, unchanged.
        ExecutionError: any other failure, naming the operator.
    """
    inputs: list[Any] = []
    child_stats: list[OperatorStats] = []
    for out, stats in _run_children(op, ctx):
        inputs.append(out)
        child_stats.append(stats)
    start = time.perf_counter_ns()
    try:
        output = op.execute(ctx, inputs)
    except QueryError:
        raise
    except ExecutionError:
        raise
    except Exception as exc:  # noqa: BLE001 - wrapped with the operator's name
        raise ExecutionError(op.name, exc) from exc
    elapsed = time.perf_counter_ns() - start
    rows_in = sum(_rows(x) for x in inputs)
    return output, OperatorStats(rows_in, _rows(output), elapsed, child_stats)
