"""Robustness properties (hypothesis): statements x a real database.

A small real database (`build_db`: every field type, chunked documents, missing/future dates, a
row without a vector, sessions in every state with signals, a compression chain and a cyclic
session with messages) and syntactically plausible SEARCH / RETRIEVE / EXPLAIN / SHOW / DESCRIBE
statements drawn from grammar fragments, with parameters bound to Python values of every type.

`statements(hostile=False)` stays inside the value ranges where the engine is known to behave, so
the properties below pass and act as a regression net. `hostile=True` widens every range (ints
up to 2**63-1, 1e308 and 5e-324, lone surrogates, years 1 and 9999, odd time zones); fuzzing with
it found the bugs pinned in the "fixed bugs" section of `test_robustness.py` (it is not run
here: before their fixes, some of them aborted the interpreter).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from engine_helpers import NOW_TS, doc, vec
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from session_rows import write_session_row

import recallql

FIELDS = {"team": "str", "year": "int", "score": "float", "ok": "bool", "tags": "list[str]",
          "at": "timestamp"}
KINDS = {**FIELDS, "id": "str", "doc_id": "str", "entity": "str", "position": "int",
         "created_at": "timestamp"}
DAY = 86400.0


def build_db() -> recallql.Database:
    """Collection `kb` (4-d caller vectors, chunked documents, every field type), sessions in
    every state with signals and annotations, and a compression chain of messages."""
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    db.create_collection("kb", text_fields=("title", "body"), fields=FIELDS, dim=4,
                         embedder=None)
    db.ingest("kb", [
        doc("a#0", "alpha backup", "beta retention policy", vec(1, 0, 0, 0), doc_id="a",
            position=0, team="ops", year=2020, ok=True, tags=["t1", "x"], at="2024-01-01",
            created_at="2025-01-01"),
        doc("a#1", "alpha backup", "monthly cold storage", vec(0.9, 0.3, 0, 0), doc_id="a",
            position=1, team="ops", year=2020, created_at="2025-01-01"),
        doc("b", "beta", "gamma backup nightly", vec(0, 1, 0, 0), team="sec", year=2021,
            ok=False, tags=["t2"], created_at="2026-11-01", entity="E1"),
        doc("c", "gamma", "delta rotate keys", vec(1, 1, 0, 0), team="ops", year=1999,
            score=1.5),
        doc("d", "delta alpha", "", vec(0, 0, 1, 0), created_at="2030-01-01", entity="E1"),
        doc("e", "It's C++ {0} a:b OR NOT -v", "session_id:s2 36\"", None,
            created_at="2001-02-03T04:05:06+02:00", score=-0.25, tags=[]),
        doc("f", "the of and", "épée naïve 日本語 👩‍👩‍👧", vec(0.2, 0, 0, 1), team="ü",
            at=0, year=-5),
    ])
    s = db.sessions
    s.create("s1", "agent", started_at=NOW_TS - 10 * DAY)
    s.annotate("s1", "ops backup ALPHA", at=NOW_TS - 9 * DAY)
    s.signal("s1", "reward", 1.0, entity="c", at=NOW_TS - 8 * DAY)
    s.signal("s1", "reward", 0.5, entity="E1", at=NOW_TS - 2 * DAY)
    s.create("s2", "agent", parent="s1", started_at=NOW_TS - 7 * DAY)
    s.signal("s2", "reward", -1.0, entity="a", at=NOW_TS - 6 * DAY)
    s.close("s2", end_reason="compression", at=NOW_TS - 5 * DAY)
    s.create("s3", "agent", parent="s2", started_at=NOW_TS - 5 * DAY)
    s.archive("s3")
    s.create("tip", "agent", parent="s2", started_at=NOW_TS - 4 * DAY)
    write_session_row(db, "loop", "agent", parent="loop", started_at=NOW_TS - 4 * DAY)
    for sid, text in (("s1", "alpha backup was restored"), ("tip", "alpha retention again"),
                      ("tip", "rotate the keys"), ("loop", "alpha loop")):
        db.messages.append(sid, "user", text, at=NOW_TS - 3 * DAY)
    return db


# -- values ------------------------------------------------------------------------------------

def _text_alphabet(hostile: bool) -> st.SearchStrategy[str]:
    if hostile:  # lone surrogates too (not valid UTF-8, but a valid Python str)
        return st.one_of(st.characters(), st.characters(categories=["Cs"]),
                         st.sampled_from(["\x00", "\u200f", "\u200d", "\ufeff", "\uffff"]))
    return st.characters(blacklist_categories=("Cs",))


WORDS = ["alpha", "beta", "gamma", "delta", "backup", "retention", "keys", "the", "of", "C++",
         "it's", "{0}", "a:b", "OR", "NOT", "-v", "session_id:s2", "36\"", "日本語", "👩‍👩‍👧",
         "\u200f", "\u200d", "\x00", "%", "_", "\\", "''", "ops", "t1", "E1"]


def text(hostile: bool, min_size: int = 0) -> st.SearchStrategy[str]:
    words = st.lists(st.sampled_from(WORDS), min_size=min_size, max_size=6).map(" ".join)
    raw = st.lists(_text_alphabet(hostile), min_size=min_size, max_size=30).map("".join)
    options = [words, raw]
    if hostile:
        options.append(st.just("x" * 5000))
    return st.one_of(*options)


def quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def ints(hostile: bool, low: int | None = None, high: int | None = None) -> st.SearchStrategy:
    if hostile:
        special = st.sampled_from([0, 1, -1, 2, 10, 2**31, 2**53 + 1, 2**62, 2**63 - 1,
                                   -(2**63) + 1, 10**9])
        return st.one_of(special, st.integers(-(2**63) + 1, 2**63 - 1))
    lo = -1000 if low is None else low
    hi = 1000 if high is None else high
    return st.one_of(st.sampled_from([v for v in (0, 1, -1, 2, 10) if lo <= v <= hi]),
                     st.integers(lo, hi))


def floats(hostile: bool, low: float = -1e6, high: float = 1e6) -> st.SearchStrategy[float]:
    if hostile:
        return st.one_of(st.sampled_from([0.0, -0.0, 1e308, -1e308, 5e-324, 1e-308, 1e-320,
                                          1.5, 0.1]),
                         st.floats(allow_nan=False, allow_infinity=False))
    return st.one_of(st.sampled_from([v for v in (0.0, 1.5, 0.1, 1e-3) if low <= v <= high]),
                     st.floats(low, high, allow_nan=False, allow_infinity=False))


def number_literal(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def timestamps(hostile: bool) -> st.SearchStrategy[datetime]:
    if hostile:
        tz = st.sampled_from([UTC, timezone(timedelta(hours=14)),
                              timezone(timedelta(hours=-14)), None])
        return st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23,
                                                                            59, 59, 999999),
                            timezones=tz)
    return st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5)), None]))


def ts_literal(moment: datetime) -> str:
    return f"TIMESTAMP '{moment.isoformat()}'"


def param_values(hostile: bool) -> st.SearchStrategy[Any]:
    """Python values of every type a caller might bind."""
    base = [
        text(hostile), ints(hostile), floats(hostile), st.booleans(), st.none(),
        timestamps(hostile), st.just(float("nan")), st.just(float("inf")),
        st.just(2**64), st.binary(max_size=4), st.lists(st.integers(-3, 3), max_size=4),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        st.just(np.int64(7)), st.just(np.float32(0.5)), st.just(np.array([1, 2, 3])),
        st.just(np.array(["a"])), st.just(timedelta(days=3)), st.just(object()),
    ]
    return st.one_of(*base)


def vectors(hostile: bool) -> st.SearchStrategy[Any]:
    good = st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=4, max_size=4)
    bad = [
        st.just([0.0, 0.0, 0.0, 0.0]), st.just([1.0, 0.0]), st.just([[1, 0, 0, 0]]),
        st.just([1, float("nan"), 0, 0]), st.just("abcd"), st.just(np.zeros((2, 2))),
        st.just([True, False, True, False]), st.just(None), st.just([1e39, 0, 0, 0]),
    ]
    if hostile:
        bad += [st.just([1e-45, 0, 0, 0]), st.just([3e38, 3e38, 3e38, 3e38]),
                st.just([10**400, 0, 0, 0])]
    good_forms = st.one_of(good, good.map(lambda v: np.asarray(v, np.float32)),
                           good.map(lambda v: np.asarray(v, np.float64)), good.map(tuple),
                           st.just([1, 0, 0, 0]), st.just(np.array([0, 1, 0, 0], np.int8)))
    return st.one_of(good_forms, good_forms, good_forms, good_forms, good_forms, st.one_of(*bad))


# -- statements --------------------------------------------------------------------------------

class Params:
    """Collects `:pN` parameters while a statement is being drawn."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, value: Any) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f":{name}"


