"""The one "did you mean" helper (`recallql.grammar.suggest`) and the sites that use it."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import doc, make_db, vec

import recallql
from recallql.grammar import did_you_mean
from recallql.grammar.suggest import MAX_LISTED, closest

PACKAGE = Path(recallql.__file__).resolve().parent


@pytest.mark.parametrize(("name", "options", "hint"), [
    ("tema", ["team", "year"], "did you mean 'team'?"),
    ("TEAM", ["year", "team"], "did you mean 'team'?"),          # case alone: that option
    ("Docs", ["docs", "dcos"], "did you mean 'docs'?"),
    ("matchng", ["MATCHING", "LIMIT"], "did you mean 'MATCHING'?"),  # quoted as written
    ("zzz", ["team", "year"], "known: team, year"),              # in the given order
    ("zzz", [], None),
], ids=["typo", "case", "case-first", "keyword", "none-close", "no-options"])
def test_hint_format(name, options, hint):
    assert did_you_mean(name, options) == hint


def test_listing_can_be_left_to_the_message():
    assert did_you_mean("zzz", ["team"], listing=False) is None
    assert did_you_mean("tem", ["team"], listing=False) == "did you mean 'team'?"


def test_long_listings_are_cut():
    options = [f"field_{i:02d}" for i in range(MAX_LISTED + 5)]
    hint = did_you_mean("qqqqqqqqqqqqqq", options)
    assert hint == ("known: " + ", ".join(options[:MAX_LISTED])
                    + f", … ({MAX_LISTED + 5} in all)")


def test_closest_prefers_the_first_of_equal_options():
    assert closest("ab", ["ab", "AB"]) == "ab"
    assert closest("xy", ["ab"]) is None


def test_no_other_module_computes_suggestions():
    """One helper: difflib appears nowhere else in the package."""
    users = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if "difflib" in p.read_text(encoding="utf-8"))
    assert users == ["grammar/suggest.py"]


@pytest.fixture
def db():
    return make_db([doc("a", "alpha", "", vec(1, 0, 0, 0), team="x")], fields={"team": "str"})


@pytest.mark.parametrize(("text", "hint"), [
    ("SEARCH kbb MATCHING 'x'", "did you mean 'kb'?"),                        # engine
    ("DESCRIBE kbb", "did you mean 'kb'?"),                                   # engine (info)
    ("SEARCH kb MATCHING 'x' WHERE tema = 'x'", "did you mean 'team'?"),      # engine
    ("SEARCH kb MATCHING 'x' WITH SIGNAL BOOST (rewrad = 1)", "did you mean 'reward'?"),
    ("SHOW SESSIONS WHERE satus = 'open'", "did you mean 'status'?"),
    ("SEARCH kb MATCHNG 'x'", "did you mean 'MATCHING'?"),                     # grammar
    ("SEARCH kb MATCHING 'x' WITH RECENCY (wieght = 1)", "did you mean 'weight'?"),
    ("SEARCH kb MATCHING 'x' WITH RECENCY (shape = GAUS)", "did you mean 'GAUSS'?"),
], ids=["collection", "describe", "field", "signal", "session-field", "keyword", "option",
        "shape"])
def test_every_site_gives_the_same_hint_form(db, text, hint):
    with pytest.raises(recallql.QueryError) as err:
        db.execute(text)
    assert err.value.hint == hint
