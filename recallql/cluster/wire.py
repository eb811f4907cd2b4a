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


#: A numpy array on the wire: (dtype string, shape, its bytes).
WireArray = tuple[str, tuple[int, ...], bytes]


def array_wire(a: np.ndarray) -> WireArray:
    """An array as its dtype, shape and bytes: pickled, that costs a fifth of pickling the array
    itself (13 small arrays per shard reply: 27 -> 5 µs to pickle, 16 -> 5 µs to unpickle)."""
    return (a.dtype.str, a.shape, a.tobytes())


def array_from_wire(data: WireArray) -> np.ndarray:
    """The inverse of `array_wire` (a writable copy)."""
    kind, shape, raw = data
    return np.frombuffer(raw, np.dtype(kind)).reshape(shape).copy()


def _opt(a: np.ndarray | None) -> WireArray | None:
    return None if a is None else array_wire(a)


def _unopt(data: WireArray | None) -> np.ndarray | None:
    return None if data is None else array_from_wire(data)


def pack(batches: LegBatches) -> tuple[Any, ...]:
    """`batches` as a tuple of arrays (as `array_wire`), lists and scalars."""
    legs = [(b.name, str(b.kind), array_wire(b.rowids), array_wire(b.scores),
             array_wire(b.ranks), b.window, b.time_ns, _opt(b.places), b.method, b.why)
            for b in batches.legs]  # ids: from the features
    notices = [(str(code), message) for code, message in batches.notices]
    return (batches.collection, batches.batch, batches.size, batches.scan_ns,
            _features(batches.features), notices, legs)


def unpack(data: tuple[Any, ...]) -> LegBatches:
    """The inverse of `pack`."""
    collection, batch, size, scan_ns, features, notices, legs = data
    feat = _unfeatures(features)
    return LegBatches(
        collection, batch, size,
        tuple(_leg(feat, name, kind, array_from_wire(rowids), array_from_wire(scores),
                   array_from_wire(ranks), window, time_ns, _unopt(places), method, why)
              for name, kind, rowids, scores, ranks, window, time_ns, places, method, why
              in legs),
        feat, scan_ns, tuple((Reason(code), message) for code, message in notices))


def _leg(feat: Features, name: str, kind: str, rowids: np.ndarray, scores: np.ndarray,
         ranks: np.ndarray, window: int, time_ns: int, places: np.ndarray | None, method: str,
         why: str) -> LegBatch:
    return LegBatch(name, LegKind(kind), rowids, scores, ranks,
                    feat.ids.take(np.searchsorted(feat.rowid, rowids)), window, time_ns,
                    places, method=method, why=why)


def _strs(col: Strings | None) -> list[str] | None:
    return None if col is None else col.tolist()


def _features(feat: Features) -> tuple[Any, ...]:
    return (array_wire(np.asarray(feat.rowid, np.int64)), feat.ids.tolist(), feat.doc_ids.tolist(),
            array_wire(np.asarray(feat.positions, np.int64)), _strs(feat.entities),
            _opt(feat.recency),
            {name: _coded_wire(col) for name, col in feat.strings.items()},
            _strs(feat.session_ids), _opt(feat.compacted))


def _unfeatures(data: tuple[Any, ...]) -> Features:
    rowid, ids, doc_ids, positions, entities, recency, strings, sessions, compacted = data
    return Features(
        rowid=array_from_wire(rowid), ids=Strings.of(ids), doc_ids=Strings.of(doc_ids),
        positions=array_from_wire(positions),
        entities=None if entities is None else Strings.of(entities), recency=_unopt(recency),
        strings={name: _coded_from_wire(col) for name, col in strings.items()},
        session_ids=None if sessions is None else Strings.of(sessions),
        compacted=_unopt(compacted))
