"""String columns read by rowid (`recallql.index.columns`): single reads, `StrView.take` and
`StrArray.take` return the stored strings, whatever the path (per-row reader, buffer slices,
one buffer copy), and a snapshot's view never sees rows appended after it."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index.columns import (
    TAKE_COPY_SHARE,
    DerivedStrColumn,
    StrArray,
    StrColumn,
    StrView,
)

IDS = ["a#0", "héllo wörld", "", "日本語", "x" * 300, "b#1"]


def ids() -> StrArray:
    column = StrArray()
    column.extend(IDS[:3])
    column.extend(IDS[3:])  # two appends: the buffers grow
    return column


def test_views_read_each_string_by_rowid_and_by_take():
    view = StrView(ids(), len(IDS))
    assert [view[i] for i in range(len(IDS))] == IDS
    assert view[-1] == "b#1" and view[1:4] == IDS[1:4]
    assert view.take([5, 0, 3, 3]) == ["b#1", "a#0", "日本語", "日本語"]
    with pytest.raises(IndexError):
        view[len(IDS)]


def test_take_decodes_the_same_from_slices_and_from_one_copy():
    column = StrArray()
    values = [f"item-{i}-é" for i in range(TAKE_COPY_SHARE * 4)]
    column.extend(values)
    few = np.array([7, 0, 255, 3])  # fewer than 1/TAKE_COPY_SHARE of the rows: slices
    every = np.arange(len(values))  # all rows: one copy of the buffer
    assert column.take(few, len(values)) == [values[i] for i in few]
    assert column.take(every, len(values)) == values
    assert column.take(np.zeros(0, np.int64), len(values)) == []


def test_a_view_does_not_see_rows_appended_after_it():
    column = ids()
    view = StrView(column, 2)
    assert view.take([1]) == ["héllo wörld"]  # the reader is built at this size
    column.extend(["late"] * 100)  # the buffers are reallocated
    assert len(view) == 2 and view[1] == "héllo wörld"
    with pytest.raises(IndexError):
        view[2]


def test_pooled_and_derived_columns_read_missing_and_same_values():
    base = ids()
    docs = DerivedStrColumn(base)
    docs.extend([None, "doc-1", None, "doc-1", None, "doc-2"])  # None: same as the id
    assert StrView(docs, 6).take(range(6)) == ["a#0", "doc-1", "", "doc-1", "x" * 300, "doc-2"]
    tags = StrColumn()
    tags.extend(["ops", None, "sec"])
    view = StrView(tags, 3)
    assert view.take([0, 1, 2]) == ["ops", None, "sec"] and view[1] is None
