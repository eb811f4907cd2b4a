"""A cluster's user gets the errors one database gives: the same class, message, span, line,
column and ``str()`` for bad statements, bad items, session mistakes; nothing of a failing
batch written on any shard; a clear recallql error for a lost shard or a closed connection;
every recallql exception crosses Ray with its attributes.

Each test runs twice: over shard objects in this process (``in_process``), and over Ray actors
(marked ``cluster``: ``make test-cluster`` runs them inside ``unshare -n``; elsewhere they
skip, saying why). One Ray instance serves the whole module.
"""

from __future__ import annotations

import functools
import os
import pickle
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import recallql
from recallql import cluster
from recallql.cluster.runtime import network_interfaces
from recallql.engine.executor import ExecutionError
from recallql.grammar.errors import ParameterError, QuerySemanticError, QuerySyntaxError
from recallql.index.errors import (
    DatabaseLocked,
    FilterError,
    IdempotencyKeyReused,
    IngestError,
    SignalRejected,
    StoreError,
)
from recallql.sessions.input import SessionError, SessionNotFound

NOW = 1.7e9
#: "now" for the shards and the database (a partial of a builtin: it pickles by value, so Ray's
#: workers need not import this module).
clock = functools.partial(float, NOW)


def _ray_or_skip() -> Any:
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install "
                              "'recallql[cluster]'")
    if network_interfaces():
        pytest.skip("`unshare -n` is not permitted here, and this starts Ray, whose servers "
                    "listen on every interface" if os.environ.get("RECALLQL_NO_UNSHARE") else
                    "starts Ray, whose servers listen on every interface: runs only inside a "
                    "private network namespace (`make test-cluster` uses unshare -n)")
    return ray


FIELDS = {"agent_id": str}


class DyingEmbedder:
    """The shards' default embedder (4-d): its process exits, as a crashing shard does, when
    a text says "exit now" (only the Ray test sends one)."""

    name = "dying-4"
    dim = 4

    def __call__(self, texts: list[str]) -> np.ndarray:
        if any("exit now" in text for text in texts):
            os._exit(1)
        return np.tile(np.float32([0.0, 1.0, 0.0, 0.0]), (len(texts), 1))
ITEMS = [{"id": f"n{i}", "title": "tape backup", "agent_id": f"a{i % 3}",
          "vector": [1.0, 0.0, 0.0, float(i)]} for i in range(6)]


def _define(target: Any, shared: bool) -> None:
    for name, is_shared in (("notes", False), ("kb", True)):
        kwargs = {"shared": True} if is_shared and shared else {}
        target.create_collection(name, fields=FIELDS, embedder=None, dim=4, **kwargs)


@pytest.fixture(scope="module",
                params=["in_process", pytest.param("ray", marks=pytest.mark.cluster)])
def pair(request, tmp_path_factory):
    """(cluster, database): the same collections and items; `notes` per tenant (a0, a1, a2)
    and `kb` shared in the cluster, both plain collections in the database."""
    in_process = request.param == "in_process"
    if not in_process:
        _ray_or_skip().cloudpickle.register_pickle_by_value(sys.modules[__name__])
    root = tmp_path_factory.mktemp(request.param)
    db = recallql.connect(root / "db", embedder=None, clock=clock)
    c = cluster.connect(shards=3, path=root / "cluster", embedder=DyingEmbedder(), clock=clock,
                        in_process=in_process, num_cpus=2)
    _define(db, False)
    _define(c, True)
    for target in (db, c):
        target.ingest("notes", ITEMS)
        target.ingest("kb", ITEMS)
    yield c, db
    c.close()
    db.close()


def outcome(call: Any) -> tuple[Any, ...]:
    """What a call gives a user: its result's repr, or its error's class, ``str()`` and the
    attributes recallql errors carry."""
    try:
        return ("ok", repr(call()))
    except Exception as exc:  # noqa: BLE001 - comparing what escapes
        return (type(exc), str(exc), *(getattr(exc, a, None) for a in (
            "span", "line", "column", "expected", "hint", "item", "field", "operator")))


def same(c: Any, db: Any, call: Any) -> None:
    """`call(target)` gives the same outcome on the cluster and the database."""
    mine, theirs = outcome(lambda: call(c)), outcome(lambda: call(db))
    assert mine == theirs


