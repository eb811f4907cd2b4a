"""recallql.index.postings: rowids by value of a dictionary-encoded column."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.index import postings
from recallql.index.postings import ColumnPostings, Postings


def random_codes(n: int, n_codes: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_codes, n).astype(np.int32)
    codes[rng.random(n) < 0.1] = -1  # missing
    codes[rng.random(n) < 0.05] = -2  # "same as the base column" (derived columns)
    return codes


def test_rows_of_a_code_are_its_rowids_ascending():
    codes = np.array([2, 0, 2, -1, 1, 2, -2, 0], np.int32)
    p = Postings(codes, 3)
    assert p.rows(0).tolist() == [1, 7]
    assert p.rows(1).tolist() == [4]
    assert p.rows(2).tolist() == [0, 2, 5]
    assert [p.count(c) for c in range(3)] == [2, 1, 3]


def test_unknown_and_negative_codes_match_nothing():
    p = Postings(np.array([0, 0, 1], np.int32), 2)
    for code in (-1, -2, 2, 99):
        assert p.rows(code).tolist() == []
        assert p.count(code) == 0


def test_column_postings_equal_a_full_comparison():
    codes = random_codes(5000, 40)
    cp = ColumnPostings()
    for wanted in ([3], [0, 39], [5, 6, 7, 8], [], [40], [-1]):
        got = cp.rows(codes, 40, wanted)
        expected = np.flatnonzero(np.isin(codes, [w for w in wanted if w >= 0]))
        assert got.tolist() == expected.tolist(), wanted
        assert got.dtype == np.int64


def test_appended_rows_are_found_in_the_tail_and_after_a_rebuild(monkeypatch):
    monkeypatch.setattr(postings, "TAIL_ROWS", 100)
    codes = random_codes(3000, 12, seed=1)
    codes[:1000] %= 10  # the dictionary grows: codes 10 and 11 appear after row 1,000
    codes[:1000][codes[:1000] == 8] = -1
    cp = ColumnPostings()
    cp.rows(codes[:1000], 10, [1])
    base = cp._base
    assert base is not None and base.size == 1000
    # 200 more rows (tail ≤ max(100, 250)): the base is kept, the tail compared
    got = cp.rows(codes[:1200], 12, [1, 11])
    assert cp._base is base
    assert got.tolist() == np.flatnonzero(np.isin(codes[:1200], [1, 11])).tolist()
    # 2,000 more (tail > a quarter of the base): rebuilt over all rows
    got = cp.rows(codes, 12, [11])
    assert cp._base is not base and cp._base.size == 3000
    assert got.tolist() == np.flatnonzero(codes == 11).tolist()


def test_an_older_snapshot_sees_only_its_rows():
    codes = random_codes(2000, 5, seed=2)
    cp = ColumnPostings()
    cp.rows(codes, 5, [0])  # base over all 2,000 rows
    got = cp.rows(codes[:500], 5, [0])  # a snapshot taken earlier: 500 rows
    assert got.tolist() == np.flatnonzero(codes[:500] == 0).tolist()


@pytest.mark.parametrize("seed", range(5))
def test_random_growth_matches_comparison(seed, monkeypatch):
    monkeypatch.setattr(postings, "TAIL_ROWS", 50)
    rng = np.random.default_rng(seed)
    codes = random_codes(4000, 30, seed=seed)
    cp = ColumnPostings()
    size = 0
    while size < len(codes):
        size = min(len(codes), size + int(rng.integers(1, 400)))
        wanted = rng.choice(30, int(rng.integers(1, 4)), replace=False).tolist()
        got = cp.rows(codes[:size], 30, wanted)
        assert got.tolist() == np.flatnonzero(np.isin(codes[:size], wanted)).tolist()


def test_equality_and_in_filters_go_through_the_columns_postings():
    from recallql.index.columns import StrColumn
    from recallql.index.filters import Cmp, In, Not, filter_mask

    rng = np.random.default_rng(5)
    values = [None if x == 0 else f"t{x}" for x in rng.integers(0, 30, 5000)]
    column = StrColumn()
    column.extend(values[:4000])
    lookup = {"tenant": column}.__getitem__
    truth = np.array([v == "t7" for v in values[:4000]])
    assert np.array_equal(filter_mask(Cmp("tenant", "=", "t7"), lookup, 4000), truth)
    assert column.postings._base is not None and column.postings._base.size == 4000
    column.extend(values[4000:])  # the rows appended since are the tail
    for expr, want in [(Cmp("tenant", "=", "t7"), lambda v: v == "t7"),
                       (In("tenant", ("t3", "t29", "nope")), lambda v: v in ("t3", "t29")),
                       (Cmp("tenant", "=", "nope"), lambda v: False),
                       (Not(In("tenant", ("t3",))), lambda v: v is not None and v != "t3")]:
        mask = filter_mask(expr, lookup, 5000)
        assert np.array_equal(mask, np.array([bool(want(v)) for v in values])), expr


def id_columns(ids: list[str], doc_ids: list[str | None], entities: list[str | None]):
    """The snapshot's id, doc_id and entity columns (None: the same as the column below)."""
    from recallql.index.columns import DerivedStrColumn, StrArray

    id_col = StrArray()
    doc_col = DerivedStrColumn(id_col)
    entity_col = DerivedStrColumn(doc_col)
    id_col.extend(ids)
    doc_col.extend(doc_ids)
    entity_col.extend(entities)
    return {"id": id_col, "doc_id": doc_col, "entity": entity_col}


