"""The semantic leg over a collection's vector segments: exact or ANN, chosen per statement.

Every segment is searched by one of three methods, all returning exact cosines (the float32
stored vector against the float64 query, rounded to float32), so a row's score does not
depend on the method:

- ``exact``: every eligible row of the segment is scored (`recallql.index.vectors`), through
  the segment's int8 copy when it has one (`recallql.index.quantized`: the candidates provably
  hold the exact top-n; only they are read in float32);
- ``ann``: the segment's HNSW graph proposes candidates, oversampled by the eligible share
  (`recallql.index.ann.ann_candidates`); they are re-scored exactly;
- a filtered ``ann`` search that under-fills falls back to ``exact`` for that segment.

`choose` picks the method from the number of eligible rows after filters: up to
`EXACT_MAX_ROWS` (a tenant's or a session's rows) the exact scan is cheaper than walking a graph
and is exact by construction; above it, segments that have a graph use it. Never a filtered
graph walk for a selective filter: with few eligible rows the scan wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from recallql.index.ann import AnnGraph, ann_candidates, exact_cosines
from recallql.index.quantized import Quantized, candidates
from recallql.index.ranking import top_by_score
from recallql.index.vectors import Segment, semantic_topn

Skip = Callable[[str, np.ndarray], None] | None

#: At most this many eligible rows are scanned exactly even when graphs exist.
EXACT_MAX_ROWS = 20_000
METHODS = ("auto", "exact", "ann")


@dataclass(frozen=True)
class VectorPart:
    """One segment and its optional accelerators (an HNSW graph, an int8 copy)."""

    segment: Segment
    graph: AnnGraph | None = None
    quantized: Quantized | None = None


@dataclass
class SemanticStats:
    """How the leg ran (for EXPLAIN).

    Attributes:
        method: ``"exact"``, ``"ann"`` or ``"ann+exact"`` (some segments each way).
        why: the reason for the choice, in words.
        eligible: eligible rows with a vector.
        scanned: rows scored exactly (in float32, or through an int8 copy).
        rescored: rows read in float32 to re-score candidates.
        fallbacks: segments whose filtered ANN search under-filled and were scanned instead.
    """

    method: str
    why: str
    eligible: int = 0
    scanned: int = 0
    rescored: int = 0
    fallbacks: int = 0
    segments: dict[str, str] = field(default_factory=dict)


def choose(eligible: int, graph_rows: int, forced: str = "auto") -> tuple[str, str]:
    """(method, why) for a statement whose filters leave `eligible` rows with a vector, when
    `graph_rows` rows sit in segments that have a graph.

    Raises:
        ValueError: `forced` is not one of `METHODS`.
    """
    if forced not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {forced!r}")
    if forced == "exact":
        return "exact", "USING SEMANTIC (exact)"
    if graph_rows == 0:
        return "exact", "no segment has an ANN index (too few rows)"
    if forced == "ann":
        return "ann", "USING SEMANTIC (ann)"
    if eligible <= EXACT_MAX_ROWS:
        return "exact", f"{eligible:,} eligible rows ≤ {EXACT_MAX_ROWS:,}: scanned exactly"
    return "ann", f"{eligible:,} eligible rows > {EXACT_MAX_ROWS:,}: ANN with oversampling"


def _exact_part(part: VectorPart, query: np.ndarray, n: int, eligible: np.ndarray,
                ok: np.ndarray, ids: Sequence[str], stats: SemanticStats, skip: Skip
                ) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-n candidates of one segment's eligible rows (`ok`: bool[m] local)."""
    seg = part.segment
    stats.scanned += int(np.count_nonzero(ok))
    if part.quantized is None:
        return semantic_topn([seg], query, n, eligible, ids, skip)
    local = np.flatnonzero(ok)
    pick = local[candidates(part.quantized.take(local), query, n)]
    stats.rescored += len(pick)
    return seg.rowids_at(pick), exact_cosines(query, seg.vecs[pick])


