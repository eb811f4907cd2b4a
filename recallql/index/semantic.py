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

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from recallql.index.ann import (
    MAX_CANDIDATES,
    MAX_SHARE,
    OVERSAMPLE,
    PAD,
    AnnGraph,
    ann_candidates,
    exact_cosines,
)
from recallql.index.graphs import PARAMS
from recallql.index.quantized import Quantized, candidates
from recallql.index.ranking import top_by_score
from recallql.index.vectors import Segment, semantic_topn

Skip = Callable[[str, np.ndarray], None] | None

#: At most this many eligible rows are scanned exactly even when graphs exist.
EXACT_MAX_ROWS = 20_000
METHODS = ("auto", "exact", "ann")
#: Standard deviations above its expected share of the top-n that each of several graphs is
#: asked for (`graph_share`).
SHARE_Z = 3.0


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
        segments: per segment file, how it was searched (in words).
        graphs: per segment searched through its graph, (n_g, k, ef) of its last round.
    """

    method: str
    why: str
    eligible: int = 0
    scanned: int = 0
    rescored: int = 0
    fallbacks: int = 0
    segments: dict[str, str] = field(default_factory=dict)
    graphs: dict[str, tuple[int, int, int]] = field(default_factory=dict)


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
    pick = (candidates(part.quantized, query, n) if len(local) == len(ok)
            else local[candidates(part.quantized, query, n, local)])
    stats.rescored += len(pick)
    return _finite(seg, seg.rowids_at(pick), exact_cosines(query, seg.vecs[pick]), skip)


def _finite(seg: Segment, rowids: np.ndarray, cos: np.ndarray, skip: Skip
            ) -> tuple[np.ndarray, np.ndarray]:
    """Candidates without those whose stored vector is not finite (a damaged segment file:
    never ranked; reported to `skip`)."""
    finite = np.isfinite(cos)
    if finite.all():
        return rowids, cos
    if skip is not None:
        skip(seg.file, rowids[~finite])
    return rowids[finite], cos[finite]


def graph_share(n: int, count: int, total: int) -> int:
    """Rows asked of one graph's segment when several graphs split the `total` eligible rows:
    n_g = ⌈n·s + z·√(n·s·(1 − s))⌉ with s = count / total and z = `SHARE_Z`, capped at
    min(n, count) and at least 1.

    If rows were spread over segments independently of the query, the count of the top-n in
    a segment would be hypergeometric with mean n·s and variance below n·s·(1 − s), so n_g
    covers it but for a tail of about 0.1% (z = 3). Segments are written in time order and
    need not be exchangeable (a topic of last week sits in the newest segment), so `search`
    asks again, with twice n_g, any graph whose worst candidate still reaches the merged n-th
    cosine: a segment is left only once its own candidates fall below the top-n.
    """
    if total <= 0 or count <= 0 or n <= 0:
        return 0
    share = min(1.0, count / total)
    want = math.ceil(n * share + SHARE_Z * math.sqrt(n * share * (1.0 - share)) - 1e-9)
    return max(1, min(n, count, want))


def _ann_part(part: VectorPart, query: np.ndarray, n: int, eligible: np.ndarray,
              count: int, stats: SemanticStats, skip: Skip, ef: int | None = None
              ) -> tuple[np.ndarray, np.ndarray] | None:
    seg = part.segment
    assert part.graph is not None

    def gather(rowids: np.ndarray) -> np.ndarray:
        return seg.vecs[seg.positions(rowids)]

    got = ann_candidates(part.graph, query, n, eligible, gather, count, ef=ef)
    if got is None:
        return None
    rowids, cos, ann = got
    stats.rescored += len(rowids)
    rowids, cos = _finite(seg, rowids, cos, skip)
    stats.segments[seg.file] = f"ann n_g={n} k={ann.asked} ef={ann.ef} rounds={ann.rounds}"
    stats.graphs[seg.file] = (n, ann.asked, ann.ef)
    return rowids, cos


def search(segments: Sequence[VectorPart | Segment], query: np.ndarray, n: int,
           eligible: np.ndarray, ids: Sequence[str], method: str = "auto",
           skip: Skip = None, ef: int | None = None
           ) -> tuple[np.ndarray, np.ndarray, SemanticStats]:
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
        ef: the HNSW search breadth of each graph search (``USING SEMANTIC (ann, ef = N)``;
            raised to the candidates asked, k, when lower); None: the graph's default, 128.

    Returns:
        (rowids int64[m], cosine float32[m], stats).

    Raises:
        ValueError: an unknown `method`.
    """
    parts = [p if isinstance(p, VectorPart) else VectorPart(p, p.graph, p.quantized)
             for p in segments]
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
    found = _Parts(parts, oks, counts, query, n, eligible, ids, stats, skip, ef).run(
        chosen == "ann")
    if chosen == "ann" and (stats.fallbacks or graph_rows < all_rows):
        stats.method = "ann+exact"
    if stats.graphs:
        stats.why += "; " + describe_graphs(n, stats.graphs, ef)
    return _merge(found, n, ids, stats)


