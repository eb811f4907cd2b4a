"""The query engine: statement -> plan -> legs -> merge -> `Result` (docs/architecture.md).

The public names below are imported lazily (importing a submodule such as
`recallql.engine.models` stays cheap). The steps:

    plan = db.plan("SEARCH docs MATCHING :q LIMIT 5", q="backup")   # QueryPlan (JSON-able)
    batches = db.run_legs(plan)                                       # LegBatches (JSON-able)
    result = recallql.merge(plan, batches, db)                        # == db.execute(...)
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

_EXPORTS: dict[str, str] = {
    "QueryEngine": "recallql.engine.engine",
    "QueryPlan": "recallql.engine.plan",
    "LegSpec": "recallql.engine.plan",
    "LegKind": "recallql.engine.plan",
    "FusionSpec": "recallql.engine.plan",
    "ExplainSpec": "recallql.engine.plan",
    "FeatureSpec": "recallql.engine.plan",
    "LegBatch": "recallql.engine.legs",
    "LegBatches": "recallql.engine.legs",
    "run_legs": "recallql.engine.legs",
    "competition_ranks": "recallql.engine.legs",
    "Features": "recallql.engine.features",
    "concat_features": "recallql.engine.features",
    "Strings": "recallql.engine.features",
    "merge": "recallql.engine.merging",
    "merge_outcome": "recallql.engine.merging",
    "MergeSource": "recallql.engine.merging",
    "MergeOutcome": "recallql.engine.merging",
    "RefillPolicy": "recallql.engine.refill",
    "MAX_WINDOW": "recallql.engine.refill",
    "run_statement": "recallql.engine.refill",
    "LegScan": "recallql.engine.operators.scan",
    "LegContext": "recallql.engine.operators.base",
    "register_leg": "recallql.engine.operators.scan",
    "ExecutionError": "recallql.engine.executor",
    "MetricsNode": "recallql.engine.metrics",
    "Result": "recallql.engine.models",
    "Row": "recallql.engine.models",
    "Explain": "recallql.engine.models",
    "Notice": "recallql.engine.models",
    "ReasonEntry": "recallql.engine.models",
    "PlanNode": "recallql.engine.models",
    "Reason": "recallql.engine.reasons",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> _Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recallql.engine' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(_EXPORTS)
