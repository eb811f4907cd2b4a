"""The eligible rows of a statement, sparse or dense.

A filter resolved through per-value postings (`recallql.index.filters.posting_rows`: equality
and ``IN`` on declared str fields, and AND / OR of those) yields the ascending rowids it keeps;
any other filter yields a bool mask over every row. `RowSet` holds either and converts lazily,
so that a selective filter costs O(rows kept) per statement — a session's 100 rows of a 1M-row
collection never become a 1M-wide mask — while a broad one keeps the vectorised mask.
"""

from __future__ import annotations

import functools

import numpy as np


class RowSet:
    """A set of rowids below `size`, from ascending rowids or a bool mask.

    Args:
        size: rowid upper bound (the snapshot's size).
        rows: int64[m] ascending, distinct rowids < `size` (the sparse form), or
        mask: bool[size] (the dense form); exactly one of the two.

    Raises:
        ValueError: neither or both forms, or a mask of the wrong shape or dtype.
    """

    def __init__(self, size: int, *, rows: np.ndarray | None = None,
                 mask: np.ndarray | None = None):
        if (rows is None) == (mask is None):
            raise ValueError("a RowSet takes rows or a mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != bool or mask.shape != (size,):
                raise ValueError(f"allowed must be bool[{size}], got {mask.dtype}"
                                 f"{list(mask.shape)}")
        self.size = size
        self._rows = None if rows is None else np.asarray(rows, np.int64)
        self._mask = mask
        self._kept: list[tuple[np.ndarray, RowSet]] = []

    @classmethod
    def of(cls, allowed: RowSet | np.ndarray, size: int) -> RowSet:
        """`allowed` as a RowSet (a bool[size] mask is wrapped, checked).

        Raises:
            ValueError: a mask of the wrong shape or dtype, or a RowSet of another size.
        """
        if isinstance(allowed, RowSet):
            if allowed.size != size:
                raise ValueError(f"allowed rows are of a {allowed.size}-row snapshot, "
                                 f"not {size}")
            return allowed
        return cls(size, mask=allowed)

    @property
    def sparse(self) -> bool:
        """True when held as rowids (from postings)."""
        return self._rows is not None

    @functools.cached_property
    def rows(self) -> np.ndarray:
        """int64[m] ascending rowids."""
        if self._rows is not None:
            return self._rows
        assert self._mask is not None
        return np.flatnonzero(self._mask).astype(np.int64)

    @functools.cached_property
    def mask(self) -> np.ndarray:
        """bool[size] (built on first use from the rowids: O(size))."""
        if self._mask is not None:
            return self._mask
        out = np.zeros(self.size, bool)
        out[self.rows] = True
        return out

    @functools.cached_property
    def count(self) -> int:
        """Rows in the set."""
        if self._rows is not None:
            return len(self._rows)
        assert self._mask is not None
        return int(np.count_nonzero(self._mask))

    def keep(self, where: np.ndarray) -> RowSet:
        """The rows of this set where the bool[size] `where` holds (O(rows) when sparse).

        `where` must not change while this set lives (the snapshot's read-only `live` mask, as
        the legs pass it): the result is kept and returned again for the same array, since a
        statement's legs each ask for the live rows of its filter."""
        for array, kept in self._kept:
            if array is where:
                return kept
        if self._rows is not None:
            kept = RowSet(self.size, rows=self._rows[where[self._rows]])
        else:
            assert self._mask is not None
            kept = RowSet(self.size, mask=self._mask & where)
        if len(self._kept) < 4:  # a statement asks for one or two arrays
            self._kept.append((where, kept))
        return kept

    def __getitem__(self, rowids: np.ndarray) -> np.ndarray:
        """bool[k]: membership of each of `rowids` (each in ``0 … size-1``), like indexing a
        mask."""
        rowids = np.asarray(rowids, np.int64)
        if self._rows is None:
            assert self._mask is not None
            return self._mask[rowids]
        rows = self._rows
        if not len(rows):
            return np.zeros(rowids.shape, bool)
        at = np.minimum(np.searchsorted(rows, rowids), len(rows) - 1)
        return rows[at] == rowids
