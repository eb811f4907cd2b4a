"""Tenant-routed statements equal the tenant's own database (the coordinator and shards in this
process: `connect(in_process=True)`): routing by `tenant=`, by the routing field in the WHERE,
and by the owner of the FOR SESSION session; writes route the same way."""

from __future__ import annotations

import pytest
from cluster_helpers import (
    CLOCK,
    Routed,
    answer,
    cacm_docs,
    cacm_queries,
    cases,
    conversation,
    differences,
    setup_tenants,
    tenant_database,
    tenant_docs,
    where_routed,
)

from recallql import cluster
from recallql.grammar.errors import QuerySemanticError
from recallql.index.errors import IngestError


@pytest.fixture(scope="module")
def systems(index_shared_data, tmp_path_factory):
    docs = cacm_docs(index_shared_data)
    root = tmp_path_factory.mktemp("tenants")
    c = cluster.connect(shards=4, path=root / "cluster", embedder=None, clock=CLOCK,
                        in_process=True)
    setup_tenants(c, docs)
    parts = tenant_docs(docs)
    refs = {t: tenant_database(root / t, parts[t]) for t in ("agent-1", "agent-6")}
    yield c, refs, cacm_queries(index_shared_data)
    c.close()
    for db in refs.values():
        db.close()


def test_tenants_are_spread_over_the_shards(systems):
    c, _, _ = systems
    placed = c.tenants()
    assert len(placed) == 8
    assert sorted(placed.values()) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_tenant_statements_equal_the_tenants_database(systems):
    c, refs, queries = systems
    some = dict(list(queries.items())[:12])
    for tenant, db in refs.items():
        assert differences(Routed(c, tenant), db, cases(some)) == []
        assert differences(c, db, where_routed(tenant, queries)) == []


def test_sessions_and_messages_route_by_owner(systems):
    c, refs, _ = systems
    db = refs["agent-6"]
    conversation(c, "s-6", "agent-6")
    conversation(db, "s-6", "agent-6")
    assert c.sessions.owner("s-6") == "agent-6"
    for text in ["SEARCH messages MATCHING 'restore after crash' FOR SESSION 's-6' LIMIT 5",
                 "SEARCH cacm MATCHING 'symbol tables' FOR SESSION 's-6' LIMIT 5",
                 "SHOW SESSION 's-6'"]:
        ours, theirs = c.execute(text), db.execute(text)
        assert _comparable(ours) == _comparable(theirs), text
    assert c.sessions.snapshot("s-6") == db.sessions.snapshot("s-6")


def _comparable(out):
    if hasattr(out, "rows"):
        return answer(out)
    return out.model_dump()


def test_explain_runs_whole_on_the_tenants_shard(systems):
    c, refs, queries = systems
    q = next(iter(queries.values()))
    ours = c.explain("SEARCH cacm MATCHING :q WHERE agent_id = 'agent-1' LIMIT 5", q=q)
    theirs = refs["agent-1"].explain("SEARCH cacm MATCHING :q WHERE agent_id = 'agent-1' "
                                     "LIMIT 5", q=q)
    assert answer(ours) == answer(theirs)
    assert ours.plan.model_dump(exclude={"time_ms"}) == theirs.plan.model_dump(
        exclude={"time_ms"})


def test_a_statement_without_a_tenant_is_refused_with_a_caret(systems):
    c, _, _ = systems
    with pytest.raises(QuerySemanticError, match="which tenant") as err:
        c.execute("SEARCH cacm MATCHING 'x' LIMIT 5")
    assert "^" in str(err.value)


def test_an_item_without_a_tenant_is_refused(systems):
    c, _, _ = systems
    with pytest.raises(IngestError, match="agent_id"):
        c.ingest("cacm", [{"id": "x", "title": "no owner"}])


def test_a_read_of_an_unknown_tenant_is_an_empty_databases_answer(systems):
    """A tenant nothing was written for answers as an empty tenant database (it raised
    ClusterError "unknown tenant"); it is neither placed nor created. A write that does not
    create the tenant (a delete) still names it as unknown."""
    c, _, _ = systems
    assert c.execute("SEARCH cacm MATCHING 'x' LIMIT 5", tenant="nobody").ids() == []
    assert "nobody" not in c.tenants()
    assert list(c.root.glob("shard-*/tenants/*nobody*")) == []
    with pytest.raises(cluster.ClusterError, match="unknown tenant 'nobody'"):
        c.delete("cacm", ["x"], tenant="nobody")


