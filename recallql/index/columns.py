"""Append-only in-memory columns of a collection's item metadata (for snapshots and filters).

Rows are immutable once committed (only their liveness changes), so every column is an
append-only buffer; a snapshot is a read-only view of the first `size` rows, and later appends
never change what an earlier snapshot sees. Strings are dictionary-encoded (`StrPool`), so a
predicate on a string column is evaluated once per distinct value and gathered by code.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

import numpy as np
from numpy.typing import DTypeLike

from recallql.index.postings import ColumnPostings, HashPostings
from recallql.index.schema import FieldType

MISSING = -1


class Buffer:
    """An append-only numpy array whose views stay valid as it grows."""

    def __init__(self, dtype: DTypeLike):
        self._buf = np.zeros(16, dtype)
        self.n = 0

    def extend(self, values: Sequence | np.ndarray) -> None:
        """Append values (converted to the buffer's dtype)."""
        arr = np.asarray(values, dtype=self._buf.dtype)
        need = self.n + len(arr)
        if need > len(self._buf):  # grow by 1/4: bounded waste for large columns
            grown = np.zeros(max(need, len(self._buf) + len(self._buf) // 4), self._buf.dtype)
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


class StrView(Sequence[str]):
    """The strings of a str column as a read-only sequence indexed by rowid (first `size`)."""

    def __init__(self, column: StrArray | StrColumn | DerivedStrColumn, size: int):
        self._column = column
        self._size = size
        self._get: Callable[[int], str | None] | None = None

    def __len__(self) -> int:
        return self._size

    def _reader(self) -> Callable[[int], str | None]:
        get = self._get
        if get is None:  # built on first use: the views of the first `size` rows, once
            get = self._get = self._column.reader(self._size)
        return get

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            get = self._reader()
            return [get(i) for i in range(*index.indices(self._size))]
        i = operator.index(index)
        if not -self._size <= i < self._size:
            raise IndexError(f"rowid {i} out of range")
        return self._reader()(i % self._size)

    def __iter__(self) -> Iterator[str]:
        return iter(cast("list[str]", self._column.values(self._size)))  # ids: never None

    def take(self, rows: Iterable[int]) -> list[str | None]:
        """The strings of `rows` (each in ``0 .. len - 1``, not checked: rowids the snapshot
        produced), read one by one without `__getitem__`'s per-row checks."""
        get = self._reader()
        return [get(r) for r in rows]


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
        self.postings = ColumnPostings()

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

    def equal_rows(self, values: Iterable[str], size: int) -> np.ndarray:
        """int64[m] ascending rowids (< `size`) whose value is one of `values`: a dictionary
        lookup per value and a slice of the per-value postings (`recallql.index.postings`),
        whatever the number of rows or distinct values."""
        index = self.pool.index
        wanted = sorted({index[v] for v in values if v in index})
        if not wanted:
            return np.zeros(0, np.int64)
        return self.postings.rows(self.codes(size), len(self.pool.vocab), wanted)

    def get(self, row: int) -> str | None:
        code = int(self._codes.view(row + 1)[row])
        return None if code == MISSING else self.pool.vocab[code]

    def reader(self, size: int) -> Callable[[int], str | None]:
        """`get` over the first `size` rows, with the column's views made once (for many
        single-row reads: `StrView`)."""
        codes, vocab = self.codes(size).data, self.pool.vocab

        def get(row: int) -> str | None:
            code = codes[row]
            return None if code == MISSING else vocab[code]

        return get

    def values(self, size: int) -> list[str | None]:
        vocab = self.pool.vocab
        return [None if c == MISSING else vocab[c] for c in self.codes(size).tolist()]

    def take(self, rows: np.ndarray, size: int) -> list[str | None]:
        """The values of the given rows (each < `size`), None where missing."""
        vocab = self.pool.vocab
        return [None if c == MISSING else vocab[c] for c in self.codes(size)[rows].tolist()]


#: `StrArray.take` copies the whole id buffer once when it decodes at least 1/TAKE_COPY_SHARE
#: of the rows (decoding from a bytes copy is ~1.5x faster per id than from buffer slices, and
#: at that share the copy costs less than the difference).
TAKE_COPY_SHARE = 64


class StrArray(Column):
    """Item ids: UTF-8 bytes in one growing buffer plus end offsets (compact: no per-string
    Python object is kept). Never missing."""

    kind = FieldType.STR

    def __init__(self) -> None:
        self._bytes = Buffer(np.uint8)
        self._ends = Buffer(np.int64)
        self.postings = HashPostings()

    def extend(self, values: list[object]) -> None:
        encoded = [str(v).encode() for v in values]
        end = int(self._ends.view(self._ends.n)[-1]) if self._ends.n else 0
        self._ends.extend(np.cumsum([len(e) for e in encoded], dtype=np.int64) + end)
        self._bytes.extend(np.frombuffer(b"".join(encoded), np.uint8))

    def get(self, row: int) -> str:
        ends = self._ends.view(row + 1)
        start = int(ends[row - 1]) if row else 0
        return bytes(self._bytes.view(int(ends[row]))[start:]).decode()

    def reader(self, size: int) -> Callable[[int], str]:
        """`get` over the first `size` rows, with the two buffer views made once (for many
        single-row reads: `StrView`)."""
        ends = self._ends.view(size).data
        blob = self._bytes.view(ends[-1] if size else 0).data

        def get(row: int) -> str:
            return str(blob[ends[row - 1] if row else 0:ends[row]], "utf-8")

        return get

    def values(self, size: int) -> list[str]:
        ends = self._ends.view(size).tolist()
        if not ends:
            return []
        blob = bytes(self._bytes.view(ends[-1]))
        return [blob[a:b].decode() for a, b in zip([0, *ends[:-1]], ends, strict=True)]

    def take(self, rows: np.ndarray, size: int) -> list[str]:
        """The ids of the given rows (each < `size`), decoded from the buffer: a few ids
        each from its own slice of the buffer, many from one copy of it (faster per id)."""
        rows = np.asarray(rows, np.int64)
        ends = self._ends.view(size)
        stop = ends[rows]
        start = np.where(rows > 0, ends[np.maximum(rows - 1, 0)], 0)
        view = self._bytes.view(int(ends[-1]) if size else 0)
        if rows.shape[0] * TAKE_COPY_SHARE < size:
            blob = view.data
            return [str(blob[a:b], "utf-8") for a, b in zip(start.tolist(), stop.tolist(),
                                                             strict=True)]
        data = view.tobytes()
        return [data[a:b].decode() for a, b in zip(start.tolist(), stop.tolist(), strict=True)]

    def present(self, size: int) -> np.ndarray:
        return np.ones(size, bool)

    def where(self, predicate: Callable[[str], bool], size: int) -> np.ndarray:
        return np.fromiter((predicate(v) for v in self.values(size)), bool, size)

    def equal_rows(self, values: Iterable[str], size: int) -> np.ndarray:
        """int64[m] ascending rowids (< `size`) whose id is one of `values`: a binary search in
        the ids' hashes and a check of each candidate (`recallql.index.postings.HashPostings`),
        not a decode and compare of every id."""
        def hashes_of(start: int, stop: int) -> np.ndarray:
            ids = self.take(np.arange(start, stop, dtype=np.int64), stop)
            return np.fromiter(map(hash, ids), np.int64, stop - start)

        return self.postings.rows(values, size, hashes_of, self.reader(size))


SAME = -2


class DerivedStrColumn(StrColumn):
    """A str column that usually equals another one (doc_id = id, entity = doc_id): such rows
    store the code `SAME` instead of a pooled string. Values given as None mean "same"."""

    def __init__(self, base: StrArray | StrColumn):
        super().__init__()
        self.base = base

    def extend(self, values: list[object]) -> None:
        code = self.pool.code
        self._codes.extend([SAME if v is None else code(v) for v in values])  # type: ignore

    def get(self, row: int) -> str | None:
        code = int(self._codes.view(row + 1)[row])
        return self.base.get(row) if code == SAME else self.pool.vocab[code]

    def reader(self, size: int) -> Callable[[int], str | None]:
        codes, vocab, base = self.codes(size).data, self.pool.vocab, self.base.reader(size)

        def get(row: int) -> str | None:
            code = codes[row]
            return base(row) if code == SAME else vocab[code]

        return get

    def values(self, size: int) -> list[str | None]:
        vocab, base = self.pool.vocab, None
        out = []
        for row, c in enumerate(self.codes(size).tolist()):
            if c == SAME:
                base = base if base is not None else self.base.values(size)
                out.append(base[row])
            else:
                out.append(vocab[c])
        return out

    def take(self, rows: np.ndarray, size: int) -> list[str | None]:
        rows = np.asarray(rows, np.int64)
        codes = self.codes(size)[rows]
        vocab = self.pool.vocab
        out: list[str | None] = [None if c < 0 else vocab[c] for c in codes.tolist()]
        same = np.flatnonzero(codes == SAME)
        if same.shape[0]:
            for i, value in zip(same.tolist(), self.base.take(rows[same], size), strict=True):
                out[i] = value
        return out

    def equal_rows(self, values: Iterable[str], size: int) -> np.ndarray:
        """int64[m] ascending rowids (< `size`) whose value is one of `values`: the rows that
        store it (the pool's postings) and the rows marked `SAME` whose base value is it (the
        base's own lookup), each O(rows matched)."""
        values = list(values)
        own = super().equal_rows(values, size)
        base = self.base.equal_rows(values, size)
        same = base[self.codes(size)[base] == SAME]
        return np.union1d(own, same).astype(np.int64) if len(own) else same

    def where(self, predicate: Callable[[str], bool], size: int) -> np.ndarray:
        codes = self.codes(size)
        table = np.fromiter((predicate(s) for s in self.pool.vocab), bool, len(self.pool.vocab))
        mask = np.append(table, [False, False])[codes]  # SAME (-2) and MISSING (-1): False
        same = codes == SAME
        if same.any():
            mask[same] = self.base.where(predicate, size)[same]
        return mask


class ListColumn(Column):
    """A list-of-str field: per-row offsets into a flat, dictionary-encoded value list."""

    kind = FieldType.LIST_STR

    def __init__(self) -> None:
        self.pool = StrPool()
        self._flat = Buffer(np.int32)
        self._owner = Buffer(np.int64)
        self._ends = Buffer(np.int64)  # per row: where its elements end in `_flat`
        self._present = Buffer(np.bool_)
        self.rows = 0

    def extend(self, values: list[object]) -> None:
        flat, owner, ends = [], [], []
        base = self._flat.n
        for offset, value in enumerate(values):
            for item in cast("Iterable[str]", value or ()):
                flat.append(self.pool.code(item))
                owner.append(self.rows + offset)
            ends.append(base + len(flat))
        self._flat.extend(flat)
        self._owner.extend(owner)
        self._ends.extend(ends)
        self._present.extend([v is not None for v in values])
        self.rows += len(values)

    def present(self, size: int) -> np.ndarray:
        return self._present.view(size)

    def elements(self, rows: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The elements of the given rows (each < `size`), row by row in `rows` order.

        Returns:
            `(counts, codes)`: int64[m] the number of elements of each row, and int32[Σ counts]
            their codes in `pool`, the first row's elements first.
        """
        rows = np.asarray(rows, np.int64)
        ends = self._ends.view(size)
        hi = ends[rows]
        lo = np.where(rows > 0, ends[np.maximum(rows - 1, 0)], 0)
        counts = hi - lo
        first = np.cumsum(counts) - counts
        index = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(lo - first, counts)
        return counts, self._flat.view(self._flat.n)[index]

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