# -- pickling -------------------------------------------------------------------------------------

ERRORS = [
    QuerySyntaxError("expected a whole number after LIMIT, found 'ten'", text="SEARCH d LIMIT ten",
                     span=(15, 18), expected=["a whole number"], hint="LIMIT takes a number"),
    QuerySemanticError("unknown field 'agnt_id'", text="x agnt_id", span=(2, 9),
                       hint="did you mean 'agent_id'?"),
    ParameterError("parameter :n is missing", text="LIMIT :n", span=(6, 8)),
    IngestError("duplicate id within the batch", item="'g4'", field="id"),
    IngestError("an item must be a dict, got str", item="#1"),
    SessionError("session 's1' already exists"),
    SessionNotFound("cannot close: no session 'nope'"),
    SignalRejected("signal rejected (rule unknown_session): no session 'nope'"),
    StoreError("the database /x is closed"),
    FilterError("unknown field 'x'"),
    IdempotencyKeyReused("key 'k' was used for another request"),
    DatabaseLocked("locked", path="/x", pid=7, waited=1.5),
    ExecutionError("LexicalScan", ValueError("bad")),
    cluster.ClusterError("shard 1 died"),
]


def _attributes(exc: BaseException) -> tuple[Any, ...]:
    return (type(exc), str(exc), exc.args, dict(vars(exc)))


@pytest.mark.parametrize("exc", ERRORS, ids=lambda e: type(e).__name__)
def test_every_recallql_error_pickles_with_its_attributes(exc):
    assert _attributes(pickle.loads(pickle.dumps(exc))) == _attributes(exc)


def _raise(exc: BaseException) -> None:
    raise exc


def test_every_recallql_error_crosses_the_shard_boundary_as_itself(pair):
    """Raised in a shard's process (a Ray task on the Ray path), the coordinator re-raises the
    error itself — not `RayTaskError(...)` — with every attribute."""
    c, _ = pair
    for exc in ERRORS:
        if hasattr(c.transport, "_ray"):
            ray = c.transport._ray
            ref = ray.remote(num_cpus=0)(_raise).remote(exc)
            with pytest.raises(type(exc)) as caught:
                c.transport._get([ref], [0], "a task")
        else:
            with pytest.raises(type(exc)) as caught:
                _raise(pickle.loads(pickle.dumps(exc)))
        assert type(caught.value) is type(exc)
        assert _attributes(caught.value) == _attributes(exc)


# -- statements -----------------------------------------------------------------------------------

#: (statement, parameters): each a mistake; the cluster's error is the database's.
BAD_STATEMENTS = [
    ("SEARCH notes MATCHING 'x' WHERE agent_id = 'a1' LIMT 3", {}),
    ("SEARCH notes MATCHING 'x' WHERE agent_id = 'a1'\n  LIMIT ten", {}),
    ("SEARCH kb MATCHING 'x' LIMIT", {}),
    ("SEARCH note MATCHING 'x' WHERE agent_id = 'a1' LIMIT 3", {}),
    ("SEARCH kbb MATCHING 'x' LIMIT 3", {}),
    ("EXPLAIN SEARCH nots MATCHING 'x' LIMIT 3", {}),
    ("RETRIEVE FROM kbb LIMIT 3", {}),
    ("SEARCH notes MATCHING 'x' WHERE agent_id = 'a1' AND titel = 'x' LIMIT 3", {}),
    ("SEARCH notes MATCHING 'x' WHERE agnt_id = 'a1' LIMIT 3", {}),
    ("RETRIEVE FROM notes WHERE created_at >= 'yesterday' LIMIT 3", {}),
    ("SEARCH notes NEAR :v LIMIT 3", {"v": [1.0, 0.0]}),
    ("SHOW SESSION 'nope'", {}),
    ("SHOW LINEAGE 'nope'", {}),
    ("SEARCH kb MATCHING 'x' WHERE agnt_id = 'a1' LIMIT 3", {}),
    ("RETRIEVE FROM kb WHERE created_at >= 'yesterday' LIMIT 3", {}),
    ("SEARCH kb MATCHING 'x' WHERE agent_id = 5 LIMIT 3", {}),
    ("SEARCH notes MATCHING :q WHERE agent_id = 'a1' LIMIT :n", {"q": "x", "n": "three"}),
    ("SEARCH kb MATCHING :q LIMIT 3", {}),
    ("SEARCH kb MATCHING :q LIMIT 3", {"q": "x", "extra": 1}),
    ("SEARCH kb NEAR :v LIMIT 3", {"v": [1.0, 0.0]}),
    ("SEARCH kb MATCHING 'x' FUSE RRF (k = -1) LIMIT 3", {}),
]


