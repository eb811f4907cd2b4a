"""The query engine: statement text -> `Result` / `Explain` (SPEC §3, §4, §5).

`QueryEngine.execute` parses (cached), binds parameters, analyses against the catalog, plans,
executes with a per-statement context (snapshot, `now`, session state, signals, embedder,
lineage), and builds result rows with their reasons from the same execution.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from recallql.engine import info as info_statements
from recallql.engine.analyzer import QuerySpec, analyze
from recallql.engine.candidates import Candidates
from recallql.engine.executor import run
from recallql.engine.explain import plan_node, row_reasons
from recallql.engine.models import Explain, Notice, Result, Row, SessionSnapshot
from recallql.engine.operators.base import ExecutionContext
from recallql.engine.planner import Plan, plan
from recallql.engine.reasons import Reason
from recallql.grammar import bind, parse
from recallql.grammar import statements as s
from recallql.grammar.errors import QuerySemanticError
from recallql.grammar.timestamps import format_timestamp
from recallql.index import filters as f
from recallql.index.history import RetentionLoss
from recallql.index.schema import CollectionInfo
from recallql.sessions.lifecycle import Sessions
from recallql.sessions.live_context import LiveContext

#: Deeper re-runs for grouping stop at this candidate window.
MAX_WINDOW = 10_000
MESSAGES = "messages"
_HIDDEN_FIELDS = {"rowid"}


class Backend(Protocol):
    """What the engine needs of a database (implemented by `recallql.api.Database`)."""

    sessions: Sessions

    def collections(self) -> list[CollectionInfo]: ...

    def snapshot(self, collection: str, as_of: float | None = None) -> Any: ...

    def embedder(self, collection: str) -> Callable[[list[str]], np.ndarray] | None: ...

    def read_transaction(self) -> Any: ...


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
    """

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time) -> None:
        self._db = backend
        self._clock = clock
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    # -- entry points --------------------------------------------------------------------------

    def execute(self, text: str | s.StatementBase, /, *args: Any, **params: Any
                ) -> Result | Explain:
        """Run one statement. EXPLAIN statements return an `Explain`, others a `Result`.

        Raises:
            QuerySyntaxError, QuerySemanticError, ParameterError: mistakes in the statement.
        """
        if isinstance(text, str):
            stmt = parse(text)
        elif isinstance(text, s.StatementBase):
            stmt = text
        else:
            raise TypeError(f"a statement is a str (or a parsed statement), not "
                            f"{type(text).__name__}")
        bound = bind(stmt, *args, **params)
        if isinstance(bound, s.Explain):
            return self.explain(bound, analyze=bound.analyze, verbose=bound.verbose)
        if isinstance(bound, s.Search | s.Retrieve):
            return self._query(bound)[0]
        return info_statements.run(self._db, bound, self._clock())

    def explain(self, stmt: s.Explain | s.Search | s.Retrieve, *, analyze: bool = False,
                verbose: bool = False) -> Explain:
        """Run a SEARCH/RETRIEVE and return the plan, per-operator stats and rows with reasons."""
        inner = stmt.statement if isinstance(stmt, s.Explain) else stmt
        fmt = (stmt.format if isinstance(stmt, s.Explain) else None) or "text"
        result, ran, stats, details = self._query(inner, verbose=verbose)
        return Explain(statement=inner.to_text(), analyze=analyze, verbose=verbose, format=fmt,
                       plan=plan_node(ran.root, stats, analyze), result=result,
                       verbose_details=details)

    # -- SEARCH / RETRIEVE ---------------------------------------------------------------------

    def _query(self, stmt: s.Search | s.Retrieve, verbose: bool = False
               ) -> tuple[Result, Plan, Any, dict[str, str]]:
        catalog = {c.name: c for c in self._db.collections()}
        spec = analyze(stmt, catalog, self._db.sessions.policy.bounds.keys())
        info = spec.collection
        messages = is_messages(info)
        if messages:
            spec = _searchable_messages(spec)
        embedder = self._db.embedder(info.name)
        if spec.using == "semantic" and spec.vector is None and embedder is None:
            raise QuerySemanticError(
                f"collection '{info.name}' has no embedder for USING SEMANTIC",
                text=stmt.source, span=tuple(stmt.using.span),
                hint="pass a query vector with NEAR :v, or attach one with db.set_embedder()")
        now_ts = spec.as_of.timestamp() if spec.as_of is not None else self._clock()
        snap = self._db.snapshot(info.name, as_of=now_ts if spec.as_of is not None else None)
        with self._db.read_transaction() as conn:
            ctx, snapshot = self._context(spec, snap, now_ts, embedder, conn, messages)
            embed_ms = _embed_ahead(ctx, spec)
            ran, out, stats = self._run(spec, ctx, snap, embedder is not None, messages)
            rows = self._rows(out, snap, info, messages)
        if embed_ms is not None:
            ctx.stats["embed_ms"] = embed_ms
        details = _verbose(snap, ran, rows, out) if verbose else {}
        notices = [Notice(code=c, message=m) for c, m in (*ran.notices, *ctx.notices.items())]
        if snap.retention_loss is not None:
            notices.append(_retention_notice(snap.retention_loss))
        result = Result(statement=stmt.to_text(), collection=info.name, rows=rows,
                        session_snapshot=snapshot, warnings=_dedupe(notices),
                        truncated=ctx.truncated, stats=_stats(ctx, ran, spec.as_of, now_ts))
        return result, ran, stats, details

    def _context(self, spec: QuerySpec, snap: Any, now_ts: float, embedder: Any, conn: Any,
                 messages: bool) -> tuple[ExecutionContext, SessionSnapshot | None]:
        sessions = self._db.sessions
        ctx = ExecutionContext(snapshot=snap, now_ts=now_ts, signals=sessions,
                               embed=self._embed_fn(spec.collection.name, embedder))
        snapshot = None
        if spec.session_id is not None:
            found = sessions.state(spec.session_id, now_ts)
            if found is None:
                ctx.notice(Reason.SESSION_NOT_FOUND,
                           f"session '{spec.session_id}' does not exist (never created, or "
                           "swept); ran without the session boost")
            else:
                ctx.session, snapshot = found
        if messages:  # a statement's resolver: stored roots (or the walk on an older store)
            ctx.services["lineage"] = lambda budget: sessions.resolver(conn, budget)
        return ctx, snapshot

    def _run(self, spec: QuerySpec, ctx: ExecutionContext, snap: Any, can_embed: bool,
             messages: bool) -> tuple[Plan, Candidates, Any]:
        window = spec.window
        while True:
            ran = plan(spec, snap.analyze, can_embed, window, messages)
            ctx.stats.clear()
            ctx.notices = {k: v for k, v in ctx.notices.items() if k is Reason.SESSION_NOT_FOUND}
            ctx.truncated = False
            if "lineage" in ctx.services:  # a fresh memo and budget per attempt
                _start_lineage(ctx, spec)
            out, stats = run(ran.root, ctx)
            legs_cut = any(v["rows"] >= v["window"] for v in ctx.stats.get("legs", {}).values())
            if not (ctx.stats.get("underfilled") and legs_cut and not ctx.truncated):
                return ran, out, stats
            if ran.window >= min(MAX_WINDOW, snap.size):
                if ran.window >= MAX_WINDOW:
                    ctx.notice(Reason.WINDOW_EXHAUSTED,
                               f"grouping needed more than {MAX_WINDOW} candidates per leg; the "
                               "page may be short")
                return ran, out, stats
            window = min(ran.window * 4, MAX_WINDOW)

    def _embed_fn(self, collection: str, embedder: Any) -> Callable[[str], np.ndarray] | None:
        if embedder is None:
            return None

        def embed(text: str) -> np.ndarray:
            key = (collection, text)
            vec = self._query_vectors.get(key)
            if vec is None:
                vec = np.asarray(embedder([text]), dtype=np.float32)[0]
                self._query_vectors[key] = vec
                if len(self._query_vectors) > 256:
                    self._query_vectors.popitem(last=False)
            return vec

        return embed

    def _rows(self, cands: Candidates, snap: Any, info: CollectionInfo, messages: bool
              ) -> list[Row]:
        fetched = snap.fetch(cands.rowid) if len(cands) else []
        score = cands.score()
        roots = cands.details.get("lineage_root")
        rows = []
        for i, stored in enumerate(fetched):
            fields = {k: v for k, v in stored.items() if k not in _HIDDEN_FIELDS}
            extra: dict[str, Any] = {}
            if messages:
                extra = {"session_id": fields.get("session_id"),
                         "message_id": fields.get("message_id"),
                         "conversation_root": roots[i] if roots is not None else None}
            rows.append(Row(id=stored["id"], collection=info.name, score=float(score[i]),
                            fields=fields, reasons=row_reasons(cands, i), **extra))
        return rows


