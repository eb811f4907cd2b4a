"""The query engine: statement text -> `Result` / `Explain` (SPEC §3, §4, §5).

A SEARCH or RETRIEVE runs as three public steps (docs/architecture.md):

1. `plan`: parse (cached), bind, analyse against the catalog, plan, embed the MATCHING text
   -> a serialisable `QueryPlan` (with `now`);
2. `run_legs`: the legs on the collection's snapshot -> `LegBatches`;
3. `merge`: fusion, boosts, grouping, ordering and the page's rows -> `Result`.

`execute` is exactly those steps, refilled by the `RefillPolicy` when grouping under-fills the
page: one code path, so EXPLAIN, `execute` and a manual plan -> run_legs -> merge give the same
rows, scores and reasons.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from recallql.engine import info as info_statements
from recallql.engine.analyzer import QuerySpec, analyze
from recallql.engine.executor import ExecutionError
from recallql.engine.explain import bm25_note
from recallql.engine.legs import LegBatches
from recallql.engine.legs import run_legs as run_plan_legs
from recallql.engine.merging import MergeSource
from recallql.engine.models import Explain, Notice, Result
from recallql.engine.plan import ExplainSpec, LegKind, QueryPlan
from recallql.engine.planner import plan as plan_spec
from recallql.engine.reasons import Reason
from recallql.engine.refill import RefillPolicy, run_statement
from recallql.engine.surrounding import Surrounding, surrounding
from recallql.grammar import bind, parse
from recallql.grammar import statements as s
from recallql.grammar.errors import QuerySemanticError
from recallql.grammar.timestamps import format_timestamp
from recallql.index import filters as f
from recallql.index.embedders import Embedder
from recallql.index.errors import StoreError
from recallql.index.history import RetentionLoss
from recallql.index.schema import CollectionInfo
from recallql.index.snapshot import CollectionSnapshot
from recallql.index.vectors import NotRealNumbers, real_float32
from recallql.sessions.lifecycle import Sessions
from recallql.sessions.models import SessionSnapshot, SessionState
from recallql.sessions.stored import RootResolver

MESSAGES = "messages"
#: Query vectors kept per engine, keyed by embedder and text.
QUERY_VECTOR_CACHE = 256


class Backend(MergeSource, Protocol):
    """What the engine needs of a database (implemented by `recallql.api.Database`)."""

    sessions: Sessions

    def collections(self) -> list[CollectionInfo]: ...

    def snapshot(self, collection: str, as_of: float | None = None) -> CollectionSnapshot: ...

    def embedder(self, collection: str) -> Embedder | None: ...

    def leg_pool(self) -> Executor | None: ...


def is_messages(info: CollectionInfo) -> bool:
    """Whether a collection is the built-in `messages` (lineage and live-context rules apply).

    Decided by name, not by field names: a user collection that happens to declare
    `session_id`, `active` and `compacted` is searched like any other.
    """
    return info.name == MESSAGES


class QueryEngine:
    """Runs statements against a `Backend`.

    Args:
        backend: the database.
        clock: "now" in epoch seconds UTC, read once per statement (tests pin it).
        refill: the refill policy for under-filled groups.
    """

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time,
                 refill: RefillPolicy | None = None) -> None:
        self._db = backend
        self._clock = clock
        self._refill = refill or RefillPolicy()
        self._query_vectors: OrderedDict[tuple[int, str, str],
                                         tuple[Embedder, np.ndarray]] = OrderedDict()

    # -- entry points --------------------------------------------------------------------------

    def execute(self, text: str | s.StatementBase, /, *args: Any, **params: Any
                ) -> Result | Explain:
        """Run one statement. EXPLAIN statements return an `Explain`, others a `Result`.

        Raises:
            QuerySyntaxError, QuerySemanticError, ParameterError: mistakes in the statement.
        """
        bound = self._bound(text, args, params)
        if isinstance(bound, s.Explain | s.Search | s.Retrieve):
            return self._run_consistent(bound)
        return info_statements.run(self._db, bound, self._clock())

    def explain(self, stmt: s.Explain | s.Search | s.Retrieve, *, analyze: bool = False,
                verbose: bool = False) -> Explain:
        """Run a SEARCH/RETRIEVE and return the plan, per-operator metrics and rows with
        reasons."""
        out = self._run_consistent(stmt, ExplainSpec(
            analyze=analyze, verbose=verbose,
            format=(stmt.format if isinstance(stmt, s.Explain) else None) or "text"))
        assert isinstance(out, Explain)
        return out

    def _run_consistent(self, stmt: s.Explain | s.Search | s.Retrieve,
                        explain: ExplainSpec | None = None) -> Result | Explain:
        """Plan and run `stmt`; again (at most `STALE_LINEAGE_RETRIES` times) when it dropped
        hits as unresolved lineage and a batch committed while it ran.

        The legs answer from one snapshot, but the lineage walk reads session rows in a later
        SQLite transaction: a sweep committed in between removes the sessions of hits the legs
        still show, which would drop them as `LINEAGE_UNRESOLVED_DROPPED` (half of the sweep
        seen). Re-running on the new snapshot sees all of it."""
        plan, snapshot = self._plan(stmt, explain)
        out = self.run(plan, snapshot)
        for _ in range(STALE_LINEAGE_RETRIES):
            if (plan.as_of is not None or not _dropped_lineage(out)
                    or self._db.snapshot(plan.collection).seq == snapshot.seq):
                break
            plan, snapshot = self._plan(stmt, explain)
            out = self.run(plan, snapshot)
        return bm25_note(out, snapshot, plan) if isinstance(out, Explain) else out

    def plan(self, text: str | s.StatementBase, /, *args: Any, **params: Any) -> QueryPlan:
        """The plan of a SEARCH, RETRIEVE or EXPLAIN statement (`now` read from the clock).

        Raises:
            QueryError: a mistake in the statement, or a statement that is not a query.
        """
        bound = self._bound(text, args, params)
        if not isinstance(bound, s.Explain | s.Search | s.Retrieve):
            raise QuerySemanticError("only SEARCH, RETRIEVE and EXPLAIN statements have a plan",
                                     text=bound.source, span=(0, len(bound.source)))
        return self._plan(bound)[0]

    def run_legs(self, plan: QueryPlan) -> LegBatches:
        """Run a plan's legs on the collection's current snapshot (AS OF: as committed then)."""
        as_of = plan.now if plan.as_of is not None else None
        return run_plan_legs(plan, self._db.snapshot(plan.collection, as_of=as_of),
                             self._db.leg_pool())

    def run(self, plan: QueryPlan, snapshot: CollectionSnapshot | None = None
            ) -> Result | Explain:
        """`merge(plan, run_legs(plan), backend)`, refilled by the refill policy.

        Args:
            plan: the plan.
            snapshot: the snapshot every attempt's legs run on (the one planning read, so a
                statement sees one batch); None: the collection's current snapshot.
        """
        if snapshot is None:
            return run_statement(plan, self.run_legs, self._db, self._refill)
        pool = self._db.leg_pool()
        return run_statement(plan, lambda p: run_plan_legs(p, snapshot, pool),
                             PinnedSource(self._db, snapshot), self._refill)

    # -- planning ------------------------------------------------------------------------------

    @staticmethod
    def _bound(text: str | s.StatementBase, args: tuple[Any, ...], params: dict[str, Any]
               ) -> s.StatementBase:
        if isinstance(text, str):
            stmt = parse(text)
        elif isinstance(text, s.StatementBase):
            stmt = text
        else:
            raise TypeError(f"a statement is a str (or a parsed statement), not "
                            f"{type(text).__name__}")
        return bind(stmt, *args, **params)

    def _plan(self, stmt: s.Explain | s.Search | s.Retrieve, explain: ExplainSpec | None = None
              ) -> tuple[QueryPlan, CollectionSnapshot]:
        if isinstance(stmt, s.Explain):
            explain = explain or ExplainSpec(analyze=stmt.analyze, verbose=stmt.verbose,
                                             format=stmt.format or "text")
            stmt = stmt.statement
        current = self._current(stmt.collection.name)
        catalog = {current.info.name: current.info} if current is not None else \
            {c.name: c for c in self._db.collections()}  # unknown: named with did-you-mean
        spec = analyze(stmt, catalog, self._signal_names())
        info = spec.collection
        messages = is_messages(info)
        if messages:
            spec = _searchable_messages(spec)
        embedder = self._db.embedder(info.name)
        if spec.using == "semantic" and spec.vector is None and embedder is None:
            raise QuerySemanticError(
                f"collection '{info.name}' has no embedder for USING SEMANTIC",
                text=stmt.source, span=stmt.using.span if stmt.using else None,
                hint="pass a query vector with NEAR :v, or attach one with db.set_embedder()")
        now = spec.as_of.timestamp() if spec.as_of is not None else self._clock()
        # its analyser turns the text into terms; AS OF: the database as committed then
        snapshot = current if current is not None and spec.as_of is None else \
            self._db.snapshot(info.name, as_of=now if spec.as_of is not None else None)
        planned = plan_spec(spec, snapshot.analyze, embedder is not None, messages=messages,
                            now=now, statement=stmt.to_text(), explain=explain)
        if snapshot.retention_loss is not None:
            planned = planned.model_copy(update={"notices": (
                *planned.notices, _retention_notice(snapshot.retention_loss))})
        if spec.as_of is not None and now > (current_time := self._clock()):
            planned = planned.model_copy(update={"notices": (
                *planned.notices, _future_notice(spec.as_of, current_time))})
        return self._embedded(planned, embedder), snapshot

    def _current(self, name: str) -> CollectionSnapshot | None:
        """The collection's current snapshot (its `info` is the catalog entry the statement
        is analysed against: no catalog read from SQLite per statement), or None when there
        is no such collection."""
        try:
            return self._db.snapshot(name)
        except StoreError:
            return None

    def _signal_names(self) -> Collection[str]:
        return self._db.sessions.policy.bounds.keys()

    def _embedded(self, planned: QueryPlan, embedder: Embedder | None) -> QueryPlan:
        """The plan with the semantic leg's MATCHING text embedded (cached per embedder and
        text); the time, including a first model load, is the plan's `embed_ms`."""
        legs = list(planned.legs)
        for i, leg in enumerate(legs):
            if leg.kind is LegKind.SEMANTIC and leg.vector is None and leg.text is not None \
                    and embedder is not None:
                start = time.perf_counter()
                vector = self._query_vector(embedder, leg.text)
                embed_ms = round((time.perf_counter() - start) * 1000.0, 3)
                legs[i] = leg.model_copy(update={"vector": vector})
                return planned.model_copy(update={"legs": tuple(legs), "embed_ms": embed_ms})
        return planned

    def _query_vector(self, embedder: Embedder, text: str) -> np.ndarray:
        key = (id(embedder), getattr(embedder, "name", ""), text)
        hit = self._query_vectors.get(key)
        if hit is not None and hit[0] is embedder:
            self._query_vectors.move_to_end(key)
            return hit[1]
        vec = query_embedding(embedder, text)
        self._query_vectors[key] = (embedder, vec)  # the entry keeps the embedder (and its id)
        if len(self._query_vectors) > QUERY_VECTOR_CACHE:
            self._query_vectors.popitem(last=False)
        return vec


