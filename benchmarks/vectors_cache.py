"""Embeddings computed once and cached outside the repository (benchmarks and slow tests).

The cache lives in ``$RECALLQL_BENCH_CACHE`` (default ``~/.cache/recallql-bench/``), one
``<model>-<sha256 of the texts>.npy`` per text list, so a key names both the model and the exact
texts: another model or any changed text is a miss, never a wrong hit. A cold cache still works
(it embeds and fills the cache); an unreadable or mis-shaped file is recomputed. Files are
written to a temporary name and renamed, so a concurrent reader never sees half a file.
Embedding 100k chunks costs ~15–30 min of CPU here, so it checkpoints every `CHECKPOINT` texts
and resumes where it stopped.

Warm the cache in the background (low priority, it runs long)::

    nice -n 10 python -m benchmarks.vectors_cache
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

from recallql.index.embedders import Embedder, MiniLMEmbedder

CHECKPOINT = 2_000


def cache_dir() -> Path:
    """The cache folder (created on demand)."""
    root = os.environ.get("RECALLQL_BENCH_CACHE") or Path.home() / ".cache" / "recallql-bench"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def texts_key(texts: list[str], model: str) -> str:
    """``<model>-<first 16 hex of sha256 over the texts>``."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return f"{model}-{digest.hexdigest()[:16]}"


def embed_cached(texts: list[str], label: str = "", verbose: bool = True,
                 embedder: Embedder | None = None) -> np.ndarray:
    """float32[len(texts), dim] vectors of `texts`, from the cache when it has them.

    Args:
        texts: texts in order.
        label: what they are, for progress lines.
        verbose: print progress to stderr.
        embedder: the model (default: the default embedder, all-MiniLM-L6-v2); its ``name``
            is part of the cache key.
    """
    embedder = embedder or MiniLMEmbedder()
    path = cache_dir() / f"{texts_key(texts, embedder.name)}.npy"
    cached = _load(path, len(texts), embedder.dim)
    if cached is not None:
        return cached
    partial = path.with_suffix(".partial.npy")
    done = _load(partial, None, embedder.dim)
    if done is None or len(done) > len(texts):
        done = np.zeros((0, embedder.dim), np.float32)
    started, first = time.perf_counter(), len(done)
    for start in range(len(done), len(texts), CHECKPOINT):
        block = np.asarray(embedder(texts[start:start + CHECKPOINT]), np.float32)
        done = np.concatenate([done, block])
        _save(partial, done)
        if verbose:
            rate = (len(done) - first) / (time.perf_counter() - started)
            print(f"embedding {label}: {len(done):,}/{len(texts):,} ({rate:.0f} texts/s)",
                  file=sys.stderr, flush=True)
    _save(path, done)
    partial.unlink(missing_ok=True)
    return done


class CachedEmbedder:
    """An embedder whose large calls (ingest batches) are served by `embed_cached`.

    Same ``name`` and ``dim`` as the wrapped model, so a collection records the real model;
    calls with fewer than `min_texts` texts (query embeddings) go straight to the model.

    Args:
        inner: the model (default: the default embedder).
        min_texts: the smallest call that is cached.
    """

    def __init__(self, inner: Embedder | None = None, min_texts: int = 64):
        self.inner = inner or MiniLMEmbedder()
        self.name = self.inner.name
        self.dim = self.inner.dim
        self.min_texts = min_texts

    def __call__(self, texts: list[str]) -> np.ndarray:
        if len(texts) < self.min_texts:
            return self.inner(texts)
        return embed_cached(list(texts), verbose=False, embedder=self.inner)


def _load(path: Path, rows: int | None, dim: int) -> np.ndarray | None:
    """The array in `path` when it is readable and float32[rows, dim] (any rows when None)."""
    if not path.is_file():
        return None
    try:
        array = np.load(path)
    except (OSError, ValueError, EOFError):
        return None
    if array.dtype != np.float32 or array.ndim != 2 or array.shape[1] != dim:
        return None
    return array if rows is None or len(array) == rows else None


def _save(path: Path, array: np.ndarray) -> None:
    """Write `array` to `path` atomically (a temporary file renamed over it)."""
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def warm() -> None:
    """Embed every text set the benchmarks use (IR docs and queries, the latency corpus)."""
    from benchmarks import corpus

    for name in ("cacm", "cranfield"):
        ir = corpus.ir_set(name)
        embed_cached(list(ir.queries.values()), f"{name} queries")
        embed_cached(ir.texts, f"{name} docs")
    embed_cached([item["body"] for item in corpus.latency_corpus()], "latency corpus")


if __name__ == "__main__":
    warm()
