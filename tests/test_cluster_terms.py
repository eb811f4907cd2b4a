"""A shard's record of its rows' terms (`recallql.cluster.terms.RowTerms`): the counts of a
statement's query terms for any rows, equal to counting each row's tokens."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from recallql.cluster.terms import RowTerms


def test_frequencies_are_each_rows_counts_of_the_query_terms():
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(60)]
    rows = {}
    terms = RowTerms()
    for rowid in rng.permutation(3000)[:700].tolist():  # sparse rowids, more than one growth
        tokens = Counter(rng.choice(words, int(rng.integers(0, 30))).tolist())
        rows[rowid] = tokens
        terms.add(rowid, len(rows) % 256, tokens.items())
    assert len(terms) == 700
    asked = np.asarray(list(rows)[::3], np.int64)
    query = ["w3", "w17", "absent", "w59"]
    tf, codes = terms.frequencies(asked, query)
    assert tf.tolist() == [[rows[r][t] for t in query] for r in asked.tolist()]
    order = list(rows)
    assert codes.tolist() == [(order.index(r) + 1) % 256 for r in asked.tolist()]
    assert terms.missing(np.asarray([asked[0], 5000, 2999], np.int64)) == \
        [r for r in (5000, 2999) if r not in rows]


def test_no_query_term_known_gives_zeros_and_unknown_rows_are_refused():
    terms = RowTerms()
    terms.add(4, 7, [("alpha", 2)])
    tf, codes = terms.frequencies(np.asarray([4], np.int64), ["beta"])
    assert tf.tolist() == [[0]] and codes.tolist() == [7]
    with pytest.raises(KeyError, match="without recorded terms"):
        terms.frequencies(np.asarray([3], np.int64), ["alpha"])