def query_embedding(embedder: Embedder, text: str) -> np.ndarray:
    """float32[d]: the embedder's vector of one query text (checked for shape and finiteness
    by the semantic leg).

    Raises:
        ExecutionError: the output is not one row of real numbers (strings, None, a ragged
            list; an empty matrix was a raw IndexError), naming the embedder.
    """
    name = f"embedder {getattr(embedder, 'name', '')!r}"
    try:
        out = real_float32(embedder([text]))
    except NotRealNumbers as exc:
        raise ExecutionError(name, exc) from None
    if out.ndim != 2 or out.shape[0] != 1:
        raise ExecutionError(name, ValueError(f"returned shape {out.shape} for one text, "
                                              "expected (1, dim)"))
    return out[0]


#: Re-runs of a statement whose lineage read saw a batch its legs did not (`_run_consistent`).
STALE_LINEAGE_RETRIES = 2


def _dropped_lineage(out: Result | Explain) -> bool:
    result = out.result if isinstance(out, Explain) else out
    return any(w.code == Reason.LINEAGE_UNRESOLVED_DROPPED for w in result.warnings)


class PinnedSource:
    """A `MergeSource` that reads rows from the statement's own snapshot (the backend for
    everything else): rows never change and rowids are never reused, so this is what the
    backend would return, without asking the store for its current snapshot again."""

    def __init__(self, backend: Backend, snapshot: CollectionSnapshot) -> None:
        self._backend = backend
        self._snapshot = snapshot

    def session_state(self, session_id: str, now_ts: float
                      ) -> tuple[SessionState, SessionSnapshot] | None:
        return self._backend.session_state(session_id, now_ts)

    def entity_sums(self, entities: list[str], names: list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        return self._backend.entity_sums(entities, names, now_ts)

    def lineage_resolver(self, budget: int, as_of: float | None = None
                         ) -> AbstractContextManager[RootResolver]:
        return self._backend.lineage_resolver(budget, as_of)

    def _pinned(self, collection: str, batch: int) -> bool:
        return collection == self._snapshot.info.name and batch == self._snapshot.seq

    def fetch_rows(self, collection: str, rowids: np.ndarray, batch: int) -> list[dict[str, Any]]:
        if self._pinned(collection, batch):
            return self._snapshot.fetch(rowids)
        return self._backend.fetch_rows(collection, rowids, batch)

    def bm25_explanation(self, collection: str, terms: list[str], rowid: int, batch: int) -> str:
        if self._pinned(collection, batch):
            return self._snapshot.explain_bm25(terms, rowid)
        return self._backend.bm25_explanation(collection, terms, rowid, batch)

    def surrounding_rows(self, collection: str, rowids: np.ndarray, before: int, after: int,
                         filter_expr: Any, batch: int) -> list[Surrounding]:
        if self._pinned(collection, batch):
            return surrounding(self._snapshot, rowids, before, after, filter_expr)
        return self._backend.surrounding_rows(collection, rowids, before, after, filter_expr,
                                              batch)


def _searchable_messages(spec: QuerySpec) -> QuerySpec:
    """AND the never-searchable rule (rewound messages: active=0, compacted=0) into the filter."""
    searchable = f.Or((f.Cmp("active", "=", True), f.Cmp("compacted", "=", True)))
    combined = searchable if spec.filter is None else f.And((spec.filter, searchable))
    return dataclasses.replace(spec, filter=combined)


def _future_notice(at: datetime, now: float) -> Notice:
    """`AS_OF_IN_FUTURE`: the AS OF time is after now, so the answer is today's data aged to
    that time (recency and signal decay), and it changes as rows are committed until then."""
    return Notice(code=Reason.AS_OF_IN_FUTURE, message=(
        f"AS OF {format_timestamp(at)} is in the future (now is {format_timestamp(now)}): "
        "the result shows the rows committed so far, with recency and signal decay computed "
        "at that time, and is not reproducible until then"))


def _retention_notice(loss: RetentionLoss) -> Notice:
    """`AS_OF_BEYOND_RETENTION`: rows deleted after the AS OF time that were already purged."""
    exact = "" if loss.exact_from is None else \
        f"; AS OF is exact from {format_timestamp(loss.exact_from)} on"
    return Notice(code=Reason.AS_OF_BEYOND_RETENTION, message=(
        f"AS OF {format_timestamp(loss.at)}: {loss.lost} row(s) deleted since then were purged "
        "(past the retention window, by `recallql vacuum`, or by a rebuild of the text index: "
        f"`recallql reindex` / `optimize`), so they are not shown{exact} (connect with a longer "
        "retention, and vacuum or optimize less often, to keep more history)"))
