"""Filters that make queries cheaper (issue 16 item 2), on real tantivy indexes and SQLite.

The declared str fields are tantivy ``keys`` terms (`recallql.index.keyterms`), so the lexical
leg runs the text query with a term filter; a filter resolved through postings is a sparse
`RowSet`, so the semantic leg gathers just its rows and the context leg steps over them. Every
path must give what the unfiltered leg gives, filtered: the same rows, in the same order, with
bit-identical scores. EXPLAIN names how each leg applied the filter.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import recallql
from recallql.index import text as text_index
from recallql.index.filters import And, Between, Cmp, Contains, In, Not, Or
from recallql.index.keyterms import KEYS_FIELD, key_term
from recallql.index.rowsets import RowSet
from recallql.index.text import ANALYZER_FILE

N, DIM = 600, 8
WORDS = ["backup", "restore", "disk", "policy", "retention", "snapshot", "daily", "weekly"]
FIELDS = {"tenant": "str", "session": "str", "tags": "list[str]", "rank": "int"}


def make_items(rng: np.random.Generator, n: int = N, first: int = 0) -> list[dict]:
    """Items whose text draws from a small vocabulary (ties and deep BM25 rankings), tenants
    t0..t9 at random, sessions of 10 consecutive rows, a tag list, a rank and a vector."""
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    items = []
    for j in range(first, first + n):
        words = rng.choice(WORDS, size=int(rng.integers(1, 6)))
        item = {"id": f"i{j:04d}", "body": " ".join(words), "tenant": f"t{rng.integers(10)}",
                "session": f"s{j // 10}", "rank": int(rng.integers(10)),
                "tags": [t for t in ("red", "blue", "green") if rng.random() < 0.4],
                "vector": vecs[j - first]}
        if j % 50 == 7:
            del item["tenant"]  # missing: never equal to anything
        items.append(item)
    return items


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("terms") / "db"
    database = recallql.connect(path, embedder=None)
    database.create_collection("c", text_fields=("body",), fields=FIELDS, dim=DIM,
                               embedder=None)
    rng = np.random.default_rng(16)
    items = make_items(rng)
    database.ingest("c", items[:400])
    database.ingest("c", items[400:])
    database.delete("c", [f"i{j:04d}" for j in range(3, N, 17)])  # tombstones
    yield database
    database.close()


def holds(expr, row: dict) -> bool:
    """The test's own reading of a filter over one stored row (SQL: missing fails)."""
    if isinstance(expr, And):
        return all(holds(e, row) for e in expr.items)
    if isinstance(expr, Or):
        return any(holds(e, row) for e in expr.items)
    if isinstance(expr, Not):
        value = row.get(expr.item.field)
        return value is not None and value != [] and not holds(expr.item, row)
    value = row.get(expr.field)
    if value is None:
        return False
    values = value if isinstance(value, list) else [value]
    if isinstance(expr, Cmp):
        return {"=": any(v == expr.value for v in values),
                ">": any(v > expr.value for v in values)}[expr.op]
    if isinstance(expr, In):
        return any(v in expr.values for v in values)
    if isinstance(expr, Contains):
        return expr.value in values
    if isinstance(expr, Between):
        return any(expr.lo <= v <= expr.hi for v in values)
    raise AssertionError(expr)


CASES = [  # (filter, how the lexical leg applies it: the start of its description)
    (Cmp("tenant", "=", "t3"), "terms(tenant)"),
    (In("tenant", ("t1", "t4", "t1", "nobody")), "terms(tenant)"),
    (Cmp("session", "=", "s7"), "terms(session)"),
    (In("session", ("s2", "s30", None)), "terms(session)"),
    (Contains("tags", "red"), "terms(tags)"),
    (Cmp("tags", "=", "blue"), "terms(tags)"),
    (And((Cmp("tenant", "=", "t2"), In("tags", ("green", "blue")))), "terms(tags,tenant)"),
    (Or((Cmp("tenant", "=", "t5"), Cmp("session", "=", "s1"))), "terms(session,tenant)"),
    (And((Cmp("tenant", "=", "t1"), Cmp("rank", ">", 4))), "terms(tenant)+check"),
    (Or((Cmp("tenant", "=", "t1"), Cmp("rank", ">", 8))), "rowids("),  # under half the rows
    (Between("rank", 2, 3), "rowids("),
    (Not(Cmp("tenant", "=", "t1")), "post-filter"),  # most rows: the hits are checked
    (Cmp("tenant", "=", "nobody"), "terms(tenant)"),
]


