"""Per-value postings of a dictionary-encoded column: the rowids holding each value.

A str column stores one int32 code per row (`recallql.index.columns.StrColumn`). Its postings
are the rowids grouped by code in compressed sparse row form — ``order`` (int64[n], rowids
sorted by code, ascending within a code) and ``starts`` (int64[codes + 1]) — so that
``WHERE tenant = 'x'`` costs one dictionary lookup and one slice, whatever the number of rows
or distinct values, instead of a comparison per row (or a predicate per distinct value).

Columns are append-only, so the postings are built over a prefix of the rows (the *base*) and
the rows appended since (the *tail*) are compared directly; the base is rebuilt when the tail
outgrows `TAIL_ROWS` and a quarter of the base (so a rebuild costs O(n log n) at most every
n/4 appended rows).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import numpy as np

#: Rows compared directly (not through postings) before the base is rebuilt.
TAIL_ROWS = 65_536


class Postings:
    """Rowids by code over the first `size` rows of a codes array.

    Args:
        codes: int32[n] codes (negative: missing, or derived — never posted).
        n_codes: number of distinct codes (codes are in ``0 … n_codes-1``; raised to the
            largest code + 1 if that is larger).
    """

    def __init__(self, codes: np.ndarray, n_codes: int):
        codes = np.asarray(codes)
        self.size = len(codes)
        posted = np.flatnonzero(codes >= 0)
        if len(posted):
            n_codes = max(n_codes, int(codes[posted].max()) + 1)
        self.n_codes = n_codes
        by_code = np.argsort(codes[posted], kind="stable")
        self.order = posted[by_code].astype(np.int64)
        counts = np.bincount(codes[posted], minlength=n_codes)
        self.starts = np.zeros(n_codes + 1, np.int64)
        np.cumsum(counts, out=self.starts[1:])

    def rows(self, code: int) -> np.ndarray:
        """int64[m] ascending rowids holding `code` (empty for an unknown code)."""
        if not 0 <= code < self.n_codes:
            return np.zeros(0, np.int64)
        return self.order[self.starts[code]:self.starts[code + 1]]

    def count(self, code: int) -> int:
        """Rows holding `code`."""
        if not 0 <= code < self.n_codes:
            return 0
        return int(self.starts[code + 1] - self.starts[code])


class ColumnPostings:
    """Postings of an append-only codes column: a `Postings` base plus a directly compared tail.

    Thread-safe: concurrent readers share one base; a rebuild replaces it atomically.
    """

    def __init__(self) -> None:
        self._base: Postings | None = None
        self._lock = threading.Lock()

    def _current(self, codes: np.ndarray, n_codes: int) -> Postings:
        base = self._base
        size = len(codes)
        if base is None or base.size > size or (
                size - base.size > max(TAIL_ROWS, base.size // 4)):
            with self._lock:
                base = self._base
                if base is None or base.size > size or (
                        size - base.size > max(TAIL_ROWS, base.size // 4)):
                    base = self._base = Postings(codes, n_codes)
        return base

    def rows(self, codes: np.ndarray, n_codes: int, wanted: list[int]) -> np.ndarray:
        """int64[m] ascending rowids among ``0 … len(codes)-1`` whose code is in `wanted`.

        Args:
            codes: int32[size], the column's codes up to the snapshot's size (rows never
                change once written; only more are appended).
            n_codes: number of distinct codes in the column's dictionary.
            wanted: codes to look up (unknown ones match nothing).
        """
        base = self._current(codes, n_codes)
        parts = [base.rows(c) for c in wanted]
        if len(codes) > base.size:
            tail = codes[base.size:]
            hit = np.isin(tail, wanted) if len(wanted) > 1 else tail == (
                wanted[0] if wanted else -3)
            parts.append(np.flatnonzero(hit).astype(np.int64) + base.size)
        parts = [p for p in parts if len(p)]
        if not parts:
            return np.zeros(0, np.int64)
        out = np.concatenate(parts)
        return out if len(parts) == 1 else np.sort(out)


class HashPostings:
    """Rowids by the hash of each row's value, for a column with no dictionary (item ids:
    `recallql.index.columns.StrArray`), so that ``WHERE id = 'x'`` or ``id IN (…)`` costs a
    binary search and a check of the candidates, not a decode and compare of every row.

    The hashes (Python's `hash` of each value: this process only, never stored) are computed
    on first use and then for appended rows only; the *base* is their sort over a prefix of the
    rows, rebuilt under the same rule as `ColumnPostings`, and the tail is compared directly.
    Candidates are checked against the value itself, so a hash collision costs a read, never a
    wrong row. Thread-safe: state is replaced whole under a lock, rows never change once written.
    """

    def __init__(self) -> None:
        self._hashes = np.zeros(0, np.int64)  # hashes of rows 0 … _n-1 (capacity beyond)
        self._n = 0
        self._base: tuple[int, np.ndarray, np.ndarray] | None = None  # (size, order, sorted)
        self._lock = threading.Lock()

    def _hashed(self, size: int, hashes_of: Callable[[int, int], np.ndarray]) -> np.ndarray:
        """int64[size]: the hashes of rows 0 … size-1, computing those not yet hashed."""
        hashes, n = self._hashes, self._n
        if n < size:
            with self._lock:
                hashes, n = self._hashes, self._n
                if n < size:
                    if len(hashes) < size:
                        grown = np.zeros(max(size, 2 * len(hashes)), np.int64)
                        grown[:n] = hashes[:n]
                        hashes = grown
                    hashes[n:size] = hashes_of(n, size)
                    self._hashes, self._n = hashes, size
        return hashes[:size]

    def _current(self, hashes: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        base, size = self._base, len(hashes)
        if base is None or size - base[0] > max(TAIL_ROWS, base[0] // 4):
            with self._lock:
                base = self._base
                if base is None or size - base[0] > max(TAIL_ROWS, base[0] // 4):
                    order = np.argsort(hashes, kind="stable").astype(np.int64)
                    base = self._base = (size, order, hashes[order])
        return base

    def rows(self, values: Iterable[str], size: int,
             hashes_of: Callable[[int, int], np.ndarray],
             value_of: Callable[[int], str]) -> np.ndarray:
        """int64[m] ascending rowids among ``0 … size-1`` whose value is one of `values`.

        Args:
            values: the values looked up.
            size: the snapshot's row count (rows past it are never returned).
            hashes_of: ``hashes_of(a, b)`` → int64[b - a], `hash` of rows a … b-1's values.
            value_of: a row's value (rows < `size`), to check candidates.
        """
        wanted = set(values)
        if not wanted or not size:
            return np.zeros(0, np.int64)
        hashes = self._hashed(size, hashes_of)
        base_size, order, ordered = self._current(hashes)
        keys = np.array(sorted(hash(v) for v in wanted), np.int64)
        lo = np.searchsorted(ordered, keys, "left")
        hi = np.searchsorted(ordered, keys, "right")
        parts = [order[a:b] for a, b in zip(lo.tolist(), hi.tolist(), strict=True) if b > a]
        if size > base_size:
            parts.append(np.flatnonzero(np.isin(hashes[base_size:], keys)) + base_size)
        if not parts:
            return np.zeros(0, np.int64)
        found = np.sort(np.concatenate(parts))
        found = found[found < size]
        return np.array([r for r in found.tolist() if value_of(r) in wanted], np.int64)
