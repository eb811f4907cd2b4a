"""The tantivy text index of one collection.

One BM25 field ``text`` (the collection's text fields joined with ``"\\n"``, analysed by
`recallql.index.analysis`), plus two u64 fields, indexed and fast: ``rowid`` (joins the document to
SQLite and the vectors) and ``batch`` (the batch sequence number, so that recovery can delete the
documents of a batch that never committed). Indexes of analyser 2 and later also index ``all`` = 1
in every document, so that ``doc_freq(all, 1)`` counts the documents BM25's statistics count.
Indexes created by this recallql also hold the declared str fields as untokenized terms in
``keys`` (`recallql.index.keyterms`), so that the lexical leg applies a filter as a term
query. Nothing is stored in tantivy; texts live in SQLite.

**Analyser version.** The version an index was built with is recorded in the file
`ANALYZER_FILE` inside the index directory, written when the index is created (or rebuilt); an
index without it was written by analyser 1. The same file lists the fields the index holds
``keys`` terms for (``"keywords"``); an index whose file has no such list predates them and
has no ``keys`` field: its filters are applied as before (hits checked against the eligible
rows, or a rowid term set of a few thousand rows at most) until a rebuild
(``recallql optimize`` / ``recallql reindex``) adds them. Documents and query text go through
that version (`TextIndex.prepare`, `TextIndex.analyze`), so an old index stays consistent until
it is rebuilt.

**BM25 statistics after deletes** (the Lucene rule). tantivy scores with corpus statistics —
N (documents), n(t) (documents holding t) and the average length — taken over every document
still stored in a segment: a deleted or replaced row keeps counting until the segment holding
it is merged, exactly as in Lucene (``maxDoc``, ``docFreq``). `TextIndex.counted_docs` says how
many documents the statistics count; a rebuild of the index from the live rows
(``recallql optimize`` / ``recallql reindex``) makes them exact.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import tantivy
from tantivy import FieldType as TantivyType
from tantivy import Occur, Query

from recallql.index.analysis import ANALYZER_NAME, CURRENT_VERSION, VERSIONS, analyzer, prepare
from recallql.index.connections import fsync_dir
from recallql.index.errors import StoreError
from recallql.index.keyterms import KEYS_FIELD, document_terms
from recallql.index.ranking import top_by_score
from recallql.index.rowsets import RowSet
from recallql.index.storage import describe, tantivy_error

#: A filter that the ``keys`` terms cannot express is pushed into tantivy as a rowid term set
#: only when it keeps at most this many rows and under half of them; otherwise the hits are
#: checked against the eligible rows (over-fetching by the eligible share). Building the term
#: set costs ~0.1 µs a row and tantivy then intersects every match with it (a tenant's 10,000
#: rowids of 1M cost ~11 ms CPU; on 5,000 rows without any filter, pushing every live rowid
#: made the lexical leg 10× slower than the bare search).
TERM_SET_MAX = 4096
WRITER_HEAP_BYTES = 96_000_000
#: The file in an index directory that records its analyser version (JSON).
ANALYZER_FILE = "recallql-analyzer.json"
#: The file of a tantivy index that lists its segments; an index without it is damaged.
META_JSON = "meta.json"


def _schema(count_field: bool, keys: bool = False) -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False, tokenizer_name=ANALYZER_NAME, index_option="freq")
    builder.add_unsigned_field("rowid", indexed=True, fast=True)
    builder.add_unsigned_field("batch", indexed=True, fast=True)
    if count_field:
        builder.add_unsigned_field("all", indexed=True)
    if keys:
        builder.add_text_field(KEYS_FIELD, stored=False, tokenizer_name="raw",
                               index_option="basic")
    return builder.build()


#: The schema of analyser-1 indexes; term queries are built against it (the fields it has keep
#: the same ids in `SCHEMA_COUNTED`).
SCHEMA = _schema(False)
#: The schema of indexes of analyser 2 written before the ``keys`` terms.
SCHEMA_COUNTED = _schema(True)
#: The schema of indexes created now: `SCHEMA_COUNTED` plus the ``keys`` field.
SCHEMA_KEYED = _schema(True, keys=True)


def _marker(path: Path) -> dict | None:
    """The contents of `ANALYZER_FILE` (None: there is none).

    Raises:
        StoreError: the file is unreadable, names an unknown version or a malformed field list.
    """
    marker = path / ANALYZER_FILE
    if not marker.is_file():
        return None
    try:
        found = json.loads(marker.read_text(encoding="utf-8"))
        version = found["version"]
        keywords = found.get("keywords", [])
        if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
            raise ValueError(f"keywords must be a list of field names, got {keywords!r}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(f"cannot read the analyser version in {marker}: {exc}") from exc
    if version not in VERSIONS:
        raise StoreError(f"{marker}: text analyser version {version!r} is unknown to this "
                         f"recallql (it knows {list(VERSIONS)}); upgrade recallql")
    return found


def stored_version(path: Path) -> int | None:
    """The analyser version recorded in an index directory: None when there is no index there,
    1 for an index without `ANALYZER_FILE` written before it (no ``all`` field).

    Raises:
        StoreError: the file is unreadable, names an unknown version, or is missing from an
            index of analyser 2 or later.
    """
    found = _marker(path)
    if found is None:
        if not (path / META_JSON).is_file():
            return None
        if _has_count_field(path):
            raise StoreError(f"{path / ANALYZER_FILE} is missing: the text index {path} was "
                             "written by analyser 2 or later (it has their `all` field), so its "
                             "analyser is unknown; the database is damaged (restore the file "
                             "or the database from a backup)")
        return 1
    return int(found["version"])


def _has_count_field(path: Path) -> bool:
    """Whether the index's schema (its ``meta.json``) has the ``all`` field of analyser 2+."""
    try:
        meta = json.loads((path / META_JSON).read_text(encoding="utf-8"))
        return any(field.get("name") == "all" for field in meta.get("schema", []))
    except (OSError, ValueError, AttributeError, TypeError):
        return False  # tantivy's open names a damaged meta.json


