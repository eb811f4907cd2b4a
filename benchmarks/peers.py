"""The systems compared with recallql, each behind the same two calls: build, then search.

- `Bm25sPeer`: bm25s (defaults: Lucene BM25, k1 = 1.5, b = 0.75) with PyStemmer's English
  stemmer and bm25s's English stopwords; lexical only.
- `LancePeer`: LanceDB on disk: its native full-text index (simple tokenizer, lower case,
  English stemming and stopwords, the defaults) and an exact (unindexed, flat) cosine scan of
  the same vectors, fused by its `RRFReranker(K=60)`. LanceDB's hybrid query fetches `limit`
  rows from each leg.
- `RawTantivy`: a bare tantivy index over the same text with recallql's analyser (its Unicode
  normalisation included), a boolean
  SHOULD of term queries, top-N and the N row numbers read from a fast field.
- `RawNumpy`: ``matrix @ q`` (or a one-thread ``einsum``), ``argpartition``, a sort of the top N.
- `RecallqlSystem`: recallql itself, on disk, vectors supplied (the same cached embeddings).

Nothing here installs anything: the peers are the ``bench`` extra of ``pyproject.toml``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

os.environ.setdefault("LANCE_LOG", "error")
os.environ.setdefault("LANCEDB_LOG", "error")  # silences lance's scanner deprecation warnings
logging.getLogger("lancedb").setLevel(logging.ERROR)


class Bm25sPeer:
    """bm25s with PyStemmer (English) and its English stopword list."""

    name = "bm25s"

    def __init__(self, texts: Sequence[str]):
        import bm25s
        import Stemmer

        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=self._stemmer,
                                show_progress=False)
        self._retriever = bm25s.BM25()
        self._retriever.index(tokens, show_progress=False)
        self._size = len(texts)

    def search(self, text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(row numbers, scores) of the top k rows with a positive score."""
        tokens = self._bm25s.tokenize([text], stopwords="en", stemmer=self._stemmer,
                                      show_progress=False, return_ids=False)
        if not tokens[0]:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        docs, scores = self._retriever.retrieve(tokens, k=min(k, self._size),
                                                show_progress=False, n_threads=1)
        keep = scores[0] > 0
        return docs[0][keep], scores[0][keep]


class LancePeer:
    """LanceDB hybrid search (native FTS + exact cosine scan, RRF k = 60) over one table.

    Args:
        path: an empty directory for the LanceDB database.
        ids: item ids.
        texts: the text to index (one string per item).
        vectors: float32[n, dim], L2-normalised.
    """

    name = "LanceDB"

    def __init__(self, path: Path, ids: Sequence[str], texts: Sequence[str],
                 vectors: np.ndarray):
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS
        from lancedb.rerankers import RRFReranker

        dim = vectors.shape[1]
        flat = pa.array(np.ascontiguousarray(vectors, np.float32).ravel())
        table = pa.table({"id": list(ids), "text": list(texts),
                          "vector": pa.FixedSizeListArray.from_arrays(flat, dim)})
        self._table = lancedb.connect(path).create_table("items", table)
        self._table.create_index("text", config=FTS())
        self._reranker = RRFReranker(K=60)

    def hybrid(self, text: str, vector: np.ndarray, k: int) -> list[str]:
        """Ids of the hybrid top k (each leg fetches k rows, RRF fuses them)."""
        query = (self._table.search(query_type="hybrid").vector(vector).text(text)
                 .distance_type("cosine").rerank(self._reranker).limit(k).select(["id"]))
        return query.to_arrow().column("id").to_pylist()

    def lexical(self, text: str, k: int) -> list[str]:
        """Ids of the full-text top k."""
        query = self._table.search(text, query_type="fts").limit(k).select(["id", "_score"])
        return query.to_arrow().column("id").to_pylist()

    def semantic(self, vector: np.ndarray, k: int) -> list[str]:
        """Ids of the exact cosine top k."""
        query = (self._table.search(vector, query_type="vector").distance_type("cosine")
                 .limit(k).select(["id", "_distance"]))
        return query.to_arrow().column("id").to_pylist()


class RawTantivy:
    """A bare tantivy index with recallql's analyser (no filters, no tie-break, no SQLite)."""

    name = "raw tantivy"

    def __init__(self, texts: Sequence[str]):
        import tantivy

        from recallql.index.analysis import ANALYZER_NAME, analyzer, prepare

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", stored=False, tokenizer_name=ANALYZER_NAME,
                               index_option="freq")
        builder.add_unsigned_field("rowid", indexed=False, fast=True)
        self._schema = builder.build()
        index = tantivy.Index(self._schema)
        index.register_tokenizer(ANALYZER_NAME, analyzer())
        writer = index.writer(heap_size=200_000_000, num_threads=1)
        for rowid, text in enumerate(texts):
            doc = tantivy.Document()
            doc.add_text("text", prepare(text))
            doc.add_unsigned("rowid", rowid)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._searcher = index.searcher()
        self._tantivy = tantivy
        self._analyzer = analyzer()
        self._prepare = prepare

    def search(self, text: str, n: int) -> tuple[list[int], list[float]]:
        """(row numbers, BM25 scores) of the top n: analyse, query, read the row numbers."""
        q = self._tantivy.Query
        terms = dict.fromkeys(self._analyzer.analyze(self._prepare(text)))
        query = q.boolean_query([(self._tantivy.Occur.Should,
                                  q.term_query(self._schema, "text", t)) for t in terms])
        hits = self._searcher.search(query, n, count=False).hits
        rowids = self._searcher.fast_field_values("rowid", [addr for _, addr in hits])
        return rowids, [score for score, _ in hits]


class RawNumpy:
    """Exact cosine top-N with numpy over an in-memory float32 matrix."""

    name = "raw numpy"

    def __init__(self, vectors: np.ndarray):
        self._matrix = np.ascontiguousarray(vectors, np.float32)

    def search(self, vector: np.ndarray, n: int, einsum: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
        """(row numbers, cosines) of the top n (``einsum``: one thread instead of BLAS)."""
        q = vector.astype(np.float32)
        scores = np.einsum("ij,j->i", self._matrix, q) if einsum else self._matrix @ q
        top = np.argpartition(-scores, n)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return top, scores[top]


class RecallqlSystem:
    """recallql on disk with the built-in ``docs`` collection and caller-supplied vectors.

    Args:
        path: an empty directory for the database.
        items: items for `Database.ingest` (``id``, text fields, ``created_at``, ...).
        vectors: float32[n, dim], one per item, in order (384-d unless `embedder` says).
        batch: items per ingest batch.
        clock: the database's clock ("now", epoch seconds UTC), or None for the wall clock.
        embedder: the ``embedder=`` of `recallql.connect` (default None: vectors only from the
            caller, the built-in ``docs`` 384-d); an `Embedder` of another dimension makes
            ``docs`` that dimension.
    """

    name = "recallql"

    def __init__(self, path: Path, items: Sequence[dict], vectors: np.ndarray,
                 batch: int = 20_000, clock: Callable[[], float] | None = None,
                 embedder: object = None):
        import recallql

        self.db = recallql.connect(path, embedder=embedder,
                                   **({"clock": clock} if clock else {}))
        for start in range(0, len(items), batch):
            chunk = [dict(item, vector=vectors[start + i])
                     for i, item in enumerate(items[start:start + batch])]
            self.db.ingest("docs", chunk)

    def search(self, statement: str, **params: object) -> list[str]:
        """Ids of the rows of one statement."""
        return [row.id for row in self.db.execute(statement, **params).rows]

    def close(self) -> None:
        """Close the database."""
        self.db.close()