def _value_for(draw: st.DrawFn, kind: str, hostile: bool, params: Params) -> str:
    """A literal of (usually) the field's type, or a parameter bound to anything."""
    if draw(st.integers(0, 19)) == 0:
        return params.add(draw(param_values(hostile)))
    if draw(st.integers(0, 29)) == 0:  # a literal of another type: a semantic error
        kind = draw(st.sampled_from(list(set(KINDS.values()))))
    if kind in ("str", "list[str]"):
        if draw(st.booleans()):
            return params.add(draw(text(hostile)))
        return quote(draw(text(hostile)))
    if kind == "int":
        return number_literal(draw(ints(hostile)))
    if kind == "float":
        return number_literal(draw(st.one_of(floats(hostile), ints(hostile))))
    if kind == "bool":
        return draw(st.sampled_from(["TRUE", "FALSE"]))
    moment = draw(timestamps(hostile))
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return params.add(moment)
    if choice == 1:
        return quote(moment.date().isoformat())
    if choice == 2 and not hostile:
        return number_literal(draw(st.integers(-(10**10), 10**10)))
    if choice == 2:
        return number_literal(draw(st.one_of(ints(True), floats(True))))
    return ts_literal(moment.replace(tzinfo=moment.tzinfo or UTC))


@st.composite
def predicates(draw: st.DrawFn, hostile: bool, params: Params, depth: int = 0) -> str:
    if depth < 3 and draw(st.integers(0, 3)) == 0:
        op = draw(st.sampled_from(["AND", "OR", "NOT"]))
        if op == "NOT":
            return "NOT " + draw(predicates(hostile, params, depth + 1))
        parts = draw(st.lists(predicates(hostile, params, depth + 1), min_size=2, max_size=3))
        return "(" + f" {op} ".join(parts) + ")"
    name = draw(st.sampled_from([*KINDS, *KINDS, "title", "nope", '"limit"']))
    kind = KINDS.get(name, "str")
    form = draw(st.sampled_from(["cmp", "in", "between", "like", "contains", "null"]))
    if form == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="]))
        return f"{name} {op} {_value_for(draw, kind, hostile, params)}"
    if form == "in":
        values = [_value_for(draw, kind, hostile, params) for _ in range(draw(st.integers(1, 3)))]
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{name} {neg}IN ({', '.join(values)})"
    if form == "between":
        neg = draw(st.sampled_from(["", "NOT "]))
        lo = _value_for(draw, kind, hostile, params)
        hi = _value_for(draw, kind, hostile, params)
        return f"{name} {neg}BETWEEN {lo} AND {hi}"
    if form == "like":
        neg = draw(st.sampled_from(["", "NOT "]))
        pattern = draw(st.one_of(text(hostile), st.sampled_from(["%", "a%", "_", "%\\%", "\\"])))
        return f"{name} {neg}LIKE {quote(pattern)}"
    if form == "contains":
        return f"{name} CONTAINS {_value_for(draw, 'str', hostile, params)}"
    return f"{name} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"