def stored_keywords(path: Path) -> tuple[str, ...] | None:
    """The fields an index directory holds ``keys`` terms for; None for an index written
    before them (no ``keys`` field)."""
    found = _marker(path)
    if found is None or "keywords" not in found:
        return None
    return tuple(found["keywords"])


def write_version(path: Path, version: int, keywords: Sequence[str] = ()) -> None:
    """Record `version` and the ``keys`` fields in the index directory (written to a
    temporary file, then renamed)."""
    tmp = path / (ANALYZER_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"version": version, "keywords": list(keywords)}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path / ANALYZER_FILE)


def directory_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the directory at `path`, or None when it is missing."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def siblings(path: Path) -> tuple[Path, Path]:
    """``(text.rebuild, text.old)`` beside the index directory `path`."""
    return path.with_name(path.name + ".rebuild"), path.with_name(path.name + ".old")


def rebuild_pending(path: Path) -> bool:
    """Whether a rebuild of the index at `path` left ``text.rebuild`` or ``text.old``."""
    return any(p.exists() for p in siblings(path))


def recover_rebuild(path: Path) -> None:
    """Finish or discard a rebuild a crash interrupted (see `recallql.index.reindex`); run by
    the writer holding the lock, so never while another process rebuilds."""
    building, old = siblings(path)
    if building.exists() and not path.exists():
        os.replace(building, path)
        fsync_dir(path.parent)
    elif building.exists():
        shutil.rmtree(building)
    if old.exists():
        shutil.rmtree(old)