@dataclass
class _Parts:
    """One statement's search of every segment: ANN through the graphs (each asked for its
    share `graph_share`, asked again by `_reask`), exact for the others and on under-fill."""

    parts: list[VectorPart]
    oks: list[np.ndarray]
    counts: list[int]
    query: np.ndarray
    n: int
    eligible: np.ndarray
    ids: Sequence[str]
    stats: SemanticStats
    skip: Skip
    ef: int | None = None

    def run(self, ann: bool) -> list[tuple[np.ndarray, np.ndarray]]:
        found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        asked: dict[int, int] = {}  # graph parts: rows asked (n_g)
        total = sum(self.counts)
        for i, (part, count) in enumerate(zip(self.parts, self.counts, strict=True)):
            if count == 0 or self.n <= 0:
                continue
            if ann and part.graph is not None:
                asked[i] = graph_share(self.n, count, total)
            found[i] = self._one(i, asked)
        while more := _reask(found, asked, self.counts, self.n):
            for i in more:
                asked[i] = min(self.n, self.counts[i], 2 * asked[i])
                found[i] = self._one(i, asked)
        return list(found.values())

    def _one(self, i: int, asked: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Part i through its graph when `asked` holds it, else (or on under-fill: the part
        then leaves `asked`) scanned exactly."""
        part, stats = self.parts[i], self.stats
        if i in asked:
            got = _ann_part(part, self.query, asked[i], self.eligible, self.counts[i], stats,
                            self.skip, self.ef)
            if got is not None:
                return got
            stats.fallbacks += 1
            del asked[i]
            stats.graphs.pop(part.segment.file, None)
        return _exact_part(part, self.query, self.n, self.eligible, self.oks[i], self.ids,
                           stats, self.skip)


def _reask(found: dict[int, tuple[np.ndarray, np.ndarray]], asked: dict[int, int],
           counts: Sequence[int], n: int) -> list[int]:
    """Graph parts to ask again: asked for fewer than min(n, eligible) rows while their worst
    candidate reaches the n-th best cosine of all candidates (so an unasked row of theirs
    might too)."""
    if not asked:
        return []
    every = np.concatenate([c for _, c in found.values()])
    if len(every) < n:
        return [i for i, want in asked.items() if want < min(n, counts[i])]
    nth = float(np.partition(every, len(every) - n)[len(every) - n])
    return [i for i, want in asked.items() if want < min(n, counts[i])
            and len(found[i][1]) and float(found[i][1].min()) >= nth]


def describe_graphs(n: int, per_graph: dict[str, tuple[int, int, int]],
                    ef: int | None = None) -> str:
    """EXPLAIN's account of the graph searches: n, and per distinct (n_g, k, ef) how many
    graphs searched with it (the last round's values), with the formulas (`ef`: the
    statement's ``USING SEMANTIC (ann, ef = N)``, if any)."""
    base = (f"{PARAMS.expansion_search}" if ef is None
            else f"{ef} (USING SEMANTIC (ann, ef = {ef}))")
    groups = Counter(per_graph.values())
    parts = ", ".join(f"{c} × (n_g {g}, k {k}, ef {ef})"
                      for (g, k, ef), c in sorted(groups.items(), reverse=True))
    return (f"n = {n} over {len(per_graph)} graph{'s' if len(per_graph) > 1 else ''}: {parts} "
            f"[n_g = min(n, ⌈n·s + {SHARE_Z:g}·√(n·s·(1 − s))⌉), s = the graph's share of "
            f"the eligible rows; k = ⌈{OVERSAMPLE:g}·(n_g + {PAD}) / f⌉, f = the eligible "
            f"fraction of the graph, at most its rows and max(n_g, min({MAX_CANDIDATES}, "
            f"{MAX_SHARE:g} of its rows)); ef = max({base}, k)]")


def _merge(found: list[tuple[np.ndarray, np.ndarray]], n: int, ids: Sequence[str],
           stats: SemanticStats) -> tuple[np.ndarray, np.ndarray, SemanticStats]:
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.float32), stats
    rowids = np.concatenate([r for r, _ in found]).astype(np.int64)
    cos = np.concatenate([c for _, c in found]).astype(np.float32)
    order = np.asarray(top_by_score(cos, n, lambda i: ids[int(rowids[i])]), np.int64)
    return rowids[order], cos[order], stats