def _ann_part(part: VectorPart, query: np.ndarray, n: int, eligible: np.ndarray,
              count: int, stats: SemanticStats, skip: Skip
              ) -> tuple[np.ndarray, np.ndarray] | None:
    seg = part.segment
    assert part.graph is not None

    def gather(rowids: np.ndarray) -> np.ndarray:
        return seg.vecs[seg.positions(rowids)]

    got = ann_candidates(part.graph, query, n, eligible, gather, count)
    if got is None:
        return None
    rowids, cos, ann = got
    stats.rescored += len(rowids)
    finite = np.isfinite(cos)
    if not finite.all():  # a damaged segment file: never ranked, reported
        if skip is not None:
            skip(seg.file, rowids[~finite])
        rowids, cos = rowids[finite], cos[finite]
    stats.segments[seg.file] = f"ann k={ann.asked} ef={ann.ef} rounds={ann.rounds}"
    return rowids, cos


def search(segments: Sequence[VectorPart | Segment], query: np.ndarray, n: int,
           eligible: np.ndarray, ids: Sequence[str], method: str = "auto",
           skip: Skip = None) -> tuple[np.ndarray, np.ndarray, SemanticStats]:
    """Cosine top-n over eligible rows, ordered by (−cosine, item id).

    Args:
        segments: the collection's segments (each with its graph, when it has one), or
            `VectorPart`s with their accelerators.
        query: float64[dim], L2-normalised.
        n: rows wanted.
        eligible: bool[size] (live, allowed, has a vector).
        ids: item id per rowid (tie-break).
        method: ``"auto"`` (`choose`), ``"exact"`` or ``"ann"``.
        skip: told ``(file, rowids)`` of rows an exact scan found with a non-finite stored
            vector (never returned).

    Returns:
        (rowids int64[m], cosine float32[m], stats).

    Raises:
        ValueError: an unknown `method`.
    """
    parts = [p if isinstance(p, VectorPart) else VectorPart(p, p.graph) for p in segments]
    oks = [p.segment.eligible(eligible) for p in parts]
    counts = [int(np.count_nonzero(ok)) for ok in oks]
    graph_rows = sum(len(p.segment.vecs) for p in parts if p.graph is not None)
    all_rows = sum(len(p.segment.vecs) for p in parts)
    chosen, why = choose(sum(counts), graph_rows, method)
    stats = SemanticStats(chosen, why, eligible=sum(counts))
    if chosen == "exact" and all(p.quantized is None for p in parts):  # one scan of all
        stats.scanned = sum(counts)
        rowids, cos = semantic_topn([p.segment for p in parts], query, n, eligible, ids, skip)
        return rowids, cos, stats
    found: list[tuple[np.ndarray, np.ndarray]] = []
    for part, ok, count in zip(parts, oks, counts, strict=True):
        if count == 0 or n <= 0:
            continue
        got = None
        if chosen == "ann" and part.graph is not None:
            got = _ann_part(part, query, n, eligible, count, stats, skip)
            stats.fallbacks += int(got is None)
        found.append(got or _exact_part(part, query, n, eligible, ok, ids, stats, skip))
    if chosen == "ann" and (stats.fallbacks or graph_rows < all_rows):
        stats.method = "ann+exact"
    return _merge(found, n, ids, stats)


def _merge(found: list[tuple[np.ndarray, np.ndarray]], n: int, ids: Sequence[str],
           stats: SemanticStats) -> tuple[np.ndarray, np.ndarray, SemanticStats]:
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.float32), stats
    rowids = np.concatenate([r for r, _ in found]).astype(np.int64)
    cos = np.concatenate([c for _, c in found]).astype(np.float32)
    order = np.asarray(top_by_score(cos, n, lambda i: ids[int(rowids[i])]), np.int64)
    return rowids[order], cos[order], stats
