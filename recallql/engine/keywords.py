"""Session keyword hints over string metadata (SPEC §4.3), columnar and cached.

A keyword matches a row when any of the row's string metadata values — its declared `str` fields
and the elements of its `list[str]` fields — contains the keyword, case-insensitively: both are
compared after NFKC case folding (`recallql.index.analysis.normalize`), so NFC and NFD spellings
and full-width Latin match.

String columns are dictionary-encoded (`recallql.index.columns.StrPool`): a row holds a code into
the column's vocabulary of distinct values, and the vocabulary only ever grows. So whether a value
contains a keyword is computed once per (vocabulary entry, keyword), kept in a `bool` table per
keyword, and extended when the vocabulary grows; a statement then only gathers table entries by its
candidates' codes (numpy), never touching strings. Tables are bounded per vocabulary
(`TABLE_BUDGET_BYTES`, least recently used keywords evicted).
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from recallql.engine.features import Coded, StringField
from recallql.index.analysis import normalize

#: Upper bound of the cached tables of one vocabulary, in bytes (one byte per entry and keyword,
#: plus 8 bytes per entry and packed keyword set).
TABLE_BUDGET_BYTES = 16 * 1024 * 1024
#: Packed keyword sets kept per vocabulary (one per concurrently active session, roughly).
PACKED_SETS = 8
#: Normalised vocabulary slices kept per vocabulary (`VocabMatches._prepared`).
_SLICES = 4
_SEPARATOR = "\x00"


def keyword_matches(strings: Mapping[str, StringField], m: int, keywords: Sequence[str]
                    ) -> np.ndarray:
    """int64[m]: how many of `keywords` each row's string metadata contains.

    Per field this is one gather of the candidates' codes in a packed table (bit j of a value's
    word: the value contains keyword j) and an OR into the rows' words; the count is a popcount.

    Args:
        strings: the candidates' dictionary-encoded `str` / `list[str]` fields
            (`Features.strings`).
        m: the number of candidates.
        keywords: the session's keywords, already normalised (`normalize`) and distinct.

    Returns:
        int64[m] counts in [0, len(keywords)].
    """
    if m == 0 or not keywords:
        return np.zeros(m, dtype=np.int64)
    keys = tuple(keywords)
    bits = np.zeros((m, _words(len(keys))), dtype=np.uint64)
    for column in strings.values():
        if isinstance(column, Coded):
            bits |= _packed(column.pool, keys)[column.codes]
        elif column.codes.shape[0]:
            counts = column.counts
            some = counts > 0
            first = (np.cumsum(counts) - counts)[some]  # each row's first element
            values = _packed(column.pool, keys)[column.codes]
            bits[some] |= np.bitwise_or.reduceat(values, first, axis=0)
    return np.bitwise_count(bits).sum(axis=1, dtype=np.int64)


def _words(k: int) -> int:
    return (k + 63) // 64


def _packed(pool: Any, keywords: tuple[str, ...]) -> np.ndarray:
    with _CACHE_LOCK:
        matches = _CACHE.get(pool)
        if matches is None:
            matches = _CACHE[pool] = VocabMatches(pool.vocab)
    return matches.packed(keywords, len(pool.vocab))


_CACHE: weakref.WeakKeyDictionary[Any, VocabMatches] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


class VocabMatches:
    """Which entries of one growing vocabulary contain each keyword.

    Args:
        vocab: the pool's list of distinct values (append-only; read, never modified).
    """

    def __init__(self, vocab: list[str]) -> None:
        self._vocab = vocab
        self._tables: OrderedDict[str, np.ndarray] = OrderedDict()
        self._packed: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()
        self._bytes = 0  # of the tables and the packed tables together
        self._lock = threading.Lock()
        #: `Prepared` vocabulary slices by (start, stop): the last few only (every table of
        #: one statement's keywords is extended over the same slice).
        self._slices: OrderedDict[tuple[int, int], Prepared] = OrderedDict()

    def _prepared(self, start: int, stop: int) -> Prepared:
        """The normalised vocabulary entries ``start:stop``, normalised once for all keywords
        (not once per keyword: 5,000 keywords over 10,000 values took 6 s)."""
        key = (start, stop)
        prepared = self._slices.pop(key, None)
        if prepared is None:
            prepared = Prepared(self._vocab[start:stop])
        self._slices[key] = prepared
        while len(self._slices) > _SLICES:
            self._slices.popitem(last=False)
        return prepared

    def packed(self, keywords: tuple[str, ...], n: int) -> np.ndarray:
        """uint64[c + 1, W] with c ≥ n and W = ⌈k/64⌉: bit j of entry i is set when the entry
        contains keyword j once normalised (NFKC case folding). The last row is zero, so a
        missing code (-1) gathers no bits. The packings of the last `PACKED_SETS` keyword sets
        are kept."""
        with self._lock:
            packed = self._packed.pop(keywords, None)
            if packed is not None:
                self._bytes -= packed.nbytes
            if packed is None or packed.shape[0] <= n:
                tables = [self._table(keyword, n) for keyword in keywords]
                packed = _pack(tables)
            self._packed[keywords] = packed  # most recently used last
            self._bytes += packed.nbytes
            self._evict(len(keywords))
            return packed

    def _evict(self, keep_tables: int) -> None:
        """Drop least recently used packings (beyond `PACKED_SETS`, or over budget), then
        tables, keeping the current packing and the `keep_tables` newest tables."""
        while len(self._packed) > 1 and (len(self._packed) > PACKED_SETS
                                         or self._bytes > TABLE_BUDGET_BYTES):
            self._bytes -= self._packed.popitem(last=False)[1].nbytes
        while self._bytes > TABLE_BUDGET_BYTES and len(self._tables) > keep_tables:
            self._bytes -= self._tables.popitem(last=False)[1].nbytes

    def _table(self, keyword: str, n: int) -> np.ndarray:
        """bool[c + 1], c ≥ n: entry i contains `keyword`; the last element is False."""
        table = self._tables.pop(keyword, None)
        if table is None or table.shape[0] <= n:
            start = 0 if table is None else table.shape[0] - 1
            more = self._prepared(start, n).find(keyword)
            head = () if table is None else (table[:-1],)
            grown = np.concatenate((*head, more, np.zeros(1, dtype=bool)))
            self._bytes += grown.nbytes - (0 if table is None else table.nbytes)
            table = grown
        self._tables[keyword] = table  # most recently used last
        return table


def _pack(tables: list[np.ndarray]) -> np.ndarray:
    """Bit-pack per-keyword bool tables (each with a False sentinel last) into uint64 words."""
    size = min(t.shape[0] for t in tables)
    packed = np.zeros((size, _words(len(tables))), dtype=np.uint64)
    for j, table in enumerate(tables):
        packed[:, j // 64] |= table[:size].astype(np.uint64) << np.uint64(j % 64)
    packed[-1] = 0
    return packed


def contains(values: Sequence[str], keyword: str) -> np.ndarray:
    """bool[n]: `keyword in normalize(value)` for each value (NFKC case folding)."""
    return Prepared(values).find(keyword)


class Prepared:
    """Values normalised once (NFKC case folding), to find any number of keywords in.

    The values are joined and normalised as one string and a keyword is found with `str.find`
    (C speed), jumping to the next value after each hit: the Python work per keyword is
    proportional to the number of hits, not to the number of values.

    Args:
        values: the strings (a vocabulary slice).
    """

    def __init__(self, values: Sequence[str]) -> None:
        self._values = values
        self._n = len(values)
        joined = _SEPARATOR.join(values)
        self._blob = normalize(joined) if values else ""
        ends = self._boundaries(joined)  # ends[i]: where value i + 1 starts in the blob
        self._exact = ends is not None
        self._ends: list[int] = ends or []
        self._each: list[str] | None = None

    def _boundaries(self, joined: str) -> list[int] | None:
        """Where each value's normalised text ends in the blob (one past its separator), read
        from the separators themselves: normalising may lengthen one value (ß → ss) and shorten
        another (NFD é → NFC é), so the original lengths do not locate them. None when some
        value holds the separator itself (then the values are searched one by one).

        The separator (U+0000) is a starter that composes with nothing and is neither case
        folded nor ignorable, so the blob is the values' normalised texts joined by it."""
        if not self._n or joined.count(_SEPARATOR) != self._n - 1:
            return [] if not self._n else None
        codes = np.frombuffer(self._blob.encode("utf-32-le"), dtype=np.uint32)
        seps = np.flatnonzero(codes == 0)
        if seps.shape[0] != self._n - 1:  # defensive: normalisation added or removed one
            return None
        return [*(seps + 1).tolist(), len(self._blob) + 1]

    def find(self, keyword: str) -> np.ndarray:
        """bool[n]: which values contain `keyword` (already normalised)."""
        out = np.zeros(self._n, dtype=bool)
        if not self._n:
            return out
        if _SEPARATOR in keyword or not self._exact:
            # a keyword that could span two values, or a value holding the separator: one
            # by one
            if self._each is None:
                self._each = [normalize(v) for v in self._values]
            out[:] = [keyword in v for v in self._each]
            return out
        blob, ends = self._blob, self._ends
        pos = blob.find(keyword)
        while pos >= 0:
            i = bisect.bisect_right(ends, pos)
            out[i] = True
            pos = blob.find(keyword, ends[i])
        return out