def _embed_ahead(ctx: ExecutionContext, spec: QuerySpec) -> float | None:
    """Embed the MATCHING text before the plan runs (the vector is cached for the statement), so
    the semantic leg's EXPLAIN ANALYZE time is the scan, and the embedding — including a first
    model load — is reported on its own as `embed_ms`."""
    if ctx.embed is None or spec.text is None or spec.vector is not None \
            or spec.using == "lexical":
        return None
    start = time.perf_counter()
    ctx.embed(spec.text)
    return round((time.perf_counter() - start) * 1000.0, 3)


def _start_lineage(ctx: ExecutionContext, spec: QuerySpec) -> None:
    """A statement's lineage resolver (one memo; budget B for walks, where any remain) and,
    under FOR SESSION, the live context, from `ctx.services["lineage"]`."""
    resolver = ctx.services["lineage"](spec.budget)
    ctx.services["resolver"] = resolver
    if spec.session_id is not None:
        ctx.services["live_context"] = LiveContext.build(spec.session_id, resolver)


def _searchable_messages(spec: QuerySpec) -> QuerySpec:
    """AND the never-searchable rule (rewound messages: active=0, compacted=0) into the filter."""
    searchable = f.Or((f.Cmp("active", "=", True), f.Cmp("compacted", "=", True)))
    combined = searchable if spec.filter is None else f.And((spec.filter, searchable))
    return dataclasses.replace(spec, filter=combined)


