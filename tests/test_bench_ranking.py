"""Speed-ups found by the latency benchmark order exactly like the code they replaced:
`top_by_score` like the plain ``(−score, id)`` sort (reading ids only for ties), `total_order`
with item ids ranked among the candidates like the collection-wide id rank."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallql.engine.candidates import Candidates, LegColumn
from recallql.engine.features import Features, Strings
from recallql.engine.ordering import _neg_or_inf, total_order
from recallql.engine.plan import LegKind
from recallql.index.ranking import top_by_score


def _plain(scores, n, ids):
    return sorted(range(len(scores)), key=lambda i: (-scores[i], ids[i]))[:n]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=40), st.integers(0, 45), st.randoms())
def test_same_order_as_plain_sort(levels, n, rnd):
    scores = [level / 4 for level in levels]  # few distinct values: many ties
    ids = [f"id{rnd.randrange(10**6):06d}-{i}" for i in range(len(scores))]
    assert top_by_score(scores, n, ids.__getitem__) == _plain(scores, n, ids)


def test_numpy_float32_scores():
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.9], np.float32)
    ids = ["e", "d", "c", "b", "a"]
    assert top_by_score(scores, 3, ids.__getitem__) == [4, 1, 2]


def test_ids_read_for_ties_only():
    read = []

    def key(i):
        read.append(i)
        return str(i)

    assert top_by_score([3.0, 2.0, 2.0, 1.0, 0.5], 3, key) == [0, 1, 2]
    assert sorted(read) == [1, 2]


@pytest.mark.parametrize("n", [0, -1])
def test_nothing_wanted(n):
    assert top_by_score([1.0, 2.0], n, str) == []


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(0, 3), st.randoms())
def test_total_order_with_local_id_ranks_matches_global_ranks(size, levels, rnd):
    """`total_order` ranks item ids among the candidates only; the order equals the one built
    from the collection-wide id rank it used before."""
    ids = [f"i{rnd.randrange(size)}" for _ in range(size)]  # repeated ids: tombstoned versions
    doc_ids = [f"d{rnd.randrange(3)}" for _ in range(size)]
    positions = np.array([rnd.randrange(2) for _ in range(size)], np.int64)
    rowid = np.array(sorted(rnd.sample(range(size), rnd.randint(1, size))), np.int64)
    m = len(rowid)
    pick = lambda: np.array([rnd.randrange(levels + 1) / 4 for _ in range(m)])  # noqa: E731
    bm25, cosine = pick(), pick()
    features = Features(rowid=rowid, ids=Strings.of([ids[r] for r in rowid]),
                        doc_ids=Strings.of([doc_ids[r] for r in rowid]), positions=positions[rowid])
    legs = (LegColumn("lexical", LegKind.LEXICAL, np.ones(m, np.int64), bm25),
            LegColumn("semantic", LegKind.SEMANTIC, np.ones(m, np.int64), cosine))
    cands = Candidates(features=features, legs=legs)
    score = pick()
    rank = {v: i for i, v in enumerate(sorted(set(ids)))}
    global_rank = np.array([rank[v] for v in ids], np.int64)
    _, doc_rank = np.unique(np.array([doc_ids[r] for r in rowid]), return_inverse=True)
    keys = (global_rank[rowid], positions[rowid], doc_rank,
            _neg_or_inf(bm25), _neg_or_inf(cosine), -score)
    expected = np.lexsort(keys)
    got = total_order(cands, score)
    assert got.tolist() == expected.tolist()


def test_total_order_reads_strings_only_for_ties():
    read = []

    def gather(index):
        read.append(len(index))
        return [f"i{i}" for i in index.tolist()]

    m = 6
    features = Features(rowid=np.arange(m), ids=Strings(gather, np.arange(m)),
                        doc_ids=Strings(gather, np.arange(m)), positions=np.zeros(m, np.int64))
    cosine = np.array([0.1, 0.5, 0.3, 0.9, 0.7, 0.2])
    cands = Candidates(features=features, legs=(
        LegColumn("semantic", LegKind.SEMANTIC, np.ones(m, np.int64), cosine),))
    assert total_order(cands, cosine).tolist() == [3, 4, 1, 2, 5, 0]
    assert read == []  # no tie: the numeric keys give the order
    tied = np.array([0.5, 0.5, 0.3, 0.9, 0.3, 0.2])
    cands = Candidates(features=features, legs=(
        LegColumn("semantic", LegKind.SEMANTIC, np.ones(m, np.int64), tied),))
    assert total_order(cands, tied).tolist() == [3, 0, 1, 2, 4, 5]
    assert read  # ties: broken by doc id, position and item id
