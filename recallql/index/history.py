"""``AS OF t``: a collection as committed at time `t`.

Every batch records its commit time (``batches.committed_at``, epoch seconds UTC, never
earlier than the batch before). The snapshot ``AS OF t`` is the one of batch ``B``, the last
batch committed at or before `t`: rows written by later batches are invisible (rowids are dense
and grow with the batch, so they are the rows from ``size(B)`` on), and rows tombstoned by later
batches are visible again.

Tombstoned rows keep their SQLite row for good; their tantivy document and vector are kept for
the **retention window** (`Store.retention`, default 7 days): a batch records as its horizon the
last batch committed at least that long ago, and the tantivy documents and vectors of rows
tombstoned at or before the horizon may then be purged (`recallql.index.batch`; `Store.vacuum`
moves the horizon to now). Rows tombstoned after ``B`` but at or before the horizon cannot be
shown on every leg, so they stay hidden and the snapshot carries the notice
``AS_OF_BEYOND_RETENTION`` saying how many and from when ``AS OF`` is exact again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from recallql.index.snapshot import CollectionSnapshot

BEYOND_RETENTION = "AS_OF_BEYOND_RETENTION"


@dataclass(frozen=True, slots=True)
class RetentionLoss:
    """What an ``AS OF`` snapshot cannot show (the engine words it as `AS_OF_BEYOND_RETENTION`).

    Attributes:
        lost: rows deleted after the ``AS OF`` time whose documents and vectors were purged.
        at: the ``AS OF`` time, epoch seconds UTC.
        exact_from: epoch seconds UTC from which ``AS OF`` is exact again (the commit time of
            the retention horizon), or None.
    """

    lost: int
    at: float
    exact_from: float | None


def as_of_snapshot(snap: CollectionSnapshot, at: float) -> CollectionSnapshot:
    """The collection as committed at `at` (epoch seconds UTC), derived from `snap` (the
    last committed batch); `snap` itself when nothing was committed after `at`.

    Args:
        snap: the current snapshot.
        at: the time, epoch seconds UTC.

    Returns:
        A snapshot of batch ``B`` (`seq`), its `size` and `live` as at ``B``, sharing the
        current searcher and vector segments (rows past ``size(B)`` are never returned).
    """
    state = snap.state
    meta = state.meta
    with meta.read_transaction() as conn:
        batch = meta.batch_at(at, conn)
        if batch >= snap.seq:
            return snap
        size = int(conn.execute("SELECT COALESCE(SUM(n_items), 0) FROM batches WHERE "
                                "collection_id = ? AND seq <= ?", (state.id, batch)).fetchone()[0])
        row = meta.collection(state.info.name, conn)
        horizon = snap.seq if row is None else row.horizon
        dead = np.array(conn.execute(
            "SELECT row, dead_batch FROM items WHERE collection_id = ? AND dead_batch > ? AND "
            "row < ?", (state.id, batch, size)).fetchall(), np.int64).reshape(-1, 2)
        horizon_at = meta.committed_at(horizon, conn)
    size = min(size, snap.size)
    live = snap.live[:size].copy()
    kept = dead[dead[:, 1] > horizon, 0]
    live[kept[kept < size]] = True
    live.flags.writeable = False
    lost = len(dead) - len(kept)
    loss = RetentionLoss(lost, at, horizon_at) if lost else None
    return snap.derived(seq=batch, size=size, live=live, retention_loss=loss)
