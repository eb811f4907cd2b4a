"""Filter expressions evaluated on a real store: SQL three-valued logic, missing fields fail
closed (also under NOT), every operator on every field type."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

import recallql
from recallql.index.errors import FilterError
from recallql.index.filters import (
    And,
    Between,
    Cmp,
    Contains,
    In,
    IsNull,
    Like,
    Not,
    Or,
    like_matcher,
)

ROWS = [
    {"id": "a", "text": "x", "kind": "note", "n": 1, "x": 0.5, "ok": True,
     "at": "2024-01-01", "tags": ["red", "blue"], "created_at": "2020-01-01"},
    {"id": "b", "text": "x", "kind": "Note", "n": 5, "x": 2.5, "ok": False,
     "at": "2024-06-01", "tags": [], "doc_id": "D", "position": 3},
    {"id": "c", "text": "x", "kind": "memo_1", "n": 10, "tags": ["blue"]},
    {"id": "d", "text": "x"},
]


@pytest.fixture(scope="module")
def snap():
    db = recallql.connect(embedder=None)
    db.create_collection("f", ("text",), {"kind": str, "n": int, "x": float, "ok": bool,
                                          "at": dt.datetime, "tags": list[str]},
                         dim=2, embedder=None)
    db.ingest("f", ROWS)
    db.ingest("f", [{"id": "e", "text": "y", "kind": "note", "n": 5}])
    return db.snapshot("f")


CASES = [
    (Cmp("kind", "=", "note"), "ae"),
    (Cmp("kind", "!=", "note"), "bc"),
    (Cmp("kind", "<", "a"), "b"),
    (Cmp("n", ">", 1), "bce"),
    (Cmp("n", ">=", 1.0), "abce"),
    (Cmp("n", "<>", 5), "ac"),
    (Cmp("n", "=", None), ""),
    (Cmp("x", "<=", 0.5), "a"),
    (Cmp("ok", "=", False), "b"),
    (Cmp("at", ">", dt.datetime(2024, 3, 1)), "b"),
    (Cmp("at", "<", "2024-03-01T00:00:00Z"), "a"),
    (Cmp("created_at", "<", 1e10), "a"),
    (Cmp("id", ">=", "c"), "cde"),
    (Cmp("doc_id", "=", "D"), "b"),
    (Cmp("doc_id", "=", "a"), "a"),
    (Cmp("entity", "=", "D"), "b"),
    (Cmp("position", "=", 3), "b"),
    (Cmp("tags", "=", "blue"), "ac"),
    (In("kind", ("Note", "memo_1", None)), "bc"),
    (In("n", (1, 10)), "ac"),
    (In("n", ()), ""),
    (In("tags", ("red", "green")), "a"),
    (Between("n", 2, 10), "bce"),
    (Between("at", "2023-12-31", "2024-01-02"), "a"),
    (Like("kind", "no%"), "ae"),
    (Like("kind", "%o%"), "abce"),
    (Like("kind", "memo\\_1"), "c"),
    (Like("kind", "memo_1"), "c"),
    (Like("kind", "memo_"), ""),
    (Like("tags", "bl%"), "ac"),
    (Contains("kind", "ote"), "abe"),
    (Contains("tags", "blue"), "ac"),
    (IsNull("x"), "cde"),
    (IsNull("x", negated=True), "ab"),
    (IsNull("tags"), "de"),
    (IsNull("created_at"), "bcde"),
    (Not(Cmp("n", "=", 5)), "ac"),  # d has no n: unknown, stays out
    (Not(Not(Cmp("n", "=", 5))), "be"),
    (Not(Cmp("ok", "=", True)), "b"),
    (And((Cmp("kind", "=", "note"), Cmp("n", "=", 5))), "e"),
    (Or((Cmp("kind", "=", "memo_1"), Cmp("ok", "=", True))), "ac"),
    (Not(And((Cmp("n", ">", 0), Cmp("x", ">", 1)))), "a"),  # c, e: n>0 true, x unknown
    (Not(Or((Cmp("n", "=", 1), Cmp("x", ">", 1)))), ""),
    (And(()), "abcde"),
    (Or(()), ""),
]


@pytest.mark.parametrize(("expr", "expected"), CASES, ids=[repr(c[0]) for c in CASES])
def test_filter(snap, expr, expected):
    mask = snap.filter_mask(expr)
    assert mask.dtype == bool and mask.shape == (snap.size,)
    assert "".join(snap.ids[r] for r in np.flatnonzero(mask)) == expected


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (Cmp("nope", "=", 1), "no field 'nope'"),
        (Cmp("n", "=", "1"), "field 'n' is int"),
        (Cmp("n", "=", True), "field 'n' is int"),
        (Cmp("kind", "=", 3), "field 'kind' is str"),
        (Cmp("ok", "=", 1), "field 'ok' is bool"),
        (Cmp("at", ">", "soon"), "ISO-8601"),
        (Cmp("n", "~", 1), "unknown comparison"),
        (Cmp("tags", "<", "a"), "list field"),
        (Like("n", "1%"), "LIKE/CONTAINS need text"),
        ("n = 1", "not a filter expression"),
    ],
)
def test_filter_errors(snap, expr, message):
    with pytest.raises(FilterError, match=message):
        snap.filter_mask(expr)


def test_like_matcher_escapes_everything_else():
    assert like_matcher("a.b%")("a.bcd")
    assert not like_matcher("a.b%")("axbcd")
    assert like_matcher("100\\%")("100%")
    assert not like_matcher("100\\%")("1000")


def _like_reference(pattern: str, text: str) -> bool:
    """LIKE as a backtracking regex: exact, but exponential on some patterns (small inputs)."""
    import re

    out, escaped = [], False
    for ch in pattern:
        if escaped:
            out.append(re.escape(ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append({"%": ".*", "_": "."}.get(ch, re.escape(ch)))
    if escaped:
        out.append(re.escape("\\"))
    return re.fullmatch("".join(out), text, re.DOTALL) is not None


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=3000, deadline=None)
@given(st.text("ab%_\\", max_size=8), st.text("ab%_\\\n", max_size=10))
def test_like_matcher_equals_the_regex_reference(pattern, text):
    assert like_matcher(pattern)(text) == _like_reference(pattern, text)


def test_rows_mask_evaluates_plain_rows_like_a_snapshot():
    """`rows_mask` (SHOW SESSIONS): the same three-valued logic over dict rows."""
    from recallql.index.filters import rows_mask
    from recallql.index.schema import FieldType

    rows = [{"k": "a", "t": 10.0}, {"k": "b"}, {"k": None, "t": 30.0}]
    fields = {"k": FieldType.STR, "t": FieldType.TIMESTAMP}
    assert rows_mask(In("k", ("a", None)), rows, fields).tolist() == [True, False, False]
    assert rows_mask(Not(In("k", ("a", None))), rows, fields).tolist() == [False, False, False]
    assert rows_mask(Not(In("k", ("a",))), rows, fields).tolist() == [False, True, False]
    assert rows_mask(Cmp("t", ">", 5.0), rows, fields).tolist() == [True, False, True]
    assert rows_mask(IsNull("t"), rows, fields).tolist() == [False, True, False]
    with pytest.raises(FilterError, match="unknown field 'x'"):
        rows_mask(Cmp("x", "=", 1), rows, fields)
