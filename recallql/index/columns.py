"""Append-only in-memory columns of a collection's item metadata (for snapshots and filters).

Rows are immutable once committed (only their liveness changes), so every column is an
append-only buffer; a snapshot is a read-only view of the first `size` rows, and later appends
never change what an earlier snapshot sees. Strings are dictionary-encoded (`StrPool`), so a
predicate on a string column is evaluated once per distinct value and gathered by code.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from recallql.index.schema import FieldType

MISSING = -1


class Buffer:
    """An append-only numpy array whose views stay valid as it grows."""

    def __init__(self, dtype: object):
        self._buf = np.zeros(16, dtype)
        self.n = 0

    def extend(self, values: Sequence | np.ndarray) -> None:
        """Append values (converted to the buffer's dtype)."""
        arr = np.asarray(values, dtype=self._buf.dtype)
        need = self.n + len(arr)
        if need > len(self._buf):
            grown = np.zeros(max(need, 2 * len(self._buf)), self._buf.dtype)
            grown[: self.n] = self._buf[: self.n]
            self._buf = grown
        self._buf[self.n:need] = arr
        self.n = need

    def view(self, size: int) -> np.ndarray:
        """Read-only view of the first `size` values."""
        out = self._buf[:size]
        out.flags.writeable = False
        return out


class StrPool:
    """Dictionary encoding: distinct strings ↔ int32 codes (``-1`` = missing)."""

    def __init__(self) -> None:
        self.vocab: list[str] = []
        self.index: dict[str, int] = {}

    def code(self, value: str | None) -> int:
        """Code of `value` (added when new)."""
        if value is None:
            return MISSING
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.vocab)
            self.vocab.append(value)
        return code

    def gather(self, predicate: Callable[[str], bool], codes: np.ndarray) -> np.ndarray:
        """bool per code: `predicate` of the code's string; missing codes give False."""
        table = np.fromiter((predicate(s) for s in self.vocab), bool, len(self.vocab))
        return np.append(table, False)[codes]

    def sort_ranks(self) -> np.ndarray:
        """int64[len(vocab)]: rank of each string in code-point order."""
        order = sorted(range(len(self.vocab)), key=self.vocab.__getitem__)
        ranks = np.empty(len(order), np.int64)
        ranks[order] = np.arange(len(order))
        return ranks


class StrView(Sequence[str]):
    """The strings of a coded column as a read-only sequence indexed by rowid."""

    def __init__(self, pool: StrPool, codes: np.ndarray):
        self._vocab = pool.vocab
        self._codes = codes

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self._vocab[c] for c in self._codes[index]]
        return self._vocab[self._codes[operator.index(index)]]

    def __iter__(self) -> Iterator[str]:
        vocab = self._vocab
        return (vocab[c] for c in self._codes.tolist())


class Column:
    """A declared field's values; `values(size)` and `present(size)` are read-only views."""

    kind: FieldType

    def extend(self, values: list[object]) -> None:
        raise NotImplementedError

    def present(self, size: int) -> np.ndarray:
        raise NotImplementedError


_NAN_KINDS = (FieldType.FLOAT, FieldType.TIMESTAMP)


class NumberColumn(Column):
    """int, float, bool and timestamp fields (timestamps as epoch seconds UTC); a missing value
    is stored as ``NaN`` (float, timestamp) or 0 (int, bool) and `present` is False."""

    _DTYPES = {FieldType.INT: np.int64, FieldType.FLOAT: np.float64, FieldType.BOOL: np.bool_,
               FieldType.TIMESTAMP: np.float64}

    def __init__(self, kind: FieldType):
        self.kind = kind
        self._values = Buffer(self._DTYPES[kind])
        self._present = Buffer(np.bool_)

    def extend(self, values: list[object]) -> None:
        fill = np.nan if self.kind in _NAN_KINDS else 0
        self._present.extend([v is not None for v in values])
        self._values.extend([fill if v is None else v for v in values])

    def values(self, size: int) -> np.ndarray:
        return self._values.view(size)

    def present(self, size: int) -> np.ndarray:
        return self._present.view(size)


class StrColumn(Column):
    """A dictionary-encoded str field (also id, doc_id and entity, which share one pool)."""

    kind = FieldType.STR

    def __init__(self, pool: StrPool | None = None):
        self.pool = pool or StrPool()
        self._codes = Buffer(np.int32)

    def extend(self, values: list[object]) -> None:
        code = self.pool.code
        self._codes.extend([code(v) for v in values])  # type: ignore[arg-type]

    def codes(self, size: int) -> np.ndarray:
        return self._codes.view(size)

    def present(self, size: int) -> np.ndarray:
        return self._codes.view(size) != MISSING

    def where(self, predicate: Callable[[str], bool], size: int) -> np.ndarray:
        """bool[size]: rows whose value satisfies `predicate` (missing → False)."""
        return self.pool.gather(predicate, self.codes(size))


class ListColumn(Column):
    """A list-of-str field: per-row offsets into a flat, dictionary-encoded value list."""

    kind = FieldType.LIST_STR

    def __init__(self) -> None:
        self.pool = StrPool()
        self._flat = Buffer(np.int32)
        self._owner = Buffer(np.int64)
        self._present = Buffer(np.bool_)
        self.rows = 0

    def extend(self, values: list[object]) -> None:
        flat, owner = [], []
        for offset, value in enumerate(values):
            for item in value or ():  # type: ignore[union-attr]
                flat.append(self.pool.code(item))
                owner.append(self.rows + offset)
        self._flat.extend(flat)
        self._owner.extend(owner)
        self._present.extend([v is not None for v in values])
        self.rows += len(values)

    def present(self, size: int) -> np.ndarray:
        return self._present.view(size)

    def any(self, predicate: Callable[[str], bool], size: int) -> np.ndarray:
        """bool[size]: rows with at least one element satisfying `predicate`."""
        flat, owner = self._flat.view(self._flat.n), self._owner.view(self._owner.n)
        hit = self.pool.gather(predicate, flat) & (owner < size)
        out = np.zeros(size, bool)
        out[owner[hit]] = True
        return out


def make_column(kind: FieldType) -> Column:
    """An empty column for a declared field of type `kind`."""
    if kind is FieldType.STR:
        return StrColumn()
    if kind is FieldType.LIST_STR:
        return ListColumn()
    return NumberColumn(kind)
