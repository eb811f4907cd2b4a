"""Both legs rank ties by item id, whatever the insertion order, batch layout or n cut; filters
(`allowed`) never let an excluded row through and top-n returns n eligible rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recallql
from recallql.index import text as text_module
from tests.conftest import index_unit

DIM = 8
TEXTS = ["alpha beta", "alpha", "alpha beta", "beta gamma", "alpha", "gamma", "alpha beta",
         "delta", "alpha alpha beta", "beta"]


def _corpus(rng: np.random.Generator, n: int = 40) -> list[dict]:
    base = index_unit(rng, 4, DIM)
    items = []
    for i in range(n):
        items.append({"id": f"{rng.integers(0, 10**6):06d}-{i}", "text": TEXTS[i % len(TEXTS)],
                      "vector": base[i % 4]})  # many identical texts and identical vectors
    return items


def _build(items: list[dict], batch_sizes: list[int]):
    db = recallql.connect(embedder=None)
    db.create_collection("c", ("text",), dim=DIM, embedder=None)
    start = 0
    for size in batch_sizes:
        if start < len(items):
            db.ingest("c", items[start:start + size])
            start += size
    if start < len(items):
        db.ingest("c", items[start:])
    return db


def _ranked(db, n, allowed_ids=None):
    snap = db.snapshot("c")
    allowed = None
    if allowed_ids is not None:
        allowed = np.array([i in allowed_ids for i in snap.ids], bool)
    lex = snap.lexical_topn(snap.analyze("alpha beta"), n, allowed)
    sem = snap.semantic_topn(_QUERY, n, allowed)
    return ([(snap.ids[r], float(s)) for r, s in zip(*lex, strict=True)],
            [(snap.ids[r], float(s)) for r, s in zip(*sem, strict=True)])


_QUERY = np.linspace(-1, 1, DIM).astype(np.float32)


def _expected(ranked_full, n):
    """The first n of the full list, which must itself be sorted by (-score, id)."""
    assert ranked_full == sorted(ranked_full, key=lambda x: (-x[1], x[0]))
    return ranked_full[:n]


@pytest.mark.parametrize("n", [1, 3, 5, 7, 12, 13, 40, 100])
def test_ties_are_ranked_by_id_in_any_insertion_order(n):
    rng = np.random.default_rng(1)
    items = _corpus(rng)
    forward = _build(items, [40])
    backward = _build(items[::-1], [3, 1, 7, 2, 11])
    full = _ranked(forward, 100)
    assert _ranked(forward, n) == _ranked(backward, n) == (
        _expected(full[0], n), _expected(full[1], n))
    lexical_scores = [s for _, s in full[0]]
    assert len(set(lexical_scores)) < len(lexical_scores)  # there really are ties
    assert len({s for _, s in full[1]}) == 4


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 45),
       sizes=st.lists(st.integers(1, 15), min_size=1, max_size=6))
def test_ties_property(seed, n, sizes):
    rng = np.random.default_rng(seed)
    items = _corpus(rng, 30)
    shuffled = [items[i] for i in rng.permutation(len(items))]
    a, b = _build(items, [30]), _build(shuffled, sizes)
    assert _ranked(a, n) == _ranked(b, n)


@pytest.mark.parametrize("term_set_max", [0, 8192], ids=["over-fetch", "term-set"])
@pytest.mark.parametrize("keep", [0.02, 0.3, 0.9])
def test_allowed_mask_is_pushed_down(monkeypatch, term_set_max, keep):
    monkeypatch.setattr(text_module, "TERM_SET_MAX", term_set_max)
    rng = np.random.default_rng(int(keep * 100))
    items = _corpus(rng, 300)
    db = _build(items, [100, 100, 100])
    db.ingest("c", [dict(items[5], text="alpha replaced")])  # one tombstone
    ids = [it["id"] for it in items]
    allowed = {i for i in ids if rng.random() < keep}
    full_lex, full_sem = _ranked(db, 1000)
    for n in (1, 5, 10, 50):
        lex, sem = _ranked(db, n, allowed)
        assert {i for i, _ in lex} <= allowed and {i for i, _ in sem} <= allowed
        assert lex == [x for x in full_lex if x[0] in allowed][:n]
        assert sem == [x for x in full_sem if x[0] in allowed][:n]
        assert len(sem) == min(n, len(allowed))


def test_topn_edge_cases():
    db = recallql.connect(embedder=None)
    db.create_collection("c", ("text",), dim=DIM, embedder=None)
    snap = db.snapshot("c")
    assert snap.size == 0 and not snap.has_vectors()
    for rows, scores in (snap.lexical_topn(["alpha"], 10), snap.semantic_topn(_QUERY, 10)):
        assert rows.dtype == np.int64 and scores.dtype == np.float32 and len(rows) == 0
    db.ingest("c", _corpus(np.random.default_rng(3), 5))
    snap = db.snapshot("c")
    assert len(snap.semantic_topn(_QUERY, 1000)[0]) == 5
    assert len(snap.semantic_topn(_QUERY, 0)[0]) == 0
    assert len(snap.lexical_topn([], 10)[0]) == 0
    nothing = np.zeros(snap.size, bool)
    assert len(snap.lexical_topn(["alpha"], 10, nothing)[0]) == 0
    assert len(snap.semantic_topn(_QUERY, 10, nothing)[0]) == 0
    for bad in (np.zeros(DIM), np.full(DIM, np.nan), np.ones(DIM + 1)):
        with pytest.raises(ValueError, match="query vector"):
            snap.semantic_topn(bad, 3)
    with pytest.raises(ValueError, match="allowed"):
        snap.lexical_topn(["alpha"], 3, np.ones(snap.size + 1, bool))
    with pytest.raises(ValueError, match="allowed"):
        snap.semantic_topn(_QUERY, 3, np.ones(snap.size, np.int8))
