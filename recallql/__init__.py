"""recallql: an embedded query engine for AI-agent memory.

Hybrid retrieval (BM25 via tantivy + dense vectors via numpy, fused by a convex combination of
normalised scores or by RRF, with context credit for neighbouring items), recency, session and
signal boosts, conversation lineage, and EXPLAIN with per-result score arithmetic.

    >>> import recallql
    >>> db = recallql.connect()                 # in memory; connect("path/") opens or creates
    >>> stmt = recallql.parse("SEARCH docs MATCHING 'backup retention' LIMIT 5")

Names are imported lazily so that `import recallql` stays cheap for the CLI.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # language
    "parse": "recallql.grammar",
    "parse_script": "recallql.grammar",
    "bind": "recallql.grammar",
    "QueryError": "recallql.grammar.errors",
    "QuerySyntaxError": "recallql.grammar.errors",
    "QuerySemanticError": "recallql.grammar.errors",
    "ParameterError": "recallql.grammar.errors",
    # storage
    "IngestError": "recallql.index.errors",
    "AnalyzerOutdatedWarning": "recallql.index.errors",
    "SignalRejected": "recallql.index.errors",
    "DatabaseLocked": "recallql.index.errors",
    "StoreError": "recallql.index.errors",
    "IdempotencyKeyReused": "recallql.index.errors",
    # sessions
    "SessionError": "recallql.sessions",
    "SessionNotFound": "recallql.sessions",
    "SignalPolicy": "recallql.sessions.signals",
    # database API and result models
    "connect": "recallql.api",
    "Database": "recallql.api",
    # plan -> legs -> merge
    "merge": "recallql.engine.merging",
    "QueryPlan": "recallql.engine.plan",
    "LegBatches": "recallql.engine.legs",
    "Result": "recallql.engine.models",
    "Row": "recallql.engine.models",
    "Explain": "recallql.engine.models",
    "Notice": "recallql.engine.models",
    "ReasonEntry": "recallql.engine.models",
    "PlanNode": "recallql.engine.models",
    "ContextItem": "recallql.engine.models",
    "SessionSnapshot": "recallql.sessions.models",
    "Reason": "recallql.engine.reasons",
    # write reports
    "IngestReport": "recallql.index.batch",
    "DeleteReport": "recallql.index.batch",
    "SweepReport": "recallql.sessions.sweep",
    "CheckReport": "recallql.index.checks",
    "ImportReport": "recallql.importers.hermes",
    "CollectionInfo": "recallql.index.schema",
}

if _TYPE_CHECKING:  # the same names for type checkers and IDEs, which would see `Any` for
    # each through the lazy `__getattr__` below (`X as X`: an explicit re-export)
    from recallql.api import Database as Database
    from recallql.api import connect as connect
    from recallql.engine.legs import LegBatches as LegBatches
    from recallql.engine.merging import merge as merge
    from recallql.engine.models import ContextItem as ContextItem
    from recallql.engine.models import Explain as Explain
    from recallql.engine.models import Notice as Notice
    from recallql.engine.models import PlanNode as PlanNode
    from recallql.engine.models import ReasonEntry as ReasonEntry
    from recallql.engine.models import Result as Result
    from recallql.engine.models import Row as Row
    from recallql.engine.plan import QueryPlan as QueryPlan
    from recallql.engine.reasons import Reason as Reason
    from recallql.grammar import bind as bind
    from recallql.grammar import parse as parse
    from recallql.grammar import parse_script as parse_script
    from recallql.grammar.errors import ParameterError as ParameterError
    from recallql.grammar.errors import QueryError as QueryError
    from recallql.grammar.errors import QuerySemanticError as QuerySemanticError
    from recallql.grammar.errors import QuerySyntaxError as QuerySyntaxError
    from recallql.importers.hermes import ImportReport as ImportReport
    from recallql.index.batch import DeleteReport as DeleteReport
    from recallql.index.batch import IngestReport as IngestReport
    from recallql.index.checks import CheckReport as CheckReport
    from recallql.index.errors import AnalyzerOutdatedWarning as AnalyzerOutdatedWarning
    from recallql.index.errors import DatabaseLocked as DatabaseLocked
    from recallql.index.errors import IdempotencyKeyReused as IdempotencyKeyReused
    from recallql.index.errors import IngestError as IngestError
    from recallql.index.errors import SignalRejected as SignalRejected
    from recallql.index.errors import StoreError as StoreError
    from recallql.index.schema import CollectionInfo as CollectionInfo
    from recallql.sessions import SessionError as SessionError
    from recallql.sessions import SessionNotFound as SessionNotFound
    from recallql.sessions.models import SessionSnapshot as SessionSnapshot
    from recallql.sessions.signals import SignalPolicy as SignalPolicy
    from recallql.sessions.sweep import SweepReport as SweepReport

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> _Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recallql' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({"__version__", *_EXPORTS})
