"""The coordinator plans shared-collection statements itself: one round trip per statement.

Planning needs little of a database: the collection's schema (`CollectionInfo`), the analyser
version its text index was built with (query text -> terms), the signal names the sessions'
policy accepts, and whether the collection embeds MATCHING text. A shard hands these over
(`Shard.plan_context`) with a key, a digest of all four (`context_key`); the coordinator keeps
them per collection (`Planner`) and plans with the engine's own `analyze` and `plan` — the same
functions `recallql.Database.plan` runs, so the plan is the one shard 0 would make.

A statement the cached context rejects (`QuerySemanticError`, e.g. a field declared since) is
planned once more with a fresh context when the shard's key has changed. Every legs call
carries the key its plan was made with. A shard whose own key differs (the
collection was reindexed with another analyser, re-created, or its embedder changed) refuses the
call with `StalePlan`; the coordinator forgets the context, fetches it again and re-plans once
(`recallql.cluster.client`). Statements the coordinator cannot plan from the context alone are
planned on shard 0 as before (`Planner.plan` returns None): AS OF (it reads the commit history)
and collections whose embedder is not a built-in one the coordinator can rebuild by name.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from recallql.cluster.runtime import ClusterError
from recallql.engine.analyzer import analyze
from recallql.engine.engine import query_embedding
from recallql.engine.plan import ExplainSpec, LegKind, QueryPlan
from recallql.engine.planner import plan as plan_spec
from recallql.grammar import statements as st
from recallql.grammar.errors import QuerySemanticError
from recallql.index.analysis import analyzer, prepare
from recallql.index.embedders import Embedder, by_name
from recallql.index.schema import CollectionInfo
from recallql.index.timestamps import microsecond_clock

#: Query vectors the coordinator keeps, keyed by embedder name and text.
QUERY_VECTORS = 256


class StalePlan(ClusterError):
    """A shard refused a plan made with another schema, analyser or embedder than its own.

    Attributes:
        shard: the shard's index; key: the shard's current context key.
    """

    def __init__(self, shard: int, key: str) -> None:
        super().__init__(f"shard {shard} refused a plan made for another version of the "
                         f"collection (its context key is {key})")
        self.shard, self.key = shard, key

    def __reduce__(self) -> tuple[type[StalePlan], tuple[int, str]]:
        return (StalePlan, (self.shard, self.key))


@dataclass(frozen=True)
class PlanContext:
    """What planning a statement over one collection reads.

    Attributes:
        info: the collection's schema; analyzer_version: its text index's analyser version;
        signal_names: the signal names the policy accepts (sorted); can_embed: whether the
        collection embeds MATCHING text; key: `context_key` of the four.
    """

    info: CollectionInfo
    analyzer_version: int
    signal_names: tuple[str, ...]
    can_embed: bool
    key: str

    @classmethod
    def of(cls, info: CollectionInfo, analyzer_version: int, signal_names: tuple[str, ...],
           can_embed: bool) -> PlanContext:
        names = tuple(sorted(signal_names))
        return cls(info, analyzer_version, names, can_embed,
                   context_key(info, analyzer_version, names, can_embed))


def context_key(info: CollectionInfo, analyzer_version: int, signal_names: tuple[str, ...],
                can_embed: bool) -> str:
    """A 16-hex-digit digest (BLAKE2b) of everything a plan depends on besides the statement."""
    fields = sorted((name, str(kind)) for name, kind in info.fields.items())
    text = repr((info.name, info.text_fields, fields, info.dim, info.embedder_name,
                 analyzer_version, tuple(sorted(signal_names)), can_embed))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class Planner:
    """Plans on the coordinator from cached `PlanContext`s.

    Args:
        fetch: collection name -> its context from a shard (None: no such collection there).
        clock: "now" in epoch seconds UTC (the cluster's clock, as the shards').
    """

    def __init__(self, fetch: Callable[[str], PlanContext | None],
                 clock: Callable[[], float] | None) -> None:
        self._fetch = fetch
        self._clock = microsecond_clock(clock or time.time)  # as a database reads it
        self._contexts: dict[str, PlanContext] = {}
        self._embedders: dict[str, Embedder] = {}
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self, collection: str) -> None:
        """Drop a collection's context (fetched again by the next plan)."""
        self._contexts.pop(collection, None)

    def context(self, collection: str) -> PlanContext | None:
        """The collection's cached context (fetched on first use)."""
        ctx = self._contexts.get(collection)
        if ctx is None:
            ctx = self._fetch(collection)
            if ctx is not None:
                self._contexts[collection] = ctx
        return ctx

    def plan(self, stmt: st.Explain | st.Search | st.Retrieve,
             explain: ExplainSpec | None = None) -> tuple[QueryPlan, str] | None:
        """The plan of a bound statement and the context key it was made with; None when only
        a shard can plan it (AS OF, an embedder the coordinator cannot rebuild, a collection
        the shards do not hold: their error is the one to show).

        Raises:
            QueryError: a mistake in the statement (as `recallql.Database.plan`).
        """
        if isinstance(stmt, st.Explain):
            explain = explain or ExplainSpec(analyze=stmt.analyze, verbose=stmt.verbose,
                                             format=stmt.format or "text")
            stmt = stmt.statement
        name = stmt.collection.name
        cached = name in self._contexts
        ctx = self.context(name)
        if ctx is None or ctx.info.name == "messages":
            return None
        try:
            spec = analyze(stmt, {ctx.info.name: ctx.info}, ctx.signal_names)
        except QuerySemanticError:
            if not cached:
                raise
            self.forget(name)  # e.g. a field declared since: ask again, and plan once more
            if (fresh := self.context(name)) is None or fresh.key == ctx.key:
                raise
            return self.plan(stmt, explain)
        embedder = self._embedder(ctx)
        if spec.as_of is not None or (ctx.can_embed and embedder is None) \
                or (spec.using == "semantic" and spec.vector is None and not ctx.can_embed):
            return None  # (the last: shard 0 raises "no embedder for USING SEMANTIC")
        version = ctx.analyzer_version
        planned = plan_spec(spec, lambda text: analyzer(version).analyze(prepare(text, version)),
                            ctx.can_embed, now=self._clock(), statement=stmt.to_text(),
                            explain=explain)
        return self._embedded(planned, embedder), ctx.key

    def _embedder(self, ctx: PlanContext) -> Embedder | None:
        name = ctx.info.embedder_name
        if not ctx.can_embed or name is None:
            return None
        if name not in self._embedders:
            found = by_name(name)
            if found is None:
                return None
            self._embedders[name] = found
        return self._embedders[name]

    def _embedded(self, planned: QueryPlan, embedder: Embedder | None) -> QueryPlan:
        """The semantic leg's MATCHING text embedded (as `QueryEngine` does on a database)."""
        for i, leg in enumerate(planned.legs):
            if leg.kind is LegKind.SEMANTIC and leg.vector is None and leg.text is not None \
                    and embedder is not None:
                start = time.perf_counter()
                vector = self._vector(embedder, leg.text)
                legs = list(planned.legs)
                legs[i] = leg.model_copy(update={"vector": vector})
                return planned.model_copy(update={
                    "legs": tuple(legs),
                    "embed_ms": round((time.perf_counter() - start) * 1000.0, 3)})
        return planned

    def _vector(self, embedder: Embedder, text: str) -> np.ndarray:
        key = (str(getattr(embedder, "name", "")), text)
        with self._lock:  # client threads share the coordinator
            hit = self._vectors.get(key)
            if hit is not None:
                self._vectors.move_to_end(key)
                return hit
        vec = query_embedding(embedder, text)  # one row of real numbers, or ExecutionError
        with self._lock:
            self._vectors[key] = vec
            if len(self._vectors) > QUERY_VECTORS:
                self._vectors.popitem(last=False)
        return vec
