"""Scatter-gather over a shared collection equals one database (the coordinator and shards in
this process: `connect(in_process=True)`, the same code Ray runs): CACM split 4 ways, every
statement shape x every CACM query, same ids, order, scores, reasons and contributions."""

from __future__ import annotations

import numpy as np
import pytest
from cluster_helpers import (
    CLOCK,
    EMBEDDER,
    FIELDS,
    answer,
    cacm_docs,
    cacm_queries,
    cases,
    differences,
    single_database,
)

import recallql
from recallql import cluster
from recallql.cluster import gather
from recallql.cluster.bm25 import FIELD_NORMS, Bm25Stats, fieldnorm_code
from recallql.cluster.gather import SHIFT
from recallql.cluster.wire import dumps, loads, unpack


@pytest.fixture(scope="module")
def systems(index_shared_data, tmp_path_factory):
    docs = cacm_docs(index_shared_data)
    root = tmp_path_factory.mktemp("gather")
    single = single_database(root / "single", docs[:3000])
    c = cluster.connect(shards=4, path=root / "cluster", embedder=None, clock=CLOCK,
                        in_process=True)
    c.create_collection("cacm", text_fields=("title", "body"), fields=FIELDS,
                        embedder=EMBEDDER, shared=True)
    c.ingest("cacm", docs[:3000])
    yield single, c, docs, cacm_queries(index_shared_data)
    c.close()
    single.close()


def shard_legs(c, shard, plan):
    """A shard's own `legs` answer for `plan`: (packed batches, lexical parts, rows)."""
    return loads(c.actor(shard).legs(dumps((plan.model_dump_json(), None, None, 0, None))))


def test_items_are_spread_over_every_shard(systems):
    _, c, _, _ = systems
    sizes = [c.actor(i).shared().snapshot("cacm").size for i in range(4)]
    assert sum(sizes) == 3000
    assert min(sizes) > 600  # a hash of the item id, not one shard holding everything


def test_every_cacm_statement_equals_one_database(systems):
    single, c, _, queries = systems
    assert differences(c, single, cases(queries)) == []


def test_explain_rows_and_plan_match(systems):
    single, c, _, queries = systems
    q = next(iter(queries.values()))
    ours = c.explain("SEARCH cacm MATCHING :q LIMIT 5", q=q, analyze=True)
    theirs = single.explain("SEARCH cacm MATCHING :q LIMIT 5", q=q, analyze=True)
    assert answer(ours) == answer(theirs)
    assert [(n.operator, n.properties) for n in _nodes(ours.plan)] \
        == [(n.operator, n.properties) for n in _nodes(theirs.plan)]  # method= and why= too


def _nodes(node):
    yield node
    for child in node.children:
        yield from _nodes(child)


def test_naive_per_shard_bm25_would_differ(systems):
    """Without global statistics the merged top-10 is rarely one database's (the reason for
    re-scoring): shards' own BM25 scores, merged by score, against the single database."""
    single, c, _, queries = systems
    same = 0
    for q in queries.values():
        plan = c.plan("SEARCH cacm MATCHING :q USING LEXICAL LIMIT 10", q=q)
        naive = []
        for i in range(4):
            text, _, _ = shard_legs(c, i, plan)
            leg = unpack(text).legs[0]
            naive += list(zip((-leg.scores).tolist(), leg.ids.tolist(), strict=True))
        top = [item for _, item in sorted(naive)[:10]]
        same += top == single.execute("SEARCH cacm MATCHING :q USING LEXICAL LIMIT 10",
                                      q=q).ids()
    assert same < len(queries) // 2


def test_bound_holds_for_every_returned_row(systems):
    """A row's global BM25 never exceeds `bound` x its shard-local BM25 (what makes the deeper
    fetch sound), on every CACM query's candidates of every shard."""
    _, c, _, queries = systems
    checked = 0
    for q in list(queries.values())[:20]:
        plan = c.plan("SEARCH cacm MATCHING :q USING LEXICAL LIMIT 50", q=q)
        leg = plan.legs[0]
        counts = leg.term_counts or (1,) * len(leg.terms)
        runs = [shard_legs(c, i, plan) for i in range(4)]
        total = Bm25Stats.total([parts["lexical"].stats for _, parts, _ in runs])
        for text, parts, _ in runs:
            part = parts["lexical"]
            local = Bm25Stats(part.stats.docs, part.stats.tokens, part.stats.doc_freq)
            scores = unpack(text).legs[0].scores
            mine = local.score(leg.terms, counts, part.tf, part.codes)
            assert np.array_equal(mine.astype(np.float64), scores)  # tantivy's own arithmetic
            glob = total.score(leg.terms, counts, part.tf, part.codes)
            assert (glob <= total.bound(local, leg.terms, counts) * scores + 1e-9).all()
            checked += len(scores)
    assert checked > 1000


