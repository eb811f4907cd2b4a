"""A shard: the only writer of the databases under its directory (a Ray actor at run time).

``<root>/shard-<i>/tenants/<tenant>/`` holds one recallql database per tenant (documents,
sessions, signals and messages together); ``<root>/shard-<i>/shared/`` holds this shard's share
of the shared collections' items. Databases open lazily and stay open; a restarted actor (Ray
`max_restarts`) reopens them from disk, where every committed batch is.

The class is plain Python (`recallql.cluster.runtime` wraps it with `ray.remote`), so its
behaviour is tested without Ray too. Ray runs one call at a time on an actor, so nothing writes
between a call's legs and the statistics it returns with them.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
import urllib.parse
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recallql.api import Database
from recallql.api import connect as connect_database
from recallql.cluster.bm25 import ShardStats, fieldnorm_code
from recallql.cluster.placement import CollectionDef, Placement
from recallql.cluster.planner import PlanContext, StalePlan
from recallql.cluster.terms import TERM_CACHE_ROWS, RowTerms
from recallql.cluster.wire import WireArray, array_from_wire, array_wire, dumps, loads, pack
from recallql.engine.legs import LegBatches
from recallql.engine.legs import run_legs as run_plan_legs
from recallql.engine.plan import LegKind, QueryPlan
from recallql.index.embedders import by_name, resolve
from recallql.index.errors import StoreError
from recallql.index.schema import CollectionInfo, make_info
from recallql.index.snapshot import CollectionSnapshot

#: Parsed plans a shard keeps, by their JSON text.
PLAN_CACHE = 64

#: What a tenant call may reach: `Database` methods, and those of its `sessions` and `messages`.
TENANT_METHODS: dict[str, frozenset[str]] = {
    "db": frozenset({"execute", "explain", "plan", "ingest", "delete", "collections",
                     "check", "session_state", "entity_sums"}),
    "sessions": frozenset({"create", "annotate", "signal", "signal_many", "close", "archive",
                           "snapshot", "get", "list", "verify_lineage"}),
    "messages": frozenset({"append", "extend"}),
}


#: The calls a tenant that has nothing written answers as an empty tenant database (`Shard.call`).
EMPTY_READS: dict[str, frozenset[str]] = {
    "db": frozenset({"execute", "explain", "plan", "collections", "session_state",
                     "entity_sums"}),
    "sessions": frozenset({"get", "list", "snapshot", "verify_lineage"}),
}


class UnknownTenant(LookupError):
    """A statement or read names a tenant that has no data on its shard."""


@dataclass(frozen=True)
class LexicalPart:
    """What a shard returns with a lexical leg for exact global BM25.

    Attributes:
        stats: the shard's N, T and n(t) for the leg's terms.
        tf: int64[m, t] each candidate's frequency of each query term (leg order);
        codes: int64[m] each candidate's field-length code (`fieldnorm_code`).
        cut_score: the shard-local BM25 of its last candidate (an unreturned row scores at
            most this locally); exhausted: the shard has no other matching row.
    """

    stats: ShardStats
    tf: np.ndarray
    codes: np.ndarray
    cut_score: float
    exhausted: bool

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its arrays as bytes (`wire.array_wire`)."""
        return (_lexical_part, (self.stats, array_wire(self.tf), array_wire(self.codes),
                                self.cut_score, self.exhausted))


def _lexical_part(stats: ShardStats, tf: WireArray, codes: WireArray, cut_score: float,
                  exhausted: bool) -> LexicalPart:
    return LexicalPart(stats, array_from_wire(tf), array_from_wire(codes), cut_score, exhausted)


def tenant_dir(tenant: str) -> str:
    """A tenant's directory name: ``t_`` and its percent-encoded name (any text is a tenant)."""
    return "t_" + urllib.parse.quote(tenant, safe="")


