"""Every invalid item raises IngestError naming the item and field; nothing of the batch is
written (SQLite counts, tantivy results, vectors and files are unchanged)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

import recallql
from recallql import IngestError
from recallql.index.timestamps import MAX_EPOCH, MIN_EPOCH, item_epoch, to_epoch
from recallql.index.vectors import MIN_NORM, normalise_query

GOOD = {"id": "ok-1", "title": "valid title", "body": "valid body"}
DIM = 16


def _state(db):
    """Everything observable about the `docs` collection."""
    snap = db.snapshot("docs")
    lex = snap.lexical_topn(["valid"], 50)[0].tolist()
    sem = snap.semantic_topn(np.ones(DIM, np.float32), 50)[0].tolist()
    conn = db.store.meta.read
    counts = conn.execute("SELECT (SELECT count(*) FROM items), (SELECT count(*) FROM segments),"
                          " (SELECT value FROM state WHERE key='committed_batch')").fetchone()
    files = sorted(p.name for p in db.store.path.rglob("*.npy"))
    return snap.size, lex, sem, counts, files


def _vec(*values):
    v = np.zeros(DIM, np.float32)
    v[: len(values)] = values
    return v


CASES = [
    ("dim", {"id": "v", "vector": [1.0, 2.0]}, "'v'", "vector", "expected 16, got 2"),
    ("nan", {"id": "v", "vector": _vec(1.0, math.nan)}, "'v'", "vector", "non-finite"),
    ("inf", {"id": "v", "vector": _vec(math.inf)}, "'v'", "vector", "non-finite"),
    ("overflow", {"id": "v", "vector": [1e39] + [0.0] * 15}, "'v'", "vector", "non-finite"),
    ("zero", {"id": "v", "vector": _vec()}, "'v'", "vector", "zero norm"),
    ("tiny-norm", {"id": "v", "vector": _vec(1e-45)}, "'v'", "vector", "too small"),
    ("subnormal-norm", {"id": "v", "vector": _vec(1e-39, 1e-39)}, "'v'", "vector", "too small"),
    ("vector-junk", {"id": "v", "vector": ["a", "b"]}, "'v'", "vector", "numbers"),
    ("vector-huge-int", {"id": "v", "vector": [10**400] + [0] * 15}, "'v'", "vector",
     "out of range"),
    # numpy would parse strings, count bools as 0/1 and drop imaginary parts (NEAR refuses
    # them all): each was stored as a vector
    ("vector-str", {"id": "v", "vector": ["1"] * DIM}, "'v'", "vector", "got str values"),
    ("vector-complex", {"id": "v", "vector": np.ones(DIM, np.complex64)}, "'v'", "vector",
     "got complex values"),
    ("vector-bool", {"id": "v", "vector": [True] * DIM}, "'v'", "vector", "got bool values"),
    ("vector-none", {"id": "v", "vector": [1.0, None] + [0.0] * 14}, "'v'", "vector",
     "got NoneType"),
    ("vector-ragged", {"id": "v", "vector": [1.0, [2.0]] + [0.0] * 14}, "'v'", "vector",
     "numbers (of one length)"),
    ("date-huge-int", {"id": "d", "created_at": 10**400}, "'d'", "created_at", "out of range"),
    ("id-5000-digits", {"id": 10**5000}, "#1", "id", "longer than 1024"),
    ("doc-id-5000-digits", {"id": "p", "doc_id": 10**5000}, "'p'", "doc_id", "longer than"),
    ("date-nonsense", {"id": "d", "created_at": "next tuesday"}, "'d'", "created_at",
     "ISO-8601"),
    ("date-epoch", {"id": "d", "created_at": 1e20}, "'d'", "created_at", "out of range"),
    ("date-bool", {"id": "d", "created_at": True}, "'d'", "created_at", "bool"),
    ("date-nan", {"id": "d", "created_at": math.nan}, "'d'", "created_at", "out of range"),
    ("unknown", {"id": "u", "colour": "red"}, "'u'", "colour", "unknown field"),
    ("str-field", {"id": "f", "source": 5}, "'f'", "source", "expected str"),
    ("list-field", {"id": "f", "tags": "ops"}, "'f'", "tags", "expected list"),
    ("list-items", {"id": "f", "tags": ["ok", 3]}, "'f'", "tags", "expected list"),
    ("empty-id", {"id": ""}, "#1", "id", "empty"),
    ("blank-id", {"id": "  "}, "#1", "id", "empty"),
    ("missing-id", {"title": "no id"}, "#1", "id", "string or an integer"),
    ("bool-id", {"id": True}, "#1", "id", "string or an integer"),
    ("float-id", {"id": 1.5}, "#1", "id", "string or an integer"),
    ("text-type", {"id": "t", "title": 42}, "'t'", "title", "text must be a string"),
    ("text-bytes", {"id": "t", "body": b"x"}, "'t'", "body", "text must be a string"),
    ("position", {"id": "p", "position": -1}, "'p'", "position", ">= 0"),
    ("position-bool", {"id": "p", "position": True}, "'p'", "position", ">= 0"),
    ("doc-id", {"id": "p", "doc_id": ""}, "'p'", "doc_id", "non-empty"),
    ("entity", {"id": "p", "entity": ["x"]}, "'p'", "entity", "non-empty"),
    ("not-a-dict", ["id", "x"], "#1", None, "must be a dict"),
    # lone surrogates: valid Python str, not storable as UTF-8
    ("surrogate-title", {"id": "s", "title": "ok \ud800"}, "'s'", "title", "lone surrogate"),
    ("surrogate-body", {"id": "s", "body": "\udfff"}, "'s'", "body", "lone surrogate"),
    ("surrogate-str-field", {"id": "s", "source": "w\ud800"}, "'s'", "source", "surrogate"),
    ("surrogate-list-item", {"id": "s", "tags": ["ok", "\ud800"]}, "'s'", "tags", "surrogate"),
    ("surrogate-id", {"id": "s\ud800"}, "#1", "id", "lone surrogate '\\ud800' at index 1"),
    ("surrogate-doc-id", {"id": "s", "doc_id": "\ud800"}, "'s'", "doc_id", "surrogate"),
    ("surrogate-entity", {"id": "s", "entity": "e\ud800"}, "'s'", "entity", "surrogate"),
]


@pytest.mark.parametrize(("item", "who", "field", "message"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_item_rejected_and_nothing_written(index_db, index_docs, item, who, field,
                                                   message):
    index_db.ingest("docs", index_docs)
    before = _state(index_db)
    with pytest.raises(IngestError) as err:
        index_db.ingest("docs", [GOOD, item, {"id": "ok-2", "title": "valid"}])
    assert message in str(err.value)
    assert err.value.item == who and err.value.field == field
    assert who in str(err.value)
    assert _state(index_db) == before
    index_db.ingest("docs", [GOOD])  # the store is still writable
    assert _state(index_db)[0] == before[0] + 1


def test_duplicate_id_in_batch(index_db):
    with pytest.raises(IngestError, match="item 'x', field 'id': duplicate id") as err:
        index_db.ingest("docs", [{"id": "x"}, {"id": 1}, {"id": "x"}])
    assert err.value.item == "'x'"
    assert index_db.snapshot("docs").size == 0


def test_int_id_is_stored_as_str_and_collides_with_its_str(index_db):
    with pytest.raises(IngestError, match="duplicate"):
        index_db.ingest("docs", [{"id": 7}, {"id": "7"}])
    index_db.ingest("docs", [{"id": 7}])
    assert list(index_db.snapshot("docs").ids) == ["7"]


class _BadEmbedder:
    name = "bad"
    dim = DIM

    def __init__(self, output):
        self.output = output

    def __call__(self, texts):
        return self.output(len(texts))


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (lambda n: np.ones((n, DIM - 1), np.float32), r"shape \(2, 15\), expected \(2, 16\)"),
        (lambda n: np.ones((n + 1, DIM), np.float32), "shape"),
        (lambda n: np.full((n, DIM), np.nan, np.float32), "non-finite"),
        (lambda n: np.zeros((n, DIM), np.float32), "zero norm"),
        # were stored (strings parsed, imaginary parts dropped) or a raw numpy ValueError
        (lambda n: [["1"] * DIM] * n, r"unusable vectors \(must be a sequence of numbers, "
                                      r"got str values\)"),
        (lambda n: np.ones((n, DIM), np.complex64), "got complex values"),
        (lambda n: [[1.0] * DIM] + [[1.0]] * (n - 1), r"numbers \(of one length\)"),
    ],
    ids=["dim", "rows", "nan", "zero", "strings", "complex", "ragged"],
)
def test_embedder_output_is_checked(tmp_path, output, message):
    embedder = _BadEmbedder(output)
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.create_collection("c", ("text",), embedder=embedder)
        with pytest.raises(IngestError, match=message) as err:
            db.ingest("c", [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}])
        assert "bad" in str(err.value)
        assert db.snapshot("c").size == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (dt.datetime(2024, 1, 31), 1706659200.0),
        (dt.datetime(2024, 1, 31, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))), 1706659200.0),
        (dt.date(2024, 1, 31), 1706659200.0),
        ("2024-01-31", 1706659200.0),
        ("2024-01-31T00:00:00Z", 1706659200.0),
        ("2024-01-31T02:00:00+02:00", 1706659200.0),
        (1706659200, 1706659200.0),
        (1706659200.5, 1706659200.5),
        (-86400, -86400.0),
    ],
    ids=["naive", "aware", "date", "iso-date", "iso-z", "iso-offset", "epoch-int",
         "epoch-float", "before-1970"],
)
def test_to_epoch(value, expected):
    assert to_epoch(value) == expected


def test_declared_field_types(tmp_path):
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.create_collection("t", ("text",), {"n": int, "x": float, "b": bool,
                                              "at": dt.datetime, "tags": list[str]},
                             dim=2, embedder=None)
        for bad, field in [({"n": "abc"}, "n"), ({"n": True}, "n"), ({"n": 1.5}, "n"),
                           ({"n": 2**64}, "n"), ({"x": "1.0"}, "x"), ({"x": math.inf}, "x"),
                           ({"x": False}, "x"), ({"b": 1}, "b"), ({"at": "soon"}, "at"),
                           ({"x": 10**400}, "x"), ({"n": 10**400}, "n"),
                           ({"at": -(10**400)}, "at"), ({"n": 10**5000}, "n")]:
            with pytest.raises(IngestError) as err:
                db.ingest("t", [dict({"id": "r"}, **bad)])
            assert err.value.field == field
        db.ingest("t", [{"id": "r", "n": np.int64(3), "x": 2, "b": np.bool_(True),
                         "at": "2020-01-01", "tags": ("a",)}])
        row = db.snapshot("t").fetch([0])[0]
        assert (row["n"], row["x"], row["b"], row["at"], row["tags"]) == (
            3, 2.0, True, 1577836800.0, ["a"])


def test_error_after_texts_were_streamed_to_tantivy(index_db, index_docs):
    """Validated chunks go to tantivy while validation continues; a late error discards them."""
    index_db.ingest("docs", index_docs)
    before = _state(index_db)
    searcher_docs = index_db.store._state("docs").text.searcher().num_docs
    items = [{"id": f"bulk{i}", "title": "valid bulk"} for i in range(3000)]
    items[2500]["created_at"] = "garbage"
    with pytest.raises(IngestError, match="'bulk2500', field 'created_at'"):
        index_db.ingest("docs", items)
    assert _state(index_db) == before
    index_db.ingest("docs", items[:10])
    assert index_db.store._state("docs").text.searcher().num_docs == searcher_docs + 10
    assert index_db.snapshot("docs").lexical_topn(["bulk"], 100)[0].size == 10


@pytest.mark.parametrize("vector", [
    _vec(1e-30, 2e-30),                     # tiny but normal: 1/norm overflows float32
    _vec(3e38, 3e38, 3e38, 3e38),           # huge: the norm overflows float32
    _vec(*[MIN_NORM] * 1),                  # the smallest accepted norm
], ids=["tiny", "huge", "min-norm"])
def test_extreme_but_valid_vectors_normalise_exactly(tmp_path, vector):
    """Norms and the division are float64: the stored row is the unit vector, cosine 1."""
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.create_collection("c", ("text",), dim=DIM, embedder=None)
        db.ingest("c", [{"id": "a", "text": "x", "vector": vector}])
        unit = vector.astype(np.float64) / np.linalg.norm(vector.astype(np.float64))
        rowids, cosines = db.snapshot("c").semantic_topn(unit.astype(np.float32), 1)
        assert rowids.tolist() == [0]
        assert cosines[0] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(("vector", "message"), [
    (_vec(1e-45), "too small"), (_vec(1e-39, 1e-39), "too small"), (_vec(), "zero norm"),
    (_vec(1.0, math.nan), "non-finite"), (np.ones(DIM - 1), "shape"), ("abcd", "numbers"),
], ids=["tiny", "subnormal", "zero", "nan", "dim", "junk"])
def test_normalise_query_follows_the_ingest_rule(vector, message):
    with pytest.raises(ValueError, match=message):
        normalise_query(vector, DIM)


def test_normalise_query_of_extreme_valid_vectors():
    for vector in (_vec(1e-30), _vec(3e38, 3e38), _vec(MIN_NORM)):
        q = normalise_query(vector, DIM)
        assert q.dtype == np.float64 and np.linalg.norm(q) == pytest.approx(1.0)


def test_huge_ints_are_described_not_printed(index_db):
    """str(10**5000) raises in Python >= 3.11: messages describe such values instead."""
    with pytest.raises(IngestError, match="about 5000 digits") as err:
        index_db.ingest("docs", [{"id": "p", "position": 10**5000}])
    assert err.value.field == "position"
    index_db.ingest("docs", [{"id": 10**1000}])  # a 1001-digit id is a valid id
    assert index_db.snapshot("docs").ids[0] == str(10**1000)


_PLUS5 = dt.timezone(dt.timedelta(hours=5))
_MINUS5 = dt.timezone(dt.timedelta(hours=-5))


@pytest.mark.parametrize(("moment", "valid"), [
    (dt.datetime(1, 1, 1, tzinfo=dt.UTC), True),
    (dt.datetime(1, 1, 1, tzinfo=_PLUS5), False),            # 0000-12-31T19:00Z
    (dt.datetime(1, 1, 1, 5, tzinfo=_PLUS5), True),          # 0001-01-01T00:00Z
    (dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC), True),
    (dt.datetime(9999, 12, 31, 18, 59, 59, tzinfo=_MINUS5), True),
    (dt.datetime(9999, 12, 31, 23, 0, tzinfo=_MINUS5), False),  # 10000-01-01T04:00Z
    (dt.datetime(9999, 12, 31, 20, tzinfo=_MINUS5), False),     # 10000-01-01T01:00Z
], ids=["first", "before-first", "first-offset", "last-second", "last-offset", "after-last",
        "after-last-2"])
def test_timestamp_verdict_does_not_depend_on_the_form(moment, valid):
    """One range, checked after conversion to UTC epoch seconds, for every form."""
    for value in (moment, moment.isoformat(), moment.timestamp()):
        if valid:
            assert MIN_EPOCH <= item_epoch(value) <= MAX_EPOCH
        else:
            with pytest.raises(ValueError, match="out of range"):
                item_epoch(value)


def test_last_microsecond_of_9999_is_kept_inside_the_range(tmp_path):
    """Floats are ~30 us apart in 9999: the exact instant is valid, and is stored as the last
    float before year 10000, so it formats back as a date (a float of year 10000 would not)."""
    last = dt.datetime.max.replace(tzinfo=dt.UTC)
    assert item_epoch(last) == item_epoch(dt.datetime.max) == MAX_EPOCH
    assert dt.datetime.fromtimestamp(MAX_EPOCH, dt.UTC).year == 9999
    with pytest.raises(ValueError, match="out of range"):
        item_epoch(253402300800)  # 10000-01-01T00:00:00Z
    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.create_collection("c", ("text",), dim=2, embedder=None)
        db.ingest("c", [{"id": "a", "created_at": "9999-12-31T23:59:59.999999+00:00"},
                        {"id": "b", "created_at": dt.datetime.min}])
        rows = db.snapshot("c").fetch([0, 1])
        assert [r["created_at"] for r in rows] == [MAX_EPOCH, MIN_EPOCH]


@pytest.mark.parametrize("text", ["9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.99999Z",
                                  "0001-01-01T00:00:00Z", "2025-01-31T08:00:00.123456Z"],
                         ids=["last-microsecond", "last-30us", "first", "ordinary"])
def test_a_filter_on_an_items_own_instant_matches_it(text):
    """A filter value is the float the item stored for the same instant, also in the last
    microseconds of 9999 (stored as MAX_EPOCH, where `datetime.timestamp()` rounds up to
    10000-01-01)."""
    assert to_epoch(text) == item_epoch(text)
    with recallql.connect(embedder=None) as db:
        db.create_collection("c", ("text",), dim=2, embedder=None)
        db.ingest("c", [{"id": "a", "text": "alpha", "created_at": text, "vector": [1.0, 0.0]}])
        for op in ("=", "<=", ">="):
            result = db.execute(f"SEARCH c MATCHING 'alpha' WHERE created_at {op} "
                                f"TIMESTAMP '{text}'")
            assert [row.id for row in result.rows] == ["a"], op


def test_to_epoch_for_filters_keeps_offsets_outside_the_item_range():
    """Filter values (to_epoch) are converted, not range-checked, when given as datetimes."""
    moment = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=_MINUS5)
    assert to_epoch(moment) == moment.timestamp()


def test_non_ascii_text_is_accepted(index_db):
    """Only lone surrogates are rejected: any other character, and valid pairs, are stored."""
    item = {"id": "é-😀", "title": "naïve café 😀", "body": "\x00\u200f", "doc_id": "文書",
            "entity": "ünï", "tags": ["ß", "😀"], "source": "\U0001F600"}
    index_db.ingest("docs", [item])
    (row,) = index_db.snapshot("docs").fetch([0])
    assert {k: row[k] for k in item} == item
