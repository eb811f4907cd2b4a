"""`Store.vacuum` and `Store.check`: purge tombstoned rows now; verify under the writer lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recallql.index import batch as batches
from recallql.index import integrity
from recallql.index.changes import Plan
from recallql.index.checks import CheckReport, Problem
from recallql.index.storage import storage_errors

if TYPE_CHECKING:
    from recallql.index.store import Store


def vacuum(store: Store) -> list[int]:
    """Purge every tombstoned row of every collection: two batches per collection that has
    unpurged ones (the first moves the retention horizon to the last batch, the second deletes
    the tantivy documents up to it), then rewrite the vector segments holding their vectors.

    Returns:
        The batch numbers written.

    Raises:
        StoreError: read-only store, or a storage failure (the store stays at its last
            committed batch).
        DatabaseLocked: another process's write held the lock for `lock_timeout`.
    """
    written = []
    meta = store.meta
    with store.writing():
        write = meta.write
        for row in meta.collections(write):
            if not write.execute("SELECT 1 FROM items WHERE collection_id = ? AND "
                                 "dead_batch > ? LIMIT 1", (row.id, row.purged_batch)
                                 ).fetchone():
                continue  # every tombstoned row is purged already
            state = store._state(row.info.name)  # noqa: SLF001 - the store's own helper
            for _ in range(2):
                stamp = store._begin(state, horizon=meta.committed_batch(write))  # noqa: SLF001
                store._write(state, stamp, Plan(), batches.no_sql)  # noqa: SLF001
                written.append(stamp.seq)
            with storage_errors(store._collection_dir(row.info.name)):  # noqa: SLF001
                batches.compact_segments(state, meta)
    return written


def check(store: Store) -> CheckReport:
    """`recallql.index.integrity.check` holding the writer lock (waiting up to the store's
    `lock_timeout`), so that no write runs while the three stores are read; when the lock
    cannot be had, the check runs anyway and says so (a warning)."""
    with store.writer.lock_for_reading() as locked:
        report = integrity.check(store)
    if not locked and store.path is not None:
        report.problems.append(Problem(
            str(store.path / "LOCK"), "warning", "unlocked", "checked without the writer lock "
            "(held too long, or not writable here): a write running meanwhile may show as "
            "damage; check again"))
    return report
