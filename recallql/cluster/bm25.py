"""Globally exact BM25 over shards: tantivy's formula, in its float32 arithmetic, with the
corpus statistics of every shard summed.

Each shard's tantivy index scores with its own statistics (N, n(t), the average field length),
and tantivy-py takes no others, so a shard's BM25 is not the BM25 one database holding every
row would give. The coordinator therefore re-scores the shards' candidates from what a shard
returns for them — each query term's frequency in the row and the row's field-length code — with
the global statistics: N = Σ N_s, n(t) = Σ n_s(t), total tokens T = Σ T_s. The arithmetic is
tantivy's `Bm25Weight` (``src/query/bm25.rs``, the Lucene BM25 rule with k1 = 1.2, b = 0.75), in
float32 and in the same order:

    idf(t)   = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))          (the system libm's logf)
    avgdl    = f32(T) / f32(N)
    norm(dl) = k1 · ((1 − b) + b · dl / avgdl)    dl = the field length as tantivy stores it
    score    = Σ_t (idf(t) · (k1 + 1) · q(t)) · tf / (tf + norm(dl))   q(t): query term count

where dl is quantised to one byte as tantivy's fieldnorms are (`FIELD_NORMS`). The sum runs over
the query's terms in plan order, as tantivy's union scorer adds them.

A shard's unreturned rows are bounded with `Bm25Stats.bound`: a row's global score is at most
`max_t(idf_g(t) / idf_s(t)) · max(1, avgdl_g / avgdl_s)` times its shard-local score, which is at
most the last local score the shard returned (`LexicalPart.cut_score`). The maximum runs over
the terms an unreturned row may hold: a term whose every document on the shard (n_s(t), which
counts deleted ones too) is among the returned rows is held by none of the others.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

K1 = np.float32(1.2)
B = np.float32(0.75)
_F = np.float32
#: Relative slack on upper bounds for float32 rounding (a few ulps of every operation).
BOUND_SLACK = 1e-4


def _field_norms() -> np.ndarray:
    """tantivy's `FIELD_NORMS_TABLE` (``src/fieldnorm/code.rs``): the field length each
    one-byte code stands for — exact up to 24, then Lucene's SmallFloat with a 4-bit mantissa."""
    table = []
    for code in range(256):
        if code < 24:
            table.append(code)
            continue
        j = code - 24
        bits, shift = j & 7, (j >> 3) - 1
        table.append(24 + (bits if shift == -1 else (bits | 8) << shift))
    return np.asarray(table, np.int64)


FIELD_NORMS = _field_norms()


def fieldnorm_code(tokens: int) -> int:
    """The one-byte code tantivy stores for a field of `tokens` tokens (`fieldnorm_to_id`)."""
    return int(np.searchsorted(FIELD_NORMS, tokens, side="right") - 1)


def _logf() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name or "libm.so.6")
        fn = lib.logf
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


_LOGF = _logf()


def ln32(x: np.float32) -> np.float32:
    """float32 natural log as tantivy computes it (Rust's `f32::ln` calls the C library's
    `logf`); without a loadable libm, the float64 log rounded to float32."""
    if _LOGF is not None:
        return _F(_LOGF(float(x)))
    return _F(math.log(float(x)))


@functools.lru_cache(maxsize=65_536)
def idf(doc_freq: int, docs: int) -> np.float32:
    """tantivy's `idf`: ln(1 + (N − n + 0.5) / (n + 0.5)) in float32."""
    x = (_F(docs - doc_freq) + _F(0.5)) / (_F(doc_freq) + _F(0.5))
    return ln32(_F(1.0) + x)


@dataclass(frozen=True)
class ShardStats:
    """One shard's BM25 statistics for a query's terms.

    Attributes:
        docs: N_s, documents the shard's statistics count (`bm25_documents`).
        tokens: T_s, tokens in those documents.
        doc_freq: n_s(t) for each query term.
    """

    docs: int
    tokens: int
    doc_freq: Mapping[str, int]


