"""Planner: `QuerySpec` -> `QueryPlan` (serialisable) -> operator tree. Both steps are pure: no
I/O, no clock (`now` comes in as an argument; the engine embeds the MATCHING text afterwards).

The tree, root first, for a hybrid SEARCH with every clause:

    TopK
      GroupByDocument | GroupByConversation        (GROUP BY)
        LiveContextFilter                          (FOR SESSION on messages, unless GROUP BY
                                                    CONVERSATION, which applies it itself)
          RecencyBoost                             (default on; WITHOUT RECENCY drops it)
            SignalBoost                            (RETRIEVE default; WITH SIGNAL BOOST)
              SessionBoost                         (FOR SESSION)
                ConvexFusion | RrfFusion           (FUSE CONVEX, the default, | FUSE RRF)
                  LexicalScan                      (text with terms; USING HYBRID | LEXICAL)
                  SemanticScan                     (embedder or NEAR; USING HYBRID | SEMANTIC)
                  ContextScan                      (neighbours of their rows; weight > 0)
                  ...                              (legs added to the plan: one per LegSpec)

RETRIEVE without MATCHING has `EligibleScan` in place of the fusion. The live-context filter sees
final scores, so when the lineage budget stops it, what it returns is a prefix of the order the
user sees (SPEC §6). Each leg's window is `N = max(offset + limit, window)`; filters are pushed
into every leg.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from recallql.engine.analyzer import QuerySpec
from recallql.engine.models import Notice
from recallql.engine.operators.base import Operator
from recallql.engine.operators.boosts import RecencyBoost, SessionBoost, SignalBoost
from recallql.engine.operators.conversation import GroupByConversation, LiveContextFilter
from recallql.engine.operators.fusion import ConvexFusion, Fusion, RrfFusion
from recallql.engine.operators.scan import EligibleScan, leg_operator
from recallql.engine.operators.topk import GroupByDocument, TopK
from recallql.engine.plan import (
    ContextSpec,
    ExplainSpec,
    FeatureSpec,
    FusionSpec,
    LegKind,
    LegSpec,
    QueryPlan,
    RecencyPlan,
    SessionBoostSpec,
    query_vector,
)
from recallql.engine.reasons import Reason
from recallql.engine.scoring import DecayShape
from recallql.grammar.construct import trusted
from recallql.index.schema import CollectionInfo, FieldType


def plan(
    spec: QuerySpec,
    analyze: Callable[[str], list[str]],
    can_embed: bool,
    window: int | None = None,
    messages: bool = False,
    *,
    now: float = 0.0,
    statement: str = "",
    explain: ExplainSpec | None = None,
) -> QueryPlan:
    """The plan of `spec`.

    Args:
        spec: the analysed statement.
        analyze: the collection's text analyser (query text -> terms).
        can_embed: whether the collection has an embedder for the semantic leg (the engine
            embeds the text into the leg's `vector` after planning).
        window: override of the candidate window.
        messages: whether the collection holds messages (live-context rules apply).
        now: "now" in epoch seconds UTC.
        statement: the statement's canonical text.
        explain: EXPLAIN options, or None.
    """
    n = max(spec.offset + spec.limit, window or spec.window)
    notices: list[Notice] = []
    relevance = spec.text is not None or spec.vector is not None
    legs = _legs(spec, analyze, can_embed, n, notices) if relevance else ()
    boost, recency = spec.session_boost, spec.recency
    features = _features(
        spec.session_id is not None or bool(spec.signal_weights),
        recency.field if recency is not None else None,
        spec.session_id is not None and boost is not None,
        messages and (spec.session_id is not None or spec.group_by == "conversation"))
    return trusted(QueryPlan, {  # the analysed spec's values are of the field types
        "statement": statement, "kind": spec.kind, "collection": spec.collection.name,
        "messages": messages, "now": float(now), "as_of": spec.as_of, "window": n,
        "limit": spec.limit, "offset": spec.offset, "filter": spec.filter, "legs": legs,
        "fusion": _fusion(spec.fusion, spec.k, n, spec.normalization, spec.weights)
        if relevance else None,
        "session_id": spec.session_id,
        "session_boost": None if boost is None else _session(*boost),
        "signal_weights": spec.signal_weights,
        "recency": None if recency is None else _recency(
            recency.weight, recency.half_life_days, recency.field, recency.shape),
        "group_by": spec.group_by, "budget": spec.budget, "features": features,
        "context": None if spec.context is None else ContextSpec(
            before=spec.context[0], after=spec.context[1]),
        "timestamp_fields": _timestamp_fields(spec.collection), "notices": tuple(notices),
        "explain": explain, "embed_ms": None})


def _timestamp_fields(info: CollectionInfo) -> tuple[str, ...]:
    return tuple(sorted(n for n, t in info.fields.items() if t == FieldType.TIMESTAMP))


# The small parameter records are immutable and few: built once each (planning stays cheap).
@functools.lru_cache(maxsize=64)
def _features(entities: bool, recency: str | None, strings: bool, messages: bool
              ) -> FeatureSpec:
    return FeatureSpec(entities=entities, recency=recency, strings=strings, messages=messages)


@functools.lru_cache(maxsize=256)
def _fusion(method: Literal["rrf", "convex"], k: float, window: int,
            normalization: Literal["minmax", "tmm"], weights: tuple[tuple[str, float], ...]
            ) -> FusionSpec:
    return FusionSpec(method=method, k=k, window=window, normalization=normalization,
                      weights=weights)


@functools.lru_cache(maxsize=256)
def _session(keywords: float, velocity: float, entities: float) -> SessionBoostSpec:
    return SessionBoostSpec(keywords=keywords, velocity=velocity, entities=entities)


@functools.lru_cache(maxsize=256)
def _recency(weight: float, half_life_days: float, field: str, shape: DecayShape) -> RecencyPlan:
    return RecencyPlan(weight=weight, half_life_days=half_life_days, field=field, shape=shape)


def _dropped_legs(collection: str, using: str, no_terms: bool, no_vector: bool) -> list[Notice]:
    """The warnings for legs the statement asked for but could not run, each saying what ran
    instead — or that nothing did (a text of only stopwords on a collection without an
    embedder ran no leg: it said "ran the semantic leg only" and "ran the lexical leg only")."""
    notices = []
    if no_terms:
        if using == "lexical":
            rest = "USING LEXICAL has no other leg, so no rows"
        elif no_vector:
            rest = "the semantic leg cannot run either (no embedder, no NEAR vector), so no rows"
        else:
            rest = "ran the semantic leg only"
        notices.append(Notice(code=Reason.LEXICAL_LEG_EMPTY, message=(
            "the MATCHING text has no searchable terms (blank, punctuation or stopwords); "
            + rest)))
    if no_vector:
        rest = "no leg ran, so no rows" if no_terms else "ran the lexical leg only"
        notices.append(Notice(code=Reason.SEMANTIC_LEG_UNAVAILABLE, message=(
            f"collection '{collection}' has no embedder and no NEAR vector was given; "
            + rest)))
    return notices


def _legs(spec: QuerySpec, analyze: Callable[[str], list[str]], can_embed: bool, n: int,
          notices: list[Notice]) -> tuple[LegSpec, ...]:
    info = spec.collection
    legs: list[LegSpec] = []
    no_terms = False
    if spec.text is not None and spec.using in ("hybrid", "lexical"):
        terms = analyze(spec.text)
        if terms:
            counts = Counter(terms)
            weights = tuple(counts.values()) if len(counts) < len(terms) else ()
            legs.append(trusted(LegSpec, {
                "name": "lexical", "kind": LegKind.LEXICAL, "operator": "LexicalScan",
                "window": n, "filter": spec.filter, "fields": tuple(info.text_fields),
                "terms": tuple(counts), "term_counts": weights, "text": None, "vector": None,
                "options": {}}))
        else:
            no_terms = True
    no_vector = False
    if spec.using in ("hybrid", "semantic"):
        if spec.vector is not None or (spec.text is not None and can_embed):
            text = spec.text if spec.vector is None else None
            legs.append(trusted(LegSpec, {
                "name": "semantic", "kind": LegKind.SEMANTIC, "operator": "SemanticScan",
                "window": n, "filter": spec.filter, "fields": (), "terms": (),
                "term_counts": (), "text": text,
                "vector": None if spec.vector is None else query_vector(spec.vector),
                "options": {"dim": info.dim, **(
                    {} if spec.semantic_method == "auto" else {"method": spec.semantic_method}),
                    **({} if spec.semantic_ef is None else {"ef": spec.semantic_ef})}}))
        else:
            no_vector = True
    notices.extend(_dropped_legs(info.name, spec.using, no_terms, no_vector))
    if legs and spec.context_weight > 0.0:
        legs.append(_context_leg(n, spec.filter, spec.context_weight))
    return tuple(legs)


@functools.lru_cache(maxsize=256)
def _context_leg(window: int, filter_expr: Any, weight: float) -> LegSpec:
    """The context leg (immutable, so built once per window, filter and weight)."""
    return LegSpec(name="context", kind=LegKind.CONTEXT, operator="ContextScan", window=window,
                   filter=filter_expr, options={"weight": weight})


def _fusion_node(qp: QueryPlan) -> Fusion:
    fusion = qp.fusion
    assert fusion is not None
    children = tuple(leg_operator(leg) for leg in qp.legs)
    if fusion.method == "rrf":
        return RrfFusion(children=children, window=fusion.window, weights=fusion.weights,
                         k=fusion.k)
    return ConvexFusion(children=children, window=fusion.window, weights=fusion.weights,
                        normalization=fusion.normalization)


def build_tree(qp: QueryPlan) -> Operator:
    """The operator tree of a plan (pure; the same plan always gives the same tree)."""
    node: Operator = EligibleScan(filter=qp.filter) if qp.fusion is None else _fusion_node(qp)
    if qp.session_id is not None and qp.session_boost is not None:
        b = qp.session_boost
        node = SessionBoost(child=node, session_id=qp.session_id, keywords=b.keywords,
                            velocity=b.velocity, entities=b.entities)
    if qp.signal_weights:
        node = SignalBoost(child=node, weights=qp.signal_weights)
    if qp.recency is not None:
        r = qp.recency
        node = RecencyBoost(child=node, weight=r.weight, half_life_days=r.half_life_days,
                            field=r.field, shape=r.shape)
    need = qp.need
    if qp.session_id is not None and qp.messages and qp.group_by != "conversation":
        node = LiveContextFilter(child=node, session_id=qp.session_id,
                                 need=0 if qp.group_by else need)
    if qp.group_by == "document":
        node = GroupByDocument(child=node, need=need)
    elif qp.group_by == "conversation":
        node = GroupByConversation(child=node, need=need, budget=qp.budget)
    return TopK(child=node, k=qp.limit, offset=qp.offset)