def _duration(draw: st.DrawFn, hostile: bool) -> str:
    if hostile:
        value = draw(st.one_of(floats(True), ints(True)))
    else:
        value = draw(st.one_of(st.floats(1e-3, 1e5), st.integers(1, 10**5)))
    unit = draw(st.sampled_from(["DAYS", "DAY", "HOURS", "MINUTES", "SECONDS", "SECOND"]))
    return f"{number_literal(value)} {unit}"


def _weight(draw: st.DrawFn, hostile: bool, params: Params, signed: bool = False) -> str:
    if draw(st.integers(0, 19)) == 0:
        return params.add(draw(param_values(hostile)))
    if hostile:
        return number_literal(draw(st.one_of(floats(True), ints(True))))
    low = -10.0 if signed else 0.0
    return number_literal(draw(st.one_of(floats(False, low, 10.0), st.integers(0, 5))))


def _options(draw: st.DrawFn, pairs: list[tuple[str, Any]]) -> str:
    """`(name = value, ...)` for a random subset of `pairs`; values are drawn (callables) only
    for the options chosen, so no parameter is left unused."""
    chosen = draw(st.lists(st.sampled_from(pairs), unique_by=lambda p: p[0], max_size=len(pairs)))
    if not chosen:
        return ""
    return " (" + ", ".join(f"{k} = {v() if callable(v) else v}" for k, v in chosen) + ")"


def _count(draw: st.DrawFn, hostile: bool, params: Params, low: int) -> str:
    if draw(st.integers(0, 5)) == 0:
        values = ints(hostile, low, 50)
        if draw(st.integers(0, 3)) == 0:
            values = param_values(hostile)
        return params.add(draw(values))
    return str(draw(ints(hostile, low, 50) if not hostile else ints(True)))


