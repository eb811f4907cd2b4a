"""Scatter-gather over a shared collection: every shard runs the plan's legs on its share, the
coordinator merges each leg globally and `recallql.merge` runs everything above the legs once.

Per leg, the global candidates are the union of the shards' top N, ordered by (−score, item id)
and cut at N, with ties sharing a rank (`competition_ranks`) — the list one database holding
every row returns. Cosine needs nothing more. BM25 is re-scored with the global statistics
(`recallql.cluster.bm25`); a shard whose unreturned rows could still score at least the N-th
global score (`Bm25Stats.bound`) is asked again with twice its window, until none can.

Rowids are re-keyed `shard << SHIFT | rowid` so candidates of all shards merge in one feature
table (`concat_features`); `fetch_rows` sends each rowid back to its shard.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from recallql.cluster.bm25 import Bm25Stats
from recallql.cluster.runtime import ClusterError
from recallql.cluster.shard import LexicalPart
from recallql.cluster.wire import dumps, loads, unpack
from recallql.engine.features import Features, Strings, concat_features
from recallql.engine.legs import LegBatch, LegBatches, competition_ranks
from recallql.engine.plan import LegKind, LegSpec, QueryPlan
from recallql.index.snapshot import decode_row
from recallql.sessions.models import SessionSnapshot, SessionState
from recallql.sessions.stored import RootResolver

#: Bits of a shard-local rowid in a re-keyed rowid (2^40 rows per shard).
SHIFT = 40
#: Deeper lexical fetches stop at this window per shard (past it the leg is cut there).
MAX_DEPTH = 1 << 20
#: The chance, per shard and leg, that a shard's first window holds fewer rows than it has among
#: the leg's global top N (`first_window`: that shard is then asked again, `_deeper`).
SPILL = 1e-6
#: A lexical leg's first window covers a shard's share of this many times the leg's window.
#: Cosine is global, so a shard's first rows are exactly its share of the global list; BM25 is
#: re-scored, and `_deeper` must bound an unreturned row's global score by its last local score
#: times the statistics' ratios (1.1–1.2 on CACM at 4 shards), so a window of exactly its share
#: leaves the bound above the N-th score for long queries (measured on the 64 CACM queries at 4
#: shards, LIMIT 10: a second round for 12.5% of statements with its share of N, 1.6% with its
#: share of 1.5·N, none with N). Answers are exact whatever the value; it sets only cost.
LEXICAL_DEPTH = 1.5
#: Rows per leg a shard sends ahead with its candidates, at most (`prefetch_rows`).
PREFETCH_MAX = 50

#: A row a shard sent ahead: the schema's (text field names, declared field names) and the row's
#: stored record (`CollectionSnapshot.fetch_records`; `decode_row` makes it a row).
PendingRow = tuple[tuple[tuple[str, ...], tuple[str, ...]], tuple[Any, ...]]

#: `scatter(method, shards, args, then=None)`: call `method` on each shard with its arguments,
#: wait, and return the results in shard order, each passed through `then(position, result)`
#: as it arrives when given (`recallql.cluster.client.Cluster.scatter`).
Scatter = Callable[..., list[Any]]


@dataclasses.dataclass
class _ShardRun:
    batches: LegBatches
    lexical: dict[str, LexicalPart]
    windows: dict[str, int]
    local: dict[str, Bm25Stats] = dataclasses.field(default_factory=dict)
    #: bool[t] per lexical leg: `unreturned_terms` of its part.
    held: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: per leg (plan order): its item ids as a list (`_merged`).
    ids: list[list[str]] = dataclasses.field(default_factory=list)

    def prepare(self, plan: QueryPlan) -> None:
        """What `_deeper` and `_merged` read of this shard alone, computed as its reply
        arrives (while other shards still run): the local BM25 weights, the terms unreturned
        rows may hold, the legs' item ids."""
        for spec in plan.legs:
            if spec.kind is LegKind.LEXICAL and spec.name in self.lexical:
                self.local_stats(spec.name).weights(spec.terms, _counts(spec))
                self.held[spec.name] = unreturned_terms(self.lexical[spec.name], spec.terms)
        self.ids = [batch.ids.tolist() for batch in self.batches.legs]

    def local_stats(self, leg: str) -> Bm25Stats:
        """The shard's own statistics for a lexical leg (weights memoised)."""
        if leg not in self.local:
            part = self.lexical[leg].stats
            self.local[leg] = Bm25Stats(part.docs, part.tokens, part.doc_freq)
        return self.local[leg]


