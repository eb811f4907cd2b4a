"""Run a plan's retrieval legs: `QueryPlan` -> `LegBatches` (docs/architecture.md).

`run_legs` is the part of a statement that needs the index: each leg's top-N eligible rows with
exact raw scores (float64) and competition ranks, the features the operators above the legs read
for those rows, and the snapshot's batch number. Everything after it (`recallql.merge`) needs only
these batches and a `MergeSource`, so a coordinator can run `run_legs` on shards and merge once.
Legs run concurrently (tantivy and numpy release the GIL): the first in the calling thread, the
others in the given pool. Outputs never depend on the interleaving.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from recallql.engine.executor import ExecutionError
from recallql.engine.features import (
    Coded,
    CodedLists,
    Features,
    StringField,
    Strings,
    features_from_wire,
    features_to_wire,
)
from recallql.engine.operators.base import LegContext
from recallql.engine.operators.scan import ContextScan, LegScan, eligible_rows, leg_operator
from recallql.engine.plan import FeatureSpec, LegKind, LegSpec, QueryPlan
from recallql.engine.reasons import Reason
from recallql.grammar.errors import QueryError, QuerySemanticError
from recallql.index.columns import StrView
from recallql.index.errors import FilterError
from recallql.index.rowsets import RowSet
from recallql.index.schema import FieldType
from recallql.index.snapshot import CollectionSnapshot


def competition_ranks(scores: np.ndarray) -> np.ndarray:
    """int64[m] 1-based ranks of a leg's scores (sorted best first), ties sharing the best rank
    of their group ("1224" standard competition ranking).

    A leg orders tied rows by item id, but that order is a tie-break, not evidence: rows with equal
    BM25 or cosine get equal RRF shares, so an exact tie is decided by the boosts (the newer
    document wins it under recency) and then by the total order.
    """
    m = scores.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.empty(m, dtype=bool)
    starts[0] = True
    np.not_equal(scores[1:], scores[:-1], out=starts[1:])
    return np.maximum.accumulate(np.where(starts, np.arange(1, m + 1), 0)).astype(np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class LegBatch:
    """One leg's candidates, best first.

    Attributes:
        name, kind: the leg's name and kind in the plan.
        rowids: int64[m]; scores: float64[m] exact raw scores (BM25, cosine); ranks: int64[m]
            1-based competition ranks of `scores`; ids: the rows' item ids.
        window: the candidate window N asked for (m ≤ N).
        time_ns: the leg's wall time.
        places: context legs: int64[m, 2], each row's document code and its place among the
            eligible items of the documents in document order (`Neighbours.places`: rows of one
            document d items apart differ by d); rows ascending, scores and ranks 0 (a context
            leg matches nothing itself). None for other legs.
    """

    name: str
    kind: LegKind
    rowids: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray
    ids: Strings
    window: int
    time_ns: int = 0
    places: np.ndarray | None = None
    #: How the leg searched (the semantic leg: ``exact``, ``ann`` or ``ann+exact``) and why.
    method: str = ""
    why: str = ""
    #: How the leg applied the statement's filter (EXPLAIN's ``filter=``): the lexical leg
    #: ``terms(<fields>)``, ``rowids(<m>)`` or ``post-filter``; the semantic leg ``posting
    #: rows=<m>`` (gathered) or ``mask rows=<m>``. Empty without a filter.
    filter: str = ""

    def __len__(self) -> int:
        return int(self.rowids.shape[0])

    @property
    def cut(self) -> bool:
        """True when the leg filled its window, so a deeper window could hold more rows (never
        for a context leg: a deeper window of the direct legs brings its rows)."""
        return self.kind is not LegKind.CONTEXT and len(self) >= self.window


@dataclass(frozen=True, eq=False)
class LegBatches:
    """What `run_legs` returns: per-leg candidates and the features of their rows.

    Attributes:
        collection: the collection searched.
        batch: the snapshot's committed batch number (rowids are valid in it and later).
        size: the snapshot's rowid upper bound (no window deeper than this helps).
        legs: one batch per leg of the plan, in plan order.
        features: the features of the union of the legs' rows, ascending rowid (without legs:
            of every eligible row).
        scan_ns: wall time of the eligible-row scan (plans without legs).
        notices: statement-level warnings the legs raised, `(code, message)` (e.g.
            `VECTORS_NOT_FINITE`: damaged stored vectors skipped by the semantic leg).
    """

    collection: str
    batch: int
    size: int
    legs: tuple[LegBatch, ...]
    features: Features
    scan_ns: int = 0
    notices: tuple[tuple[Reason, str], ...] = ()

    @property
    def cut(self) -> bool:
        """True when some leg filled its window."""
        return any(leg.cut for leg in self.legs)

    def to_json(self) -> str:
        """The batches as JSON (exact: float64 scores round-trip bit for bit)."""
        return _Wire(
            collection=self.collection, batch=self.batch, size=self.size, scan_ns=self.scan_ns,
            features=features_to_wire(self.features),
            legs=[_LegWire(name=b.name, kind=b.kind, rowids=b.rowids.tolist(),
                           scores=b.scores.tolist(), ranks=b.ranks.tolist(), ids=b.ids.tolist(),
                           window=b.window, time_ns=b.time_ns,
                           places=None if b.places is None else b.places.tolist(),
                           method=b.method, why=b.why, filter=b.filter)
                  for b in self.legs],
            notices=[(str(code), message) for code, message in self.notices],
        ).model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> LegBatches:
        """The inverse of `to_json`.

        Raises:
            pydantic.ValidationError: malformed JSON.
        """
        wire = _Wire.model_validate_json(text)
        legs = tuple(LegBatch(
            name=b.name, kind=b.kind, rowids=np.asarray(b.rowids, np.int64),
            scores=np.asarray(b.scores, np.float64), ranks=np.asarray(b.ranks, np.int64),
            ids=Strings.of(b.ids), window=b.window, time_ns=b.time_ns,
            places=None if b.places is None
            else np.asarray(b.places, np.int64).reshape(-1, 2),
            method=b.method, why=b.why, filter=b.filter) for b in wire.legs)
        return cls(wire.collection, wire.batch, wire.size, legs,
                   features_from_wire(wire.features), wire.scan_ns,
                   tuple((Reason(code), message) for code, message in wire.notices))


class _LegWire(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    kind: LegKind
    rowids: list[int]
    scores: list[float]
    ranks: list[int]
    ids: list[str]
    window: int
    time_ns: int = 0
    places: list[list[int]] | None = None
    method: str = ""
    why: str = ""
    filter: str = ""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: str
    batch: int
    size: int
    legs: list[_LegWire]
    features: dict[str, Any]
    scan_ns: int = 0
    notices: list[tuple[str, str]] = []


# -- running ------------------------------------------------------------------------------------


def run_legs(plan: QueryPlan, snapshot: CollectionSnapshot, pool: Executor | None = None
             ) -> LegBatches:
    """Run the plan's legs (or its eligible-row scan) on `snapshot`.

    Raises:
        QuerySemanticError: a filter that cannot be evaluated (the analyzer checks names).
        ExecutionError: a leg failed, naming its operator.
    """
    ctx = LegContext(snapshot, _masks(plan, snapshot))
    scan_ns = 0
    if plan.fusion is not None:
        direct = [spec for spec in plan.legs if spec.kind is not LegKind.CONTEXT]
        found = {b.name: b for b in _parallel([leg_operator(spec) for spec in direct], ctx,
                                              pool if _threaded(direct, ctx) else None)}
        rows = np.unique(np.concatenate([b.rowids for b in found.values()])) if found \
            else np.zeros(0, np.int64)
        context = [_context(spec, ctx, rows) for spec in plan.legs
                   if spec.kind is LegKind.CONTEXT]
        found.update((b.name, b) for b in context)
        batches = tuple(found[spec.name] for spec in plan.legs)
        if context:  # the direct legs' rows are in `rows` already
            rows = np.unique(np.concatenate([rows, *(b.rowids for b in context)]))
    else:
        start = time.perf_counter_ns()
        batches, rows = (), _guarded("EligibleScan", lambda: eligible_rows(ctx, plan.filter))
        scan_ns = time.perf_counter_ns() - start
    return LegBatches(plan.collection, int(snapshot.seq), int(snapshot.size), batches,
                      gather_features(snapshot, rows, plan.features), scan_ns,
                      _leg_notices(plan, snapshot))


def _leg_notices(plan: QueryPlan, snapshot: CollectionSnapshot) -> tuple[tuple[Reason, str], ...]:
    if plan.fusion is None or not any(leg.kind is LegKind.SEMANTIC for leg in plan.legs):
        return ()
    return tuple((Reason.VECTORS_NOT_FINITE,
                  f"{count} stored vector(s) of segment {file} are not finite (NaN or infinity: "
                  "the file is damaged) and were skipped; run `recallql check`")
                 for file, count in snapshot.skipped_vectors().items())


def _masks(plan: QueryPlan, snapshot: CollectionSnapshot) -> dict[Any, RowSet]:
    exprs = [plan.filter, *(leg.filter for leg in plan.legs)]
    masks: dict[Any, RowSet] = {}
    for expr in exprs:
        if expr is not None and expr not in masks:
            try:
                masks[expr] = snapshot.filter_rows(expr)
            except FilterError as exc:  # the analyzer checks names and types; this is a net
                raise QuerySemanticError(f"WHERE cannot be evaluated: {exc}") from None
    return masks


def _guarded(name: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (QueryError, ExecutionError):
        raise
    except Exception as exc:  # noqa: BLE001 - wrapped with the operator's name
        raise ExecutionError(name, exc) from exc


def _search(op: LegScan, ctx: LegContext) -> tuple[np.ndarray, np.ndarray, int]:
    """One leg's search and its wall time (only the search runs in the leg's thread: any more
    Python there would wait for the GIL while the other leg holds it)."""
    start = time.perf_counter_ns()
    rowids, scores = _guarded(op.name, lambda: op.search(ctx))
    return rowids, scores, time.perf_counter_ns() - start


def _context(spec: LegSpec, ctx: LegContext, found: np.ndarray) -> LegBatch:
    """The context leg's batch: the direct legs' rows `found` of documents of several items and
    their neighbours, with their places in document order."""
    op = leg_operator(spec)
    assert isinstance(op, ContextScan)
    start = time.perf_counter_ns()
    rowids, places = _guarded(op.name, lambda: op.around(ctx, found))
    m = rowids.shape[0]
    return LegBatch(spec.name, spec.kind, rowids, np.zeros(m, np.float64), np.zeros(m, np.int64),
                    Strings(_str_gather(ctx.snapshot, "id"), rowids), spec.window,
                    time.perf_counter_ns() - start, places)


#: The direct legs run in the leg pool's threads only when one of them searches more than this
#: many eligible rows: below it each leg's search is a fraction of a millisecond, and handing
#: one to a thread costs more CPU than running it after the other (100 eligible rows at 100k:
#: 1.71 ms CPU per statement with the pool, 1.62 without; 1,000 rows: 2.93 against 2.81; the
#: unfiltered statement: 7.18 against 7.25, wall p50 11.0 against 11.2 ms; load 6-9). The
#: same bound as the semantic leg's exact scan (`recallql.index.semantic.EXACT_MAX_ROWS`).
THREADED_MIN_ROWS = 20_000


def _threaded(specs: Sequence[LegSpec], ctx: LegContext) -> bool:
    """Whether a leg searches more than `THREADED_MIN_ROWS` eligible rows."""
    size = ctx.snapshot.size
    return any((size if (rows := ctx.rows(spec.filter)) is None else rows.count)
               > THREADED_MIN_ROWS for spec in specs)


def _parallel(scans: list[LegScan], ctx: LegContext, pool: Executor | None) -> list[LegBatch]:
    if pool is None or len(scans) < 2:
        found = [_search(op, ctx) for op in scans]
    else:
        futures = [pool.submit(_search, op, ctx) for op in scans[1:]]
        try:
            first = _search(scans[0], ctx)
        finally:
            rest = [f.result() for f in futures]
        found = [first, *rest]
    ids = _str_gather(ctx.snapshot, "id")
    return [LegBatch(op.spec.name, op.spec.kind, rowids, scores, competition_ranks(scores),
                     Strings(ids, rowids), op.spec.window, elapsed,
                     method=ctx.notes.get(op.spec.name, ("", ""))[0],
                     why=ctx.notes.get(op.spec.name, ("", ""))[1],
                     filter=ctx.filters.get(op.spec.name, ""))
            for op, (rowids, scores, elapsed) in zip(scans, found, strict=True)]


# -- features -----------------------------------------------------------------------------------


#: Up to this many rows, strings are read one by one (`StrView.take`); beyond, with the column's
#: bulk `take` (vectorised offsets).
SMALL_GATHER = 64


def _str_gather(snapshot: CollectionSnapshot, name: str) -> Callable[[np.ndarray], list[str]]:
    """Strings of column `name` for rowids (None, i.e. a missing `session_id`, as "")."""
    view: Sequence[str] | None = {"id": snapshot.ids, "doc_id": snapshot.doc_ids,
                                  "entity": snapshot.entities}.get(name)

    def gather(rows: np.ndarray) -> list[str]:
        if view is not None and rows.shape[0] <= SMALL_GATHER:
            if isinstance(view, StrView):  # never missing
                return view.take(rows.tolist())  # type: ignore[return-value]
            return [view[r] for r in rows.tolist()]  # a sequence of the snapshot contract
        values = snapshot.values(name, rows)
        if view is not None:  # never missing
            return values  # type: ignore[return-value]
        return ["" if v is None else str(v) for v in values]

    return gather


def gather_features(snapshot: CollectionSnapshot, rowids: np.ndarray, spec: FeatureSpec
                    ) -> Features:
    """The features `spec` asks for, of `rowids` (ascending), from the in-memory columns."""
    size = snapshot.size
    strings: dict[str, StringField] = {}
    if spec.strings:
        for name, kind in snapshot.info.fields.items():
            column: Any = snapshot.column(name)
            if kind is FieldType.STR:
                strings[name] = Coded(column.pool, column.codes(size)[rowids])
            elif kind is FieldType.LIST_STR:
                counts, codes = column.elements(rowids, size)
                strings[name] = CodedLists(column.pool, counts, codes)
    messages = spec.messages
    return Features(
        rowid=rowids, ids=Strings(_str_gather(snapshot, "id"), rowids),
        doc_ids=Strings(_str_gather(snapshot, "doc_id"), rowids),
        positions=np.asarray(snapshot.positions)[rowids],
        entities=Strings(_str_gather(snapshot, "entity"), rowids) if spec.entities else None,
        recency=None if spec.recency is None else row_timestamps(snapshot, spec.recency, rowids),
        strings=strings,
        session_ids=Strings(_str_gather(snapshot, "session_id"), rowids) if messages else None,
        compacted=_bools(snapshot, "compacted", rowids) if messages else None,
    )


def row_timestamps(snapshot: CollectionSnapshot, field: str, rowids: np.ndarray) -> np.ndarray:
    """float64[m] epoch seconds UTC of a timestamp field for each row; NaN when missing (the
    analyzer checks the type; dates are validated at ingest)."""
    if field == "created_at":
        return np.asarray(snapshot.created_at, dtype=np.float64)[rowids]
    column: Any = snapshot.column(field)
    return np.asarray(column.values(snapshot.size), dtype=np.float64)[rowids]


def _bools(snapshot: CollectionSnapshot, field: str, rowids: np.ndarray) -> np.ndarray:
    column: Any = snapshot.column(field)
    return np.asarray(column.values(snapshot.size), dtype=bool)[rowids]
