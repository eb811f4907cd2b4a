"""Embeddings computed once with the default embedder and cached outside the repository.

The cache lives in ``$RECALLQL_BENCH_CACHE`` (default ``~/.cache/recallql-bench/``), one
``<model>-<sha256 of the texts>.npy`` per text list. Embedding 100k chunks costs ~15–30 min of CPU
here, so it checkpoints every `CHECKPOINT` texts and resumes where it stopped.

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

from recallql.index.embedders import MiniLMEmbedder

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
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    return f"{model}-{digest.hexdigest()[:16]}"


def embed_cached(texts: list[str], label: str = "", verbose: bool = True) -> np.ndarray:
    """float32[len(texts), 384] vectors of `texts` with the default embedder, from the cache.

    Args:
        texts: texts in order.
        label: what they are, for progress lines.
        verbose: print progress to stderr.
    """
    embedder = MiniLMEmbedder()
    path = cache_dir() / f"{texts_key(texts, embedder.name)}.npy"
    if path.is_file():
        return np.load(path)
    partial = path.with_suffix(".partial.npy")
    done = np.load(partial) if partial.is_file() else np.zeros((0, embedder.dim), np.float32)
    started, first = time.perf_counter(), len(done)
    for start in range(len(done), len(texts), CHECKPOINT):
        block = embedder(texts[start:start + CHECKPOINT])
        done = np.concatenate([done, block])
        np.save(partial, done)
        if verbose:
            rate = (len(done) - first) / (time.perf_counter() - started)
            print(f"embedding {label}: {len(done):,}/{len(texts):,} ({rate:.0f} texts/s)",
                  file=sys.stderr, flush=True)
    np.save(path, done)
    partial.unlink(missing_ok=True)
    return done


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
