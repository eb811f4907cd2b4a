"""Merge: a plan's gathered leg batches -> `Result` (fusion, boosts, grouping, ordering, rows).

`merge` runs everything above the legs, once, over candidates that `run_legs` gathered — on
this database, or on shards by a coordinator. It reads no index: the candidates' features come
with the batches, and the rest comes from a `MergeSource` (session state, signal sums, lineage
rows, the final rows). `Database.execute` is exactly `merge(plan, db.run_legs(plan), db)`
(through the refill policy, `recallql.engine.refill`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from recallql.engine.candidates import Candidates, LineageDetail
from recallql.engine.executor import Execution, Gathered, run
from recallql.engine.explain import plan_node, rows_reasons
from recallql.engine.legs import LegBatches
from recallql.engine.metrics import LegMetrics, Output
from recallql.engine.models import ContextItem, Explain, Notice, Result, Row
from recallql.engine.operators.base import ExecutionContext, Operator
from recallql.engine.operators.fusion import Fusion, LegHits
from recallql.engine.operators.scan import EligibleScan, LegScan
from recallql.engine.plan import LegKind, QueryPlan
from recallql.engine.planner import build_tree
from recallql.engine.reasons import Reason
from recallql.engine.surrounding import Surrounding
from recallql.grammar.construct import trusted
from recallql.grammar.errors import printable
from recallql.grammar.timestamps import format_timestamp
from recallql.sessions.live_context import LiveContext
from recallql.sessions.models import SessionSnapshot, SessionState
from recallql.sessions.stored import RootResolver

_HIDDEN_FIELDS = {"rowid"}


class MergeSource(Protocol):
    """What `merge` needs besides the candidates. `recallql.Database` implements it; a
    coordinator implements it over its shards (the session store, and row fetch by the rowids
    its batches carry)."""

    def session_state(self, session_id: str, now_ts: float
                      ) -> tuple[SessionState, SessionSnapshot] | None:
        """The FOR SESSION session's boost inputs and snapshot at `now_ts`; None: not found."""
        ...

    def entity_sums(self, entities: list[str], names: list[str], now_ts: float
                    ) -> dict[str, dict[str, float]]:
        """Cross-session decayed signal sums `{name: {entity: sum}}` at `now_ts`."""
        ...

    def lineage_resolver(self, budget: int, as_of: float | None = None
                         ) -> AbstractContextManager[RootResolver]:
        """One statement's conversation-root resolver over a consistent read of the sessions:
        the stored roots, or a lineage walk of at most `budget` session rows on a store whose
        roots are not stored or `as_of` (epoch seconds UTC) a time before a session ended
        (`Sessions.resolver`)."""
        ...

    def fetch_rows(self, collection: str, rowids: np.ndarray, batch: int) -> list[dict[str, Any]]:
        """The stored fields of each row (as `CollectionSnapshot.fetch`), in `rowids` order;
        `batch` is the batch number of the leg batches the rowids came from."""
        ...

    def bm25_explanation(self, collection: str, terms: list[str], rowid: int, batch: int) -> str:
        """tantivy's BM25 explanation of `terms` for one row, as JSON text (EXPLAIN VERBOSE)."""
        ...

    def surrounding_rows(self, collection: str, rowids: np.ndarray, before: int, after: int,
                         filter_expr: Any, batch: int) -> list[Surrounding]:
        """`WITH CONTEXT`: each row's eligible items before and after it in its document, as
        `(offset, stored fields)` (`recallql.engine.surrounding`)."""
        ...


@dataclass(frozen=True)
class MergeOutcome:
    """A merge and what the refill policy reads of it.

    Attributes:
        result: the `Result` (an `Explain` for EXPLAIN plans).
        underfilled: some operator kept fewer rows than the page needs.
        cut: some leg filled its window (a deeper window could bring more rows).
        truncated: the result is a safe ranked prefix (lineage budget).
    """

    result: Result | Explain
    underfilled: bool
    cut: bool
    truncated: bool


def merge(plan: QueryPlan, leg_batches: LegBatches, source: MergeSource) -> Result | Explain:
    """Fuse, boost, group and order gathered candidates and fetch the page's rows.

    Args:
        plan: the statement's plan (`db.plan()`).
        leg_batches: the plan's leg batches (`db.run_legs(plan)`, or gathered from shards).
        source: session state, signal sums, lineage rows and row fetch (a `Database`).

    Returns:
        The `Result` (an `Explain` when the plan is an EXPLAIN).

    Raises:
        ExecutionError: an operator failed, naming it.
        ValueError: leg batches of another collection than the plan's, or without a leg the
            plan fuses.
    """
    return merge_outcome(plan, leg_batches, source).result