def _retention_notice(loss: RetentionLoss) -> Notice:
    """`AS_OF_BEYOND_RETENTION`: rows deleted after the AS OF time that were already purged."""
    exact = "" if loss.exact_from is None else \
        f"; AS OF is exact from {format_timestamp(loss.exact_from)} on"
    return Notice(code=Reason.AS_OF_BEYOND_RETENTION, message=(
        f"AS OF {format_timestamp(loss.at)}: {loss.lost} row(s) deleted since then are past the "
        f"retention window and were purged, so they are not shown{exact} (run `recallql vacuum` "
        "less often, or connect with a longer retention, to keep more history)"))


def _dedupe(notices: list[Notice]) -> list[Notice]:
    seen: set[Reason] = set()
    out = []
    for n in notices:
        if n.code not in seen:
            seen.add(n.code)
            out.append(n)
    return out


def _stats(ctx: ExecutionContext, ran: Plan, as_of: datetime | None, now_ts: float
           ) -> dict[str, Any]:
    stats = {k: v for k, v in ctx.stats.items() if k != "underfilled"}
    stats["window"] = ran.window
    now = as_of if as_of is not None else datetime.fromtimestamp(now_ts, tz=UTC)
    stats["now"] = format_timestamp(now)
    return stats


def _verbose(snap: Any, ran: Plan, rows: list[Row], cands: Candidates) -> dict[str, str]:
    """tantivy's BM25 explanation for each row the lexical leg matched (EXPLAIN VERBOSE)."""
    if not ran.terms:
        return {}
    out = {}
    for i, row in enumerate(rows):
        if cands.lex_rank[i] > 0:
            out[row.id] = snap.explain_bm25(list(ran.terms), int(cands.rowid[i]))
    return out
