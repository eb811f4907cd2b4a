"""The embedding cache of `benchmarks.vectors_cache` (used by the CACM quality fixture)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import vectors_cache as vc
from recallql.index.embedders import HashEmbedder


class Counting:
    """A real (hash) embedder that counts the texts it embeds."""

    def __init__(self, name: str = "hash-blake2b-8"):
        self.inner = HashEmbedder(8)
        self.name, self.dim, self.embedded = name, 8, 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.embedded += len(texts)
        return self.inner(texts)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RECALLQL_BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cold_cache_embeds_then_serves_from_the_file(cache):
    texts = [f"text {i}" for i in range(5)]
    model = Counting()
    first = vc.embed_cached(texts, verbose=False, embedder=model)
    assert model.embedded == 5
    assert [p.name for p in cache.iterdir()] == [f"{vc.texts_key(texts, model.name)}.npy"]
    again = vc.embed_cached(texts, verbose=False, embedder=model)
    assert model.embedded == 5  # read back, not re-embedded
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(first, HashEmbedder(8)(texts))


def test_key_names_the_model_and_the_exact_texts():
    texts = ["a", "b"]
    assert vc.texts_key(texts, "m1") != vc.texts_key(texts, "m2")
    assert vc.texts_key(texts, "m1") != vc.texts_key(["a", "b "], "m1")
    assert vc.texts_key(["ab"], "m1") != vc.texts_key(["a", "b"], "m1")  # boundaries count
    assert vc.texts_key(texts, "m1").startswith("m1-")


def test_another_model_is_a_miss(cache):
    texts = ["x", "y"]
    vc.embed_cached(texts, verbose=False, embedder=Counting("model-a"))
    other = Counting("model-b")
    vc.embed_cached(texts, verbose=False, embedder=other)
    assert other.embedded == 2
    assert len(list(cache.glob("*.npy"))) == 2


def test_a_damaged_file_is_recomputed(cache):
    texts = ["x", "y", "z"]
    model = Counting()
    vc.embed_cached(texts, verbose=False, embedder=model)
    path = cache / f"{vc.texts_key(texts, model.name)}.npy"
    path.write_bytes(path.read_bytes()[:40])
    out = vc.embed_cached(texts, verbose=False, embedder=model)
    assert model.embedded == 6
    assert out.shape == (3, 8)
    assert vc.embed_cached(texts, verbose=False, embedder=model).shape == (3, 8)
    assert model.embedded == 6  # the rewritten file is good again


def test_cached_embedder_keeps_the_model_name_and_caches_only_large_calls(cache):
    model = Counting()
    wrapped = vc.CachedEmbedder(model, min_texts=3)
    assert (wrapped.name, wrapped.dim) == (model.name, model.dim)
    wrapped(["q"])
    wrapped(["q"])
    assert model.embedded == 2 and not list(cache.glob("*.npy"))  # small calls: the model
    batch = ["d1", "d2", "d3"]
    np.testing.assert_array_equal(wrapped(batch), HashEmbedder(8)(batch))
    wrapped(batch)
    assert model.embedded == 5  # the batch was embedded once
