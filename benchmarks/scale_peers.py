"""The systems of the scaling benchmark, built once per size and cached on disk.

- `LanceScale`: LanceDB as its users run it at each size: its native full-text index on the
  text, a Bitmap index on ``tenant`` and a BTree index on ``session`` (scalar indexes for
  prefiltering), and the vector column either unindexed (``exact``: a flat scan, what LanceDB
  does until an index is built; right at 10k rows) or indexed with ``ivf_pq`` (IVF_PQ, cosine,
  LanceDB's default partitions and sub-vectors; queried with nprobes 20 and refine_factor 10,
  which re-ranks 10× the limit with the full vectors) or ``ivf_hnsw_sq`` (IVF_HNSW_SQ, cosine,
  defaults). Hybrid = vector + FTS fused by LanceDB's `RRFReranker(K=60)`.
- `RecallqlScale`: a recallql database with a ``chunks`` collection (text field ``body``,
  declared fields ``tenant`` and ``session``, 384-d vectors supplied), ingested in batches of
  20,000 items without background graph building, then ``optimize_vectors`` (what
  ``recallql optimize`` does: one segment, one HNSW graph, as a LanceDB user builds its vector
  index after loading) before it is measured; the segment counts after ingest (bounded by
  tiered merging) and after optimize are kept in ``build.json``.

Databases live under ``<cache>/db/`` (see `benchmarks.scale_data.path_for`); a ``.complete``
marker says a build finished. recallql databases are keyed by a hash of the storage layer's
source (``recallql/index/*.py``), so a storage change rebuilds them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import numpy as np

from benchmarks import scale_data

os.environ.setdefault("LANCE_LOG", "error")
os.environ.setdefault("LANCEDB_LOG", "error")

LANCE_KINDS = ("exact", "ivf_pq", "ivf_hnsw_sq")
NPROBES, REFINE = 20, 10
INGEST_BATCH = 20_000
COLLECTION = "chunks"
FIELDS = {"tenant": str, "session": str}


def _batches(items: Iterable[dict], size: int) -> Iterator[list[dict]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def _timed_build(path: Path, build) -> float:
    """Run `build(path)` unless `path` holds a finished build; seconds taken (0 if cached)."""
    marker = path / ".complete"
    if marker.is_file():
        return 0.0
    if path.exists():
        shutil.rmtree(path)
    start = time.perf_counter()
    build(path)
    marker.write_text("ok\n")
    return time.perf_counter() - start


class LanceScale:
    """LanceDB over the first `n` scale items (see the module docstring).

    Args:
        n: rows.
        kind: ``"exact"``, ``"ivf_pq"`` or ``"ivf_hnsw_sq"``.
    """

    def __init__(self, n: int, kind: str):
        import lancedb
        from lancedb.rerankers import RRFReranker

        self.n, self.kind = n, kind
        self.path = scale_data.path_for(f"lance-{lancedb.__version__}-{kind}-{n}")
        self.built_s = _timed_build(self.path, self._build)
        self.table = lancedb.connect(self.path).open_table("items")
        self._reranker = RRFReranker(K=60)

    def _build(self, path: Path) -> None:
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS, IvfHnswSq, IvfPq

        vecs = scale_data.vectors(self.n)
        db = lancedb.connect(path)
        table = None
        for start, chunk in zip(range(0, self.n, 100_000),
                                _batches(scale_data.items(self.n), 100_000), strict=False):
            flat = pa.array(np.ascontiguousarray(vecs[start:start + len(chunk)]).ravel())
            data = pa.table({
                "id": [c["id"] for c in chunk], "text": [c["body"] for c in chunk],
                "tenant": [c["tenant"] for c in chunk], "session": [c["session"] for c in chunk],
                "vector": pa.FixedSizeListArray.from_arrays(flat, vecs.shape[1])})
            table = db.create_table("items", data) if table is None else table
            if start:
                table.add(data)
        assert table is not None
        table.create_index("text", config=FTS())
        table.create_scalar_index("tenant", index_type="BITMAP")
        table.create_scalar_index("session", index_type="BTREE")
        if self.kind == "ivf_pq":
            table.create_index("vector", config=IvfPq(distance_type="cosine"))
        elif self.kind == "ivf_hnsw_sq":
            table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))

    def _tuned(self, query):
        query = query.distance_type("cosine")
        if self.kind == "ivf_pq":
            query = query.nprobes(NPROBES).refine_factor(REFINE)
        elif self.kind == "ivf_hnsw_sq":
            query = query.nprobes(NPROBES)
        return query

    def hybrid(self, text: str, vec: np.ndarray, k: int, where: str | None = None) -> list[str]:
        """Ids of the hybrid top k (each leg fetches k rows), prefiltered by `where`."""
        query = self._tuned(self.table.search(query_type="hybrid").vector(vec).text(text))
        if where:
            query = query.where(where, prefilter=True)
        return query.rerank(self._reranker).limit(k).select(["id"]).to_arrow() \
            .column("id").to_pylist()

    def vector(self, vec: np.ndarray, k: int, where: str | None = None) -> list[str]:
        """Ids of the vector top k, prefiltered by `where`."""
        query = self._tuned(self.table.search(vec, query_type="vector"))
        if where:
            query = query.where(where, prefilter=True)
        return query.limit(k).select(["id"]).to_arrow().column("id").to_pylist()


def storage_key() -> str:
    """First 12 hex of a hash over recallql's storage layer sources."""
    root = Path(__file__).resolve().parents[1] / "recallql" / "index"
    digest = hashlib.sha256()
    for path in sorted(root.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


class RecallqlScale:
    """recallql over the first `n` scale items (see the module docstring)."""

    def __init__(self, n: int):
        import recallql

        self.n = n
        self.path = scale_data.path_for(f"recallql-{storage_key()}-{n}")
        self.built_s = _timed_build(self.path, self._build)
        self.db = recallql.connect(self.path, embedder=None)

    def _build(self, path: Path) -> None:
        import recallql

        vecs = scale_data.vectors(self.n)
        info: dict[str, object] = {"load_before": os.getloadavg()}
        with recallql.connect(path, embedder=None) as db:
            db.store.background_graphs = False  # bulk load first, then one graph (optimize)
            db.create_collection(COLLECTION, ("body",), FIELDS, dim=vecs.shape[1], embedder=None)
            start, began = 0, time.perf_counter()
            for chunk in _batches(scale_data.items(self.n), INGEST_BATCH):
                block = vecs[start:start + len(chunk)]
                db.ingest(COLLECTION, [dict(c, vector=block[i]) for i, c in enumerate(chunk)])
                start += len(chunk)
            info["ingest_s"] = time.perf_counter() - began
            info["segments_after_ingest"] = self._segments(db)
            began, cpu = time.perf_counter(), time.process_time()
            report = db.optimize_vectors([COLLECTION], threads=2)[0]
            info.update(optimize_s=time.perf_counter() - began,
                        optimize_cpu_s=time.process_time() - cpu,
                        graph_rows_added=report.graph_added,
                        segments_after_optimize=self._segments(db),
                        load_after=os.getloadavg())
            db.store.build_graphs()  # the column checkpoint (the graph exists already)
        (path / "build.json").write_text(json.dumps(info) + "\n")

    @staticmethod
    def _segments(db) -> int:
        return len(db.store.snapshot(COLLECTION).state.segments)

    def build_info(self) -> dict:
        """What the build recorded (`build.json`: ingest and optimize seconds, segment
        counts, load), or {} for a database built before it was recorded."""
        file = self.path / "build.json"
        return json.loads(file.read_text()) if file.is_file() else {}

    def ids(self, statement: str, **params: object) -> list[str]:
        """Ids of the rows of one statement."""
        return [row.id for row in self.db.execute(statement, **params).rows]

    def close(self) -> None:
        self.db.close()