@st.composite
def query_statements(draw: st.DrawFn, hostile: bool = False, paging: bool = True
                     ) -> tuple[str, dict[str, Any]]:
    """A SEARCH or RETRIEVE statement and its parameters (`paging=False`: no count, LIMIT or
    OFFSET, so the caller can append its own)."""
    params = Params()
    collection = draw(st.sampled_from(["kb"] * 12 + ["messages", "messages", "docs", "kbb"]))
    retrieve = draw(st.booleans())
    parts: list[str] = []
    if retrieve:
        head = "RETRIEVE"
        if paging and draw(st.integers(0, 3)) == 0:
            head += " " + _count(draw, hostile, params, 1)
        parts.append(f"{head} FROM {collection}")
    else:
        parts.append(f"SEARCH {collection}")
    has_matching = draw(st.booleans()) or not retrieve
    if has_matching:
        value = draw(text(hostile, min_size=0 if draw(st.integers(0, 19)) == 0 else 1))
        parts.append("MATCHING " + (params.add(value) if draw(st.booleans()) else quote(value)))
    if draw(st.integers(0, 3)) == 0:
        parts.append("USING " + draw(st.sampled_from(["HYBRID", "LEXICAL", "SEMANTIC"])))
    if draw(st.integers(0, 2)) == 0 or not has_matching:
        parts.append("NEAR " + params.add(draw(vectors(hostile))))
    if draw(st.integers(0, 2)) == 0:
        parts.append("WHERE " + draw(predicates(hostile, params)))
    session = None
    if draw(st.integers(0, 2)) == 0:
        sid = draw(st.one_of(st.sampled_from(["s1", "s2", "s3", "tip", "loop", "nobody",
                                              "'; DROP TABLE sessions; --"]), text(hostile, 1)))
        session = sid
        parts.append("FOR SESSION " + (params.add(sid) if draw(st.booleans()) else quote(sid)))
    boosts = []
    if draw(st.integers(0, 2)) == 0:
        if draw(st.integers(0, 3)) == 0:
            boosts.append("WITHOUT RECENCY")
        else:
            field = draw(st.sampled_from(["created_at", "at"] * 4 + ["team", "nope"]))
            shape = draw(st.sampled_from(["EXP", "GAUSS", "LINEAR", "exp"] * 3 + ["SQUARE"]))
            boosts.append("WITH RECENCY" + _options(draw, [
                ("weight", lambda: _weight(draw, hostile, params)),
                ("half_life", lambda: _duration(draw, hostile)),
                ("field", field), ("shape", shape)]))
    if session is not None and draw(st.booleans()):
        boosts.append("WITH SESSION BOOST" + _options(draw, [
            ("keywords", lambda: _weight(draw, hostile, params)),
            ("velocity", lambda: _weight(draw, hostile, params)),
            ("entities", lambda: _weight(draw, hostile, params))]))
    if draw(st.integers(0, 2)) == 0:
        if draw(st.integers(0, 3)) == 0:
            boosts.append("WITHOUT SIGNAL BOOST")
        else:
            boosts.append("WITH SIGNAL BOOST" + _options(draw, [
                ("reward", lambda: _weight(draw, hostile, params, signed=True))]
                + ([("click", "0.1")] if draw(st.integers(0, 9)) == 0 else [])))
    parts.extend(draw(st.permutations(boosts)))
    if draw(st.integers(0, 3)) == 0:
        k = number_literal(draw(floats(hostile, 1e-3, 1e4) if not hostile else floats(True)))
        window = str(draw(ints(hostile, 1, 300)))
        parts.append("FUSE RRF" + _options(draw, [("k", k), ("window", window)]))
    if draw(st.integers(0, 3)) == 0:
        if collection != "messages" or draw(st.integers(0, 9)) == 0:
            parts.append("GROUP BY DOCUMENT")
        else:
            budget = str(draw(ints(hostile, 1, 5000)))
            parts.append("GROUP BY CONVERSATION" + _options(draw, [("budget", budget)]))
    if draw(st.integers(0, 3)) == 0:
        moment = draw(timestamps(hostile))
        if draw(st.booleans()):
            parts.append("AS OF " + params.add(moment))
        else:
            parts.append("AS OF " + ts_literal(moment.replace(tzinfo=moment.tzinfo or UTC)))
    if paging and draw(st.integers(0, 2)) == 0:
        parts.append("LIMIT " + _count(draw, hostile, params, 1))
        if draw(st.booleans()):
            parts.append("OFFSET " + _count(draw, hostile, params, 0))
    return " ".join(parts), params.values


