"""Per-row values the boosts need, read from the snapshot's in-memory columns (never SQLite)."""

from __future__ import annotations

from typing import Any

import numpy as np


def row_timestamps(snapshot: Any, field: str, rowids: np.ndarray) -> np.ndarray:
    """float64[m] epoch seconds UTC of a timestamp field for each row; NaN when missing.

    Args:
        snapshot: the collection snapshot.
        field: `created_at` or a declared timestamp field (the analyzer checks the type; dates
            are validated at ingest, so a stored value is always a date).
        rowids: int64[m].
    """
    if field == "created_at":
        return np.asarray(snapshot.created_at, dtype=np.float64)[rowids]
    column = snapshot.column(field)
    return np.asarray(column.values(snapshot.size), dtype=np.float64)[rowids]


def row_entities(snapshot: Any, rowids: np.ndarray) -> list[str]:
    """Each row's `entity` (which defaults to its doc_id, which defaults to its id)."""
    return snapshot.values("entity", rowids)