@pytest.mark.parametrize(("text", "params"), BAD_STATEMENTS, ids=[t for t, _ in BAD_STATEMENTS])
def test_a_bad_statement_is_the_databases_error(pair, text, params):
    c, db = pair
    same(c, db, lambda t: t.execute(text, **params))
    with pytest.raises(recallql.QueryError):  # the mistake is refused (same() compared how)
        c.execute(text, **params)


def test_a_valid_statement_naming_no_tenant_is_refused_as_documented(pair):
    """docs/cluster.md: nothing but tenant=, the routing field or a session routes; a
    statement on a per-tenant collection that names none is an error, never a broadcast."""
    c, _ = pair
    text = "SEARCH notes MATCHING 'x' LIMIT 3"
    with pytest.raises(QuerySemanticError) as caught:
        c.execute(text)
    assert caught.value.message.startswith("the cluster cannot tell which tenant this "
                                           "statement is for")
    assert caught.value.span == (0, len(text))


def test_explain_of_a_bad_statement_is_the_databases_error(pair):
    c, db = pair
    for text in ("SEARCH kb MATCHING 'x' WHERE agnt = 1 LIMIT 3",
                 "SEARCH notes MATCHING 'x' WHERE agent_id = 'a2' AND agnt = 1 LIMIT 3",
                 "SEARCH kbb MATCHING 'x' LIMIT 3"):
        same(c, db, lambda t, text=text: t.explain(text))


def test_plan_of_a_tenant_statement_is_its_databases_plan(pair):
    """`plan` routes as `execute` (it asked shard 0's shared database, which holds no
    per-tenant collection: "unknown collection 'notes'")."""
    c, db = pair
    text = "SEARCH notes MATCHING 'tape' WHERE agent_id = 'a1' LIMIT 3"
    mine, theirs = c.plan(text), db.plan(text)
    assert (mine.collection, [leg.name for leg in mine.legs], mine.limit) == \
        (theirs.collection, [leg.name for leg in theirs.legs], theirs.limit)
    same(c, db, lambda t: t.plan("SEARCH nots MATCHING 'x' WHERE agent_id = 'a1' LIMIT 3"))


#: Reads of a tenant nothing was written for: the cluster answers each as an empty tenant
#: database does (it raised ClusterError "unknown tenant").
EMPTY_TENANT_READS = [
    "RETRIEVE FROM notes LIMIT 3",
    "SEARCH notes MATCHING 'tape' LIMIT 3",
    "SEARCH notes NEAR :v LIMIT 3",
    "SEARCH nots MATCHING 'x' LIMIT 3",
    "SEARCH kb MATCHING 'x' LIMIT 3",
    "RETRIEVE FROM notes WHERE titel = 'x' LIMIT 3",
    "SHOW SESSION 'nope'",
    "SHOW LINEAGE 'nope'",
]


def test_a_read_of_a_tenant_with_nothing_written_is_an_empty_databases_answer(pair, tmp_path):
    """An empty tenant database (the per-tenant collection `notes`, the shards' embedder for
    the built-ins) gives the same rows (none) and errors; the tenant is neither placed nor
    created on disk."""
    c, _ = pair
    empty = recallql.connect(tmp_path / "empty", embedder=DyingEmbedder(), clock=clock)
    try:
        empty.create_collection("notes", fields=FIELDS, embedder=None, dim=4)
        vector = {"v": [1.0, 0.0, 0.0, 0.0]}
        for text in EMPTY_TENANT_READS:
            mine = outcome(lambda text=text: c.execute(text, tenant="nobody", **vector).ids())
            assert (text, mine) == (text, outcome(lambda text=text: empty.execute(
                text, **vector).ids()))
        assert c.execute("RETRIEVE FROM notes WHERE agent_id = 'nobody' LIMIT 3").ids() == []
        assert [r.name for r in c.execute("SHOW COLLECTIONS", tenant="nobody").rows] == \
            [r.name for r in empty.execute("SHOW COLLECTIONS").rows]
        same_error = outcome(lambda: c.explain("SEARCH nots MATCHING 'x' LIMIT 3",
                                               tenant="nobody"))
        assert same_error == outcome(lambda: empty.explain("SEARCH nots MATCHING 'x' LIMIT 3"))
        assert same_error[0] is QuerySemanticError
        assert c.plan("RETRIEVE FROM notes LIMIT 3", tenant="nobody").collection == "notes"
        assert c.sessions.get("nope") is None and c.sessions.list("nobody") == []
    finally:
        empty.close()
    assert "nobody" not in c.tenants()
    assert list(c.root.glob("shard-*/tenants/*nobody*")) == []
    with pytest.raises(cluster.ClusterError, match="unknown tenant 'nobody'"):
        c.delete("notes", ["n1"], tenant="nobody")  # a write still names the mistake


