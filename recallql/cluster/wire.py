"""`LegBatches` between a shard and the coordinator as plain data that Ray pickles cheaply
(numpy arrays stay arrays; nothing is validated twice): the same content as
`LegBatches.to_json`, without the JSON round."""

from __future__ import annotations

from typing import Any

import numpy as np

from recallql.engine.features import Strings, features_from_wire, features_to_wire
from recallql.engine.legs import LegBatch, LegBatches
from recallql.engine.plan import LegKind
from recallql.engine.reasons import Reason


def pack(batches: LegBatches) -> dict[str, Any]:
    """`batches` as a dict of arrays, lists and scalars (picklable)."""
    return {
        "collection": batches.collection, "batch": batches.batch, "size": batches.size,
        "scan_ns": batches.scan_ns, "features": features_to_wire(batches.features),
        "notices": [(str(code), message) for code, message in batches.notices],
        "legs": [(b.name, str(b.kind), b.rowids, b.scores, b.ranks, b.ids.tolist(), b.window,
                  b.time_ns, b.places) for b in batches.legs],
    }


def unpack(data: dict[str, Any]) -> LegBatches:
    """The inverse of `pack`."""
    legs = tuple(LegBatch(name, LegKind(kind), np.asarray(rowids, np.int64),
                          np.asarray(scores, np.float64), np.asarray(ranks, np.int64),
                          Strings.of(ids), window, time_ns,
                          None if places is None else np.asarray(places, np.int64).reshape(-1, 2))
                 for name, kind, rowids, scores, ranks, ids, window, time_ns, places
                 in data["legs"])
    return LegBatches(data["collection"], data["batch"], data["size"], legs,
                      features_from_wire(data["features"]), data["scan_ns"],
                      tuple((Reason(code), message) for code, message in data["notices"]))