@st.composite
def info_statements(draw: st.DrawFn, hostile: bool = False) -> tuple[str, dict[str, Any]]:
    """SHOW / DESCRIBE statements."""
    params = Params()
    form = draw(st.sampled_from(["collections", "sessions", "session", "lineage", "describe"]))
    if form == "collections":
        return "SHOW COLLECTIONS", {}
    if form == "describe":
        name = draw(st.sampled_from(["kb", "messages", "docs", "kbb", '"kb"', "session",
                                     '"x y"']))
        return f"DESCRIBE {name}", {}
    if form in ("session", "lineage"):
        sid = draw(st.one_of(st.sampled_from(["s1", "s2", "s3", "tip", "loop", "nobody"]),
                             text(hostile, 1)))
        ref = params.add(sid) if draw(st.booleans()) else quote(sid)
        return f"SHOW {form.upper()} {ref}", params.values
    parts = ["SHOW SESSIONS"]
    if draw(st.booleans()):
        field = draw(st.sampled_from(["id", "agent_id", "status", "source", "end_reason",
                                      "parent_session_id", "title", "started_at", "ended_at",
                                      "nope"]))
        if field.endswith("_at"):
            value = ts_literal(draw(timestamps(hostile)).replace(tzinfo=UTC))
        else:
            value = draw(st.one_of(st.just(quote("open")), text(hostile).map(quote),
                                   st.just("3")))
        op = draw(st.sampled_from(["=", "!=", "<", ">=", "LIKE", "CONTAINS", "IS NULL"]))
        parts.append(f"WHERE {field} {op}" + ("" if op == "IS NULL" else f" {value}"))
    if draw(st.booleans()):
        parts.append("LIMIT " + _count(draw, hostile, params, 1))
        if draw(st.booleans()):
            parts.append("OFFSET " + _count(draw, hostile, params, 0))
    return " ".join(parts), params.values


@st.composite
def statements(draw: st.DrawFn, hostile: bool = False) -> tuple[str, dict[str, Any]]:
    """Any statement, EXPLAIN-wrapped or not."""
    if draw(st.integers(0, 4)) == 0:
        return draw(info_statements(hostile))
    text_, params = draw(query_statements(hostile))
    if draw(st.integers(0, 3)) == 0:
        opts = draw(st.lists(st.sampled_from(["ANALYZE", "VERBOSE", "FORMAT JSON",
                                              "FORMAT TEXT"]), unique=True, max_size=2))
        if "FORMAT JSON" in opts and "FORMAT TEXT" in opts:
            opts.remove("FORMAT TEXT")
        text_ = " ".join(["EXPLAIN", *opts, text_])
    return text_, params


# -- checks ------------------------------------------------------------------------------------