# -- ingest ---------------------------------------------------------------------------------------


def _item(id: object, agent: object = "a0", **extra: object) -> dict[str, object]:
    out = {"title": "ok", "agent_id": agent, "vector": [1.0, 0.0, 0.0, 0.0], **extra}
    if id is not None:
        out["id"] = id
    return out


#: Batches with one invalid item after valid ones of other tenants / shards.
BAD_BATCHES = {
    "wrong dim": [_item("g1"), _item("g2", "a1", vector=[1.0, 0.0, 0.0])],
    "missing id": [_item("g3"), _item("g3b", "a2"), _item(None, "a1")],
    "not a dict": [_item("g5"), _item("g5b", "a1"), "junk"],
    "wrong type": [_item("g6"), _item("g7", "a2", title=3)],
    "routing field of the wrong type": [_item("g8"), _item("g8b", "a1"), _item("g9", 5)],
    "unknown field": [_item("g10", "a1"), _item("g11", "a2", colour="red")],
}


def _contents(target: Any) -> dict[str, list[str]]:
    out = {"kb": target.execute("RETRIEVE FROM kb LIMIT 100").ids()}
    for agent in ("a0", "a1", "a2"):
        out[agent] = target.execute("RETRIEVE FROM notes WHERE agent_id = :a LIMIT 100",
                                    a=agent).ids()
    return out


@pytest.mark.parametrize("collection", ["notes", "kb"])
@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_an_invalid_item_is_the_databases_error_and_writes_nothing_on_any_shard(
        pair, collection, case):
    c, db = pair
    before = _contents(c)
    assert before == _contents(db)
    same(c, db, lambda t: t.ingest(collection, BAD_BATCHES[case]))
    assert _contents(c) == before  # no tenant's and no shard's part was written


def test_an_item_is_named_by_its_position_in_the_whole_batch(pair):
    c, _ = pair
    for collection in ("notes", "kb"):
        with pytest.raises(IngestError) as caught:
            c.ingest(collection, BAD_BATCHES["missing id"])
        assert (caught.value.item, caught.value.field) == ("#2", "id")
        assert str(caught.value) == "item #2, field 'id': id must be a string or an integer, " \
            "got None"


def test_an_item_without_a_tenant_names_itself_and_writes_nothing(pair):
    c, _ = pair
    before = _contents(c)
    with pytest.raises(IngestError) as caught:
        c.ingest("notes", [_item("t1", "a1"), {"id": "t2", "title": "x",
                                                "vector": [1.0, 0.0, 0.0, 0.0]}])
    assert str(caught.value) == "item 't2', field 'agent_id': no tenant: pass tenant=... or " \
        "give the item a 'agent_id' string"
    assert _contents(c) == before


def test_the_first_batch_of_a_new_cluster_is_validated_before_any_tenant_is_placed(tmp_path):
    """No tenant exists yet: the schema comes from the recorded definition (with the
    cluster's embedder, for its dimension), and an invalid item writes and places nothing."""
    c = cluster.connect(shards=3, path=tmp_path / "fresh", embedder=DyingEmbedder(),
                        clock=clock, in_process=True)
    try:
        c.create_collection("notes", fields=FIELDS)  # dim: the embedder's (4)
        batch = [_item("f1", "a0"), _item("f2", "a1"), _item("f3", "a2", vector=[1.0, 0.0])]
        with pytest.raises(IngestError) as caught:
            c.ingest("notes", batch)
        assert (caught.value.item, caught.value.field) == ("'f3'", "vector")
        assert c.tenants() == {}
        assert c.transport.handle(0).collection_info("notes").dim == 4
        c.ingest("notes", batch[:2])
        assert c.tenants() == {"a0": 0, "a1": 1}
    finally:
        c.close()


