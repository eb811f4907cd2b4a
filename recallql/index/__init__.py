"""recallql.index: storage and fetching — SQLite metadata, tantivy BM25 index, numpy vectors.

Imports nothing of the rest of the project. The engine uses `Store` and `CollectionSnapshot`
(see `docs/architecture.md`).
"""

from recallql.index.batch import DeleteReport, IngestReport
from recallql.index.checks import CheckReport
from recallql.index.errors import (
    DatabaseLocked,
    FilterError,
    IdempotencyKeyReused,
    IngestError,
    SignalRejected,
    StoreError,
)
from recallql.index.schema import CollectionInfo, FieldType
from recallql.index.snapshot import CollectionSnapshot
from recallql.index.store import Store

__all__ = [
    "CheckReport",
    "CollectionInfo",
    "CollectionSnapshot",
    "DatabaseLocked",
    "DeleteReport",
    "FieldType",
    "FilterError",
    "IdempotencyKeyReused",
    "IngestError",
    "IngestReport",
    "SignalRejected",
    "Store",
    "StoreError",
]