def _rows(snap) -> list[dict]:
    return snap.fetch(np.arange(snap.size))


@pytest.mark.parametrize(("expr", "how"), CASES, ids=[str(c[0]) for c in CASES])
def test_the_lexical_leg_equals_the_unfiltered_leg_filtered(db, expr, how):
    snap = db.snapshot("c")
    rows = _rows(snap)
    terms = snap.analyze("backup policy retention daily")
    every, every_scores = snap.lexical_topn(terms, snap.size)
    keep = [i for i, r in enumerate(every.tolist()) if holds(expr, rows[r])]
    for n in (5, 40, snap.size):
        allowed = snap.filter_rows(expr)
        got, scores, used = snap.lexical_search(terms, n, allowed, expr)
        assert used.startswith(how) and (used == how or how.endswith("("))
        assert got.tolist() == every[keep][:n].tolist()
        assert scores.tobytes() == every_scores[keep][:n].tobytes()  # bit for bit
        # the mask path without the term filter (the old way) agrees too
        masked, masked_scores = snap.lexical_topn(terms, n, allowed.mask)
        assert masked.tolist() == got.tolist()
        assert masked_scores.tobytes() == scores.tobytes()


@pytest.mark.parametrize(("expr", "how"), CASES, ids=[str(c[0]) for c in CASES])
def test_the_semantic_leg_equals_the_unfiltered_leg_filtered(db, expr, how):
    snap = db.snapshot("c")
    rows = _rows(snap)
    query = np.random.default_rng(7).standard_normal(DIM)
    every, every_cos, _ = snap.semantic_search(query, snap.size, method="exact")
    keep = [i for i, r in enumerate(every.tolist()) if holds(expr, rows[r])]
    allowed = snap.filter_rows(expr)
    # postings: = / IN on str fields (a list field or an int comparison is a mask)
    assert allowed.sparse == (how.startswith("terms(") and "+check" not in how
                              and "tags" not in how)
    for n in (1, 10, snap.size):
        got, cos, stats = snap.semantic_search(query, n, allowed)
        assert got.tolist() == every[keep][:n].tolist()
        assert cos.tobytes() == every_cos[keep][:n].tobytes()
        assert stats.method == "exact" and stats.eligible == len(keep)
        dense, dense_cos, _ = snap.semantic_search(query, n, allowed.mask)
        assert dense.tolist() == got.tolist() and dense_cos.tobytes() == cos.tobytes()


def test_postings_resolve_and_or_in_without_a_mask(db):
    snap = db.snapshot("c")
    rows = _rows(snap)
    expr = Or((And((In("tenant", ("t1", "t2")), Cmp("session", "=", "s3"))),
               Cmp("session", "=", "s9")))
    allowed = snap.filter_rows(expr)
    assert allowed.sparse
    assert allowed.rows.tolist() == [i for i, r in enumerate(rows) if holds(expr, r)]
    assert snap.filter_rows(Cmp("rank", "=", 3)).sparse is False  # an int field: a mask
    assert RowSet(10, rows=np.array([2, 5]))[np.array([0, 2, 5, 9])].tolist() == [
        False, True, True, False]


def test_statements_equal_the_unfiltered_statement_filtered(db):
    """Through the engine: each leg of a filtered hybrid statement is the unfiltered leg
    filtered (USING LEXICAL / USING SEMANTIC, deep LIMIT, no boosts)."""
    v = np.random.default_rng(3).standard_normal(DIM).astype(np.float32)
    for where in ("tenant = 't3'", "tenant IN ('t1', 't4')", "session = 's12'",
                  "tags CONTAINS 'green' AND tenant = 't0'", "tenant = 't2' AND rank > 4"):
        for using, near in (("LEXICAL", ""), ("SEMANTIC", " NEAR :v")):
            base = f"SEARCH c MATCHING 'backup daily' USING {using}{near}"
            params = {"v": v} if near else {}
            every = db.execute(base + " WITHOUT RECENCY LIMIT 1000", **params).rows
            snap = db.snapshot("c")
            allowed = set(np.flatnonzero(snap.filter_mask(_expr(db, where))).tolist())
            ids = {snap.ids[r]: r for r in range(snap.size) if snap.live[r]}
            want = [(r.id, _raw(r)) for r in every if ids[r.id] in allowed][:10]
            got = db.execute(f"{base} WHERE {where} WITHOUT RECENCY LIMIT 10", **params).rows
            assert [(r.id, _raw(r)) for r in got] == want, (where, using)


