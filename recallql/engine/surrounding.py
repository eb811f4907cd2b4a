"""`WITH CONTEXT (before = n, after = m)`: the items around each result row in its document.

Messages are ordered by seq in their session and chunks by position in their document
(`CollectionSnapshot.neighbours`). Only *eligible* items are returned — live, and passing the
statement's filter (for messages this includes the never-searchable rule for rewound messages)
— so nothing a WHERE excludes comes back through the context either (SPEC §3.3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recallql.index.snapshot import CollectionSnapshot

#: One row's surrounding items: `(offset, stored fields)`, in document order; offsets −n..−1
#: before the hit and 1..m after it.
Surrounding = list[tuple[int, dict[str, Any]]]


def surrounding(snapshot: CollectionSnapshot, rowids: np.ndarray, before: int, after: int,
                filter_expr: Any) -> list[Surrounding]:
    """The up-to-`before` eligible items preceding each row of `rowids` and the up-to-`after`
    following it, fetched in one read.

    Args:
        snapshot: the statement's snapshot.
        rowids: int64[m] result rows.
        before, after: items wanted on each side (≥ 0).
        filter_expr: the statement's pushed-down filter (`index.filters`), or None.

    Returns:
        One list per row of `rowids`.
    """
    eligible = np.asarray(snapshot.live, dtype=bool)
    if filter_expr is not None:
        eligible = eligible & snapshot.filter_mask(filter_expr)
    nb = snapshot.neighbours
    places: list[list[tuple[int, int]]] = []
    for row in np.asarray(rowids, np.int64).tolist():
        prev, nxt = nb.around(row, before, after, eligible)
        places.append([(i - len(prev), r) for i, r in enumerate(prev)]
                      + [(i + 1, r) for i, r in enumerate(nxt)])
    flat = [r for items in places for _, r in items]
    fetched = iter(snapshot.fetch(np.asarray(flat, np.int64)) if flat else [])
    return [[(offset, next(fetched)) for offset, _ in items] for items in places]
