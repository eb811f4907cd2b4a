"""Progress reporting shared by ``recallql ingest`` and ``recallql demo``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ProgressEmbedder"]


class ProgressEmbedder:
    """Wraps an embedder (same name and dimension) and reports each embedded chunk.

    Attributes:
        on_progress: called with the number of texts in each chunk once it is embedded.
    """

    def __init__(self, inner: Any, chunk: int = 128) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.chunk = chunk
        self.on_progress: Callable[[int], None] | None = None

    def __call__(self, texts: list[str]) -> np.ndarray:
        """Embed in chunks of similar length (sorted by length first, so padding stays low
        even though each chunk is a separate call), reporting after each chunk."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.chunk):
            picked = order[start:start + self.chunk]
            out[picked] = self.inner([texts[i] for i in picked])
            if self.on_progress is not None:
                self.on_progress(len(picked))
        return out
