"""Per-row values the boosts need, read through the collection snapshot."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np


def row_timestamps(snapshot: Any, field: str, rowids: np.ndarray) -> np.ndarray:
    """float64[m] epoch seconds UTC of `field` for each row; NaN when missing or unparseable.

    `created_at` is a column of the snapshot; other timestamp fields are read from the rows.
    """
    if field == "created_at":
        return np.asarray(snapshot.created_at, dtype=np.float64)[rowids]
    return np.array([_to_epoch(row.get(field)) for row in snapshot.fetch(rowids)], dtype=np.float64)


def _to_epoch(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.timestamp()
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else math.nan
    if isinstance(value, str):
        try:
            return _to_epoch(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return math.nan
    return math.nan


def row_strings(snapshot: Any, rowids: np.ndarray) -> list[list[str]]:
    """For each row, its string metadata values: declared `str` fields, the elements of
    `list[str]` fields, and the row's entity (SPEC §4.3 keyword hints)."""
    string_fields = [name for name, kind in snapshot.info.fields.items() if _is_stringy(kind)]
    out: list[list[str]] = []
    for rowid, row in zip(rowids, snapshot.fetch(rowids), strict=True):
        values: list[str] = [snapshot.entities[rowid]]
        for name in string_fields:
            value = row.get(name)
            if isinstance(value, str):
                values.append(value)
            elif isinstance(value, list | tuple):
                values.extend(v for v in value if isinstance(v, str))
        out.append(values)
    return out


def _is_stringy(kind: Any) -> bool:
    text = str(getattr(kind, "value", kind)).lower()
    return text in {"str", "string", "list[str]", "list_str", "list", "text"} or kind in (str, list)
