"""Neighbours of ordered items (recallql.index.neighbours): same document, position order,
eligible rows only."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index.neighbours import Neighbours, document_codes

#: rowid: (doc, position, id). Rows 0-4: session a (row 3 rewound: not eligible; row 5 is a
#: replaced version: not live); rows 6-7: session b; row 8: a document of one item.
ROWS = [("a", 1, "m1"), ("a", 2, "m2"), ("b", 1, "n1"), ("a", 3, "m3"), ("a", 4, "m4"),
        ("a", 2, "m2-old"), ("b", 2, "n2"), ("a", 5, "m5"), ("solo", 0, "s")]


@pytest.fixture
def nb():
    docs, positions, ids = zip(*ROWS, strict=True)
    rank = {v: i for i, v in enumerate(sorted(ids))}
    live = np.ones(len(ROWS), bool)
    live[5] = False
    return Neighbours(document_codes(docs), np.array(positions), np.array([rank[i] for i in ids]),
                      live)


ELIGIBLE = np.array([True, True, True, False, True, True, True, True, True])


def test_document_codes():
    assert document_codes(["a", "b", "a", "c"]).tolist() == [0, 1, 0, 2]


def test_previous_and_next_within_the_document(nb):
    rows = np.array([0, 1, 4, 2, 6, 8], np.int64)
    assert nb.step(rows, -1, ELIGIBLE).tolist() == [-1, 0, 1, -1, 2, -1]  # 4 skips rewound 3
    assert nb.step(rows, 1, ELIGIBLE).tolist() == [1, 4, 7, 6, -1, -1]


def test_a_row_that_is_not_live_has_no_neighbours(nb):
    assert nb.step(np.array([5]), 1, ELIGIBLE).tolist() == [-1]


def test_around_returns_document_order(nb):
    assert nb.around(4, before=2, after=2, eligible=ELIGIBLE) == ([0, 1], [7])
    assert nb.around(8, before=1, after=1, eligible=ELIGIBLE) == ([], [])


def test_direction_is_checked(nb):
    with pytest.raises(ValueError, match="direction must be -1 or \\+1, got 2"):
        nb.step(np.array([0]), 2, ELIGIBLE)


def test_document_places_count_eligible_items_only(nb):
    """Places in document order among the eligible rows: session a is rows 0, 1, (3 rewound),
    4, 7; session b rows 2, 6; row 5 is not live. The same from a mask and from the `Places`
    of a sparse row set; without a filter every ordered row counts."""
    from recallql.index.rowsets import RowSet

    rows = np.array([0, 1, 4, 7, 2, 6, 5], np.int64)
    doc, place = nb.document_places(rows, ELIGIBLE)
    assert doc.tolist() == [0, 0, 0, 0, 1, 1, -1]
    assert place.tolist() == [1, 2, 3, 4, 5, 6, -1]  # rows 1 and 4 are 1 apart: 3 is skipped
    sparse = nb.places(RowSet(len(ROWS), rows=np.flatnonzero(ELIGIBLE & (np.arange(9) != 5))))
    assert nb.document_places(rows, sparse)[1].tolist() == place.tolist()
    assert nb.document_places(rows)[1].tolist() == [0, 1, 3, 4, 5, 6, -1]  # 3 counts here