@dataclass(frozen=True)
class Bm25Stats:
    """Statistics for scoring: one shard's, or the sum of every shard's (`total`).

    Attributes:
        docs, tokens, doc_freq: as `ShardStats`.
    """

    docs: int
    tokens: int
    doc_freq: Mapping[str, int]
    _memo: dict[tuple[tuple[str, ...], tuple[int, ...]], np.ndarray] = field(
        default_factory=dict, compare=False, repr=False)

    @classmethod
    def total(cls, parts: Sequence[ShardStats]) -> Bm25Stats:
        """The statistics one database holding every shard's rows would have."""
        freq: dict[str, int] = {}
        for part in parts:
            for term, n in part.doc_freq.items():
                freq[term] = freq.get(term, 0) + n
        return cls(sum(p.docs for p in parts), sum(p.tokens for p in parts), freq)

    @property
    def avgdl(self) -> np.float32:
        """f32(T) / f32(N) (tantivy's `average_fieldnorm`); 0 without documents."""
        return _F(self.tokens) / _F(self.docs) if self.docs else _F(0.0)

    def weights(self, terms: Sequence[str], counts: Sequence[int]) -> np.ndarray:
        """float32[t] idf(t) · (k1 + 1) · q(t) per query term (0 for a term no row holds;
        computed once per terms and counts)."""
        key = (tuple(terms), tuple(counts))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = np.zeros(len(terms), np.float32)
        for i, (term, count) in enumerate(zip(terms, counts, strict=True)):
            n = self.doc_freq.get(term, 0)
            if n and self.docs:
                w = idf(n, self.docs) * (K1 + _F(1.0))
                out[i] = w if count == 1 else w * _F(count)
        self._memo[key] = out
        return out

    def norms(self) -> np.ndarray:
        """float32[256] k1 · ((1 − b) + b · dl / avgdl) for each field-length code."""
        avg = self.avgdl
        if avg == 0:
            return np.full(256, K1, np.float32)
        dl = FIELD_NORMS.astype(np.float32)
        return (K1 * ((_F(1.0) - B) + (B * dl) / avg)).astype(np.float32)

    def score(self, terms: Sequence[str], counts: Sequence[int], tf: np.ndarray,
              codes: np.ndarray) -> np.ndarray:
        """float32[m] BM25 of m rows, exactly as tantivy computes it with these statistics.

        Args:
            terms, counts: the query's distinct terms (plan order) and how often each occurs.
            tf: int64[m, t] term frequencies of the rows; codes: uint8/int64[m] field-length
                codes (`fieldnorm_code`).
        """
        weights, norms = self.weights(terms, counts), self.norms()
        m = tf.shape[0]
        if not m or not len(terms):
            return np.zeros(m, np.float32)
        f = np.asarray(tf, np.float32).reshape(m, len(terms))
        norm = norms[np.asarray(codes, np.int64)][:, None]
        parts = weights[None, :] * (f / (f + norm))  # 0 where tf = 0: adding it changes nothing
        return np.add.accumulate(parts, axis=1)[:, -1]  # float32, term by term, in plan order

    def bound(self, local: Bm25Stats, terms: Sequence[str], counts: Sequence[int],
              held: np.ndarray | None = None) -> float:
        """How many times its shard-local BM25 a row of the shard with statistics `local` can
        score with these (global) statistics, at most (with `BOUND_SLACK` for rounding).

        Args:
            held: bool[t] the query terms the rows in question may hold (None: all). A row
                scores only on terms it holds, so the ratio is the largest over those.
        """
        mine, theirs = self.weights(terms, counts), local.weights(terms, counts)
        held = theirs > 0 if held is None else (theirs > 0) & held
        if not held.any():
            return 0.0
        ratio = float(np.max(mine[held].astype(np.float64) / theirs[held].astype(np.float64)))
        lengths = 1.0 if local.avgdl == 0 else max(1.0, float(self.avgdl) / float(local.avgdl))
        return ratio * lengths * (1.0 + BOUND_SLACK)