def gather_legs(plan: QueryPlan, scatter: Scatter, shards: Sequence[int],
                rows: dict[int, PendingRow | dict[str, Any]] | None = None, key: str | None = None
                ) -> LegBatches:
    """The plan's leg batches over every shard's share, as one database would return them.

    Args:
        rows: filled with the rows the shards sent ahead (re-keyed rowid -> `PendingRow`:
            `GatherSource` decodes those the page reads, before asking a shard for others).
        key: the context key the plan was made with (`recallql.cluster.planner`); None: a
            shard's own plan, not checked.

    Raises:
        StalePlan: a shard's context key is not `key`.
        whatever a shard's `run_legs` raises (QueryError, ExecutionError), re-raised by Ray.
    """
    start = time.perf_counter_ns()
    first = {leg.name: _first(leg, len(shards)) for leg in plan.legs
             if leg.kind is not LegKind.CONTEXT}
    runs = _run(plan, scatter, shards, dict.fromkeys(shards, first), rows, key)
    while True:
        stats = {spec.name: _global_stats(spec, runs) for spec in plan.legs
                 if spec.kind is LegKind.LEXICAL}
        rescored = {key: scores for spec in plan.legs if spec.name in stats
                    for key, scores in _rescored(spec, stats[spec.name], runs).items()}
        deeper = _deeper(plan, runs, stats, rescored)
        if not deeper:
            break
        runs.update(_run(plan, scatter, list(deeper), deeper, None, key))
    return _merged(plan, runs, rescored, time.perf_counter_ns() - start)


def _run(plan: QueryPlan, scatter: Scatter, shards: Sequence[int],
         windows: dict[int, dict[str, int]], rows: dict[int, PendingRow | dict[str, Any]] | None,
         key: str | None) -> dict[int, _ShardRun]:
    ahead = 0 if rows is None else prefetch_rows(plan.need, len(shards))
    text, vectors = _bare(plan)
    requests: dict[tuple[tuple[str, int], ...], bytes] = {}  # one request per distinct windows
    sent = []
    for s in shards:
        wkey = tuple(sorted(windows[s].items()))
        if wkey not in requests:
            requests[wkey] = dumps((text, vectors, windows[s], ahead, key))
        sent.append(requests[wkey])

    def decoded(i: int, reply: bytes) -> _ShardRun:  # as each reply arrives
        run = _decoded(shards[i], reply, rows)
        run.prepare(plan)
        return run

    out = scatter("legs", shards, [(r,) for r in sent], then=decoded)
    return dict(zip(shards, out, strict=True))


def _decoded(shard: int, reply: bytes, rows: dict[int, PendingRow | dict[str, Any]] | None
             ) -> _ShardRun:
    """A shard's reply unpacked (its rows sent ahead into `rows`, re-keyed)."""
    packed, parts, (names, records) = loads(reply)
    batches = unpack(packed)  # each leg's window: the one the shard ran it with
    if rows is not None:
        rows.update({(shard << SHIFT) | record[0]: (names, record) for record in records})
    return _ShardRun(batches, parts, {b.name: b.window for b in batches.legs
                                      if b.kind is not LegKind.CONTEXT})


