"""`scoring.context_credit`: max over the direct candidates of a document of weight^d · relevance
(credit halves per step away from a match), with its tie rules — exact values."""

from __future__ import annotations

import numpy as np

from recallql.engine.scoring import context_credit


def credit(doc, place, relevance, giver, weight=0.5):
    return context_credit(weight, np.array(doc, np.int64), np.array(place, np.int64),
                          np.array(relevance, np.float64), np.array(giver, bool))


def test_a_far_strong_match_beats_a_near_weak_one():
    # rows: strong match at place 0, weak match at 1, the credited row at 2
    got, source, distance = credit([7, 7, 7], [0, 1, 2], [1.0, 0.3, 0.0], [True, True, False])
    assert got[2] == 0.5 ** 2 * 1.0 and source[2] == 0 and distance[2] == 2  # 0.25 > 0.5 · 0.3
    assert got[1] == 0.5 * 1.0 and source[1] == 0 and distance[1] == 1
    assert got[0] == 0.5 * 0.3 and source[0] == 1 and distance[0] == 1


def test_only_direct_candidates_give_and_never_to_themselves():
    got, source, distance = credit([1, 1], [4, 5], [0.8, 0.0], [True, False])
    assert (got[1], source[1], distance[1]) == (0.5 * 0.8, 0, 1)
    assert (got[0], source[0], distance[0]) == (0.0, -1, 0)  # its only neighbour gives nothing


def test_other_documents_and_documents_of_one_item_give_nothing():
    got, source, _ = credit([1, 2, -1, -1], [0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0], [True] * 4)
    assert got.tolist() == [0.0] * 4 and source.tolist() == [-1] * 4


def test_ties_go_to_the_nearer_item_then_to_the_item_before():
    # row 2 at place 10: 0.5 · 0.5 from places 9 and 11, 0.25 · 1.0 from place 12: all 0.25;
    # the nearer ones win (distance 1), and of those the item before (place 9, row 0)
    got, source, distance = credit([3, 3, 3, 3], [9, 11, 10, 12], [0.5, 0.5, 0.0, 1.0],
                                   [True, True, False, True])
    assert (got[2], distance[2], source[2]) == (0.25, 1, 0)
    assert got[1] == max(0.5 * 0.5, 0.5 * 1.0) and source[1] == 3


def test_weight_zero_and_empty_input():
    got, _, _ = credit([1, 1], [0, 1], [1.0, 1.0], [True, True], weight=0.0)
    assert got.tolist() == [0.0, 0.0]
    got, source, distance = credit([], [], [], [])
    assert got.shape == source.shape == distance.shape == (0,)


def _by_hand(weight, doc, place, relevance, giver):
    """The rule row by row: the best `weight^d · relevance` of another direct candidate of the
    row's document, ties to the nearer item, then to the item before."""
    m = len(doc)
    out = np.zeros(m), np.full(m, -1, np.int64), np.zeros(m, np.int64)
    for a in range(m):
        best = None
        for b in range(m):
            if b == a or doc[b] < 0 or doc[b] != doc[a] or not giver[b]:
                continue
            d = abs(int(place[a]) - int(place[b]))
            key = (-(float(np.power(weight, np.int64(d))) * relevance[b]), d, place[b] > place[a])
            if best is None or key < best[0]:
                best = key, b, d
        if best is not None:
            out[0][a], out[1][a], out[2][a] = -best[0][0], best[1], best[2]
    return out


def test_random_documents_match_the_rule_by_hand():
    rng = np.random.default_rng(7)
    for _ in range(400):
        m = int(rng.integers(1, 25))
        doc = rng.integers(-1, 3, m)
        place = rng.permutation(m + 5)[:m]  # distinct places
        relevance = rng.choice([0.0, 0.125, 0.25, 0.5, 1.0, 0.3], m)  # many exact ties
        giver = rng.random(m) < 0.6
        weight = float(rng.choice([0.5, 0.25, 1.0, 0.0, 0.7]))
        got = context_credit(weight, doc, place, relevance, giver)
        want = _by_hand(weight, doc, place, relevance, giver)
        for g, w in zip(got, want, strict=True):
            assert g.tolist() == w.tolist()


def test_long_documents_match_the_rule_by_hand():
    """Documents of up to 140 candidates, which pair each row with its `BAND` nearest rows
    first and with every row of its document only when its best giver may lie beyond (weak or
    absent givers nearby, exact ties, weight 1 or 0)."""
    rng = np.random.default_rng(11)
    for case in range(60):
        m = int(rng.integers(60, 140))
        doc = np.where(rng.random(m) < 0.1, -1, rng.integers(0, 2, m) * (case % 3 == 0))
        place = rng.permutation(3 * m)[:m]
        relevance = rng.random(m) if case % 2 else \
            rng.choice([0.0, 1e-9, 1e-4, 0.125, 0.5, 1.0], m)  # givers far beyond weak ones
        giver = rng.random(m) < float(rng.choice([0.05, 0.3, 0.9]))
        weight = float(rng.choice([0.5, 0.25, 0.7, 1.0, 0.0]))
        got = context_credit(weight, doc, place, relevance, giver)
        want = _by_hand(weight, doc, place, relevance, giver)
        for g, w in zip(got, want, strict=True):
            assert g.tolist() == w.tolist()