def test_a_stale_kept_schema_never_refuses_a_valid_item(pair):
    """The coordinator keeps a collection's schema; one that misses a field the databases
    have (declared since) is fetched afresh before an item is refused."""
    from recallql.index.schema import make_info

    c, _ = pair
    for name, shared in (("notes", False), ("kb", True)):
        c._schemas[(name, shared)] = make_info(name, ("title", "body"), {}, 4, None)
        report = c.ingest(name, [_item(f"stale-{name}", "a1")])
        assert report.count == 1
        assert "agent_id" in c._schemas[(name, shared)].fields
        c.delete(name, [f"stale-{name}"], **({} if shared else {"tenant": "a1"}))


def test_a_tenant_whose_name_is_percent_encoded_on_disk_is_written_and_read(pair):
    """A tenant's directory is its name percent-encoded (``t_team%20a%2Fb``); its databases
    open (the metadata store's read-only URI was misread: StoreError 'unable to open')."""
    c, _ = pair
    tenant = "team a/b?#ü"
    c.ingest("notes", [_item("p1", tenant)])
    assert c.execute("RETRIEVE FROM notes WHERE agent_id = :a LIMIT 5", a=tenant).ids() == ["p1"]


def test_a_batch_argument_that_is_no_list_is_the_databases_error(pair):
    """One mapping, a string or a number where a list belongs: refused as a database refuses
    it (a bare string of ids was iterated: delete('n1') deleted ids 'n' and '1')."""
    c, db = pair
    before = _contents(c)
    for value in (5, "n1", {"id": "n1"}):
        same(c, db, lambda t, v=value: t.ingest("kb", v))
        same(c, db, lambda t, v=value: t.ingest("notes", v))
        same(c, db, lambda t, v=value: t.messages.extend(v))
        same(c, db, lambda t, v=value: t.sessions.signal_many(v))
    same(c, db, lambda t: t.delete("kb", "n1"))
    assert outcome(lambda: c.delete("notes", "n1", tenant="a1")) == outcome(
        lambda: db.delete("notes", "n1"))
    assert _contents(c) == before
    with pytest.raises(AttributeError):
        c.sessions.no_such_method("s1")


# -- sessions and messages -------------------------------------------------------------------------

LATER = NOW + 1000.0  # past the 300 s the clock may be ahead of


def _message(session: object) -> dict[str, object]:
    return {"session_id": session, "role": "user", "content": "restore the backup"}


def _signal(session: object) -> dict[str, object]:
    return {"session_id": session, "name": "reward", "value": 1.0}