def dump(db: recallql.Database) -> tuple:
    """Everything a statement could change: the session tables and every collection's committed
    batch, ids, live mask and stored rows."""
    conn = db.store.meta.read
    tables = tuple(tuple(conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
                   for t in ("sessions", "annotations", "signals"))
    collections = []
    for info in db.collections():
        snap = db.snapshot(info.name)
        live = np.flatnonzero(snap.live)
        rows = snap.fetch(live) if len(live) else []
        collections.append((info.name, snap.seq, list(snap.ids), live.tolist(),
                            [sorted(map(repr, r.items())) for r in rows]))
    return tables, tuple(collections)


def limit_of(text: str, params: dict[str, Any]) -> int | None:
    """The page size a statement asked for, when it is a literal or an int parameter."""
    found = re.search(r"(?:LIMIT|RETRIEVE) (\d+|:p\d+)", text)
    if not found:
        return None
    raw = found.group(1)
    value = params.get(raw[1:]) if raw.startswith(":") else int(raw)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_result(result: Any, text: str, params: dict[str, Any]) -> None:
    """Row invariants of SPEC §4/§5: finite numbers, exact sums, unique ids, score order."""
    rows = result.rows
    ids = [row.id for row in rows]
    assert len(ids) == len(set(ids)), ids
    for row in rows:
        assert math.isfinite(row.score), (row.id, row.score)
        total = 0.0
        for reason in row.reasons:
            assert math.isfinite(reason.contribution), (row.id, reason)
            assert not re.search(r"\b(nan|inf)\b", reason.detail), (row.id, reason)
            total = total + reason.contribution
        assert total == row.score, (row.id, row.reasons, row.score)
        relevance = sum(r.contribution for r in row.reasons
                        if r.code.value in ("LEXICAL_MATCH", "SEMANTIC_MATCH", "LEG_ABSENT"))
        assert 0.0 <= relevance <= 1.0 + 1e-12, (row.id, relevance)
    scores = [row.score for row in rows]
    assert all(a >= b for a, b in zip(scores, scores[1:], strict=False)), scores
    limit = limit_of(text, params)
    if limit is not None:
        assert len(rows) <= limit


def is_query(text: str) -> bool:
    return text.startswith(("SEARCH", "RETRIEVE", "EXPLAIN"))


# -- properties --------------------------------------------------------------------------------

PROPS = settings(max_examples=250, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                        HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def fuzz_db():
    db = build_db()
    yield db
    db.close()


@PROPS
@given(stmt=statements())
def test_statements_raise_only_query_errors_and_rows_are_sound(fuzz_db, stmt):
    """Any statement: a result whose rows keep the scoring invariants, or a QueryError whose
    message renders; EXPLAIN has the same rows and no side effects; its JSON round-trips."""
    text, params = stmt
    before = dump(fuzz_db)
    try:
        result = fuzz_db.execute(text, **params)
    except recallql.QueryError as err:
        assert str(err).startswith(type(err).__name__)
        assert dump(fuzz_db) == before
        return
    if isinstance(result, recallql.Explain):
        result.to_text()
        assert recallql.Explain.model_validate_json(result.to_json()) == result
        result = result.result
    if result.records is None:
        check_result(result, text, params)
    if is_query(text):
        explained = fuzz_db.explain(text, analyze=True, **params)
        assert [r.id for r in explained.rows] == result.ids()
        assert [r.score for r in explained.rows] == [r.score for r in result.rows]
        assert [r.reasons for r in explained.rows] == [r.reasons for r in result.rows]
    assert dump(fuzz_db) == before


@settings(PROPS, max_examples=120)
@given(stmt=query_statements(paging=False), size=st.integers(1, 3))
def test_pages_concatenate_to_the_unpaged_list(fuzz_db, stmt, size):
    """SPEC §4.7: pagination slices the total order; concatenating pages gives the list."""
    text, params = stmt
    # A lineage budget may truncate differently per page; a FUSE window below the page depth
    # is `test_pages_concatenate_when_they_share_the_window`.
    assume("budget" not in text and "window" not in text)
    try:
        full = fuzz_db.execute(text + " LIMIT 40", **params).ids()
    except recallql.QueryError:
        return
    pages: list[str] = []
    for offset in range(0, len(full) + size, size):
        pages += fuzz_db.execute(f"{text} LIMIT {size} OFFSET {offset}", **params).ids()
    assert pages == full


UNKNOWN_SESSION_IDS = st.one_of(
    st.sampled_from(["nobody", "'; DROP TABLE sessions; --", "s1 ", "S1", "x" * 129, "\x00",
                     "a\"b", "\u202eevil", "👩‍👩‍👧", "s1' OR '1'='1"]),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
    .filter(lambda s: s not in ("s1", "s2", "s3", "tip", "loop")))


@settings(PROPS, max_examples=80)
@given(sid=UNKNOWN_SESSION_IDS,
       base=st.sampled_from([
           "SEARCH kb MATCHING 'alpha backup keys'",
           "SEARCH kb MATCHING 'alpha' NEAR :v WHERE team = 'ops' WITH SIGNAL BOOST",
           "RETRIEVE FROM kb", "RETRIEVE 3 FROM kb MATCHING 'gamma'",
           "SEARCH messages MATCHING 'alpha keys'", "RETRIEVE FROM messages"]))
def test_unknown_session_degrades_identically(fuzz_db, sid, base):
    """SPEC §3.2: FOR SESSION naming a session that does not exist runs without the boost and
    warns SESSION_NOT_FOUND, identically on SEARCH and RETRIEVE; the id travels as a value."""
    params = {"v": [1, 0, 0, 0]} if ":v" in base else {}
    plain = fuzz_db.execute(base, **params)
    head, _, tail = base.partition(" WITH ")
    with_session = f"{head} FOR SESSION :sid" + (f" WITH {tail}" if tail else "")
    result = fuzz_db.execute(with_session, sid=sid, **params)
    assert [w.code.value for w in result.warnings].count("SESSION_NOT_FOUND") == 1
    assert result.session_snapshot is None
    assert [(r.id, r.score) for r in result.rows] == [(r.id, r.score) for r in plain.rows]


# -- ingest ------------------------------------------------------------------------------------

GOOD_VALUES = {
    "title": st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    "team": st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
    "year": st.integers(-(2**63), 2**63 - 1),
    "score": st.floats(allow_nan=False, allow_infinity=False),
    "ok": st.booleans(),
    "tags": st.lists(st.text(max_size=4).filter(lambda s: not any(
        0xD800 <= ord(c) <= 0xDFFF for c in s)), max_size=3),
    "at": st.one_of(st.integers(-62135596800, 253402300799),
                    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
                    st.dates().map(lambda d: d.isoformat())),
    "created_at": st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                               timezones=st.sampled_from([None, UTC])),
    "vector": st.lists(st.floats(-1e3, 1e3, allow_nan=False).filter(lambda x: abs(x) > 1e-3),
                       min_size=4, max_size=4),
}

BAD_VALUES = {
    "id": [None, "", "   ", 1.5, True, b"a", ["a"], "x" * 1025],
    "title": [1, b"bytes", ["a"], {"a": 1}, 1.5],
    "team": [1, True, b"x", ["x"], None.__class__],
    "year": [1.0, "1", True, 2**63, -(2**63) - 1, float("nan"), np.uint64(2**64 - 1)],
    "score": [float("nan"), float("inf"), -float("inf"), "1.5", True, np.float32("nan")],
    "ok": [1, 0, "true", "false", None.__class__, np.int64(1)],
    "tags": ["abc", [["a"]], [1], {"a"}, ("a", 1), [None]],
    "at": ["yesterday", "2024-13-01", float("nan"), 1e300, -1e300, True, [2024], "10000-01-01"],
    "created_at": ["not a date", float("inf"), 253402300800, -62135596801, {}, b"2024"],
    "position": [-1, 1.0, "1", True, 2**63],
    "doc_id": ["", "  ", 1.5, ["d"]],
    "entity": ["", 1.5, ["e"]],
    "vector": [[1, 0, 0], [1, 0, 0, 0, 0], [[1, 0, 0, 0]], [0, 0, 0, 0],
               [1, float("nan"), 0, 0], [1e39, 0, 0, 0], "abcd", {"a": 1}, [1j, 0, 0, 0],
               np.zeros((2, 2)), [float("inf"), 0, 0, 0]],
    "unknown_field": ["x"],
}


@st.composite
def items(draw: st.DrawFn, ids: st.SearchStrategy[str] | None = None) -> dict:
    if ids is None:
        ids = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1,
                      max_size=8).filter(lambda s: s.strip())
    item = {"id": draw(ids)}
    for name in draw(st.lists(st.sampled_from(list(GOOD_VALUES)), unique=True)):
        item[name] = draw(GOOD_VALUES[name])
    return item