def _raw(row) -> float:
    """A row's raw leg score (BM25 or cosine) from its reasons."""
    reason = row.reasons[0]
    return reason.bm25 if reason.bm25 is not None else reason.cosine


def _expr(db, where: str):
    """The filter expression the engine pushes down for `where` (from the plan)."""
    plan = db.plan(f"SEARCH c MATCHING 'x' USING LEXICAL WHERE {where}")
    return plan.legs[0].filter


def test_explain_names_how_each_leg_applied_the_filter(db):
    v = np.ones(DIM, np.float32)
    text = db.explain("SEARCH c MATCHING 'backup' NEAR :v WHERE session = 's4' LIMIT 3",
                      v=v).to_text()
    lexical = next(line for line in text.splitlines() if "LexicalScan" in line)
    semantic = next(line for line in text.splitlines() if "SemanticScan" in line)
    context = next(line for line in text.splitlines() if "ContextScan" in line)
    assert "filter='terms(session)'" in lexical
    live = int(np.count_nonzero(db.snapshot("c").filter_rows(
        Cmp("session", "=", "s4")).keep(db.snapshot("c")._live_vectors).mask))
    assert f"filter='posting rows={live}'" in semantic and live == 10
    assert "filter=pushed" in context
    text = db.explain("SEARCH c MATCHING 'backup' NEAR :v WHERE rank >= 1", v=v).to_text()
    assert "filter='post-filter'" in text and "filter='mask rows=" in text  # most rows
    text = db.explain("SEARCH c MATCHING 'backup' NEAR :v WHERE rank = 1", v=v).to_text()
    assert "filter='rowids(" in text  # a selective mask: a small rowid term set
    text = db.explain("SEARCH c MATCHING 'backup' NEAR :v WHERE rank = 1 AND session = 's4'",
                      v=v).to_text()
    assert "filter='terms(session)+check'" in text  # the terms as a superset, rows checked


def test_the_context_leg_over_sparse_rows_equals_the_mask(db):
    snap = db.snapshot("c")
    nb = snap.neighbours
    allowed = snap.filter_rows(In("tenant", ("t1", "t2", "t6"))).keep(snap.live)
    rows = np.arange(snap.size, dtype=np.int64)
    for direction in (-1, 1):
        for limit in (1, 3, 64):
            want = nb.step(rows, direction, allowed.mask, limit).tolist()
            assert nb.step(rows, direction, allowed, limit).tolist() == want
            assert nb.step(rows, direction, nb.places(allowed), limit).tolist() == want


def _term_rows(snap, field: str, value: str) -> set[int]:
    """Rowids of the committed documents holding a ``keys`` term (raw tantivy)."""
    searcher = snap.searcher
    query = text_index.Query.term_query(text_index.SCHEMA_KEYED, KEYS_FIELD,
                                        key_term(field, value))
    hits = searcher.search(query, 10_000, count=False).hits
    return set(searcher.fast_field_values("rowid", [a for _, a in hits]))


def test_a_failed_batch_leaves_no_terms_and_a_later_one_is_found(tmp_path):
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.create_collection("c", text_fields=("body",), fields=FIELDS, dim=DIM, embedder=None)
        items = make_items(np.random.default_rng(1), 30)
        for item in items:
            item["tenant"] = "t-new"
        broken = [dict(items[j % 30], id=f"x{j}") for j in range(1100)]
        broken[-1]["tenant"] = 5  # after 1,024 items were queued in tantivy: all refused
        with pytest.raises(recallql.IngestError):
            db.ingest("c", broken)
        snap = db.snapshot("c")
        assert _term_rows(snap, "tenant", "t-new") == set()
        db.ingest("c", items)
        snap = db.snapshot("c")
        assert _term_rows(snap, "tenant", "t-new") == set(range(30))
        got, _, how = snap.lexical_search(snap.analyze("backup restore disk policy retention "
                                                       "snapshot daily weekly"), 100,
                                          snap.filter_rows(Cmp("tenant", "=", "t-new")),
                                          Cmp("tenant", "=", "t-new"))
        assert how == "terms(tenant)" and sorted(got.tolist()) == list(range(30))


