"""What a batch changes: which items are written, which live rows are tombstoned.

A batch (`Plan`) writes new rows and tombstones live ones, all in one commit (see
`recallql.index.batch`). The rows tombstoned are

* *replaced*: the live versions of the item ids the batch writes;
* *removed*: rows the batch deletes (`Store.delete`) or, under ``replace_documents``, the live
  chunks of the batch's documents whose item id is not in the batch (stale chunks).

An item identical to its live version (same fingerprint, `recallql.index.fingerprint`) is
*unchanged*: it is dropped from the batch, so it is neither re-embedded nor re-indexed and keeps
its rowid. All functions here need the collection state to be current (the writer's view of the
last committed batch).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from recallql.index.columns import SAME
from recallql.index.errors import IngestError, show
from recallql.index.items import ItemBatch, item_id, ref_id

if TYPE_CHECKING:
    from recallql.index.snapshot import CollectionState


@dataclass
class Plan:
    """One batch to commit.

    Attributes:
        batch: the items to write (unchanged ones left out), vectors complete.
        hashes: their fingerprints, in batch order.
        replaced: live rowids of the item ids written (tombstoned).
        removed: other live rowids tombstoned (deleted rows, stale chunks).
        unchanged: items left out because they equal their live version.
        embedded: items whose vector came from the embedder.
    """

    batch: ItemBatch = field(default_factory=ItemBatch)
    hashes: list[int] = field(default_factory=list)
    replaced: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    unchanged: int = 0
    embedded: int = 0

    @property
    def dead(self) -> list[int]:
        """Every rowid the batch tombstones."""
        return self.replaced + self.removed

    def writes_nothing(self) -> bool:
        """True when committing would change no row."""
        return len(self.batch) == 0 and not self.replaced and not self.removed


def split_unchanged(state: CollectionState, batch: ItemBatch, hashes: list[int]
                    ) -> tuple[list[int] | None, list[int]]:
    """Find the items of `batch` whose live version has the same fingerprint.

    Args:
        state: the collection (current).
        batch: the validated batch.
        hashes: its fingerprints.

    Returns:
        ``(keep, replaced)``: the batch positions to write (``None``: all of them), and the live
        rowids of the kept items' ids (to tombstone).
    """
    live = state.live_rows(batch.ids)
    if not live:
        return None, []
    stored = state.meta.content_hashes(state.id, list(live.values()))
    keep, replaced = [], []
    for i, (item, digest) in enumerate(zip(batch.ids, hashes, strict=True)):
        row = live.get(item)
        if row is None:
            keep.append(i)
        elif stored.get(row) != digest:
            keep.append(i)
            replaced.append(row)
    return (None if len(keep) == len(batch) else keep), replaced


def live_doc_rows(state: CollectionState, doc_ids: Collection[str]) -> np.ndarray:
    """int64 rowids of the live rows whose document id is in `doc_ids` (a row without an explicit
    ``doc_id`` belongs to the document named by its item id). O(size) numpy work."""
    size = state.size
    if not doc_ids or size == 0:
        return np.zeros(0, np.int64)
    column = state.columns["doc_id"]
    codes = column.codes(size)  # type: ignore[attr-defined]
    index = column.pool.index  # type: ignore[attr-defined]
    wanted = np.fromiter((c for d in doc_ids if (c := index.get(d)) is not None), np.int32)
    mask = np.isin(codes, wanted)
    for row in state.live_rows(list(doc_ids)).values():
        if codes[row] == SAME:  # doc_id = item id
            mask[row] = True
    return np.flatnonzero(mask & state.live).astype(np.int64)


def stale_rows(state: CollectionState, batch: ItemBatch) -> list[int]:
    """Live chunks of the batch's documents whose item id is not in the batch (what
    ``replace_documents=True`` tombstones)."""
    docs = {item if doc is None else doc for item, doc in zip(batch.ids, batch.doc_ids,
                                                              strict=True)}
    rows = live_doc_rows(state, docs)
    if len(rows) == 0:
        return []
    in_batch = set(batch.ids)
    ids = state.columns["id"].take(rows, state.size)  # type: ignore[attr-defined]
    return [r for r, item in zip(rows.tolist(), ids, strict=True) if item not in in_batch]


def delete_plan(state: CollectionState, ids: list[str], doc_ids: list[str]
                ) -> tuple[Plan, int]:
    """The rows a delete tombstones.

    Args:
        state: the collection (current).
        ids: distinct item ids.
        doc_ids: distinct document ids (every live chunk of each goes).

    Returns:
        ``(plan, missing)``: the plan (its `removed` rowids, sorted) and the number of ids and
        doc ids that matched no live row.
    """
    by_id = state.live_rows(ids)
    rows = set(by_id.values())
    missing = len(ids) - len(by_id)
    if doc_ids:
        found = live_doc_rows(state, doc_ids)
        docs = set(state.columns["doc_id"].take(found, state.size))  # type: ignore[attr-defined]
        missing += sum(doc not in docs for doc in doc_ids)
        rows.update(found.tolist())
    return Plan(removed=sorted(rows)), missing


def delete_args(ids: Iterable[object] | None, doc_ids: Iterable[object] | None
                ) -> tuple[list[str], list[str]]:
    """Check the arguments of `Store.delete`; returns the distinct ids and doc ids, as stored.

    Raises:
        IngestError: neither is given; one is not a list (a bare string would be read as its
            characters); an id that ingest would refuse (not a str or int, empty, too long, not
            valid Unicode), naming its position (``#i``) and the argument.
    """
    if ids is None and doc_ids is None:
        raise IngestError("delete needs ids, doc_ids or both")
    return _distinct(ids, "ids", item_id), _distinct(doc_ids, "doc_ids", ref_id)


def _distinct(values: Iterable[object] | None, name: str,
              check: Callable[[object, str, str], str]) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise IngestError(f"{name} must be a list of ids, got {show(values)} (wrap a single id "
                          "in a list)", field=name)
    return list(dict.fromkeys(check(value, f"#{i}", name) for i, value in enumerate(values)))