@pytest.fixture(scope="module")
def ingest_db():
    db = build_db()
    yield db
    db.close()


@settings(PROPS, max_examples=120)
@given(batch=st.lists(items(), max_size=4, unique_by=lambda i: i["id"]),
       field=st.sampled_from(sorted(BAD_VALUES)), data=st.data())
def test_a_rejected_batch_changes_nothing(ingest_db, batch, field, data):
    """SPEC §7: one invalid item anywhere in a batch -> IngestError naming it, and the database is
    exactly as before (all-or-nothing)."""
    bad = data.draw(items(ids=st.just("the-bad-one")))
    bad[field] = data.draw(st.sampled_from(BAD_VALUES[field]))
    batch.insert(data.draw(st.integers(0, len(batch))), bad)
    before = dump(ingest_db)
    with pytest.raises(recallql.IngestError) as err:
        ingest_db.ingest("kb", batch)
    assert err.value.field in (field, "id") or field == "unknown_field"
    assert dump(ingest_db) == before


@settings(PROPS, max_examples=40)
@given(first=st.lists(items(st.sampled_from("abcdef")), max_size=6, unique_by=lambda i: i["id"]),
       second=st.lists(items(st.sampled_from("abcdef")), max_size=6,
                       unique_by=lambda i: i["id"]))
def test_a_later_batch_replaces_items_by_id(first, second):
    """Re-ingesting an id replaces the item as a whole (no merge of old fields)."""
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    db.create_collection("kb", fields=FIELDS, dim=4, embedder=None)
    db.ingest("kb", first)
    db.ingest("kb", second)
    expected = {i["id"]: i for i in first} | {i["id"]: i for i in second}
    rows = db.execute("RETRIEVE FROM kb WITHOUT SIGNAL BOOST LIMIT 100").rows
    assert sorted(r.id for r in rows) == sorted(expected)
    for row in rows:
        item = expected[row.id]
        assert (row.fields.get("title") or "") == (item.get("title") or ""), row.id
        for name in ("team", "year", "score", "ok", "tags"):
            assert row.fields.get(name) == item.get(name), (row.id, name)
    db.close()