#: (what, call) in order: each gives the cluster's and the database's same outcome.
SESSION_CALLS = [
    ("create", lambda t: t.sessions.create("s1", "a0")),
    ("create s2 of another agent", lambda t: t.sessions.create("s2", "a1")),
    ("the same id for another agent", lambda t: t.sessions.create("s1", "a1")),
    ("the same id for its agent", lambda t: t.sessions.create("s1", "a0")),
    ("a future start", lambda t: t.sessions.create("s3", "a0", started_at=LATER)),
    ("an invalid session id", lambda t: t.sessions.create("s 3", "a0")),
    ("an invalid agent id", lambda t: t.sessions.create("s3", "a 0")),
    ("get unknown", lambda t: t.sessions.get("nope")),
    ("snapshot unknown", lambda t: t.sessions.snapshot("nope")),
    ("close unknown", lambda t: t.sessions.close("nope")),
    ("archive unknown", lambda t: t.sessions.archive("nope")),
    ("signal unknown", lambda t: t.sessions.signal("nope", "reward", 1.0)),
    ("annotate unknown", lambda t: t.sessions.annotate("nope", "backup")),
    ("append unknown", lambda t: t.messages.append("nope", "user", "x")),
    ("extend naming an unknown session",
     lambda t: t.messages.extend([_message("s1"), _message("nope")])),
    ("signal_many naming an unknown session",
     lambda t: t.sessions.signal_many([_signal("s1"), _signal("nope")])),
    ("signal_many: an entry that is no signal after an unknown session",
     lambda t: t.sessions.signal_many([_signal("nope"), 5])),
    ("signal_many: a signal missing its value after an unknown session",
     lambda t: t.sessions.signal_many([_signal("nope"), {"session_id": "s1", "name": "x"}])),
    ("extend: a message that is no mapping after an unknown session",
     lambda t: t.messages.extend([_message("nope"), 5])),
    ("list of an agent with nothing", lambda t: t.sessions.list("zzz")),
    ("a future signal", lambda t: t.sessions.signal("s1", "reward", 1.0, at=LATER)),
    ("a future message", lambda t: t.messages.append("s1", "user", "x", at=LATER)),
    ("a future end", lambda t: t.sessions.close("s1", end=LATER)),
    ("an unknown end reason", lambda t: t.sessions.close("s1", end_reason="bored")),
    ("a bad message in a batch over two owners",
     lambda t: t.messages.extend([_message("s1"), _message("s2"), {"session_id": "s2"}])),
    ("a bad signal of the second owner",
     lambda t: t.sessions.signal_many([_signal("s1"), _signal("s2"),
                                       {**_signal("s2"), "value": float("nan")}])),
    ("close s2", lambda t: t.sessions.close("s2")),
    ("append to a closed session", lambda t: t.messages.append("s2", "user", "x")),
    ("signal a closed session", lambda t: t.sessions.signal("s2", "reward", 1.0)),
    ("close a closed session", lambda t: t.sessions.close("s2")),
    ("a closed session in a batch over two owners",
     lambda t: t.messages.extend([_message("s1"), _message("s2")])),
]


def test_session_and_message_mistakes_are_the_databases(pair):
    c, db = pair
    for what, call in SESSION_CALLS:
        mine = outcome(lambda call=call: call(c))
        theirs = outcome(lambda call=call: call(db))
        assert (what, mine) == (what, theirs)
    for target in (c, db):  # the refused batches over two owners wrote nothing
        assert target.execute("RETRIEVE FROM messages FOR SESSION 's1' LIMIT 10",
                              **({} if target is db else {})).ids() == []
    assert c.sessions.owner("s1") == "a0"  # the refused second "s1" placed nothing
    assert [s["id"] for s in c.sessions.list("a1")] == ["s2"]


def _tamper_root(meta: Any, session_id: str, root: str) -> None:
    """Give a session a stored root the walk disagrees with, through its database's file."""
    import sqlite3

    conn = sqlite3.connect(meta, isolation_level=None)
    try:
        conn.execute("UPDATE sessions SET conversation_root = ? WHERE id = ?", (root, session_id))
    finally:
        conn.close()


def test_verify_lineage_is_one_report_over_every_tenant(pair):
    """`sessions.verify_lineage()` takes no session id (it was routed as if it took one): one
    report over every tenant's database, as one database holding them all gives it, its
    mismatches by session id (not by tenant: 'lin-a' is a2's, 'lin-b' a0's)."""
    from recallql.cluster.shard import tenant_dir

    c, db = pair
    for target in (c, db):
        for root, tip, agent in (("lin-a0", "lin-a", "a2"), ("lin-b0", "lin-b", "a0")):
            target.sessions.create(root, agent)
            target.sessions.close(root, "compression")
            target.sessions.create(tip, agent, parent=root)
    same(c, db, lambda t: t.sessions.verify_lineage())
    report = c.sessions.verify_lineage()
    assert report.ok and report.max_depth == 1
    assert report.sessions == report.stored == db.sessions.verify_lineage().sessions >= 4
    shards = c.tenants()
    for sid, agent in (("lin-a", "a2"), ("lin-b", "a0")):
        _tamper_root(c.root / f"shard-{shards[agent]}" / "tenants" / tenant_dir(agent)
                     / "meta.sqlite", sid, "elsewhere")
        _tamper_root(Path(db.path) / "meta.sqlite", sid, "elsewhere")
    same(c, db, lambda t: t.sessions.verify_lineage())
    report = c.sessions.verify_lineage()
    assert [(m.session_id, m.stored, m.walked) for m in report.mismatches] == [
        ("lin-a", "elsewhere", "lin-a0"), ("lin-b", "elsewhere", "lin-b0")]
    assert report.unmaintained == []


