"""The coordinator plans shared-collection statements itself (`recallql.cluster.planner`): its
plans are shard 0's, a statement is one round trip to the shards, and a plan made with a stale
cached context is refused by the shards and made again (the coordinator and shards in this
process: `connect(in_process=True)`)."""

from __future__ import annotations

import pytest
from cluster_helpers import (
    CLOCK,
    EMBEDDER,
    FIELDS,
    FIXED,
    STATEMENTS,
    answer,
    cacm_docs,
    cacm_queries,
)

import recallql
from recallql import cluster
from recallql.cluster.planner import PlanContext, StalePlan
from recallql.cluster.wire import dumps, loads
from recallql.grammar.errors import QuerySemanticError
from recallql.index.embedders import HashEmbedder

SHAPES = [*STATEMENTS, "EXPLAIN SEARCH cacm MATCHING :q LIMIT 5",
          "SEARCH cacm MATCHING :q WHERE source = 'CACM' FUSE RRF (k = 30, weights = "
          "(lexical = 2, semantic = 1)) LIMIT 7",
          "SEARCH cacm MATCHING :q WITH RECENCY (weight = 0.3) "
          "LIMIT 10"]


def _calls(c):
    """Record the methods the coordinator calls on shards (and on how many)."""
    seen: list[tuple[str, int]] = []
    scatter = c.transport.scatter

    def counting(method, shards, args, write=False, **kw):
        seen.append((method, len(shards)))
        return scatter(method, shards, args, write=write, **kw)

    c.transport.scatter = counting
    return seen


@pytest.fixture()
def systems(index_shared_data, tmp_path):
    docs = cacm_docs(index_shared_data)[:600]
    c = cluster.connect(shards=3, path=tmp_path / "c", embedder=None, clock=CLOCK,
                        in_process=True)
    c.create_collection("cacm", text_fields=("title", "body"), fields=FIELDS,
                        embedder=EMBEDDER, shared=True)
    c.ingest("cacm", docs)
    one = recallql.connect(tmp_path / "one", embedder=None, clock=CLOCK)
    one.create_collection("cacm", text_fields=("title", "body"), fields=FIELDS,
                          embedder=HashEmbedder(64))
    one.ingest("cacm", docs)
    yield c, one, list(cacm_queries(index_shared_data).values())[:12]
    c.close()
    one.close()


def _same_plan(ours, theirs):
    strip = {"embed_ms"}
    return ours.model_dump(exclude=strip) == theirs.model_dump(exclude=strip)


def test_the_coordinators_plans_are_shard_zeros(systems):
    c, _, queries = systems
    checked = 0
    for text in SHAPES + FIXED:
        for q in queries if ":q" in text else [None]:
            params = {"q": q} if q is not None else {}
            ours = c.plan(text, **params)
            theirs = c._shard_plan(text, (), params)
            assert _same_plan(ours, theirs), text
            checked += 1
    assert checked == len(SHAPES) * len(queries) + len(FIXED)


def test_a_statement_is_one_round_trip_and_the_context_is_fetched_once(systems):
    c, one, queries = systems
    seen = _calls(c)
    first = []
    for q in queries:
        text = "SEARCH cacm MATCHING :q LIMIT 10"
        start = len(seen)
        assert answer(c.execute(text, q=q)) == answer(one.execute(text, q=q))
        first.append([call for call in seen[start:] if call[0] != "plan_context"][0])
    assert ("plan", 1) not in seen
    assert seen.count(("plan_context", 1)) == 1
    assert first == [("legs", 3)] * len(queries)  # the legs go out first, planned here


def test_a_shard_refuses_a_plan_made_with_another_context(systems):
    c, _, queries = systems
    plan = c.plan("SEARCH cacm MATCHING :q LIMIT 10", q=queries[0])
    with pytest.raises(StalePlan) as caught:
        c.actor(1).legs(dumps((plan.model_dump_json(), None, None, 0, "0" * 16)))
    assert caught.value.shard == 1
    assert caught.value.key == c.planner.context("cacm").key


