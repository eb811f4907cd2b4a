"""recallql.index.colfiles: append-only, memory-mapped column files."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index.colfiles import ColumnFile, StrFile


@pytest.fixture(params=["disk", "memory"])
def where(request, tmp_path):
    return None if request.param == "memory" else tmp_path


def column(where, name="c.i64", dtype=np.int64):
    return ColumnFile(None if where is None else where / name, dtype)


def test_append_then_view(where):
    col = column(where)
    assert len(col) == 0 and col.view(0).tolist() == []
    assert col.append(0, np.array([1, 2, 3])) == 3
    assert col.append(3, np.array([4])) == 4
    view = col.view(4)
    assert view.tolist() == [1, 2, 3, 4] and view.dtype == np.dtype("<i8")
    assert not view.flags.writeable
    assert col.view(2).tolist() == [1, 2]


def test_an_earlier_view_is_unchanged_by_appends(where):
    col = column(where)
    col.append(0, np.arange(5))
    before = col.view(5)
    col.append(5, np.arange(100, 110))
    assert before.tolist() == [0, 1, 2, 3, 4]
    assert col.view(15).tolist()[5:] == list(range(100, 110))


def test_append_drops_what_an_unfinished_batch_left(where):
    col = column(where)
    col.append(0, np.arange(3))
    col.append(3, np.array([7, 7, 7]))  # a batch that never committed
    assert col.append(3, np.array([9])) == 4  # the next batch starts again at 3
    assert col.view(4).tolist() == [0, 1, 2, 9] and len(col) == 4


def test_truncate_and_refusals(where):
    col = column(where, "f.f64", np.float64)
    col.append(0, np.array([0.5, 1.5, 2.5]))
    col.truncate(5)  # longer than the file: nothing happens
    assert len(col) == 3
    col.truncate(1)
    assert col.view(1).tolist() == [0.5] and len(col) == 1
    with pytest.raises(ValueError, match="holds 1 values, 2 expected"):
        col.view(2)
    with pytest.raises(ValueError, match="cannot append at 3"):
        col.append(3, np.array([1.0]))


def test_values_survive_reopening(tmp_path):
    col = ColumnFile(tmp_path / "c.i32", np.int32)
    col.append(0, np.array([5, -1, 7]))
    col.sync()
    col.close()
    again = ColumnFile(tmp_path / "c.i32", np.int32)
    assert len(again) == 3 and again.view(3).tolist() == [5, -1, 7]
    assert (tmp_path / "c.i32").stat().st_size == 12  # raw little-endian int32


def test_strings(where):
    strs = StrFile(None if where is None else where / "ids")
    assert strs.append(0, ["a", "ßeta", ""]) == 3
    assert strs.append(3, ["日本"]) == 4
    view = strs.view(4)
    assert len(view) == 4 and view[1] == "ßeta" and view[2] == "" and view[-1] == "日本"
    assert view.take(np.array([3, 0, 1])) == ["日本", "a", "ßeta"]
    assert view.values() == ["a", "ßeta", "", "日本"]
    with pytest.raises(IndexError):
        view[4]
    strs.append(2, ["c"])  # drops "" and 日本
    assert strs.view(3).values() == ["a", "ßeta", "c"]
    strs.truncate(1)
    assert strs.view(1).values() == ["a"] and strs.view(0).values() == []
