"""Retrieval quality metrics with binary relevance: nDCG@k, average precision (MAP), recall@k.

Definitions follow trec_eval: nDCG@k with gains 1 for relevant documents and the log2 discount
(Järvelin & Kekäläinen, TOIS 2002), the ideal ranking putting all judged-relevant documents first;
average precision over all judged-relevant documents (unretrieved ones count as precision 0).
Queries without relevant documents should be dropped by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean


def ndcg_at_k(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """nDCG@k of one ranked list of ids with binary gains; 0.0 when nothing is relevant."""
    if not relevant:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal


def average_precision(ranked: Sequence[str], relevant: set[str]) -> float:
    """Average precision of one ranked list (uninterpolated, over all relevant documents)."""
    if not relevant:
        return 0.0
    hits, total = 0, 0.0
    for i, doc in enumerate(ranked, start=1):
        if doc in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant)


def recall_at_k(ranked: Sequence[str], relevant: set[str], k: int = 100) -> float:
    """Fraction of the relevant documents found in the first k results."""
    if not relevant:
        return 0.0
    return len(set(ranked[:k]) & relevant) / len(relevant)


def evaluate(
    runs: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Iterable[str]],
    k: int = 10,
) -> dict[str, float]:
    """Mean metrics over the queries that have judgments.

    Args:
        runs: query id -> ranked document ids.
        qrels: query id -> relevant document ids.
        k: the nDCG cut-off.

    Returns:
        `{"ndcg@k": …, "map": …, "recall@100": …, "queries": n}` (means over judged queries).
    """
    per_query = per_query_metrics(runs, qrels, k)
    if not per_query:
        return {f"ndcg@{k}": 0.0, "map": 0.0, "recall@100": 0.0, "queries": 0}
    return {
        f"ndcg@{k}": fmean(m[f"ndcg@{k}"] for m in per_query.values()),
        "map": fmean(m["map"] for m in per_query.values()),
        "recall@100": fmean(m["recall@100"] for m in per_query.values()),
        "queries": len(per_query),
    }


def per_query_metrics(
    runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Iterable[str]], k: int = 10
) -> dict[str, dict[str, float]]:
    """Per-query nDCG@k, AP and recall@100 for every query with at least one relevant document."""
    out: dict[str, dict[str, float]] = {}
    for qid, rel in qrels.items():
        relevant = set(rel)
        if not relevant:
            continue
        ranked = runs.get(qid, [])
        out[qid] = {
            f"ndcg@{k}": ndcg_at_k(ranked, relevant, k),
            "map": average_precision(ranked, relevant),
            "recall@100": recall_at_k(ranked, relevant, 100),
        }
    return out
