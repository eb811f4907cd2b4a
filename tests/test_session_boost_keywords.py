"""The columnar keyword hints (`recallql.engine.keywords`) against a naive reference.

The reference reads every row's stored fields (`snapshot.fetch`) and tests each keyword against
each string value, both NFKC case folded (`normalize`; lower-cased, as SPEC §4.3 words it, with
``ß`` = ``ss`` and NFC = NFD).
"""

from __future__ import annotations

import numpy as np
import pytest

import recallql
from recallql.engine import keywords as kw
from recallql.engine.features import features_from_wire, features_to_wire
from recallql.engine.legs import gather_features
from recallql.engine.plan import FeatureSpec
from recallql.index.analysis import normalize

WORDS = ["Backup", "backup-2023", "Cafe\u0301", "ﬃ", "RESTORE", "ops", "İstanbul", "Straße",
         "ΣΟΦΙΑ", "a\x00b", "c++", "", "x y", "été", "ÉTÉ"]
KEYWORDS = ["backup", "restore", "café", "ffi", "s", "i̇stanbul", "straße", "σοφια", "a", "\x00",
            "c++", "x", "y", "été", "zzz", "b"]


def reference(snapshot, rowids, keywords) -> list[int]:
    fields = [n for n, k in snapshot.info.fields.items() if k.value in ("str", "list[str]")]
    out = []
    for row in snapshot.fetch(rowids):
        values = []
        for name in fields:
            value = row[name]
            values += value if isinstance(value, list) else [value] if value is not None else []
        lowered = [normalize(v) for v in values]
        out.append(sum(any(k in v for v in lowered) for k in keywords))
    return out


def matches(snapshot, rowids, keywords, wire: bool = False) -> np.ndarray:
    """The engine's keyword counts for `rowids`, from the features `run_legs` gathers (after a
    JSON round trip of the features when `wire`)."""
    features = gather_features(snapshot, rowids, FeatureSpec(strings=True, entities=True))
    if wire:
        features = features_from_wire(features_to_wire(features))
    return kw.keyword_matches(features.strings, len(rowids), keywords)


def random_items(rng: np.random.Generator, n: int, start: int = 0) -> list[dict]:
    items = []
    for i in range(start, start + n):
        item = {"id": f"r{i}", "body": "text", "vector": [1.0, 0.0]}
        if rng.random() < 0.8:
            item["tag"] = str(rng.choice(WORDS)) + ("" if rng.random() < 0.5 else f"-{i % 7}")
        if rng.random() < 0.7:
            item["tags"] = [str(w) for w in rng.choice(WORDS, size=int(rng.integers(0, 4)))]
        if rng.random() < 0.3:
            item["other"] = str(rng.choice(WORDS))
        items.append(item)
    return items


@pytest.fixture
def db():
    database = recallql.connect(embedder=None)
    database.create_collection("r", ("body",), {"tag": str, "tags": list[str], "other": str,
                                                "n": int}, embedder=None, dim=2)
    yield database
    database.close()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_equal_the_naive_reference(db, seed):
    rng = np.random.default_rng(seed)
    db.ingest("r", random_items(rng, 300))
    snap = db.snapshot("r")
    rowids = rng.permutation(snap.size)[:200].astype(np.int64)
    keys = tuple(dict.fromkeys(normalize(str(k))
                               for k in rng.choice(KEYWORDS, size=6, replace=False)))
    got = matches(snap, rowids, keys)
    assert got.dtype == np.int64
    assert got.tolist() == reference(snap, rowids, keys)
    assert matches(snap, rowids, keys, wire=True).tolist() == got.tolist()


def test_tables_grow_with_the_vocabulary(db):
    rng = np.random.default_rng(7)
    db.ingest("r", random_items(rng, 50))
    keys = ("backup", "new-value")
    first = db.snapshot("r")
    matches(first, np.arange(first.size, dtype=np.int64), keys)  # tables built
    db.ingest("r", [{"id": "late", "body": "t", "vector": [1, 0], "tag": "A NEW-VALUE",
                     "tags": ["Backup again"]}])
    snap = db.snapshot("r")
    rowids = np.arange(snap.size, dtype=np.int64)
    assert matches(snap, rowids, keys).tolist() == reference(snap, rowids, keys)
    assert matches(snap, rowids, keys)[-1] == 2
    # an older snapshot still answers for its own rows
    old = np.arange(first.size, dtype=np.int64)
    assert matches(first, old, keys).tolist() == reference(first, old, keys)


def test_small_budget_evicts_and_stays_correct(db, monkeypatch):
    monkeypatch.setattr(kw, "TABLE_BUDGET_BYTES", 8)
    rng = np.random.default_rng(11)
    db.ingest("r", random_items(rng, 120))
    snap = db.snapshot("r")
    rowids = np.arange(snap.size, dtype=np.int64)
    for keys in (("backup", "ops"), ("restore",), ("backup", "ops"), ("c++", "x", "été")):
        assert matches(snap, rowids, keys).tolist() == reference(snap, rowids, keys)