class TextIndex:
    """A collection's tantivy index.

    Args:
        path: index directory, or ``None`` for an in-memory index.
        readonly: open an existing index without ever creating a writer.
        create: create the index (`Store.create_collection`, a rebuild); otherwise it must
            exist, and a missing or damaged one is a `StoreError` (an index is never
            re-created in place).
        keywords: a new index (created, or in memory): the declared fields it holds ``keys``
            terms for (`recallql.index.keyterms.keyword_fields`).

    Attributes:
        version: the analyser version of the index (`recallql.index.analysis`); a new index
            gets the current one.
        keywords: the fields whose values every document holds as ``keys`` terms (empty for
            an index written before them).

    Raises:
        StoreError: the directory cannot be opened as a tantivy index (named, with the cause),
            is missing its ``meta.json``, or records an unknown analyser version.
    """

    def __init__(self, path: Path | None, *, readonly: bool = False, create: bool = False,
                 keywords: Sequence[str] = ()):
        canonical = path
        if path is not None and not create and not path.exists() and siblings(path)[0].exists():
            path = siblings(path)[0]  # a writer is between the two renames of a rebuild
        try:
            self._open(path, readonly, create, keywords)
        except StoreError:
            if path is canonical or canonical is None or not canonical.exists():
                raise
            self._open(canonical, readonly, create, keywords)  # its second rename came meanwhile

    def _open(self, path: Path | None, readonly: bool, create: bool, keywords: Sequence[str]
              ) -> None:
        self.path = path
        self.readonly = readonly
        #: The directory opened (read before its marker and index: a rebuild swapped in after
        #: this shows as `replaced`, never the other way round).
        self.identity = None if path is None else directory_identity(path)
        existing = None if path is None or create else stored_version(path)
        self.version = CURRENT_VERSION if existing is None else existing
        stored = None if path is None or create else stored_keywords(path)
        self.keyed = path is None or create or stored is not None
        self.keywords: tuple[str, ...] = tuple(keywords) if path is None or create else (
            stored or ())
        try:
            if path is None:
                self.index = tantivy.Index(SCHEMA_KEYED)
            elif create:
                path.mkdir(parents=True, exist_ok=True)
                self.index = tantivy.Index(SCHEMA_KEYED, path=str(path), reuse=False)
                write_version(path, self.version, self.keywords)
            else:
                if existing is None or not (path / META_JSON).is_file():
                    raise StoreError(f"{path / META_JSON} is missing: the text index of "
                                     f"collection {path.parent.name!r} is damaged (it is never "
                                     "re-created; restore the database from a backup)")
                self.index = tantivy.Index.open(str(path))
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot open the text index {path}: {describe(exc)}") from exc
        self.index.register_tokenizer(ANALYZER_NAME, analyzer(self.version))
        self._counted = self.version >= 2
        self._writer: tantivy.IndexWriter | None = None

    def replaced(self, path: Path | None) -> bool:
        """Whether the index directory at `path` (the collection's ``text``) is no longer the
        one this object opened: another `Store` (another process) rebuilt the index and swapped
        it in (`recallql.index.reindex`), maybe with another analyser version or ``keys``
        fields, which this object would go on using for its documents and queries. Also true
        once `path` exists again for an object opened through ``text.rebuild`` between the
        two renames of a rebuild: that name is gone after the second one. False in memory,
        and while `path` is missing (a rebuild between its two renames)."""
        if path is None or self.identity is None:
            return False
        now = directory_identity(path)
        return now is not None and (now != self.identity or self.path != path)

    def prepare(self, text: str) -> str:
        """The text handed to tantivy for a document or a query (`analysis.prepare`)."""
        return prepare(text, self.version)

    def analyze(self, text: str) -> list[str]:
        """Index terms of `text` with this index's analyser version."""
        return analyzer(self.version).analyze(prepare(text, self.version))

    def counted_docs(self, searcher: tantivy.Searcher) -> int | None:
        """Documents BM25's statistics count in `searcher` (live, replaced and deleted rows
        whose documents are still in a segment); None for an analyser-1 index."""
        return int(searcher.doc_freq("all", 1)) if self._counted else None

    @property
    def writer(self) -> tantivy.IndexWriter:
        """The index writer (created on first use; holds tantivy's own writer lock until
        `close`).

        Raises:
            StoreError: read-only, or tantivy cannot create it (named, with the cause).
        """
        if self.readonly:
            raise StoreError(f"the text index {self.path} is open read-only")
        if self._writer is None:
            try:
                self._writer = self.index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
            except (OSError, ValueError) as exc:
                raise tantivy_error(self.path, "open a writer on", exc) from exc
        return self._writer

    def add(self, rowids: Sequence[int], batch: int, texts: Sequence[str],
            fields: Sequence[Mapping[str, object] | None] | None = None) -> None:
        """Queue documents (visible after `commit`); `fields` are the rows' declared field
        values (None: none), of which the `keywords` ones become ``keys`` terms."""
        add, version, counted = self.writer.add_document, self.version, self._counted
        keywords = self.keywords
        values = fields if fields is not None and keywords else [None] * len(texts)
        try:
            for rowid, text, row in zip(rowids, texts, values, strict=True):
                doc = tantivy.Document()
                doc.add_text("text", prepare(text, version))
                doc.add_unsigned("rowid", rowid)
                doc.add_unsigned("batch", batch)
                if counted:
                    doc.add_unsigned("all", 1)
                for term in document_terms(row, keywords):
                    doc.add_text(KEYS_FIELD, term)
                add(doc)
        except (OSError, ValueError) as exc:
            raise tantivy_error(self.path, "add documents to", exc) from exc

    def delete_rows(self, rowids: Sequence[int]) -> None:
        """Queue deletion of the documents of these rowids."""
        rows = [int(r) for r in rowids]
        for start in range(0, len(rows), 4096):
            chunk = rows[start:start + 4096]
            # (delete_documents_by_term sends a Python int as an i64 term: it never matches u64)
            self.writer.delete_documents_by_query(Query.term_set_query(SCHEMA, "rowid", chunk))

    def batches_after(self, seq: int) -> int:
        """Number of documents whose batch number is greater than `seq` (uncommitted ones)."""
        self.index.reload()
        found = self.index.searcher().search(self._after(seq), 1, count=True)
        return found.count  # type: ignore[attr-defined]  # set by count=True; not in the stub

    def rows_from(self, first: int) -> int:
        """Number of documents whose rowid is `first` or more (rows SQLite does not have)."""
        self.index.reload()
        found = self.index.searcher().search(self._from(first), 1, count=True)
        return found.count  # type: ignore[attr-defined]  # set by count=True; not in the stub

    def delete_uncommitted(self, seq: int, first: int) -> None:
        """Queue deletion of every document of a batch after `seq` or of a rowid from `first`
        on: what an unfinished batch left (its batch number may since have been committed by a
        batch of another collection, so the rowid is what identifies it)."""
        self.writer.delete_documents_by_query(self._after(seq))
        self.writer.delete_documents_by_query(self._from(first))

    @staticmethod
    def _after(seq: int) -> Query:
        return Query.range_query(SCHEMA, "batch", TantivyType.Unsigned, seq + 1, None)

    @staticmethod
    def _from(first: int) -> Query:
        return Query.range_query(SCHEMA, "rowid", TantivyType.Unsigned, first, None)

    def commit(self) -> None:
        """Commit queued changes durably and make them searchable in this process.

        Raises:
            StoreError: tantivy could not commit (disk full, I/O): the queued changes are
                dropped, the index stays at its last commit.
        """
        try:
            self.writer.commit()
        except (OSError, ValueError) as exc:
            self.close(quiet=True)  # a writer whose commit failed is not reused
            raise tantivy_error(self.path, "commit", exc) from exc
        self.index.reload()

    def collect_garbage(self) -> None:
        """Delete index files no commit refers to: what a killed writer left half-written.

        Needed before the first commit after a crash: a killed writer may have written a
        delete file (`<segment>.<opstamp>.del`) for a commit that never reached `meta.json`, and
        the next writer, restarting from the last committed opstamp, would try to create the same
        file name (tantivy: `FileAlreadyExists`).
        """
        try:
            self.writer.garbage_collect_files()
        except (OSError, ValueError) as exc:
            raise tantivy_error(self.path, "clean up", exc) from exc

    def rollback(self) -> None:
        """Drop queued, uncommitted changes (no-op without a writer): the writer is closed
        (`close`) and the next change opens a new one."""
        self.close()

    def searcher(self) -> tantivy.Searcher:
        """A searcher over the last commit visible to this process."""
        self.index.reload()
        return self.index.searcher()

    def documents(self) -> tuple[np.ndarray, np.ndarray]:
        """(rowids uint64[m], batches uint64[m]) of every document of the last commit (for
        `recallql.index.integrity.check`)."""
        searcher = self.searcher()
        total = searcher.num_docs
        if total == 0:
            return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        hits = searcher.search(Query.all_query(), total, count=False).hits
        addresses = [addr for _, addr in hits]
        rowids = searcher.fast_field_values("rowid", addresses)
        batch = searcher.fast_field_values("batch", addresses)
        return np.asarray(rowids, np.uint64), np.asarray(batch, np.uint64)

    def close(self, quiet: bool = False) -> None:
        """Release the writer (and tantivy's writer lock) once its merges have finished,
        dropping queued, uncommitted changes; `quiet` ignores tantivy's errors (after a
        failure).

        Never tantivy's ``rollback`` here: it kills the segment updater while a merge that
        ended may still be saving ``meta.json``; the next writer, opened on the meta.json before
        it, then garbage-collects the merged segment's files, and the index refers to files that
        are gone (found by 8 threads appending on one database).
        """
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.wait_merging_threads()  # uncommitted documents are not committed
            except (OSError, ValueError) as exc:
                if not quiet:
                    raise tantivy_error(self.path, "close the writer of", exc) from exc


