"""What a shard and the coordinator send each other: compact plain data in one pickled `bytes`.

`LegBatches` travel as tuples of numpy arrays and lists (`pack` / `unpack`): the same content as
`LegBatches.to_json`, without the JSON round and without validating anything twice (a leg's
item ids are not sent twice: every leg row is in the features, whose rowids are ascending). A whole
reply is pickled once by us (`dumps`, protocol 5, in-band) and handed to Ray as `bytes`: Ray
copies `bytes` as one buffer, where an object graph with numpy arrays costs its serialiser
about 0.1 ms more per call (`benchmarks/RESULTS.md`, "Cluster"). Only the cluster's own
processes read these bytes.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from recallql.engine.features import (
    Features,
    Strings,
    _coded_from_wire,
    _coded_wire,
)
from recallql.engine.legs import LegBatch, LegBatches
from recallql.engine.plan import LegKind
from recallql.engine.reasons import Reason


def dumps(obj: object) -> bytes:
    """`obj` as bytes (pickle protocol 5)."""
    return pickle.dumps(obj, protocol=5)


def loads(data: bytes) -> Any:
    """The inverse of `dumps`."""
    return pickle.loads(data)  # noqa: S301 - bytes from the cluster's own shard processes


def pack(batches: LegBatches) -> tuple[Any, ...]:
    """`batches` as a tuple of arrays, lists and scalars."""
    legs = [(b.name, str(b.kind), b.rowids, b.scores, b.ranks, b.window, b.time_ns,
             b.places, b.method, b.why) for b in batches.legs]  # ids: from the features
    notices = [(str(code), message) for code, message in batches.notices]
    return (batches.collection, batches.batch, batches.size, batches.scan_ns,
            _features(batches.features), notices, legs)


def unpack(data: tuple[Any, ...]) -> LegBatches:
    """The inverse of `pack`."""
    collection, batch, size, scan_ns, features, notices, legs = data
    feat = _unfeatures(features)
    return LegBatches(
        collection, batch, size,
        tuple(LegBatch(name, LegKind(kind), rowids, scores, ranks,
                       feat.ids.take(np.searchsorted(feat.rowid, rowids)), window, time_ns,
                       places, method=method, why=why)
              for name, kind, rowids, scores, ranks, window, time_ns, places, method, why
              in legs),
        feat, scan_ns, tuple((Reason(code), message) for code, message in notices))


def _strs(col: Strings | None) -> list[str] | None:
    return None if col is None else col.tolist()


def _features(feat: Features) -> tuple[Any, ...]:
    return (feat.rowid, feat.ids.tolist(), feat.doc_ids.tolist(), feat.positions,
            _strs(feat.entities), feat.recency,
            {name: _coded_wire(col) for name, col in feat.strings.items()},
            _strs(feat.session_ids), feat.compacted)


def _unfeatures(data: tuple[Any, ...]) -> Features:
    rowid, ids, doc_ids, positions, entities, recency, strings, sessions, compacted = data
    return Features(
        rowid=np.asarray(rowid, np.int64), ids=Strings.of(ids), doc_ids=Strings.of(doc_ids),
        positions=np.asarray(positions, np.int64),
        entities=None if entities is None else Strings.of(entities), recency=recency,
        strings={name: _coded_from_wire(col) for name, col in strings.items()},
        session_ids=None if sessions is None else Strings.of(sessions), compacted=compacted)