def test_a_shard_is_asked_again_when_its_rows_could_enter_the_top_n(systems, monkeypatch):
    """With first windows of 3 rows per leg, shards are asked again (counted) until none of
    their unreturned rows can enter a leg's global top N, lexical and semantic legs alike;
    the answers are still one database's."""
    single, c, _, queries = systems
    monkeypatch.setattr(gather, "_first", lambda spec, shards: 3)
    calls = []
    scatter = c.transport.scatter

    def counting(method, shards, args, write=False, **kw):
        if method == "legs":
            calls.append(len(shards))
        return scatter(method, shards, args, write=write, **kw)

    monkeypatch.setattr(c.transport, "scatter", counting)
    deeper = 0
    some = list(queries.values())[:12]
    for text in ("SEARCH cacm MATCHING :q USING LEXICAL LIMIT 3",
                 "SEARCH cacm MATCHING :q USING SEMANTIC LIMIT 3",
                 "SEARCH cacm MATCHING :q LIMIT 10"):
        for q in some:
            calls.clear()
            assert answer(c.execute(text, q=q)) == answer(single.execute(text, q=q))
            deeper += len(calls) > 1
    assert deeper >= 3 * len(some)  # every statement needed more than 3 rows of some shard


def test_first_windows_are_the_binomial_tail():
    """A shard's first window k is the smallest with P(X > k) <= SPILL, X ~ Binomial(N, 1/S)
    (computed here from the binomial sum); one shard gets the whole window."""
    from math import comb

    def tail(n, p, k):
        return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1, n + 1))

    for n, shards in [(100, 4), (100, 2), (10, 4), (250, 8)]:
        k = gather.first_window(n, shards)
        assert tail(n, 1 / shards, k) <= gather.SPILL < tail(n, 1 / shards, k - 1)
    assert gather.first_window(100, 4) == 47
    assert gather.first_window(100, 1) == 100


def test_terms_every_returned_row_accounts_for_leave_the_bound(systems):
    """Unreturned rows hold no term whose every document the shard returned, so the bound over
    the other terms holds for every row past a shard's first 20: checked against the same
    shard's deeper list, with the global statistics."""
    _, c, _, queries = systems
    checked = 0
    for q in list(queries.values())[:20]:
        plan = c.plan("SEARCH cacm MATCHING :q USING LEXICAL LIMIT 10", q=q)
        leg = plan.legs[0]
        counts = leg.term_counts or (1,) * len(leg.terms)
        short = [loads(c.actor(i).legs(dumps((plan.model_dump_json(), None, {"lexical": 20}, 0,
                                              None)))) for i in range(4)]
        full = [shard_legs(c, i, plan) for i in range(4)]
        total = Bm25Stats.total([parts["lexical"].stats for _, parts, _ in full])
        for (_, first, _), (_, parts, _) in zip(short, full, strict=True):
            part, deep = first["lexical"], parts["lexical"]
            local = Bm25Stats(part.stats.docs, part.stats.tokens, part.stats.doc_freq)
            held = gather.unreturned_terms(part, leg.terms)
            bound = total.bound(local, leg.terms, counts, held) * part.cut_score
            rest = total.score(leg.terms, counts, deep.tf, deep.codes)[part.tf.shape[0]:]
            assert (rest <= bound).all()
            checked += rest.shape[0]
    assert checked > 500