def _bare(plan: QueryPlan) -> tuple[str, dict[str, np.ndarray]]:
    """The plan's JSON without its query vectors, and the vectors by leg name (a shard puts
    them back: `Shard.legs`)."""
    vectors = {leg.name: leg.vector for leg in plan.legs if leg.vector is not None}
    if vectors:
        plan = plan.model_copy(update={"legs": tuple(
            leg.model_copy(update={"vector": None}) if leg.vector is not None else leg
            for leg in plan.legs)})
    return plan.model_dump_json(), vectors


def prefetch_rows(need: int, shards: int) -> int:
    """Rows per leg a shard sends ahead with its candidates.

    The page's rows come from the top 2·need of the global leg lists (on CACM every hybrid and
    lexical statement's page at 1 shard); a shard holds about 1/S of those, so each sends
    4·need/S (twice its share, for the spread between shards), at most 2·need and
    `PREFETCH_MAX`. A row that was not sent ahead is fetched from its shard after the merge.
    """
    return min(2 * need, -(-4 * need // max(shards, 1)), PREFETCH_MAX)


def _first(spec: LegSpec, shards: int) -> int:
    """A shard's first window for a leg: its share of the global window (`first_window`); for
    a lexical leg, its share of `LEXICAL_DEPTH` times the window, at most the window."""
    if spec.kind is LegKind.LEXICAL:
        return min(spec.window, first_window(math.ceil(spec.window * LEXICAL_DEPTH), shards))
    return first_window(spec.window, shards)


@functools.lru_cache(maxsize=1024)
def first_window(window: int, shards: int) -> int:
    """A shard's first window for a leg whose global window is `window`: the smallest k with
    P(X > k) ≤ `SPILL` for X ~ Binomial(window, 1/shards).

    Items are spread over the shards by a hash of their id, so the number of a leg's global
    top N a shard holds is binomial with p = 1/S (p, not its own size: a shard holding more
    than its share is asked again, never answered wrongly). When a shard may hold more than
    its first window, `_deeper` asks it again; k makes that a one-in-`1/SPILL` event per
    shard and leg (N = 100: 47 rows at 4 shards, 73 at 2, 100 at 1).
    """
    if shards <= 1 or window <= 1:
        return window
    p = 1.0 / shards
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(window + 1)
    tail = 0.0  # P(X > i), summed from the top
    for i in range(window, 0, -1):
        tail += math.exp(head - math.lgamma(i + 1) - math.lgamma(window - i + 1)
                         + i * log_p + (window - i) * log_q)
        if tail > SPILL:  # P(X > i - 1) > SPILL: k = i
            return i
    return 1


def _counts(spec: LegSpec) -> tuple[int, ...]:
    return spec.term_counts or (1,) * len(spec.terms)


def _global_stats(spec: LegSpec, runs: dict[int, _ShardRun]) -> Bm25Stats:
    return Bm25Stats.total([run.lexical[spec.name].stats for run in runs.values()])


def _rescored(spec: LegSpec, stats: Bm25Stats, runs: dict[int, _ShardRun]
              ) -> dict[tuple[int, str], np.ndarray]:
    """Every shard's candidates of a lexical leg re-scored with the global statistics (in one
    vectorised pass over all of them)."""
    order = sorted(runs)
    parts = [runs[s].lexical[spec.name] for s in order]
    tf = np.concatenate([part.tf for part in parts])
    codes = np.concatenate([part.codes for part in parts])
    scores = stats.score(spec.terms, _counts(spec), tf, codes).astype(np.float64)
    ends = np.cumsum([part.codes.shape[0] for part in parts]).tolist()
    return {(s, spec.name): scores[a:b]
            for s, a, b in zip(order, [0, *ends[:-1]], ends, strict=True)}


def _deeper(plan: QueryPlan, runs: dict[int, _ShardRun], stats: dict[str, Bm25Stats],
            rescored: dict[tuple[int, str], np.ndarray]) -> dict[int, dict[str, int]]:
    """Shards whose unreturned rows could enter a leg's global top N, with the deeper windows
    (twice the last) to ask them for.

    A shard that returned fewer rows than its window holds no others. Cosine is global: a
    shard that ran a leg with the whole window N, or whose last row scores below the N-th
    global score, has no unreturned row that can enter. BM25 is not: a shard is asked again
    while its bound on an unreturned row's global BM25 (`Bm25Stats.bound` × its last local
    score, with `BOUND_SLACK`, so a row under it scores strictly less than the N-th and
    cannot tie its way in either) exceeds the N-th global score.
    """
    deeper: dict[int, dict[str, int]] = {}
    for i, spec in enumerate(plan.legs):
        if spec.kind is LegKind.CONTEXT:
            continue
        lexical = spec.name in stats
        scores = np.concatenate([rescored[(s, spec.name)] if lexical
                                 else runs[s].batches.legs[i].scores for s in runs])
        nth = -np.partition(-scores, spec.window - 1)[spec.window - 1] \
            if scores.shape[0] >= spec.window else -np.inf
        for s, run in runs.items():
            window = run.windows[spec.name]
            if lexical:
                ask = _lexical_deeper(spec, run, stats[spec.name], window, nth)
            else:
                batch = run.batches.legs[i]
                ask = window < spec.window and len(batch) >= window \
                    and float(batch.scores[-1]) >= nth
            if ask:
                limit = MAX_DEPTH if lexical else spec.window
                deeper.setdefault(s, dict(run.windows))[spec.name] = min(window * 2, limit)
    return deeper


def _lexical_deeper(spec: LegSpec, run: _ShardRun, glob: Bm25Stats, window: int,
                    nth: float) -> bool:
    part = run.lexical[spec.name]
    if part.exhausted or window >= MAX_DEPTH:
        return False
    local = run.local_stats(spec.name)
    if window >= spec.window and _same(local, glob):  # its order is the global one
        return False
    held = run.held.get(spec.name)
    if held is None:
        held = unreturned_terms(part, spec.terms)
    return glob.bound(local, spec.terms, _counts(spec), held) * part.cut_score > nth


def unreturned_terms(part: LexicalPart, terms: tuple[str, ...]) -> np.ndarray:
    """bool[t] the query terms a shard's unreturned rows may hold: those of which fewer of its
    returned rows hold the term than its statistics count documents (n_s(t))."""
    returned = np.count_nonzero(part.tf > 0, axis=0) if part.tf.shape[0] \
        else np.zeros(len(terms), np.int64)
    counted = np.fromiter((part.stats.doc_freq.get(t, 0) for t in terms), np.int64, len(terms))
    return returned < counted


def _same(local: Bm25Stats, glob: Bm25Stats) -> bool:
    """Whether a shard's statistics are the global ones (it holds every counted document):
    its BM25 is then the global BM25 bit for bit, and its unreturned rows all rank after its
    returned ones."""
    return (local.docs, local.tokens, dict(local.doc_freq)) == (glob.docs, glob.tokens,
                                                                dict(glob.doc_freq))


def _merged(plan: QueryPlan, runs: dict[int, _ShardRun],
            rescored: dict[tuple[int, str], np.ndarray], elapsed: int) -> LegBatches:
    shards = sorted(runs)
    legs = []
    for i, spec in enumerate(plan.legs):
        if spec.kind is LegKind.CONTEXT:
            legs.append(_context_leg(spec, [runs[s].batches.legs[i] for s in shards]))
            continue
        rowids, scores, ids = [], [], []
        for s in shards:
            batch = runs[s].batches.legs[i]
            rowids.append((s << SHIFT) | batch.rowids)
            scores.append(rescored.get((s, spec.name), batch.scores))
            ids.extend(runs[s].ids[i] if runs[s].ids else batch.ids.tolist())
        cut = _cut(spec, np.concatenate(rowids) if rowids else np.zeros(0, np.int64),
                   np.concatenate(scores) if scores else np.zeros(0), ids, elapsed)
        method, why = _how([runs[s].batches.legs[i] for s in shards])
        legs.append(dataclasses.replace(cut, method=method, why=why))
    keep = np.unique(np.concatenate([leg.rowids for leg in legs])) if legs else None
    features = concat_features([_rekeyed(s, runs[s].batches.features, keep) for s in shards])
    notices = dict.fromkeys(n for s in shards for n in runs[s].batches.notices)
    return LegBatches(plan.collection, 0, sum(runs[s].batches.size for s in shards),
                      tuple(legs), features,
                      max((runs[s].batches.scan_ns for s in shards), default=0),
                      tuple(notices))


def _how(parts: list[LegBatch]) -> tuple[str, str]:
    """How the shards searched a leg (EXPLAIN's ``method=`` and ``why=``): their common method
    and reason, or each distinct method with the shards that used it."""
    methods = dict.fromkeys(part.method for part in parts if part.method)
    if len(methods) <= 1:
        return next(iter(methods), ""), next((part.why for part in parts if part.why), "")
    return "+".join(methods), "; ".join(f"shard {s}: {part.method} ({part.why})"
                                        for s, part in enumerate(parts))


def _context_leg(spec: LegSpec, parts: list[LegBatch]) -> LegBatch:
    """The context leg over shards: empty wherever documents hold one item each (CACM, most
    shared knowledge bases).

    Raises:
        ClusterError: some shard found neighbours: the credit needs the global candidates and
            documents whose items may sit on several shards, which scatter-gather does not
            gather yet.
    """
    if any(len(part) for part in parts):
        raise ClusterError(
            "the context leg (documents of several items) is not exact over the shards of a "
            "shared collection yet: turn it off with FUSE CONVEX (weights = (context = 0)) or "
            "FUSE RRF (weights = (context = 0)), or keep such documents in a tenant's collection")
    none = np.zeros(0, np.int64)
    return LegBatch(spec.name, spec.kind, none, np.zeros(0), none, Strings.of([]), spec.window,
                    0, np.zeros((0, 2), np.int64))


def _cut(spec: LegSpec, rowids: np.ndarray, scores: np.ndarray, ids: list[str],
         elapsed: int) -> LegBatch:
    """A leg's global list: ordered by (−score, item id), cut at the window."""
    pick = top_order(scores, ids, spec.window)
    top = scores[pick]
    return LegBatch(spec.name, spec.kind, rowids[pick], top, competition_ranks(top),
                    Strings.of([ids[i] for i in pick.tolist()]), spec.window, elapsed)


def top_order(scores: np.ndarray, ids: Sequence[str], n: int) -> np.ndarray:
    """int64[≤ n] the positions of the first n by (−score, id): a sort by score, then the
    item ids of each group of tied scores that reaches into the first n (usually a few)."""
    order = np.argsort(-scores, kind="stable")
    if order.shape[0] <= 1 or n <= 0:
        return order[:n].astype(np.int64)
    ranked = scores[order]
    end = int(np.searchsorted(-ranked, -ranked[min(n, ranked.shape[0]) - 1], side="right"))
    tied = np.flatnonzero(ranked[1:end] == ranked[: end - 1])  # j: ranked[j] == ranked[j + 1]
    if not tied.shape[0]:
        return order[:n].astype(np.int64)
    breaks = np.flatnonzero(tied[1:] - tied[:-1] > 1)  # a new tied group starts after each
    starts = [int(tied[0]), *(tied[breaks + 1]).tolist()]
    stops = [*(tied[breaks] + 2).tolist(), int(tied[-1]) + 2]
    out = order[:end].tolist()
    for a, b in zip(starts, stops, strict=True):
        out[a:b] = sorted(out[a:b], key=ids.__getitem__)
    return np.asarray(out[:n], np.int64)


def _rekeyed(shard: int, features: Features, keep: np.ndarray | None) -> Features:
    """A shard's features with re-keyed rowids, only the rows in `keep` (None: all)."""
    rowid = (shard << SHIFT) | features.rowid
    if keep is not None:  # both ascending: `keep`'s rows of this shard, found by bisection
        mine = keep[(keep >> SHIFT) == shard]
        index = np.searchsorted(rowid, mine)
        index = index[(index < rowid.shape[0]) & (rowid[np.minimum(index, rowid.shape[0] - 1)]
                                                  == mine)] if rowid.shape[0] else index[:0]
        features = features.take(index)
        rowid = rowid[index]
    return dataclasses.replace(features, rowid=rowid)


class GatherSource:
    """The `MergeSource` of a scatter-gather statement: rows from their shards, and the FOR
    SESSION session and signal sums from its owner's database (`session(session_id, method,
    args)`: a callable reaching it)."""

    def __init__(self, scatter: Scatter, shards: Sequence[int],
                 session: Callable[[str, str, tuple[Any, ...]], Any] | None = None,
                 rows: dict[int, PendingRow | dict[str, Any]] | None = None) -> None:
        self._scatter = scatter
        self._shards = list(shards)
        self._session = session
        #: Re-keyed rowid -> row (a stored record while only sent ahead: decoded when read).
        self.rows: dict[int, PendingRow | dict[str, Any]] = {} if rows is None else rows

    def session_state(self, session_id: str, now_ts: float
                      ) -> tuple[SessionState, SessionSnapshot] | None:
        if self._session is None:
            return None
        out: tuple[SessionState, SessionSnapshot] | None = self._session(
            session_id, "session_state", (session_id, now_ts))
        return out

    def entity_sums(self, entities: list[str], names: list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        """Signal sums of the FOR SESSION owner's sessions (sessions are tenant data; without
        FOR SESSION a shared collection sees none)."""
        if self._session is None:
            return {}
        sums: dict[str, dict[str, float]] = self._session(
            "", "entity_sums", (entities, names, now_ts))
        return sums

    def lineage_resolver(self, budget: int, as_of: float | None = None
                         ) -> AbstractContextManager[RootResolver]:
        raise ClusterError("conversation lineage reads the messages collection, which is "
                           "per tenant: run the statement on its tenant (tenant=...)")

    def fetch_rows(self, collection: str, rowids: np.ndarray, batch: int
                   ) -> list[dict[str, Any]]:
        missing = np.asarray([r for r in rowids.tolist() if r not in self.rows], np.int64)
        if missing.shape[0]:
            self.rows.update(zip(missing.tolist(), self._fetch(collection, missing),
                                 strict=True))
        out = []
        for r in rowids.tolist():
            row = self.rows[r]
            if isinstance(row, tuple):
                row = self.rows[r] = decode_row(*row)
            out.append(row)
        return out

    def _fetch(self, collection: str, rowids: np.ndarray) -> list[dict[str, Any]]:
        shard_of = rowids >> SHIFT
        local = rowids & ((1 << SHIFT) - 1)
        wanted = sorted(set(shard_of.tolist()))
        found = self._scatter("fetch", wanted,
                              [(collection, local[shard_of == s].tolist()) for s in wanted])
        queues = {s: iter(rows) for s, rows in zip(wanted, found, strict=True)}
        return [next(queues[s]) for s in shard_of.tolist()]

    def surrounding_rows(self, collection: str, rowids: np.ndarray, before: int, after: int,
                         filter_expr: Any, batch: int) -> list[Any]:
        """`WITH CONTEXT` on a shared collection (refused: a document's items may sit on
        several shards).

        Raises:
            ClusterError: always.
        """
        raise ClusterError("WITH CONTEXT is not available on a shared collection yet (a "
                           "document's items may sit on several shards); run it on a tenant's "
                           "collection")

    def bm25_explanation(self, collection: str, terms: list[str], rowid: int, batch: int
                         ) -> str:
        shard, local = rowid >> SHIFT, rowid & ((1 << SHIFT) - 1)
        text: str = self._scatter("bm25_explanation", [shard],
                                  [(collection, terms, local)])[0]
        return f"(shard {shard}, with that shard's statistics) {text}"