def test_a_generator_that_raises_midway_writes_nothing(ingest_db):
    def items_then_boom():
        yield doc("g1", "gamma", "", vec(1, 0, 0, 0))
        yield doc("g2", "gamma", "", vec(0, 1, 0, 0))
        raise RuntimeError("source failed")

    before = dump(ingest_db)
    with pytest.raises(RuntimeError, match="source failed"):
        ingest_db.ingest("kb", items_then_boom())
    assert dump(ingest_db) == before


# -- sessions ----------------------------------------------------------------------------------

SESSION_ERRORS = (recallql.SessionError, recallql.SignalRejected)
HOSTILE_IDS = st.one_of(
    st.sampled_from(["", " ", "a b", "a'b", 'a"b', "'; DROP TABLE sessions; --", "x" * 129,
                     "\x00", "s1\n", "é", "👩‍👩‍👧", "a/b", "a\\b", None, 5, b"s1", "s1"]),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=10))
HOSTILE_NUMBERS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -1e308,
                                   2.0, -2.0, "1", None, True, [1], 10**30])
HOSTILE_TIMES = st.sampled_from([float("nan"), float("inf"), "2025-01-01", "now", True, [1],
                                 NOW_TS - 365 * DAY * 100, None])


@settings(PROPS, max_examples=150)
@given(op=st.sampled_from(["create", "annotate", "signal", "close", "archive", "snapshot",
                           "sweep"]),
       sid=HOSTILE_IDS, value=HOSTILE_NUMBERS, at=HOSTILE_TIMES,
       text_=st.one_of(st.none(), st.just(""), st.just("  "), st.text(max_size=10).filter(
           lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))))
def test_session_writes_with_hostile_input_reject_cleanly(op, sid, value, at, text_):
    """Hostile ids, values and times: a SessionError / SignalRejected (never a raw error), and a
    rejected write leaves the session tables unchanged. (Ids of container types are pinned by
    `test_session_id_of_wrong_type_is_a_session_error`.)"""
    ingest_db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    s = ingest_db.sessions
    s.create("s1", "agent", started_at=NOW_TS - DAY)
    s.annotate("s1", "alpha", at=NOW_TS - DAY / 2)
    calls = {
        "create": lambda: s.create(sid, "agent", started_at=at),
        "annotate": lambda: s.annotate(sid if isinstance(sid, str) and sid else "s1", text_),
        "signal": lambda: s.signal("s1", "reward", value, entity=sid, at=at),
        "close": lambda: s.close(sid, end_reason=text_, at=at, any_reason=True),
        "archive": lambda: s.archive(sid),
        "snapshot": lambda: s.snapshot(sid, as_of=at),
        "sweep": lambda: s.sweep(value if value is not None else -1),
    }
    before = dump(ingest_db)
    try:
        calls[op]()
    except SESSION_ERRORS:
        assert dump(ingest_db) == before
    ingest_db.execute("SHOW SESSIONS")
    ingest_db.close()


# -- manual hostile fuzzing ----------------------------------------------------------------------

def hostile_fuzz(examples: int = 1000) -> dict[str, tuple[str, dict]]:
    """Run `statements(hostile=True)` against `build_db()` and return one example per distinct
    failure signature (a non-QueryError exception, or a broken row invariant). The lexical leg is
    guarded so that the top-N sizes known to abort the interpreter raise instead.

        PYTHONPATH=. python tests/test_robustness_fuzz.py 2000      (from the repository root)
    """
    import traceback

    import recallql.index.text as text_index

    db = build_db()
    original = text_index.lexical_topn

    def guarded(searcher, terms, n, eligible, ids):
        if n > 10**7:
            raise MemoryError(f"lexical top-{n} would allocate {32 * n} bytes and abort")
        return original(searcher, terms, n, eligible, ids)

    text_index.lexical_topn = guarded
    found: dict[str, tuple[str, dict]] = {}

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(stmt=statements(hostile=True))
    def run(stmt: tuple[str, dict[str, Any]]) -> None:
        text, params = stmt
        try:
            result = db.execute(text, **params)
            if isinstance(result, recallql.Explain):
                result = result.result
            if result.records is None:
                check_result(result, text, params)
        except recallql.QueryError:
            return
        except AssertionError as exc:
            found.setdefault(f"invariant: {str(exc)[:80]}", (text, params))
        except Exception as exc:  # noqa: BLE001 - collected, not raised
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
            found.setdefault(f"{type(exc).__name__} at {where}", (text, params))

    try:
        run()
    finally:
        text_index.lexical_topn = original
    return found


if __name__ == "__main__":
    import sys

    for signature, (text, params) in hostile_fuzz(int(sys.argv[1]) if len(sys.argv) > 1
                                                   else 1000).items():
        print(f"{signature}\n    {ascii(text[:300])}\n    {ascii(params)[:300]}")