def test_a_stale_cached_context_is_refused_then_refreshed(systems):
    """The cached context says analyser 1 (the index has 2): every shard refuses the plan, the
    coordinator fetches the context again, re-plans, and answers as one database."""
    c, one, queries = systems
    text = "SEARCH cacm MATCHING :q LIMIT 10"
    c.execute(text, q=queries[0])
    good = c.planner.context("cacm")
    assert good.analyzer_version != 1
    stale = PlanContext.of(good.info, 1, good.signal_names,  # the older analyser
                           good.can_embed)
    c.planner._contexts["cacm"] = stale
    seen = _calls(c)
    assert answer(c.execute(text, q=queries[1])) == answer(one.execute(text, q=queries[1]))
    assert seen.count(("plan_context", 1)) == 1  # refreshed once
    assert seen.count(("legs", 3)) == 2  # refused, then run with the fresh plan
    assert c.planner.context("cacm").key == good.key


def test_a_field_declared_on_the_shards_is_planned_after_a_refresh(systems):
    """A schema change under the coordinator's cache (a field added on every shard): the first
    statement naming it is planned again with a fresh context; one naming an unknown field is
    still an error."""
    c, one, queries = systems
    c.execute("SEARCH cacm MATCHING :q LIMIT 5", q=queries[0])
    old = c.planner.context("cacm").key
    for i in range(c.shards):
        c.actor(i).shared().store.add_fields("cacm", {"lang": "str"})
    one.store.add_fields("cacm", {"lang": "str"})
    text = "SEARCH cacm MATCHING :q WHERE lang IS NULL LIMIT 10"
    assert answer(c.execute(text, q=queries[2])) == answer(one.execute(text, q=queries[2]))
    assert c.planner.context("cacm").key != old
    with pytest.raises(QuerySemanticError, match="nosuchfield"):
        c.execute("SEARCH cacm MATCHING :q WHERE nosuchfield = 'x' LIMIT 5", q=queries[0])


def test_a_plan_without_a_key_is_not_checked(systems):
    """Plans made on shard 0 (AS OF, caller-defined embedders) carry no key."""
    c, _, queries = systems
    plan = c._shard_plan("SEARCH cacm MATCHING :q LIMIT 10", (), {"q": queries[0]})
    packed, _, _ = loads(c.actor(0).legs(dumps((plan.model_dump_json(), None, None, 0, None))))
    assert packed[0] == "cacm"  # (collection, ...): answered


def test_errors_are_one_databases(systems, tmp_path):
    """Mistakes the coordinator's plan finds, and those only a shard's finds (USING SEMANTIC
    without an embedder), read as one database's."""
    c, one, _ = systems
    items = [{"id": f"n{i}", "title": f"note {i}", "vector": [1.0, i, 0.0, 0.0]}
             for i in range(6)]
    c.create_collection("plain", dim=4, embedder=None, shared=True)
    c.ingest("plain", items)
    one.create_collection("plain", dim=4, embedder=None)
    one.ingest("plain", items)
    for text in ("SEARCH plain MATCHING 'note' USING SEMANTIC LIMIT 3",
                 "SEARCH plain MATCHING 'note' WHERE nope = 'x' LIMIT 3"):
        with pytest.raises(QuerySemanticError) as ours:
            c.execute(text)
        with pytest.raises(QuerySemanticError) as theirs:
            one.execute(text)
        assert str(ours.value) == str(theirs.value)
    assert c.execute("SEARCH plain MATCHING 'note' LIMIT 3").ids() \
        == one.execute("SEARCH plain MATCHING 'note' LIMIT 3").ids()


def test_a_query_embedding_that_is_not_one_row_of_numbers_is_an_execution_error(
        tmp_path, monkeypatch):
    """The coordinator embeds a shared collection's MATCHING text itself; output that is not
    one row of real numbers is the `ExecutionError` naming the embedder that one database
    raises (`recallql.engine.engine.query_embedding`), not strings parsed into a vector."""
    import numpy as np

    from recallql.cluster import planner
    from recallql.engine.executor import ExecutionError

    real = planner.by_name

    def broken(name):
        good = real(name)

        def emb(texts):
            return np.array([["0.5"] * good.dim for _ in texts])

        emb.dim, emb.name = good.dim, good.name
        return emb

    c = cluster.connect(shards=2, path=tmp_path / "c", embedder=None, clock=CLOCK,
                        in_process=True)
    try:
        c.create_collection("notes", text_fields=("body",), embedder=EMBEDDER, shared=True)
        c.ingest("notes", [{"id": "a", "body": "alpha beta"}])
        monkeypatch.setattr(planner, "by_name", broken)
        with pytest.raises(ExecutionError) as info:
            c.execute("SEARCH notes MATCHING 'alpha'")
        assert str(info.value).startswith(f"embedder '{EMBEDDER}'")
    finally:
        c.close()