class Shard:
    """One shard's databases.

    Args:
        root: the cluster directory; index: this shard's number.
        embedder: what the databases' built-in collections and ``"default"`` collections embed
            with (as `recallql.connect`).
        clock: "now" in epoch seconds UTC for statements and session writes (tests pin it).
    """

    def __init__(self, root: str, index: int, embedder: object = "default",
                 clock: Callable[[], float] | None = None) -> None:
        self.root = Path(root)
        self.index = index
        self.dir = self.root / f"shard-{index}"
        (self.dir / "tenants").mkdir(parents=True, exist_ok=True)
        self._embedder = embedder
        self._clock = clock
        self._placement = Placement(self.root)
        self._tenants: dict[str, Database] = {}
        self._shared: Database | None = None
        self._terms: dict[str, RowTerms] = {}
        self._plans: OrderedDict[str, QueryPlan] = OrderedDict()
        self._keys: dict[str, tuple[CollectionInfo, int, object, str]] = {}
        self._legs_span = (0.0, 0.0)

    def pid(self) -> int:
        """The actor's process id (tests watch it change after a kill)."""
        return os.getpid()

    def legs_span(self) -> tuple[float, float]:
        """When the last `legs` call started and ended (`time.perf_counter` seconds: one clock
        for every process on a Linux machine; benchmarks)."""
        return self._legs_span

    def cpu_seconds(self) -> float:
        """CPU time (user + system, seconds) this shard's process has used (benchmarks)."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    # -- databases ------------------------------------------------------------------------------

    def _open(self, path: Path | None, shared: bool) -> Database:
        db = connect_database(path, embedder=self._embedder, clock=self._clock)
        for coll in self._placement.collections():
            if coll.shared == shared:
                _create(db, coll, self._embedder)
        return db

    def _tenant(self, tenant: str, create: bool) -> Database:
        db = self._tenants.get(tenant)
        if db is not None:
            return db
        path = self.dir / "tenants" / tenant_dir(tenant)
        if not create and not path.exists():
            raise UnknownTenant(f"tenant {tenant!r} has no data yet (shard {self.index})")
        db = self._tenants[tenant] = self._open(path, shared=False)
        return db

    def shared(self) -> Database:
        """This shard's database of shared-collection items (opened on first use)."""
        if self._shared is None:
            self._shared = self._open(self.dir / "shared", shared=True)
        return self._shared

    def tenants(self) -> list[str]:
        """Tenants with a database on this shard (on disk), by directory name order."""
        return sorted(urllib.parse.unquote(p.name[2:]) for p in (self.dir / "tenants").iterdir()
                      if p.name.startswith("t_"))

    def create_collection(self, name: str) -> None:
        """Create a recorded collection in every database it belongs in on this shard."""
        coll = self._placement.collection(name)
        if coll is None:
            raise KeyError(f"collection {name!r} is not recorded in the placement table")
        if coll.shared:
            _create(self.shared(), coll, self._embedder)
            return
        for tenant in self.tenants():
            _create(self._tenant(tenant, create=False), coll, self._embedder)

    def collection_info(self, name: str) -> CollectionInfo | None:
        """A per-tenant collection's schema in this shard's tenant databases: the first
        tenant's (by name), else the one its recorded definition gives a new tenant; None
        when no tenant here holds it and it is not recorded (or its embedder cannot be built
        here)."""
        for tenant in self.tenants()[:1]:
            infos = self._tenant(tenant, create=False).collections()
            return next((info for info in infos if info.name == name), None)
        coll = self._placement.collection(name)
        if coll is None or coll.shared:
            return None
        spec = dict(coll.definition)
        which = spec.pop("embedder", "default")
        try:
            embedder = resolve(self._embedder if which == "default" else
                               None if which is None else by_name(which), spec.get("dim"))
            dim = spec.get("dim") or (None if embedder is None else embedder.dim)
            return make_info(name, spec["text_fields"], spec["fields"], int(dim or 1),
                             None if embedder is None else embedder.name)
        except (StoreError, TypeError, ValueError):
            return None

    # -- tenant calls ---------------------------------------------------------------------------

    def call(self, tenant: str, target: str, method: str, args: Sequence[Any],
             kwargs: Mapping[str, Any], create: bool = False) -> Any:
        """Run ``db.<method>`` (target ``db``), ``db.sessions.<method>`` or
        ``db.messages.<method>`` on a tenant's database.

        A read (`EMPTY_READS`) of a tenant that has no database here is answered by an empty
        tenant database (in memory, with the recorded per-tenant collections; nothing is
        created on disk): no rows, or the error such a database gives.

        Raises:
            UnknownTenant: the tenant has no database here, `create` is false and the call is
                no read.
            ValueError: a method the cluster does not route.
        """
        if method not in TENANT_METHODS.get(target, frozenset()):
            raise ValueError(f"{target}.{method} is not a cluster operation")
        if not create and tenant not in self._tenants and method in EMPTY_READS.get(
                target, frozenset()) and not (self.dir / "tenants" / tenant_dir(tenant)).exists():
            empty = self._open(None, shared=False)
            try:
                return _run(empty, target, method, args, kwargs)
            finally:
                empty.close()
        return _run(self._tenant(tenant, create), target, method, args, kwargs)

    def release(self, tenant: str) -> str:
        """Close a tenant's database and return its directory (moving a tenant)."""
        db = self._tenants.pop(tenant, None)
        if db is not None:
            db.close()
        return str(self.dir / "tenants" / tenant_dir(tenant))

    def adopt(self, tenant: str, source: str) -> None:
        """Take over a tenant's database directory released by another shard."""
        target = self.dir / "tenants" / tenant_dir(tenant)
        if target.exists():
            raise FileExistsError(f"tenant {tenant!r} already has a database on shard "
                                  f"{self.index}")
        shutil.move(source, target)

    # -- shared collections (scatter-gather) ----------------------------------------------------

    def plan(self, text: str, args: Sequence[Any], params: Mapping[str, Any]) -> str:
        """A shared-collection statement's plan as JSON (every shard has the same catalog)."""
        return self.shared().plan(text, *args, **params).model_dump_json()

    def plan_context(self, collection: str) -> PlanContext | None:
        """What the coordinator needs to plan statements over a shared collection itself
        (`recallql.cluster.planner`); None when this shard does not hold it."""
        db = self.shared()
        if collection not in {info.name for info in db.collections()}:
            return None
        return self._context(db, db.snapshot(collection))

    @staticmethod
    def _context(db: Database, snap: CollectionSnapshot) -> PlanContext:
        return PlanContext.of(snap.info, snap.analyzer_version,
                              tuple(db.sessions.policy.bounds), db.embedder(snap.info.name)
                              is not None)

    def _key(self, db: Database, snap: CollectionSnapshot) -> str:
        """The context key of `snap`'s collection (recomputed when its schema object, analyser
        version or embedder changes)."""
        name = snap.info.name
        embedder = db.embedder(name)
        found = self._keys.get(name)
        if found is not None and found[0] is snap.info and found[1] == snap.analyzer_version \
                and found[2] is embedder:
            return found[3]
        key = self._context(db, snap).key
        self._keys[name] = (snap.info, snap.analyzer_version, embedder, key)
        return key

    def legs(self, request: bytes) -> bytes:
        """Run a plan's legs on this shard's share, on one snapshot.

        Args:
            request: `wire.dumps` of (plan JSON, the semantic legs' query vectors by leg name
                (float32[d], sent apart from the JSON: parsed as floats they cost the most of
                it; None: in the JSON), this shard's window per direct leg or None: the
                plan's, rows to send ahead per leg, the plan's context key or None). A
                window below the plan's is raised to the plan's when the plan has a context
                leg and this share holds documents of several items (the context leg's
                neighbours are looked up around the direct legs' rows, so it would see fewer);
                each returned leg batch's ``window`` is the window it ran with.

        Returns:
            `wire.dumps` of: the `LegBatches` (`wire.pack`); for each lexical leg what exact
            global BM25 needs (`LexicalPart`); and the stored fields of each leg's first
            `prefetch` rows, as stored records (`CollectionSnapshot.fetch_records`, with the
            schema's field names: the page's rows are usually among them, one round trip less).

        Raises:
            StalePlan: the plan was made with another context than this shard's (its key).
        """
        start = time.perf_counter()
        plan_json, vectors, windows, prefetch, key = loads(request)
        plan = self._parsed(plan_json)
        db = self.shared()
        snap = db.snapshot(plan.collection, as_of=plan.now if plan.as_of is not None else None)
        if key is not None and (mine := self._key(db, snap)) != key:
            raise StalePlan(self.index, mine)
        if windows or vectors:
            plan = _adjusted(plan, vectors or {}, windows or {}, snap)
        batches = run_plan_legs(plan, snap, None)  # one thread: the shards run in parallel
        parts = {}
        for spec, batch in zip(plan.legs, batches.legs, strict=True):
            if spec.kind is LegKind.LEXICAL:
                parts[spec.name] = self._lexical(snap, spec.terms, spec.term_counts,
                                                 batch.rowids, batch.scores, spec.window)
        wanted = _ahead(batches, prefetch)  # records: the coordinator decodes the page's
        records = snap.fetch_records(wanted) if wanted.shape[0] else []
        out = dumps((pack(batches), parts, (snap.field_names, records)))
        self._legs_span = (start, time.perf_counter())
        return out

    def _parsed(self, plan_json: str) -> QueryPlan:
        """The plan of a JSON text (the last `PLAN_CACHE` parsed plans are kept by text)."""
        plan = self._plans.get(plan_json)
        if plan is None:
            plan = self._plans[plan_json] = QueryPlan.model_validate_json(plan_json)
            if len(self._plans) > PLAN_CACHE:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(plan_json)
        return plan

    def _lexical(self, snap: CollectionSnapshot, terms: Sequence[str],
                 counts: Sequence[int], rowids: np.ndarray, scores: np.ndarray,
                 window: int) -> LexicalPart:
        docs, tokens, freq = snap.bm25_statistics(terms)
        stats = ShardStats(int(docs or 0), tokens, dict(zip(terms, freq, strict=True)))
        tf, codes = self._row_terms(snap, rowids).frequencies(rowids, terms)
        cut = float(scores[-1]) if scores.shape[0] else 0.0
        return LexicalPart(stats, tf, codes, cut, exhausted=rowids.shape[0] < window)

    def _row_terms(self, snap: CollectionSnapshot, rowids: np.ndarray) -> RowTerms:
        """The collection's `RowTerms`, knowing `rowids`: the stored texts of rows not seen
        before re-analysed with the index's analyser, as tantivy indexed them (kept: rows never
        change; past `TERM_CACHE_ROWS` rows the cache starts again)."""
        name = snap.info.name
        known = self._terms.get(name)
        missing = known.missing(rowids) if known is not None else rowids.tolist()
        if known is None or len(known) + len(missing) > TERM_CACHE_ROWS:
            known = self._terms[name] = RowTerms()
            missing = rowids.tolist()
        if missing:
            fields = snap.info.text_fields
            for row in snap.fetch(np.asarray(missing, np.int64)):
                text = "\n".join(row[f] for f in fields if row[f])
                tokens = Counter(snap.analyze(text) if text else [])
                known.add(row["rowid"], fieldnorm_code(sum(tokens.values())), tokens.items())
        return known

    def fetch(self, collection: str, rowids: Sequence[int]) -> list[dict[str, Any]]:
        """Stored fields of rows of a shared collection (`CollectionSnapshot.fetch`)."""
        return self.shared().snapshot(collection).fetch(np.asarray(rowids, np.int64))

    def bm25_explanation(self, collection: str, terms: list[str], rowid: int) -> str:
        """tantivy's explanation of a row's BM25 with this shard's statistics."""
        return self.shared().snapshot(collection).explain_bm25(terms, rowid)

    def shared_call(self, method: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """``ingest`` / ``delete`` / ``reindex`` on this shard's share."""
        if method not in {"ingest", "delete", "reindex"}:
            raise ValueError(f"{method} is not a shared-collection operation")
        if method == "reindex":
            self._terms.clear()
        return getattr(self.shared(), method)(*args, **kwargs)

    def close(self) -> None:
        """Close every open database."""
        for db in self._tenants.values():
            db.close()
        self._tenants.clear()
        if self._shared is not None:
            self._shared.close()
            self._shared = None
        self._placement.close()


def _run(db: Database, target: str, method: str, args: Sequence[Any],
         kwargs: Mapping[str, Any]) -> Any:
    """``db.<method>``, ``db.sessions.<method>`` or ``db.messages.<method>``."""
    obj: Any = db if target == "db" else getattr(db, target)
    out = getattr(obj, method)(*args, **kwargs)
    return list(out) if method == "list" else out


def _adjusted(plan: QueryPlan, vectors: Mapping[str, np.ndarray], windows: Mapping[str, int],
              snap: CollectionSnapshot) -> QueryPlan:
    """`plan` with the legs' query vectors put back and the direct legs' windows set to
    `windows` (never below the plan's when a context leg would look for neighbours around
    fewer rows: see `Shard.legs`)."""
    floor = any(leg.kind is LegKind.CONTEXT for leg in plan.legs) and len(snap.neighbours) > 0
    legs = []
    for leg in plan.legs:
        update: dict[str, Any] = {}
        if leg.name in vectors:
            update["vector"] = vectors[leg.name]
        window = windows.get(leg.name, leg.window)
        if leg.kind is not LegKind.CONTEXT and window != leg.window \
                and not (floor and window < leg.window):
            update["window"] = window
        legs.append(leg.model_copy(update=update) if update else leg)
    if all(a is b for a, b in zip(legs, plan.legs, strict=True)):
        return plan
    return plan.model_copy(update={"legs": tuple(legs)})


def _ahead(batches: LegBatches, count: int) -> np.ndarray:
    """The rows to send ahead: each leg's first `count` (ascending rowids), or the first
    `count` eligible rows of a plan without legs."""
    if count <= 0:
        return np.zeros(0, np.int64)
    if not batches.legs:
        return batches.features.rowid[:count]
    return np.unique(np.concatenate([b.rowids[:count] for b in batches.legs]))


def _create(db: Database, coll: CollectionDef, default: object) -> None:
    """Create (or check) a recorded collection in `db`; ``"default"`` means the shard's
    embedder."""
    spec = dict(coll.definition)
    name = spec.pop("embedder", "default")
    embedder = default if name == "default" else by_name(name)
    if name not in (None, "default") and embedder is None:
        raise StoreError(f"collection {coll.name!r}: unknown embedder {name!r} (use "
                         "'default', None, or a built-in embedder's name)")
    db.create_collection(coll.name, embedder=embedder, **spec)