def test_top_order_is_score_then_item_id():
    """`top_order` (a sort by score, then ids within tied groups) equals the lexicographic
    order by (−score, item id), on random lists with many ties and without."""
    rng = np.random.default_rng(7)
    for trial in range(3000):
        m, n = int(rng.integers(0, 40)), int(rng.integers(0, 45))
        scores = rng.integers(0, 5, m).astype(np.float64) if trial % 2 else rng.random(m)
        ids = [f"doc-{k}" for k in rng.permutation(500)[:m]]
        keys = np.asarray(ids, dtype=str) if ids else np.zeros(0, dtype=str)
        assert gather.top_order(scores, ids, n).tolist() \
            == np.lexsort((keys, -scores))[:n].tolist()


def test_fieldnorm_codes_are_tantivys():
    assert FIELD_NORMS[:41].tolist() == list(range(41))
    assert FIELD_NORMS[41:45].tolist() == [42, 44, 46, 48]
    assert FIELD_NORMS[255] == 2_013_265_944
    assert [fieldnorm_code(n) for n in (0, 40, 41, 42, 43, 10**12)] == [0, 40, 40, 41, 41, 255]


def test_rowids_are_rekeyed_per_shard(systems):
    _, c, _, queries = systems
    q = next(iter(queries.values()))
    from recallql.cluster.gather import gather_legs

    batches = gather_legs(c.plan("SEARCH cacm MATCHING :q LIMIT 10", q=q), c.scatter,
                          range(4))
    shards = set((batches.features.rowid >> SHIFT).tolist())
    assert shards <= {0, 1, 2, 3} and len(shards) > 1


def test_after_writes_answers_still_equal(systems):
    single, c, docs, queries = systems
    single.ingest("cacm", docs[3000:])
    report = c.ingest("cacm", docs[3000:])
    assert report.count == len(docs) - 3000
    assert len(report.parts) > 1  # the new items went to several shards
    some = dict(list(queries.items())[:16])
    assert differences(c, single, cases(some)) == []


def test_one_shard_is_one_database_in_one_round(systems, tmp_path):
    """A shard holding every row scores as the global BM25 bit for bit: never asked again."""
    single, _, docs, queries = systems
    ref = single_database(tmp_path / "ref", docs[:500])
    c = cluster.connect(shards=1, path=tmp_path / "one", embedder=None, clock=CLOCK,
                        in_process=True)
    c.create_collection("cacm", text_fields=("title", "body"), fields=FIELDS,
                        embedder=EMBEDDER, shared=True)
    c.ingest("cacm", docs[:500])
    rounds = []
    scatter = c.transport.scatter
    c.transport.scatter = lambda m, s, a, write=False, **kw: (
        rounds.append(m) if m == "legs" else None) or scatter(m, s, a, write=write, **kw)
    some = dict(list(queries.items())[:16])
    assert differences(c, ref, cases(some)) == []
    assert rounds.count("legs") == len(cases(some))  # one round per statement
    c.close()
    ref.close()


def test_documents_of_several_items_say_what_is_not_gathered_yet(tmp_path):
    """The context leg and WITH CONTEXT need a document's neighbours, which may sit on other
    shards: refused by name; with the context leg off, answers are one database's."""
    from recallql.index.embedders import HashEmbedder

    items = [{"id": f"d{d}-{p}", "title": f"tape backup part {p}", "body": f"volume {d}",
              "doc_id": f"d{d}", "position": p} for d in range(6) for p in range(4)]
    c = cluster.connect(shards=4, path=tmp_path / "c", embedder=None, clock=CLOCK,
                        in_process=True)
    c.create_collection("kb", embedder=EMBEDDER, shared=True)
    c.ingest("kb", items)
    one = recallql.connect(tmp_path / "one", embedder=None, clock=CLOCK)
    one.create_collection("kb", embedder=HashEmbedder(64))
    one.ingest("kb", items)
    with pytest.raises(cluster.ClusterError, match="context leg"):
        c.execute("SEARCH kb MATCHING 'tape volume' LIMIT 5")
    off = "SEARCH kb MATCHING 'tape volume 3' FUSE CONVEX (weights = (context = 0)) LIMIT 8"
    assert answer(c.execute(off)) == answer(one.execute(off))
    with pytest.raises(cluster.ClusterError, match="WITH CONTEXT"):
        c.execute(off.replace(" FUSE", " WITH CONTEXT (before = 1) FUSE"))
    c.close()
    one.close()