def test_a_field_declared_after_data_exists_is_filtered_by_rows_until_a_rebuild(tmp_path):
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.create_collection("c", text_fields=("body",), fields={"tenant": "str"}, dim=DIM,
                             embedder=None)
        items = make_items(np.random.default_rng(2), 200)
        db.ingest("c", [{k: v for k, v in i.items() if k in ("id", "body", "tenant", "vector")}
                        for i in items])
        db.store.add_fields("c", {"team": "str"}, fill=lambda fields: {
            "team": "team1" if fields.get("tenant") in ("t1", "t2") else "team0"})
        db.ingest("c", [dict(id="late", body="backup daily", team="team1", tenant="t1",
                             vector=np.ones(DIM, np.float32))])
        expr = Cmp("team", "=", "team1")
        snap = db.snapshot("c")
        terms = snap.analyze("backup daily policy")
        before, scores, how = snap.lexical_search(terms, 50, snap.filter_rows(expr), expr)
        assert how.startswith("rowids(")  # no terms for the stored rows: the rows decide
        assert snap.state.text.keywords == ("tenant",)
        rows = snap.fetch(before)
        assert all(r["team"] == "team1" for r in rows) and "late" in {r["id"] for r in rows}
        reports = db.reindex(only_needed=True)  # `recallql optimize`: the terms are missing
        assert [r.collection for r in reports] == ["c"]
        assert db.reindex(only_needed=True) == []  # ... and then no longer
        snap = db.snapshot("c")
        assert snap.state.text.keywords == ("team", "tenant")
        after, after_scores, how = snap.lexical_search(terms, 50, snap.filter_rows(expr), expr)
        assert how == "terms(team)"
        assert after.tolist() == before.tolist() and after_scores.tobytes() == scores.tobytes()


def test_an_old_index_without_terms_is_filtered_the_old_way_until_reindex(tmp_path):
    """An index written before the ``keys`` terms (the analyser-1 fixture database: no
    ``keys`` field, no ``keywords`` in its marker) answers filters exactly, through the rows;
    `reindex` migrates it."""
    import shutil
    import warnings
    from pathlib import Path

    path = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "fixtures" / "analyzer_v1_db", path)
    marker = path / "collections" / "docs" / "text" / ANALYZER_FILE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", recallql.AnalyzerOutdatedWarning)
        db = recallql.connect(path, embedder=None)
    with db:
        db.ingest("docs", [{"id": f"n{j}", "title": "menu card", "source": f"s{j % 2}",
                            "vector": np.eye(16, dtype=np.float32)[j % 16]} for j in range(6)])
        expr = Cmp("source", "=", "s1")
        snap = db.snapshot("docs")
        assert snap.state.text.keywords == () and not snap.state.text.keyed
        got, scores, how = snap.lexical_search(snap.analyze("menu"), 10, snap.filter_rows(expr),
                                               expr)
        assert how == "rowids(3)" and sorted(snap.ids[r] for r in got) == ["n1", "n3", "n5"]
        db.reindex()
        assert json.loads(marker.read_text())["keywords"] == ["source", "tags"]
        snap = db.snapshot("docs")
        again, again_scores, how = snap.lexical_search(snap.analyze("menu"), 10,
                                                       snap.filter_rows(expr), expr)
        assert how == "terms(source)"
        assert sorted(snap.ids[r] for r in again) == ["n1", "n3", "n5"]


@pytest.mark.parametrize("run_rows", [1, 10**9])  # scored run by run / gathered first
def test_gathered_rows_equal_the_masked_scan_on_ranged_and_explicit_segments(monkeypatch,
                                                                            run_rows):
    from recallql.index import gather
    from recallql.index.vectors import Segment, normalise_query, semantic_topn

    monkeypatch.setattr(gather, "RUN_ROWS", run_rows)
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((300, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs[[7, 150]] = vecs[[8, 151]]  # exact ties, broken by item id
    explicit = np.array([100, 103, 104, 105, 180, 181, 190, 260], np.int64)  # a merged segment
    segments = [Segment("a", 0, 100, vecs[:100]),
                Segment("m", 100, 261, vecs[explicit], explicit),
                Segment("b", 261, 300, vecs[261:])]
    ids = [f"r{j:03d}" for j in range(300)]
    held = np.concatenate([np.arange(100), explicit, np.arange(261, 300)])
    for trial in range(12):
        pick = rng.random(300) < (0.05, 0.3, 0.9)[trial % 3]
        if trial % 4 == 0:
            pick[40:90] = True  # a long run
        rows = np.intersect1d(np.flatnonzero(pick), held)
        mask = np.zeros(300, bool)
        mask[rows] = True
        query = normalise_query(rng.standard_normal(DIM), DIM)
        for n in (1, 5, 400):
            got, cos = gather.gathered_topn(segments, query, n, rows, ids)
            want, want_cos = semantic_topn(segments, query, n, mask, ids)
            assert got.tolist() == want.tolist() and cos.tobytes() == want_cos.tobytes()
