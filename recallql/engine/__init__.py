"""The query engine: statement -> plan -> legs -> merge -> `Result` (docs/architecture.md).

The public names below are imported lazily (importing a submodule such as
`recallql.engine.models` stays cheap). The steps:

    plan = db.plan("SEARCH docs MATCHING :q LIMIT 5", q="backup")   # QueryPlan (JSON-able)
    batches = db.run_legs(plan)                                       # LegBatches (JSON-able)
    result = recallql.merge(plan, batches, db)                        # == db.execute(...)
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
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

if _TYPE_CHECKING:  # the same names for type checkers and IDEs, which would see `Any` for
    # each through the lazy `__getattr__` below (`X as X`: an explicit re-export)
    from recallql.engine.engine import QueryEngine as QueryEngine
    from recallql.engine.executor import ExecutionError as ExecutionError
    from recallql.engine.features import Features as Features
    from recallql.engine.features import Strings as Strings
    from recallql.engine.features import concat_features as concat_features
    from recallql.engine.legs import LegBatch as LegBatch
    from recallql.engine.legs import LegBatches as LegBatches
    from recallql.engine.legs import competition_ranks as competition_ranks
    from recallql.engine.legs import run_legs as run_legs
    from recallql.engine.merging import MergeOutcome as MergeOutcome
    from recallql.engine.merging import MergeSource as MergeSource
    from recallql.engine.merging import merge as merge
    from recallql.engine.merging import merge_outcome as merge_outcome
    from recallql.engine.metrics import MetricsNode as MetricsNode
    from recallql.engine.models import Explain as Explain
    from recallql.engine.models import Notice as Notice
    from recallql.engine.models import PlanNode as PlanNode
    from recallql.engine.models import ReasonEntry as ReasonEntry
    from recallql.engine.models import Result as Result
    from recallql.engine.models import Row as Row
    from recallql.engine.operators.base import LegContext as LegContext
    from recallql.engine.operators.scan import LegScan as LegScan
    from recallql.engine.operators.scan import register_leg as register_leg
    from recallql.engine.plan import ExplainSpec as ExplainSpec
    from recallql.engine.plan import FeatureSpec as FeatureSpec
    from recallql.engine.plan import FusionSpec as FusionSpec
    from recallql.engine.plan import LegKind as LegKind
    from recallql.engine.plan import LegSpec as LegSpec
    from recallql.engine.plan import QueryPlan as QueryPlan
    from recallql.engine.reasons import Reason as Reason
    from recallql.engine.refill import MAX_WINDOW as MAX_WINDOW
    from recallql.engine.refill import RefillPolicy as RefillPolicy
    from recallql.engine.refill import run_statement as run_statement

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