def text_query(terms: Sequence[str]) -> Query:
    """SHOULD-query of one term query per distinct term, in first-seen order; a term given k
    times is boosted ×k (query term frequency: the sum of its k identical BM25 scores, as
    bag-of-words queries in Lucene/Anserini and bm25s score repeated query words)."""
    clauses = []
    for term, count in Counter(terms).items():
        query = Query.term_query(SCHEMA, "text", term)
        clauses.append((Occur.Should, query if count == 1 else Query.boost_query(query, count)))
    return Query.boolean_query(clauses)


def lexical_topn(
    searcher: tantivy.Searcher,
    terms: Sequence[str],
    n: int,
    eligible: np.ndarray | RowSet,
    ids: Sequence[str],
    restrict: tuple[Query, bool, str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 top-n over eligible rows, ordered by (−bm25, item id) (`lexical_search` without
    the description)."""
    rowids, scores, _ = lexical_search(searcher, terms, n, eligible, ids, restrict)
    return rowids, scores


def lexical_search(
    searcher: tantivy.Searcher,
    terms: Sequence[str],
    n: int,
    eligible: np.ndarray | RowSet,
    ids: Sequence[str],
    restrict: tuple[Query, bool, str] | None = None,
) -> tuple[np.ndarray, np.ndarray, str]:
    """BM25 top-n over eligible rows, ordered by (−bm25, item id), and how the filter ran.

    Args:
        searcher: a searcher of the collection's index.
        terms: analysed query terms; a repeated term weighs as many times (`text_query`).
        n: number of rows wanted.
        eligible: bool[size] or a `RowSet`; rowids outside it (or ≥ size) are never returned.
        ids: item id per rowid (tie-break).
        restrict: the statement's filter as a ``keys`` term query (`keyterms.filter_query`):
            ``(query, exact, label)``; the text query must also match it (scored 0, so BM25 is
            unchanged), and hits are still checked against `eligible`.

    Returns:
        (rowids int64[m], bm25 float32[m], how): m ≤ n. Ties at the cut are resolved by item
        id: hits are fetched until the score after the n-th eligible hit strictly drops. `how`
        says how the filter ran (EXPLAIN): ``terms(<fields>)`` (the term query; ``+check`` when
        it is a superset), ``rowids(<m>)`` (a rowid term set), ``post-filter`` (hits checked),
        or ``""`` when every row is eligible.
    """
    empty = (np.zeros(0, np.int64), np.zeros(0, np.float32))
    eligible = RowSet.of(eligible, len(eligible) if isinstance(eligible, np.ndarray)
                         else eligible.size)
    count, size = eligible.count, eligible.size
    query, how, share = text_query(terms), "", count / max(size, 1)
    if restrict is not None:
        filter_query, exact, label = restrict
        query = Query.boolean_query(
            [(Occur.Must, query), (Occur.Must, Query.const_score_query(filter_query, 0.0))])
        how, share = (label, 1.0) if exact else (label + "+check", 0.5)
    elif count <= TERM_SET_MAX and count * 2 < size:
        allowed = Query.term_set_query(SCHEMA, "rowid", eligible.rows.tolist())
        query = Query.boolean_query(
            [(Occur.Must, query), (Occur.Must, Query.const_score_query(allowed, 0.0))])
        how, share = f"rowids({count})", 1.0  # tantivy returns eligible rows only
    elif count < size:
        how = "post-filter"
    if n <= 0 or not terms or count == 0:
        return (*empty, how)
    kept = _fetch_eligible(searcher, query, n, eligible, share)
    top = top_by_score([s for s, _ in kept], n, lambda i: ids[kept[i][1]])
    return (np.array([kept[i][1] for i in top], np.int64),
            np.array([kept[i][0] for i in top], np.float32), how)


def _fetch_eligible(searcher: tantivy.Searcher, query: Query, n: int,
                    eligible: RowSet, share: float = 0.5) -> list[tuple[float, int]]:
    """(score, rowid) of eligible hits, score-descending, past the n-th one's score.

    The first fetch asks for ``(n + 16) / share`` hits, `share` being the expected eligible
    share of the hits; it doubles until the n-th eligible hit is found and the score after it
    strictly drops (so ties at the cut are all there).
    """
    size = eligible.size
    limit = math.ceil((n + 16) / max(share, 0.01))
    while True:
        hits = searcher.search(query, limit, count=False).hits
        found = searcher.fast_field_values("rowid", [addr for _, addr in hits])
        rowids = np.array([size if r is None else r for r in found], np.int64)
        inside = rowids < size
        ok = np.zeros(len(rowids), bool)
        ok[inside] = eligible[rowids[inside]]
        kept = [(hits[i][0], int(rowids[i])) for i in np.flatnonzero(ok).tolist()]
        if len(hits) < limit or (len(kept) >= n and hits[-1][0] < kept[n - 1][0]):
            return kept
        limit *= 2


def explain_bm25(searcher: tantivy.Searcher, terms: Sequence[str], rowid: int) -> str:
    """tantivy's BM25 `Explanation` (JSON text) of `terms` against the document of `rowid`."""
    query = text_query(terms)
    found = searcher.search(Query.term_query(SCHEMA, "rowid", int(rowid)), 1, count=False).hits
    if not terms or not found:
        return "no match"
    try:
        return query.explain(searcher, found[0][1]).to_json()
    except ValueError as exc:
        return f"no match ({exc})"


def counted_tokens(searcher: tantivy.Searcher) -> int:
    """Tokens in the documents BM25's statistics count (T: avgdl = T / N), read back from
    tantivy's explanation of one hit of the most common term: ``round(avgdl · N)``. Exact while
    T < 2^23 (avgdl is a float32); 0 for an index without terms. tantivy-py exposes no direct
    accessor (a scatter-gather coordinator sums shards' T to score with global statistics)."""
    top = searcher.terms_with_prefix("text", "", limit=1)
    if not top:
        return 0
    query = Query.term_query(SCHEMA, "text", top[0][0])
    hits = searcher.search(query, 1, count=False).hits
    if not hits:
        return 0
    found = _explained(json.loads(query.explain(searcher, hits[0][1]).to_json()))
    avgdl, docs = found.get("avgdl"), found.get("N")
    if avgdl is None or docs is None:
        raise StoreError("tantivy's BM25 explanation has no avgdl/N (an unknown tantivy)")
    return round(float(np.float32(avgdl)) * docs)


def _explained(node: dict, out: dict[str, float] | None = None) -> dict[str, float]:
    """The named constants of a tantivy explanation (`avgdl`, `N`, ...) by their label."""
    out = {} if out is None else out
    label = str(node.get("description", "")).split(",", 1)[0]
    if label in {"avgdl", "N"}:
        out[label] = float(node["value"])
    for child in node.get("details", ()):
        _explained(child, out)
    return out
