"""Builders for engine tests: tiny hand-made corpora with 4-d vectors and a pinned clock."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

import recallql

NOW = datetime(2026, 11, 30, tzinfo=UTC)
NOW_TS = NOW.timestamp()
DAY = timedelta(days=1)


def vec(*xs: float) -> list[float]:
    """A hand-written vector (the store L2-normalises it)."""
    return [float(x) for x in xs]


def make_db(items: Iterable[dict], *, fields: dict | None = None, dim: int = 4,
            path=None, clock: float = NOW_TS) -> recallql.Database:
    """A database with collection `kb` (title, body; caller-supplied vectors) holding `items`."""
    db = recallql.connect(path, embedder=None, clock=lambda: clock)
    db.create_collection("kb", text_fields=("title", "body"), fields=fields or {}, dim=dim,
                         embedder=None)
    items = list(items)
    if items:
        db.ingest("kb", items)
    return db


def doc(id: str, title: str = "", body: str = "", v: Sequence[float] | None = None,
        created_at: object = None, **extra: object) -> dict:
    """One `kb` item."""
    item: dict = {"id": id, "title": title, "body": body, **extra}
    if v is not None:
        item["vector"] = list(v)
    if created_at is not None:
        item["created_at"] = created_at
    return item


def scores(result) -> list[float]:
    return [row.score for row in result.rows]


def reason(row, code: str):
    """The row's reason entry with `code` (exactly one expected)."""
    found = [r for r in row.reasons if r.code.value == code]
    assert len(found) == 1, (code, row.reasons)
    return found[0]


def left_sum(row) -> float:
    """The row's contributions summed left to right, as the executor sums them."""
    total = 0.0
    for r in row.reasons:
        total = total + r.contribution
    return total


def q(v: Sequence[float]) -> np.ndarray:
    return np.asarray(v, dtype=np.float32)


class Clock:
    """A settable clock (epoch seconds UTC) for `connect(clock=...)`."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def semantic_line(explain) -> dict:
    """The SemanticScan node's properties in an `Explain`'s plan tree."""
    todo = [explain.plan]
    while todo:
        node = todo.pop()
        if node.operator == "SemanticScan":
            return node.properties
        todo.extend(node.children)
    raise AssertionError("no SemanticScan in the plan")