def merge_outcome(plan: QueryPlan, batches: LegBatches, source: MergeSource) -> MergeOutcome:
    """`merge`, with what the refill policy needs to decide on a deeper window."""
    if batches.collection != plan.collection:  # their rowids index another collection's rows
        raise ValueError(f"the leg batches are of collection {batches.collection!r}, the plan "
                         f"of {plan.collection!r}: merge a plan with its own legs "
                         "(db.run_legs(plan))")
    tree = build_tree(plan)
    notices = list(plan.notices)
    state, missing = _session_state(plan, source)
    if missing is not None:
        notices.append(Notice(code=Reason.SESSION_NOT_FOUND, message=missing))
    with _lineage(plan, source, found=state is not None) as (resolver, live):
        ctx = ExecutionContext(now_ts=plan.now, session=state[0] if state else None,
                               signals=source, lineage=resolver, live_context=live)
        ex = run(tree, ctx, _gathered(tree, batches))
    cands: Candidates = ex.value
    rows = _rows(cands, source, plan, batches.batch)
    if plan.context is not None and rows:
        rows = _with_context(plan, cands, rows, source, batches.batch)
    notices += [Notice(code=code, message=message)
                for code, message in (*batches.notices, *ex.notices)]
    result = trusted(Result, {  # fresh lists of models, a fresh dict, str and bool
        "statement": plan.statement, "collection": plan.collection, "rows": rows,
        "session_snapshot": state[1] if state else None, "warnings": dedupe(notices),
        "truncated": bool(ex.truncated), "stats": _stats(ex, plan),
        "timestamp_fields": list(plan.timestamp_fields)})
    out: Result | Explain = result if plan.explain is None else _explain(
        plan, tree, ex, result, _verbose(plan, cands, rows, source, batches.batch))
    return MergeOutcome(out, ex.underfilled, batches.cut, ex.truncated)


def _session_state(plan: QueryPlan, source: MergeSource
                   ) -> tuple[tuple[SessionState, SessionSnapshot] | None, str | None]:
    """The FOR SESSION session's state at the statement's `now`, and the `SESSION_NOT_FOUND`
    message when it has none: it does not exist, or (``AS OF t``) it started after `t`, so it
    did not exist yet then and the statement degrades as it did at `t`."""
    if plan.session_id is None:
        return None, None
    name = printable(plan.session_id)
    state = source.session_state(plan.session_id, plan.now)
    if state is None:
        return None, (f"session '{name}' does not exist (never created, or swept); ran "
                      "without the session boost")
    started = state[1].started_at
    if plan.as_of is not None and started > plan.as_of:
        return None, (f"session '{name}' did not exist yet at AS OF {format_timestamp(plan.now)}"
                      f" (it started at {format_timestamp(started.timestamp())}); ran without "
                      "the session boost")
    return state, None


@contextlib.contextmanager
def _lineage(plan: QueryPlan, source: MergeSource, found: bool
             ) -> Iterator[tuple[RootResolver | None, LiveContext | None]]:
    """The statement's lineage resolver (one memo and budget) and, under FOR SESSION, the live
    context, reading session rows through one consistent read. A FOR SESSION session that is
    not `found` (absent, or not started yet ``AS OF`` the statement's time) holds no context
    but its own id."""
    if not plan.walks_lineage:
        yield None, None
        return
    as_of = plan.now if plan.as_of is not None else None
    with source.lineage_resolver(plan.budget, as_of) as resolver:
        live = None
        if plan.session_id is not None:
            live = LiveContext.build(plan.session_id, resolver) if found \
                else LiveContext.absent(plan.session_id)
        yield resolver, live


