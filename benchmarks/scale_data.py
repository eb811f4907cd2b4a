"""MiniLM-derived vectors and items for the scaling benchmarks (10k … 3M rows).

This machine has 100,000 chunks of real text (`benchmarks.corpus.latency_corpus`) with real
all-MiniLM-L6-v2 vectors (`benchmarks.vectors_cache`). Larger collections are derived from them:

- rows ``0 … 99,999`` are the real chunks and their real vectors;
- row ``j ≥ 100,000`` copies the text of its *parent* chunk ``a = j mod 100,000`` and gets the
  vector ``normalise((1 − t)·v_a + t·v_b + ε)``: ``v_b`` is one of the parent's 10 nearest real
  neighbours (chosen at random), ``t ~ U(0, 0.5)``, ``ε ~ N(0, σ²·I)``. So every derived vector
  lies on the real data's manifold, between a real chunk and one of its real neighbours, and no
  two are identical. σ is chosen by rule, not tuned: the median cosine between a derived vector
  and its parent equals the median cosine between a real chunk and its nearest real neighbour
  (`noise_sigma`), so the derived rows are as far from their parents as real rows are from
  theirs.

Everything is deterministic (fixed seeds) and cached in `vectors_cache.cache_dir()` as
``.npy`` files (1M rows: 1.5 GB; 3M: 4.6 GB) written through a memory map, so a run never
holds two copies. The items carry two low-cardinality fields for the filtered queries:
``tenant`` (100 values: about 1% of the rows each) and ``session`` (one session holds 0.01%
of the rows, at least one row: 10,000 sessions at any size from 10k rows).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import corpus
from benchmarks.vectors_cache import cache_dir, embed_cached, texts_key

#: Real rows (``RECALLQL_SCALE_BASE_ROWS`` overrides: a smaller real base while the 100k
#: vectors are still being embedded; every cache key includes the base).
BASE_ROWS = int(os.environ.get("RECALLQL_SCALE_BASE_ROWS", corpus.LATENCY_CHUNKS))
NEIGHBOURS = 10
TENANTS = 100
SESSION_SHARE = 1e-4
VERSION = "v1"
DERIVE_BLOCK = 65_536


@dataclass(frozen=True)
class Base:
    """The real rows: items (id, doc_id, position, body, created_at) and float32[n, 384]."""

    items: list[dict]
    vectors: np.ndarray
    key: str


def base() -> Base:
    """The real chunks (`BASE_ROWS`, 100k) with their cached MiniLM vectors."""
    items = corpus.latency_corpus(BASE_ROWS)
    texts = [item["body"] for item in items]
    vectors = embed_cached(texts, "latency corpus")  # the first k texts: their own cache entry
    return Base(items, vectors, texts_key(texts, "base"))


def _normalise(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def neighbours(b: Base) -> tuple[np.ndarray, np.ndarray]:
    """(int32[n, 10] indices, float32[n, 10] cosines) of each real row's nearest real
    neighbours (itself excluded), exact, cached."""
    path = cache_dir() / f"knn{NEIGHBOURS}-{b.key}.npz"
    if path.is_file():
        got = np.load(path)
        return got["idx"], got["cos"]
    v = b.vectors
    idx = np.empty((len(v), NEIGHBOURS), np.int32)
    cos = np.empty((len(v), NEIGHBOURS), np.float32)
    for start in range(0, len(v), 2048):
        sims = v[start:start + 2048] @ v.T
        rows = np.arange(len(sims))
        sims[rows, rows + start] = -np.inf
        top = np.argpartition(-sims, NEIGHBOURS, axis=1)[:, :NEIGHBOURS]
        order = np.argsort(-np.take_along_axis(sims, top, 1), axis=1)
        idx[start:start + 2048] = np.take_along_axis(top, order, 1)
        cos[start:start + 2048] = np.take_along_axis(sims, idx[start:start + 2048], 1)
    np.savez(path, idx=idx, cos=cos)
    return idx, cos


def _derive(b: Base, nn: np.ndarray, rows: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    """Derived vectors of the given row numbers (all ≥ BASE_ROWS)."""
    rng = np.random.default_rng([seed, int(rows[0])])
    parent = rows % len(b.vectors)
    partner = nn[parent, rng.integers(0, NEIGHBOURS, len(rows))]
    t = rng.uniform(0.0, 0.5, len(rows)).astype(np.float32)[:, None]
    mixed = (1 - t) * b.vectors[parent] + t * b.vectors[partner]
    noise = rng.normal(0.0, sigma, mixed.shape).astype(np.float32)
    return _normalise(mixed + noise)


def noise_sigma(b: Base) -> float:
    """σ such that the median cosine(derived, parent) equals the median cosine of a real row
    with its nearest real neighbour (bisection on a sample of 20,000 derived rows)."""
    nn, cos = neighbours(b)
    target = float(np.median(cos[:, 0]))
    rows = np.arange(BASE_ROWS, BASE_ROWS + 20_000)
    lo, hi = 0.0, 0.2
    for _ in range(30):
        mid = (lo + hi) / 2
        got = np.einsum("ij,ij->i", _derive(b, nn, rows, mid, 7), b.vectors[rows % BASE_ROWS])
        lo, hi = (mid, hi) if float(np.median(got)) > target else (lo, mid)
    return (lo + hi) / 2


def vectors(n: int, b: Base | None = None) -> np.ndarray:
    """float32[n, 384] (memory-mapped from the cache): the real vectors, then derived ones."""
    b = b or base()
    if n <= BASE_ROWS:
        return b.vectors[:n]
    prefix = f"derived-{VERSION}-{b.key}-"
    for have in sorted(cache_dir().glob(prefix + "*.npy"),
                       key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        if int(have.stem.rsplit("-", 1)[1]) >= n:  # rows depend on their number only
            return np.load(have, mmap_mode="r")[:n]
    path = cache_dir() / f"{prefix}{n}.npy"
    nn, _ = neighbours(b)
    sigma = noise_sigma(b)
    tmp = path.with_suffix(".partial.npy")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, b.vectors.shape[1]))
    out[:BASE_ROWS] = b.vectors
    for start in range(BASE_ROWS, n, DERIVE_BLOCK):
        block = _derive(b, nn, np.arange(start, start + DERIVE_BLOCK), sigma, 1)
        stop = min(n, start + DERIVE_BLOCK)
        out[start:stop] = block[:stop - start]  # whole blocks: a row depends on its number only
        print(f"derived vectors: {stop:,}/{n:,}", file=sys.stderr, flush=True)
    out.flush()
    del out
    tmp.rename(path)
    return np.load(path, mmap_mode="r")


def labels(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(tenant int32[n], session int32[n]): tenant uniform over 100 values (1% each); rows
    of a session are consecutive runs of n·0.01% rows (a session is written in order), and
    a session belongs to one tenant."""
    per_session = max(1, round(n * SESSION_SHARE))
    session = (np.arange(n) // per_session).astype(np.int32)
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, TENANTS, int(session[-1]) + 1).astype(np.int32)
    return owner[session], session


def items(n: int, b: Base | None = None) -> Iterator[dict]:
    """The items of an n-row collection in order: id, doc_id, position, body, created_at,
    tenant (``"t<k>"``) and session (``"s<k>"``)."""
    b = b or base()
    tenant, session = labels(n)
    for j in range(n):
        src = b.items[j % BASE_ROWS]
        copy = j // BASE_ROWS
        item = dict(src) if copy == 0 else {
            **src, "id": f"{src['id']}~{copy}", "doc_id": f"{src['doc_id']}~{copy}"}
        item["tenant"] = f"t{tenant[j]}"
        item["session"] = f"s{session[j]}"
        yield item


def path_for(name: str) -> Path:
    """A per-benchmark folder under the cache (databases built once and reused)."""
    path = cache_dir() / "db" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
