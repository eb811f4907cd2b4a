"""What a shard keeps of its rows for globally exact BM25: each row's terms with their counts
and its field-length code, as tantivy indexed them (`Shard._lexical`).

tantivy-py returns no term frequencies, so a shard re-analyses a candidate's stored text the
first time it is a candidate and keeps the result (rows never change once written). The rows'
entries sit in flat arrays (CSR: a row's slot has a start and a length in the flat term ids
and counts), so the frequencies of a statement's query terms for all its candidates are
gathered with a few numpy operations, however many candidates there are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

#: Rows whose terms a shard keeps (past it, the cache starts again empty).
TERM_CACHE_ROWS = 200_000


def _grown(array: np.ndarray, need: int, fill: int = 0) -> np.ndarray:
    """`array` with room for `need` entries (doubled; new entries `fill`)."""
    if need <= array.shape[0]:
        return array
    out = np.full(max(need, 2 * array.shape[0]), fill, array.dtype)
    out[: array.shape[0]] = array
    return out


class RowTerms:
    """The rows of one collection whose terms are known, and a vocabulary of term ids."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self._slot = np.full(0, -1, np.int64)  # rowid -> slot (-1: unknown)
        self._code = np.zeros(64, np.int64)
        self._start = np.zeros(64, np.int64)
        self._length = np.zeros(64, np.int64)
        self._ids = np.zeros(1024, np.int64)
        self._counts = np.zeros(1024, np.int64)
        self._rows = 0
        self._flat = 0

    def __len__(self) -> int:
        return self._rows

    def missing(self, rowids: np.ndarray) -> list[int]:
        """The rowids among `rowids` whose terms are not known yet."""
        inside = rowids < self._slot.shape[0]
        known = np.zeros(rowids.shape[0], bool)
        known[inside] = self._slot[rowids[inside]] >= 0
        return rowids[~known].tolist()

    def add(self, rowid: int, code: int, tokens: Iterable[tuple[str, int]]) -> None:
        """Record a row: its field-length code and its (term, count) pairs."""
        pairs = list(tokens)
        n, slot, at = len(pairs), self._rows, self._flat
        self._slot = _grown(self._slot, rowid + 1, fill=-1)
        self._code, self._start, self._length = (_grown(a, slot + 1) for a in
                                                 (self._code, self._start, self._length))
        self._ids, self._counts = _grown(self._ids, at + n), _grown(self._counts, at + n)
        self._ids[at: at + n] = [self.vocab.setdefault(t, len(self.vocab)) for t, _ in pairs]
        self._counts[at: at + n] = [c for _, c in pairs]
        self._code[slot], self._start[slot], self._length[slot] = code, at, n
        self._slot[rowid] = slot
        self._rows, self._flat = slot + 1, at + n

    def frequencies(self, rowids: np.ndarray, terms: Sequence[str]
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(int64[m, t] each row's count of each term, int64[m] field-length codes) of known
        rows `rowids`.

        Raises:
            KeyError: a row whose terms were never added.
        """
        m = rowids.shape[0]
        tf = np.zeros((m, len(terms)), np.int64)
        slots = self._slot[rowids] if m else np.zeros(0, np.int64)
        if m and (slots < 0).any():
            raise KeyError(f"rows without recorded terms: {rowids[slots < 0][:5].tolist()}")
        codes = self._code[slots]
        wanted = np.asarray([self.vocab.get(t, -1) for t in terms], np.int64)
        if not m or not (wanted >= 0).any():
            return tf, codes
        lengths = self._length[slots]
        row = np.repeat(np.arange(m), lengths)
        begin = np.repeat(self._start[slots] - (np.cumsum(lengths) - lengths), lengths)
        flat = begin + np.arange(row.shape[0])
        column = np.full(len(self.vocab), -1, np.int64)  # term id -> query term
        known = np.flatnonzero(wanted >= 0)
        column[wanted[known]] = known
        at = column[self._ids[flat]]
        hit = at >= 0
        tf[row[hit], at[hit]] = self._counts[flat][hit]
        return tf, codes