# -- a lost shard ---------------------------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.parametrize("pair", ["ray"], indirect=True)  # shard actors only
def test_a_shard_that_dies_mid_write_is_a_cluster_error_and_wrote_nothing(pair):
    c, _ = pair
    assert hasattr(c.transport, "_ray")
    c.create_collection("embedded", fields=FIELDS)  # embeds with the shards' DyingEmbedder
    c.ingest("embedded", [{"id": "e1", "title": "fine", "agent_id": "a0"}])
    shard = c.tenants()["a0"]
    with pytest.raises(cluster.ClusterError) as caught:
        c.ingest("embedded", [{"id": "e2", "title": "exit now", "agent_id": "a0"}])
    assert type(caught.value) is cluster.ClusterError
    text = str(caught.value)
    # (Ray names the death ActorDiedError or, while it learns of it, ActorUnavailableError)
    assert re.match(f"shard {shard} was lost during db.ingest of tenant 'a0' "
                    r"\((ActorDiedError|ActorUnavailableError): \S", text), text
    assert text.endswith("retry the call (a write is all or nothing on each shard, so a "
                         "shard's part was written whole or not at all)")
    assert "Traceback" not in text and "\n" not in text
    # the read is retried across the restart; the shard reopened its databases from disk
    assert c.execute("RETRIEVE FROM embedded WHERE agent_id = 'a0' LIMIT 10").ids() == ["e1"]


@pytest.mark.cluster
@pytest.mark.parametrize("pair", ["ray"], indirect=True)  # shard actors only
def test_a_shard_that_dies_mid_statement_every_time_is_a_cluster_error(pair):
    """A read is retried across restarts (`READ_RETRIES`); a statement that kills its shard
    each time (its MATCHING text is embedded there) ends as a ClusterError naming the shard
    and the call, and the restarted shard answers the next statement."""
    c, _ = pair
    assert hasattr(c.transport, "_ray")
    shard = c.tenants()["a0"]
    with pytest.raises(cluster.ClusterError) as caught:
        c.execute("SEARCH embedded MATCHING 'exit now' WHERE agent_id = 'a0' LIMIT 3")
    assert type(caught.value) is cluster.ClusterError
    assert re.match(f"shard {shard} was lost during db.execute of tenant 'a0' "
                    r"\((ActorDiedError|ActorUnavailableError): \S", str(caught.value))
    assert "Traceback" not in str(caught.value)
    assert c.execute("SEARCH embedded MATCHING 'fine' WHERE agent_id = 'a0' LIMIT 3").ids() \
        == ["e1"]


# -- a closed connection (keep last: it closes the module's cluster) ------------------------------


def test_a_closed_cluster_refuses_every_call_as_a_closed_database_does(pair, tmp_path):
    c, _ = pair
    other = recallql.connect(tmp_path / "closed", embedder=None, clock=clock)
    other.close()
    c.close()
    calls = [
        lambda t: t.execute("SEARCH notes MATCHING 'x' WHERE agent_id = 'a1' LIMIT 3"),
        lambda t: t.execute("SEARCH kb MATCHING 'x' LIMIT 3"),
        lambda t: t.explain("SEARCH kb MATCHING 'x' LIMIT 3"),
        lambda t: t.plan("SEARCH kb MATCHING 'x' LIMIT 3"),
        lambda t: t.ingest("kb", ITEMS[:1]),
        lambda t: t.ingest("notes", ITEMS[:1]),
        lambda t: t.delete("kb", ["n0"]),
        lambda t: t.collections(),
        lambda t: t.sessions.create("s9", "a0"),
        lambda t: t.sessions.list("a0"),
        lambda t: t.sessions.snapshot("s9"),
        lambda t: t.messages.append("s9", "user", "x"),
    ]
    for call in calls:
        with pytest.raises(StoreError) as mine:
            call(c)
        assert str(mine.value) == f"the cluster {c.root} is closed"
        with pytest.raises(StoreError) as theirs:
            call(other)
        assert str(theirs.value).endswith(f"the database {tmp_path / 'closed'} is closed")
    c.close()  # a second close does nothing