def test_a_new_tenant_goes_to_an_added_shard(systems):
    c, _, _ = systems
    index = c.add_shard()
    assert index == 4 and c.shards == 5
    c.ingest("cacm", [{"id": "n1", "title": "new tenant", "agent_id": "agent-new"}])
    assert c.tenants()["agent-new"] == 4
    assert c.execute("SEARCH cacm MATCHING 'new tenant' LIMIT 5",
                     tenant="agent-new").ids() == ["n1"]


def test_messages_extend_routes_each_session_to_its_owner(systems):
    c, _, _ = systems
    c.sessions.create("e-1", "agent-1")
    c.sessions.create("e-3", "agent-3")
    ids = c.messages.extend([
        {"session_id": "e-1", "role": "user", "content": "tape drives"},
        {"session_id": "e-3", "role": "user", "content": "disk packs"},
        {"session_id": "e-1", "role": "assistant", "content": "nine track"}], key="k1")
    assert len(ids) == 3
    again = c.messages.extend([
        {"session_id": "e-1", "role": "user", "content": "tape drives"},
        {"session_id": "e-3", "role": "user", "content": "disk packs"},
        {"session_id": "e-1", "role": "assistant", "content": "nine track"}], key="k1")
    assert again == ids  # the idempotency key: nothing written twice
    found = c.execute("SEARCH messages MATCHING 'nine track tape disk' LIMIT 5",
                      tenant="agent-1")
    assert {r.fields["content"] for r in found.rows} == {"tape drives", "nine track"}


def test_a_builtin_collection_cannot_be_shared(systems):
    c, _, _ = systems
    with pytest.raises(cluster.ClusterError, match="built-in"):
        c.create_collection("messages", shared=True)


def test_for_session_on_a_shared_collection_reads_the_owners_session(systems, tmp_path):
    """Scatter-gather with FOR SESSION: the session (keywords, signals) comes from its owner's
    database, so the boosts are those one database holding both would give."""
    from cluster_helpers import EMBEDDER, FIELDS

    import recallql
    from recallql.index.embedders import HashEmbedder

    c, _, _ = systems
    items = [{"id": f"kb{i}", "title": t, "entity": f"e{i}"} for i, t in enumerate(
        ["tape backup rotation", "restore from tape", "disk quota policy", "backup tape vault"])]
    c.create_collection("kb", text_fields=("title", "body"), fields=FIELDS, embedder=EMBEDDER,
                        shared=True)
    c.ingest("kb", items)
    one = recallql.connect(tmp_path / "one", embedder=None, clock=CLOCK)
    one.create_collection("kb", text_fields=("title", "body"), fields=FIELDS,
                          embedder=HashEmbedder(64))
    one.ingest("kb", items)
    for target in (c, one):
        target.sessions.create("kb-s", "agent-2")
        target.sessions.annotate("kb-s", "vault")
        target.sessions.signal("kb-s", "reward", 1.0, entity="e2")
    text = ("SEARCH kb MATCHING 'tape backup' FOR SESSION 'kb-s' "
            "WITH SIGNAL BOOST (reward = 0.2) LIMIT 4")
    ours, theirs = c.execute(text), one.execute(text)
    assert answer(ours) == answer(theirs)
    assert any(r.code.startswith("SIGNAL") or r.code.startswith("SESSION")
               for row in ours.rows for r in row.reasons)
    one.close()


def test_signal_many_routes_each_session_to_its_owner(systems):
    c, _, _ = systems
    c.sessions.create("g-1", "agent-1")
    c.sessions.create("g-4", "agent-4")
    signals = [{"session_id": "g-1", "name": "reward", "value": 1.0, "entity": "cacm:1"},
               {"session_id": "g-4", "name": "reward", "value": -0.5, "entity": "cacm:4"}]
    assert c.sessions.signal_many(signals, key="sig-1") == 2
    assert c.sessions.signal_many(signals, key="sig-1") == 0  # a retry records nothing
    snap = c.sessions.snapshot("g-4")
    assert (snap.agent_id, snap.signal_scores["reward"]) == ("agent-4", -0.5)