def test_ids_resolve_through_hash_postings_equal_to_a_full_comparison(monkeypatch):
    from recallql.index.filters import Cmp, In, Not, filter_mask, posting_rows

    monkeypatch.setattr(postings, "TAIL_ROWS", 100)
    rng = np.random.default_rng(7)
    ids = [f"item-{i}" for i in rng.permutation(3000)]
    ids[10] = ids[2000] = "replaced"  # one id, two rows (a replace keeps the older row)
    doc_ids = [None if x < 5 else f"doc-{x}" for x in rng.integers(0, 40, 3000)]
    columns = id_columns(ids[:2500], doc_ids[:2500], [None] * 2500)
    lookup = columns.__getitem__
    got = posting_rows(In("id", ("item-5", "replaced", "nope")), lookup, 2500)
    assert got.tolist() == [i for i, v in enumerate(ids[:2500]) if v in ("item-5", "replaced")]
    assert columns["id"].postings._base[0] == 2500
    columns["id"].extend(ids[2500:])  # appended since: the tail
    columns["doc_id"].extend(doc_ids[2500:])
    columns["entity"].extend([None] * 500)
    docs = [v if v is not None else ids[i] for i, v in enumerate(doc_ids)]
    for expr, want in [(Cmp("id", "=", "replaced"), lambda i: ids[i] == "replaced"),
                       (In("id", tuple(ids[2990:])), lambda i: i >= 2990),
                       (Cmp("doc_id", "=", "doc-9"), lambda i: docs[i] == "doc-9"),
                       (Cmp("doc_id", "=", ids[2999]), lambda i: docs[i] == ids[2999]),
                       (In("entity", ("doc-3", ids[1])), lambda i: docs[i] in ("doc-3", ids[1])),
                       (Not(Cmp("id", "=", "replaced")), lambda i: ids[i] != "replaced")]:
        truth = np.array([bool(want(i)) for i in range(3000)])
        assert np.array_equal(filter_mask(expr, lookup, 3000), truth), expr
        rows = posting_rows(expr, lookup, 3000)
        if rows is not None:
            assert rows.tolist() == np.flatnonzero(truth).tolist(), expr
    # an older snapshot sees only its own rows
    assert posting_rows(Cmp("id", "=", "replaced"), lookup, 1000).tolist() == [10]
    assert posting_rows(Cmp("id", "=", "replaced"), lookup, 3000).tolist() == [10, 2000]


def test_a_hash_collision_costs_a_check_never_a_wrong_row():
    """Candidates are checked against the value: rows whose hash equals the wanted one's but
    whose value differs are not returned."""
    from recallql.index.postings import HashPostings

    values = ["a", "b", "c", "a"]
    colliding = HashPostings()
    got = colliding.rows(["a"], 4, lambda a, b: np.full(b - a, hash("a"), np.int64),
                         values.__getitem__)
    assert got.tolist() == [0, 3]
    assert colliding.rows(["zz"], 4, lambda a, b: np.zeros(b - a, np.int64),
                          values.__getitem__).tolist() == []


def test_where_id_and_doc_id_filter_a_real_database(tmp_path, index_embedder):
    """End to end: `WHERE id = …`, `id IN (…)` and `doc_id = …` over a real database, also after
    a replace (the older row is not live) and an append (the tail)."""
    import recallql

    with recallql.connect(tmp_path / "db", embedder=index_embedder) as db:
        db.ingest("docs", [{"id": f"n{i}", "body": f"note {i} about backups"}
                           for i in range(50)])
        db.ingest("docs", [{"id": "n7", "body": "note 7 replaced: about restores"}])
        db.ingest("docs", [{"id": "late", "body": "a late note about backups"}])

        def ids(where: str) -> list[str]:
            rows = db.execute(f"RETRIEVE 100 FROM docs WHERE {where}").rows
            return sorted(r.id for r in rows)

        assert ids("id = 'n7'") == ["n7"]
        assert db.execute("RETRIEVE 5 FROM docs WHERE id = 'n7'").rows[0].fields["body"].startswith(
            "note 7 replaced")
        assert ids("id IN ('n1', 'late', 'missing')") == ["late", "n1"]
        assert ids("doc_id = 'late'") == ["late"]
        assert ids("id = 'missing'") == []