def _gathered(tree: Operator, batches: LegBatches) -> dict[Operator, Gathered]:
    """The scans' outputs, from the batches (the legs by name)."""
    out: dict[Operator, Gathered] = {}
    fusion = _find(tree, Fusion)
    if fusion is not None:
        by_name = {b.name: b for b in batches.legs}
        for op in fusion.children:
            assert isinstance(op, LegScan)
            batch = by_name.get(op.leg)
            if batch is None:
                raise ValueError(f"the leg batches have no batch for leg {op.leg!r}")
            hits = LegHits(batch, batches.features)
            out[op] = Gathered(Output(hits, LegMetrics(batch.name, len(batch), batch.window,
                                                          batch.method, batch.why,
                                                          batch.filter)),
                               batch.time_ns)
    scan = _find(tree, EligibleScan)
    if scan is not None:
        out[scan] = Gathered(Output(Candidates(features=batches.features)), batches.scan_ns)
    return out


def _find(op: Operator, cls: type[Operator]) -> Any:
    while not isinstance(op, cls):
        if not op.children:
            return None
        op = op.children[0]
    return op


def _rows(cands: Candidates, source: MergeSource, plan: QueryPlan, batch: int) -> list[Row]:
    fetched = source.fetch_rows(plan.collection, cands.rowid, batch) if len(cands) else []
    score = cands.score().tolist()
    reasons = rows_reasons(cands)
    lineage = cands.details.get("lineage")
    roots = lineage.root if isinstance(lineage, LineageDetail) else None
    rows = []
    for i, stored in enumerate(fetched):
        fields = {k: v for k, v in stored.items() if k not in _HIDDEN_FIELDS}
        if plan.messages:  # stored values: validated
            rows.append(Row(id=stored["id"], collection=plan.collection, score=score[i],
                            fields=fields, reasons=reasons[i],
                            session_id=fields.get("session_id"),
                            message_id=fields.get("message_id"),
                            conversation_root=str(roots[i]) if roots is not None else None))
        else:  # a str id, a float score, a fresh dict and list
            rows.append(trusted(Row, {"id": stored["id"], "collection": plan.collection,
                                      "score": score[i], "fields": fields,
                                      "reasons": reasons[i]}))
    return rows


def _with_context(plan: QueryPlan, cands: Candidates, rows: list[Row], source: MergeSource,
                  batch: int) -> list[Row]:
    spec = plan.context
    assert spec is not None
    around = source.surrounding_rows(plan.collection, cands.rowid, spec.before, spec.after,
                                     plan.filter, batch)
    return [row.model_copy(update={"context": [_context_item(offset, stored, plan)
                                               for offset, stored in items]})
            for row, items in zip(rows, around, strict=True)]


def _context_item(offset: int, stored: dict[str, Any], plan: QueryPlan) -> ContextItem:
    fields = {k: v for k, v in stored.items() if k not in _HIDDEN_FIELDS}
    extra: dict[str, Any] = {}
    if plan.messages:
        extra = {"session_id": fields.get("session_id"), "message_id": fields.get("message_id")}
    return ContextItem(offset=offset, id=stored["id"], fields=fields, **extra)


def dedupe(notices: list[Notice]) -> list[Notice]:
    """The first notice of each code, in order."""
    seen: set[Reason] = set()
    out = []
    for n in notices:
        if n.code not in seen:
            seen.add(n.code)
            out.append(n)
    return out


def _stats(ex: Execution, plan: QueryPlan) -> dict[str, Any]:
    stats = dict(ex.stats)
    if plan.embed_ms is not None:
        stats["embed_ms"] = plan.embed_ms
    stats["window"] = plan.window
    stats["now"] = format_timestamp(plan.as_of if plan.as_of is not None else plan.now)
    return stats


def _explain(plan: QueryPlan, tree: Operator, ex: Execution, result: Result,
             details: dict[str, str]) -> Explain:
    spec = plan.explain
    assert spec is not None
    return Explain(statement=plan.statement, analyze=spec.analyze, verbose=spec.verbose,
                   format=spec.format, plan=plan_node(tree, ex.metrics, spec.analyze),
                   result=result, verbose_details=details)


def _verbose(plan: QueryPlan, cands: Candidates, rows: list[Row], source: MergeSource,
             batch: int) -> dict[str, str]:
    """tantivy's BM25 explanation for each row the (first) lexical leg matched (VERBOSE)."""
    terms = plan.lexical_terms()
    if plan.explain is None or not plan.explain.verbose or not terms:
        return {}
    leg = next(leg for leg in cands.legs if leg.kind is LegKind.LEXICAL)
    return {row.id: source.bm25_explanation(plan.collection, list(terms), int(cands.rowid[i]),
                                            batch)
            for i, row in enumerate(rows) if leg.rank[i] > 0}

