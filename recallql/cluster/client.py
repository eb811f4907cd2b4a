"""The cluster's coordinator: `connect()` and `Cluster` (docs/cluster.md).

The coordinator is stateless (routing reads the placement table, `recallql.cluster.placement`):
it parses each statement and routes it — to the one shard that owns the statement's tenant
(tenant-routed: the statement runs whole there, so EXPLAIN, sessions and lineage are a single
database's), or, for a shared collection, to every shard (scatter-gather,
`recallql.cluster.gather`). Writes route the same way: items by their tenant, or by a hash of
their id for shared collections; sessions by their owner (``agent_id``); messages by their
session's owner.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from recallql.cluster.gather import GatherSource, gather_legs
from recallql.cluster.placement import CollectionDef, Placement, item_shard
from recallql.cluster.planner import PlanContext, Planner, StalePlan
from recallql.cluster.routed import (
    ClusterMessages,
    ClusterSessions,
    ClusterWriteReport,
    grouped,
    renumbered,
)
from recallql.cluster.runtime import ClusterError, start
from recallql.cluster.shard import EMPTY_READS
from recallql.cluster.transport import InProcess, RayShards, Then, Transport
from recallql.engine.analyzer import analyze
from recallql.engine.info import no_session_error
from recallql.engine.models import Explain, Result
from recallql.engine.plan import ExplainSpec, QueryPlan
from recallql.engine.refill import run_statement
from recallql.grammar import bind, did_you_mean, parse
from recallql.grammar import statements as st
from recallql.grammar.errors import QuerySemanticError
from recallql.grammar.nodes import And, Comparison, StringLiteral
from recallql.index.changes import delete_args
from recallql.index.errors import IngestError, StoreError
from recallql.index.items import validate as validate_items
from recallql.index.schema import BUILTIN_COLLECTIONS, CollectionInfo
from recallql.sessions.input import many


def connect(address: str | None = None, shards: int = 4, path: str | Path | None = None, *,
            embedder: object = "default", routing_field: str = "agent_id",
            clock: Callable[[], float] | None = None, num_cpus: int | None = None,
            object_store_mb: int = 200, isolated: bool = True,
            in_process: bool = False) -> Cluster:
    """Open a recallql cluster: shard actors on Ray, each the only writer of its databases.

    Args:
        address: a running Ray instance's address (``recallql cluster serve`` prints it); None
            starts a local Ray instance in this process (loopback only, no dashboard).
        shards: shard actors of a new cluster (an existing one keeps the shards it has; use
            `Cluster.add_shard` to grow it).
        path: the cluster directory (created when missing); None: a temporary one, removed by
            `close`. With `address`, the directory the server was started on.
        embedder: what the shards' ``"default"`` collections embed with (as
            `recallql.connect`; a callable must be picklable).
        routing_field: the declared field whose ``= value`` in a WHERE names the tenant.
        clock: "now" in epoch seconds UTC for every shard (tests pin it; picklable).
        num_cpus, object_store_mb: the local Ray instance's CPUs and object store (MB).
        isolated: refuse to start Ray when the network namespace has an interface other than
            loopback (Ray's servers listen on every interface; run under ``unshare -n``).
        in_process: no Ray: the shards are objects in this process, called one after another
            (the same routing and scatter-gather; for tests and development).

    Raises:
        ClusterError: Ray is missing, the process is not isolated, or a shard is not running.
    """
    if shards < 1:
        raise ClusterError(f"a cluster needs at least one shard, got shards={shards}")
    owned = path is None
    root = Path(tempfile.mkdtemp(prefix="recallql-cluster-") if path is None else path)
    root.mkdir(parents=True, exist_ok=True)
    placement = Placement(root)
    count = placement.shards() if address is not None else placement.ensure_shards(shards)
    transport: Transport
    if in_process:
        transport = InProcess(root, embedder, clock)
    else:
        transport = RayShards(start(num_cpus=num_cpus, object_store_mb=object_store_mb,
                                    isolated=isolated, address=address),
                              root, embedder, clock, owner=address is None)
    for i in range(count):
        transport.add(i)
    cluster = Cluster(transport, root, placement, routing_field, owns_dir=owned, clock=clock)
    cluster.wait_ready()
    return cluster


class Cluster:
    """A connection to a recallql cluster. Use `connect`. A context manager.

    Attributes:
        root: the cluster directory; placement: its placement table (`Placement`); sessions,
            messages: the routed session and message API.
    """

    def __init__(self, transport: Transport, root: Path, placement: Placement,
                 routing_field: str, *, owns_dir: bool,
                 clock: Callable[[], float] | None = None) -> None:
        self.transport = transport
        self.planner = Planner(self._plan_context, clock)
        self.root = root
        self.placement = placement
        self._routing = routing_field
        self._owns_dir = owns_dir
        self.sessions = ClusterSessions(self)
        self.messages = ClusterMessages(self)
        self._closed = False
        self._schemas: dict[tuple[str, bool], CollectionInfo] = {}

    def check_open(self) -> None:
        """Refuse a call on a closed connection (as a closed `recallql.Database` does).

        Raises:
            StoreError: `close` was called.
        """
        if self._closed:
            raise StoreError(f"the cluster {self.root} is closed")

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def shards(self) -> int:
        """Number of shards."""
        return self.transport.count

    def actor(self, index: int) -> Any:
        """Shard `index`: its Ray actor handle (``ray.kill(handle, no_restart=False)`` restarts
        it), or the `Shard` object in process."""
        return self.transport.handle(index)

    def scatter(self, method: str, shards: Sequence[int], args: Sequence[tuple[Any, ...]],
                *, write: bool = False, then: Then | None = None) -> list[Any]:
        """Call `method` on shards with their arguments and wait for every result (reads are
        retried across an actor restart, writes are not); `then(position, result)`, when
        given, is applied to each result as it arrives (`Transport.scatter`)."""
        self.check_open()
        return self.transport.scatter(method, shards, args, write=write, then=then)

    def wait_ready(self) -> list[int]:
        """Wait until every shard answers; returns their process ids."""
        return self.scatter("pid", range(self.shards), [()] * self.shards)

    def tenant_call(self, tenant: str, target: str, method: str, args: Sequence[Any] = (),
                    kwargs: Mapping[str, Any] | None = None, *, create: bool = False,
                    write: bool = False) -> Any:
        """Run a `Shard.call` on the shard that owns `tenant`. A read of a tenant nothing was
        written for runs on shard 0, which answers as an empty tenant database
        (`Shard.call`; the tenant is neither placed nor created).

        Raises:
            ClusterError: a write (other than one that creates the tenant) for an unknown
                tenant (nothing was ever written for it).
            StoreError: the connection is closed.
        """
        self.check_open()
        shard = self.placement.tenant_shard(tenant, place=create)
        if shard is None and not write and method in EMPTY_READS.get(target, frozenset()):
            shard = 0
        if shard is None:
            raise ClusterError(f"unknown tenant {tenant!r}: nothing was written for it yet")
        return self.scatter("call", [shard], [(tenant, target, method, tuple(args),
                                               dict(kwargs or {}), create)], write=write)[0]

    # -- statements -----------------------------------------------------------------------------

    def execute(self, text: str, /, *args: object, tenant: str | None = None,
                **params: object) -> Result | Explain:
        """Run one statement, routed by tenant (or scatter-gather over a shared collection).

        The tenant is `tenant`, else the routing field's ``= value`` in the WHERE, else the
        owner of the ``FOR SESSION`` session. A tenant nothing was written for answers as an
        empty tenant database (no rows, or that database's error).

        Raises:
            QueryError: a mistake in the statement (a caret under the token), or no tenant
                to route it to.
            ClusterError: a shard lost.
            StoreError: the connection is closed.
        """
        self.check_open()
        stmt = bind(parse(text), *args, **params)
        owner = self._route(stmt, tenant)
        if owner is not None:
            return self.tenant_call(owner, "db", "execute", (text, *args), params)  # type: ignore[no-any-return]
        assert isinstance(stmt, st.Explain | st.Search | st.Retrieve)  # `_route` checked
        return self._gathered(stmt, text, args, params, None)

    query = execute

    def explain(self, text: str, /, *args: object, tenant: str | None = None,
                analyze: bool = False, verbose: bool = False, **params: object) -> Explain:
        """EXPLAIN a SEARCH or RETRIEVE (routed as `execute`). On a shared collection the plan
        is the coordinator's: legs over every shard, then fusion and boosts once.

        Raises:
            QueryError, ClusterError, StoreError: as `execute`.
        """
        self.check_open()
        stmt = bind(parse(text), *args, **params)
        owner = self._route(stmt, tenant)
        if owner is not None:
            return self.tenant_call(owner, "db", "explain", (text, *args),  # type: ignore[no-any-return]
                                    {"analyze": analyze, "verbose": verbose, **params})
        spec = ExplainSpec(analyze=analyze, verbose=verbose)
        assert isinstance(stmt, st.Explain | st.Search | st.Retrieve)  # `_route` checked
        out = self._gathered(stmt, text, args, params, spec)
        assert isinstance(out, Explain)
        return out

    def plan(self, text: str, /, *args: object, tenant: str | None = None,
             **params: object) -> QueryPlan:
        """The plan of a statement, routed as `execute`: a tenant's database's plan, or over
        a shared collection the coordinator's own (`recallql.cluster.planner`), else shard
        0's (every shard holds the same shared catalog).

        Raises:
            QueryError: a mistake in the statement, or no tenant to route it to.
            StoreError: the connection is closed.
        """
        self.check_open()
        stmt = bind(parse(text), *args, **params)
        if isinstance(stmt, st.Explain | st.Search | st.Retrieve):
            owner = self._route(stmt, tenant)
            if owner is not None:
                return self.tenant_call(owner, "db", "plan", (text, *args), params)  # type: ignore[no-any-return]
            planned = self.planner.plan(stmt)
            if planned is not None:
                return planned[0]
        return self._shard_plan(text, args, params)

    def _shard_plan(self, text: str, args: tuple[object, ...], params: Mapping[str, object]
                    ) -> QueryPlan:
        data = self.scatter("plan", [0], [(text, args, params)])[0]
        return QueryPlan.model_validate_json(data)

    def _plan_context(self, collection: str) -> PlanContext | None:
        coll = self.placement.collection(collection)
        if coll is None or not coll.shared:
            return None
        found: PlanContext | None = self.scatter("plan_context", [0], [(collection,)])[0]
        return found

    def _gathered(self, stmt: st.Explain | st.Search | st.Retrieve, text: str,
                  args: tuple[object, ...], params: Mapping[str, object],
                  explain: ExplainSpec | None) -> Result | Explain:
        """Plan on the coordinator (else on shard 0) and run over the shards; a shard that
        refuses the plan as stale (`StalePlan`: the collection changed under the cached
        context) makes the coordinator fetch the context again and re-plan, once."""
        for attempt in (0, 1):
            planned = self.planner.plan(stmt, explain)
            if planned is None:
                plan, key = self._shard_plan(text, args, params), None
                if explain is not None:
                    plan = plan.model_copy(update={"explain": explain})
            else:
                plan, key = planned
            try:
                return self._run_gathered(plan, key)
            except StalePlan:
                self.planner.forget(plan.collection)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _run_gathered(self, plan: QueryPlan, key: str | None) -> Result | Explain:
        coll = self.placement.collection(plan.collection)
        spread = coll.spread if coll is not None else self.shards
        shards = list(range(spread))
        session = None
        if plan.session_id is not None:
            owner = self.placement.session_tenant(plan.session_id)
            if owner is not None:
                session = self._session_reader(owner)
        source = GatherSource(self.scatter, shards, session)
        return run_statement(plan, lambda p: gather_legs(p, self.scatter, shards, source.rows,
                                                         key), source)

    def _session_reader(self, owner: str) -> Callable[[str, str, tuple[Any, ...]], Any]:
        def read(_session_id: str, method: str, args: tuple[Any, ...]) -> Any:
            return self.tenant_call(owner, "db", method, args)

        return read

    def _route(self, stmt: st.StatementBase, tenant: str | None) -> str | None:
        """The tenant a statement runs on; None: scatter-gather over a shared collection.

        Raises:
            QuerySemanticError: an unknown collection, field or session, or any other
                mistake a database finds in the statement (as it says it, with its caret
                and did-you-mean), else nothing names a tenant.
        """
        if tenant is not None:
            return tenant
        query = stmt.statement if isinstance(stmt, st.Explain) else stmt
        if isinstance(query, st.Search | st.Retrieve):
            coll = self.placement.collection(query.collection.name)
            if coll is not None and coll.shared:
                return None
            if coll is None and query.collection.name not in BUILTIN_COLLECTIONS:
                names = sorted({*BUILTIN_COLLECTIONS, *(c.name for c in
                                                        self.placement.collections())})
                raise QuerySemanticError(  # a database's error, before any tenant is needed
                    f"unknown collection '{query.collection.name}'", text=query.source,
                    span=query.collection.span, hint=did_you_mean(query.collection.name, names))
            found = self._tenant_of_where(query.where)
            if found is None and query.session is not None:
                session = getattr(query.session, "value", None)
                found = self.placement.session_tenant(str(session))
            if found is not None:
                return found
        session_node = getattr(stmt, "session", None)
        if session_node is not None and not isinstance(query, st.Search | st.Retrieve):
            owner = self.placement.session_tenant(str(getattr(session_node, "value", "")))
            if owner is not None:
                return owner
            if isinstance(stmt, st.ShowSession | st.ShowLineage):  # a database's answer
                raise no_session_error(stmt, self.placement.session_ids())
        if isinstance(query, st.Search | st.Retrieve):
            info = self._tenant_info(query.collection.name)
            if info is not None:  # a mistake in the statement is a database's error first
                analyze(query, {info.name: info}, None)
        raise QuerySemanticError(
            f"the cluster cannot tell which tenant this statement is for: pass tenant=..., "
            f"filter on {self._routing} = '...', or name a session created through the cluster "
            "(FOR SESSION)", text=stmt.source, span=(0, len(stmt.source)))

    def _tenant_of_where(self, where: Any) -> str | None:
        items = where.items if isinstance(where, And) else (where,) if where else ()
        for item in items:
            if isinstance(item, Comparison) and item.field.name == self._routing \
                    and item.op == "=" and isinstance(item.value, StringLiteral):
                return item.value.value
        return None

    # -- collections and writes -----------------------------------------------------------------

    def create_collection(self, name: str, text_fields: Sequence[str] = ("title", "body"),
                          fields: Mapping[str, object] | None = None, dim: int | None = None,
                          embedder: str | None = "default", *, shared: bool = False
                          ) -> CollectionDef:
        """Create a collection in every database it belongs in (or check the recorded one).

        Args:
            name, text_fields, fields, dim: as `recallql.Database.create_collection` (field
                types as names or Python types).
            embedder: ``"default"`` (the cluster's), None (vectors from the caller), or the
                name of a built-in embedder (``"hash-blake2b-64"``).
            shared: one collection for every tenant, its items spread over the current shards
                by a hash of their id and searched by scatter-gather; otherwise every tenant's
                database has its own.

        Raises:
            ClusterError: it exists with another definition.
            StoreError: an invalid definition (nothing is recorded).
        """
        from recallql.index.schema import make_info

        self.check_open()
        if shared and name in {"docs", "messages"}:
            raise ClusterError(f"{name!r} is a built-in per-tenant collection; a shared "
                               "collection needs another name")
        types = {k: _type_name(v) for k, v in (fields or {}).items()}
        make_info(name, text_fields, types, dim or 1, None)  # validates before recording
        definition = {"text_fields": list(text_fields), "fields": types, "dim": dim,
                      "embedder": embedder}
        try:
            coll = self.placement.define(name, shared, self.shards, definition)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        self.planner.forget(name)
        self._schemas.pop((name, shared), None)
        self.scatter("create_collection", range(coll.spread if shared else self.shards),
                     [(name,)] * (coll.spread if shared else self.shards), write=True)
        return coll

    def collections(self) -> list[CollectionDef]:
        """The cluster's collections."""
        self.check_open()
        return self.placement.collections()

    def ingest(self, collection: str, items: Iterable[Mapping[str, object]], *,
               tenant: str | None = None, replace_documents: bool = False
               ) -> ClusterWriteReport:
        """Add or replace items: per tenant (`tenant`, else each item's routing field), or
        spread over shards by a hash of the item id for a shared collection.

        The whole batch is validated against the collection's schema before anything is
        written, so an invalid item writes nothing on any shard, and its error is the one a
        database gives (items named by their position in this batch, ``#i``); a shared
        collection's batch is validated as one database's (a duplicate id anywhere in it is
        refused), a per-tenant one tenant by tenant (tenants are separate databases; the
        first tenant with an invalid item, in the order tenants first appear, is reported).
        What only a database can refuse — an item of ``messages`` naming a session that is
        not open, an embedder that fails — and storage failures fail on their shard alone:
        each tenant's (or shard's) part is one all-or-nothing batch, and parts already
        written stay.

        Raises:
            IngestError: an invalid item or an item without a tenant (nothing written).
            StoreError: the connection is closed.
        """
        self.check_open()
        batch = list(many(items, "items", IngestError))  # as a database refuses a non-list
        coll = self.placement.collection(collection)
        if coll is not None and coll.shared:
            if not self._check_items(collection, True, batch, [list(range(len(batch)))]):
                _mappings(batch)
            groups = grouped(range(len(batch)),
                             lambda i: item_shard(batch[i].get("id"), coll.spread))
            shards = sorted(groups)
            reports = self.scatter("shared_call", shards, [
                ("ingest", (collection, [batch[i] for i in groups[s]]),
                 {"replace_documents": replace_documents}) for s in shards], write=True)
            return ClusterWriteReport({f"shard-{s}": r for s, r in zip(shards, reports,
                                                                        strict=True)})
        _mappings(batch)
        by_tenant = grouped(range(len(batch)),
                            lambda i: tenant or self._item_tenant(batch[i], i, strict=False))
        if collection != "messages":  # a database completes messages items before checking
            self._check_items(collection, False, batch, list(by_tenant.values()))
        if None in by_tenant:
            first = by_tenant[None][0]
            self._item_tenant(batch[first], first, strict=True)
        out = ClusterWriteReport()
        for owner, at in by_tenant.items():
            with renumbered(at):
                out.parts[owner] = self.tenant_call(owner, "db", "ingest",
                                                    (collection, [batch[i] for i in at]),
                                                    {"replace_documents": replace_documents},
                                                    create=True, write=True)
        return out

    def _check_items(self, collection: str, shared: bool, batch: list[Any],
                     parts: Iterable[list[int]]) -> bool:
        """Validate each part of `batch` (positions) against the collection's schema, as its
        database will (`recallql.index.items.validate`). The schema is kept per collection; a
        refusal is checked again with the schema fetched afresh (a field declared since).
        Returns whether a schema was known.

        Raises:
            IngestError: as a database, naming an item by its position in `batch`.
        """
        parts = list(parts)
        for fresh in (False, True):
            info = self._schema(collection, shared, fresh)
            if info is None:
                return False
            try:
                for at in parts:
                    with renumbered(at):
                        validate_items(info, [batch[i] for i in at])
                return True
            except IngestError:
                if fresh:
                    raise
        return True

    def _schema(self, collection: str, shared: bool, fresh: bool) -> CollectionInfo | None:
        """A collection's schema as its databases hold it: a shared one's from shard 0's
        share, a per-tenant one's from shard 0's tenants (`Shard.collection_info`); None when
        unknown. Kept once known (`fresh`: fetched again)."""
        key = (collection, shared)
        if not fresh and key in self._schemas:
            return self._schemas[key]
        if shared:
            context: PlanContext | None = self.scatter("plan_context", [0], [(collection,)])[0]
            info = None if context is None else context.info
        else:
            info = self.scatter("collection_info", [0], [(collection,)])[0]
        if info is None:
            self._schemas.pop(key, None)
        else:
            self._schemas[key] = info
        return info

    def _tenant_info(self, collection: str) -> CollectionInfo | None:
        """A per-tenant collection's schema (`_schema`)."""
        return self._schema(collection, False, False)

    def delete(self, collection: str, ids: Iterable[str | int], *,
               tenant: str | None = None) -> ClusterWriteReport:
        """Delete items by id (a tenant's, or a shared collection's on their shards).

        Raises:
            IngestError: `ids` is not a list of ids (a bare string, a mapping), or an id a
                database would refuse, naming its position (``#i``).
            ClusterError: a per-tenant collection without `tenant`.
            StoreError: the connection is closed.
        """
        self.check_open()
        coll = self.placement.collection(collection)
        ids = list(delete_args(ids, None)[0])  # a database's checks: a bare string is no list
        if coll is not None and coll.shared:
            groups = grouped(ids, lambda i: item_shard(i, coll.spread))
            shards = sorted(groups)
            reports = self.scatter("shared_call", shards, [
                ("delete", (collection, groups[s]), {}) for s in shards], write=True)
            return ClusterWriteReport({f"shard-{s}": r for s, r in zip(shards, reports,
                                                                        strict=True)})
        if tenant is None:
            raise ClusterError(f"deleting from the per-tenant collection {collection!r} needs "
                               "tenant=...")
        return ClusterWriteReport({tenant: self.tenant_call(tenant, "db", "delete",
                                                            (collection, ids), write=True)})

    def _item_tenant(self, item: Mapping[str, object], position: int, *, strict: bool
                     ) -> str | None:
        """The tenant of an item: its routing field's string. None (`strict` false), or
        `IngestError` naming the item (its id, else its position) and the field."""
        value = item.get(self._routing)
        if isinstance(value, str) and value:
            return value
        if not strict:
            return None
        name = item.get("id")
        raise IngestError(f"no tenant: pass tenant=... or give the item a "
                          f"'{self._routing}' string", field=self._routing,
                          item=repr(name) if isinstance(name, str | int) else f"#{position}")

    # -- shards ---------------------------------------------------------------------------------

    def add_shard(self) -> int:
        """Start one more shard; new tenants are placed on it until it holds as many tenants as
        the others (existing tenants and shared items stay where they are). Returns its index.
        """
        self.check_open()
        index = self.placement.ensure_shards(self.shards + 1) - 1
        self.transport.add(index)
        self.wait_ready()
        return index

    def tenants(self) -> dict[str, int]:
        """Every tenant and the shard that owns it."""
        self.check_open()
        return self.placement.tenants()

    def close(self) -> None:
        """Close the shards' databases; stop the Ray instance this connection started (and
        remove a temporary cluster directory). A second call does nothing; any other call
        afterwards raises `StoreError`."""
        if self._closed:
            return
        self._closed = True
        self.transport.close()
        self.placement.close()
        if self._owns_dir:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _mappings(batch: Sequence[object]) -> None:
    """Refuse a batch with an item that is not a mapping, as a database does."""
    for i, item in enumerate(batch):
        if not isinstance(item, Mapping):
            raise IngestError(f"an item must be a dict, got {type(item).__name__}",
                              item=f"#{i}")


def _type_name(kind: object) -> str:
    from recallql.index.schema import field_type

    return field_type(kind).value
