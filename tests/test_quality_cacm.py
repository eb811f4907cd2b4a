"""Real data: the default hybrid SEARCH on CACM (Fox 1983) with the real default embedder.

Reference (shared/data/README.md): plain RRF of one-field BM25 + MiniLM measured 0.537–0.540
nDCG@10 over the 52 judged queries; the issue asks for ≥ 0.53.

The 3,204 document vectors come from `benchmarks.vectors_cache` (keyed by model and texts,
outside the repository): the first run embeds them with the real model, later runs read them.
"""

from __future__ import annotations

import pytest

import recallql
from benchmarks.vectors_cache import CachedEmbedder
from recallql.datasets import corpora
from recallql.datasets.evaluation import evaluate

pytestmark = pytest.mark.slow  # a real corpus and the real model (queries; documents cached)


@pytest.fixture(scope="module")
def cacm(index_shared_data, tmp_path_factory):
    root = index_shared_data / "ir" / "cacm"
    db = recallql.connect(tmp_path_factory.mktemp("cacm") / "db", embedder=None)
    db.create_collection("cacm", text_fields=("title", "body"),
                         fields={"source": str, "authors": list[str], "tags": list[str]},
                         embedder=CachedEmbedder())
    report = db.ingest("cacm", corpora.load_cacm(root))
    assert report.count == 3204
    queries = corpora.load_cacm_queries(root)
    qrels = {qid: [d for d, rel in judged.items() if rel > 0]
             for qid, judged in corpora.load_cacm_qrels(root).items()}
    yield db, queries, {qid: rel for qid, rel in qrels.items() if rel}
    db.close()


def run(db, queries, qrels, stmt):
    runs = {qid: db.execute(stmt, q=queries[qid]).ids() for qid in qrels}
    return evaluate(runs, qrels)


def test_cacm_has_52_judged_queries(cacm):
    _, queries, qrels = cacm
    assert len(queries) == 64
    assert len(qrels) == 52


def test_default_hybrid_search_reaches_ndcg_053(cacm):
    db, queries, qrels = cacm
    metrics = run(db, queries, qrels, "SEARCH cacm MATCHING :q LIMIT 100")
    assert metrics["queries"] == 52
    assert metrics["ndcg@10"] >= 0.53, metrics


def test_hybrid_beats_each_leg_alone(cacm):
    db, queries, qrels = cacm
    hybrid = run(db, queries, qrels, "SEARCH cacm MATCHING :q LIMIT 100")["ndcg@10"]
    lexical = run(db, queries, qrels, "SEARCH cacm MATCHING :q USING LEXICAL LIMIT 100")
    semantic = run(db, queries, qrels, "SEARCH cacm MATCHING :q USING SEMANTIC LIMIT 100")
    assert hybrid > lexical["ndcg@10"]
    assert hybrid > semantic["ndcg@10"]
    # BM25 alone: 0.480 with Lucene's 33 stopwords, 0.503 with the Snowball list (analyser 2)
    assert 0.40 <= lexical["ndcg@10"] <= 0.53, lexical