def test_more_than_64_keywords(db):
    db.ingest("r", [{"id": "a", "body": "t", "vector": [1, 0], "tag": "k0 k64 k99",
                     "tags": ["k70"]}, {"id": "b", "body": "t", "vector": [1, 0]}])
    snap = db.snapshot("r")
    keys = tuple(f"k{i}" for i in range(100))
    got = matches(snap, np.array([0, 1], dtype=np.int64), keys)
    # k0, k6, k64, k7, k70, k9, k99: substrings, across both 64-bit words
    assert got.tolist() == reference(snap, np.array([0, 1]), keys) == [7, 0]


def test_no_rows_or_no_keywords(db):
    db.ingest("r", [{"id": "a", "body": "t", "vector": [1, 0], "tag": "x"}])
    snap = db.snapshot("r")
    assert matches(snap, np.zeros(0, np.int64), ("x",)).tolist() == []
    assert matches(snap, np.array([0], np.int64), ()).tolist() == [0]


@pytest.mark.parametrize("values, keyword, expected", [
    (["Ab", "b", "AB"], "ab", [True, False, True]),
    (["ßx", "x"], "ssx", [True, False]),  # case folding lengthens ß: one-by-one path
    (["İx", "x"], "ix", [True, False]),  # the Turkish İ is a plain i
    (["a\x00b", "ab"], "a\x00b", [True, False]),
    (["a", "b"], "a\x00b", [False, False]),  # never spans two values
    (["aaa", "aXa", ""], "a", [True, True, False]),
    ([], "a", []),
    # normalising shortens one value (NFD e + combining acute -> é) and lengthens the next
    # (ß -> ss) by as much: the joined blob keeps its length, but the boundary moved
    (["Cafe\u0301", "Straße"], "strasse", [False, True]),
    (["Cafe\u0301", "Straße", "x"], "s", [False, True, False]),
    (["ﬃq", "e\u0301o\u0308"], "q", [True, False]),
    (["ﬃq", "e\u0301o\u0308", "zz"], "ffiq", [True, False, False]),
])
def test_contains(values, keyword, expected):
    assert kw.contains(values, keyword).tolist() == expected


def test_entities_of_rows_whose_entity_defaults(db):
    db.ingest("r", [
        {"id": "i0", "body": "t", "vector": [1, 0]},
        {"id": "i1", "body": "t", "vector": [1, 0], "entity": "E1"},
        {"id": "i2", "body": "t", "vector": [1, 0], "doc_id": "D2"},
        {"id": "i3", "body": "t", "vector": [1, 0], "doc_id": "D3", "entity": "E3"},
    ])
    snap = db.snapshot("r")
    rows = np.array([3, 0, 2, 1, 0], dtype=np.int64)
    features = gather_features(snap, rows, FeatureSpec(entities=True))
    assert features.entities.tolist() == ["E3", "i0", "D2", "E1", "i0"]
    assert snap.values("doc_id", rows) == ["D3", "i0", "D2", "i1", "i0"]
    assert snap.values("id", rows) == ["i3", "i0", "i2", "i1", "i0"]


def test_features_of_two_shards_concatenate_like_one_table(db):
    """A coordinator's gather: features of two halves (rowids re-keyed) concatenate into the
    features of the whole, keyword counts included."""
    from recallql.engine.features import concat_features

    rng = np.random.default_rng(5)
    db.ingest("r", random_items(rng, 80))
    snap = db.snapshot("r")
    spec = FeatureSpec(strings=True, entities=True, recency="created_at")
    rows = np.arange(snap.size, dtype=np.int64)
    whole = gather_features(snap, rows, spec)
    halves = [features_from_wire(features_to_wire(gather_features(snap, part, spec)))
              for part in (rows[1::2], rows[::2])]
    both = concat_features(halves)
    assert both.rowid.tolist() == rows.tolist()
    assert both.ids.tolist() == whole.ids.tolist()
    assert both.entities.tolist() == whole.entities.tolist()
    assert np.array_equal(both.recency, whole.recency, equal_nan=True)
    keys = ("backup", "ops", "été")
    assert kw.keyword_matches(both.strings, len(both), keys).tolist() == \
        kw.keyword_matches(whole.strings, len(whole), keys).tolist()
    with pytest.raises(ValueError, match="re-key"):
        concat_features([halves[0], halves[0]])


def test_the_vocabulary_is_normalised_once_for_all_keywords(db, monkeypatch):
    """Was: each keyword's table normalised the whole vocabulary again (one `normalize` of the
    joined values per keyword), so a session annotated with 5,000 words made the first
    statement over a 10,000-value vocabulary take 6 s. Now the vocabulary slice is normalised
    once and every keyword is found in it; the counts stay the reference's."""
    db.ingest("r", [{"id": f"i{i}", "body": "t", "vector": [1, 0], "tag": f"Team-{i}",
                     "tags": ["Straße"] if i % 2 else []} for i in range(40)])
    snap = db.snapshot("r")
    rowids = np.arange(snap.size, dtype=np.int64)
    keys = tuple(f"team-{i}" for i in range(0, 60, 3)) + ("strasse", "zzz")
    calls = []
    monkeypatch.setattr(kw, "normalize", lambda text: calls.append(text) or normalize(text))
    got = matches(snap, rowids, keys)
    assert got.tolist() == reference(snap, rowids, keys)
    # one joined blob per string column with values (tag, tags): not one per keyword, and
    # none per value (a value normalising lengthens, ß → ss, is found through its separator)
    assert len(calls) == 2, calls
