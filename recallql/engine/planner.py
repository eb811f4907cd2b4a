"""Planner: `QuerySpec` -> operator tree (pure: no I/O, no clock).

The tree, root first, for a hybrid SEARCH with every clause:

    TopK
      GroupByDocument | GroupByConversation        (GROUP BY)
        LiveContextFilter                          (FOR SESSION on messages, unless GROUP BY
                                                    CONVERSATION, which applies it itself)
          RecencyBoost                             (default on; WITHOUT RECENCY drops it)
            SignalBoost                            (RETRIEVE default; WITH SIGNAL BOOST)
              SessionBoost                         (FOR SESSION)
                RrfFusion: k
                  LexicalScan                      (text with terms; USING HYBRID | LEXICAL)
                  SemanticScan                     (embedder or NEAR; USING HYBRID | SEMANTIC)

The live-context filter sees final scores, so when the lineage budget stops it, what it returns
is a prefix of the order the user sees (SPEC §6).

Each leg's window is `N = max(offset + limit, window)`; filters are pushed into both legs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from recallql.engine.analyzer import QuerySpec
from recallql.engine.operators.base import Operator
from recallql.engine.operators.boosts import RecencyBoost, SessionBoost, SignalBoost
from recallql.engine.operators.conversation import GroupByConversation, LiveContextFilter
from recallql.engine.operators.fusion import RrfFusion
from recallql.engine.operators.scan import EligibleScan, LexicalScan, SemanticScan
from recallql.engine.operators.topk import GroupByDocument, TopK
from recallql.engine.reasons import Reason


@dataclass(frozen=True)
class Plan:
    """An operator tree plus the statement-level notices known at planning time."""

    root: Operator
    notices: tuple[tuple[Reason, str], ...] = ()
    terms: tuple[str, ...] = ()
    window: int = 0


def plan(
    spec: QuerySpec,
    analyze: Callable[[str], list[str]],
    can_embed: bool,
    window: int | None = None,
    messages: bool = False,
) -> Plan:
    """Build the operator tree for `spec`.

    Args:
        spec: the analysed statement.
        analyze: the collection's text analyser (query text -> terms).
        can_embed: whether the collection has an embedder for the semantic leg.
        window: override of the candidate window (deeper re-runs for grouping).
        messages: whether the collection holds messages (live-context rules apply).
    """
    n = max(spec.offset + spec.limit, window or spec.window)
    notices: list[tuple[Reason, str]] = []
    terms: tuple[str, ...] = ()
    if spec.text is None and spec.vector is None:
        node: Operator = EligibleScan(filter=spec.filter)
    else:
        legs, terms = _legs(spec, analyze, can_embed, n, notices)
        node = RrfFusion(k=spec.k, children=tuple(legs))
    if spec.session_id is not None and spec.session_boost is not None:
        kw, vel, ent = spec.session_boost
        node = SessionBoost(child=node, session_id=spec.session_id, keywords=kw, velocity=vel,
                            entities=ent)
    if spec.signal_weights:
        node = SignalBoost(child=node, weights=spec.signal_weights)
    if spec.recency is not None:
        r = spec.recency
        node = RecencyBoost(child=node, weight=r.weight, half_life_days=r.half_life_days,
                            field=r.field, shape=r.shape)
    need = spec.offset + spec.limit
    if spec.session_id is not None and messages and spec.group_by != "conversation":
        node = LiveContextFilter(child=node, session_id=spec.session_id,
                                 need=0 if spec.group_by else need)
    if spec.group_by == "document":
        node = GroupByDocument(child=node, need=need)
    elif spec.group_by == "conversation":
        node = GroupByConversation(child=node, need=need, budget=spec.budget)
    root = TopK(child=node, k=spec.limit, offset=spec.offset)
    return Plan(root=root, notices=tuple(notices), terms=terms, window=n)


def _legs(spec: QuerySpec, analyze: Callable[[str], list[str]], can_embed: bool, n: int,
          notices: list[tuple[Reason, str]]) -> tuple[list[Operator], tuple[str, ...]]:
    info = spec.collection
    legs: list[Operator] = []
    terms: tuple[str, ...] = ()
    if spec.text is not None and spec.using in ("hybrid", "lexical"):
        terms = tuple(analyze(spec.text))
        if terms:
            counts = Counter(terms)
            weights = tuple(counts.values()) if len(counts) < len(terms) else ()
            legs.append(LexicalScan(fields=info.text_fields, terms=tuple(counts), window=n,
                                    filter=spec.filter, weights=weights))
        else:
            notices.append((Reason.LEXICAL_LEG_EMPTY,
                            "the MATCHING text has no searchable terms (blank, punctuation or "
                            "stopwords); ran the semantic leg only"))
    if spec.using in ("hybrid", "semantic"):
        if spec.vector is not None:
            legs.append(SemanticScan(dim=info.dim, window=n, vector=spec.vector,
                                     filter=spec.filter))
        elif spec.text is not None and can_embed:
            legs.append(SemanticScan(dim=info.dim, window=n, text=spec.text, filter=spec.filter))
        else:
            notices.append((Reason.SEMANTIC_LEG_UNAVAILABLE,
                            f"collection '{info.name}' has no embedder and no NEAR vector was "
                            "given; ran the lexical leg only"))
    return legs, terms
