"""Robustness: bad and unusual input against a real database (SPEC §3, §4, §5, §7, §8).

Two sections:

1. FIXED BUGS — each test pins one bug found by fuzzing (`test_robustness_fuzz.py` with
   `hostile=True`) or by hand, asserting the behaviour SPEC asks for; its docstring says what
   happened before the fix ("Was: ...").
2. REGRESSION NET — edge cases and properties that must keep passing.

The contract under test (SPEC §8): a user mistake raises a `recallql.QueryError` subclass (or
`IngestError` / `SessionError` / `SignalRejected` / `StoreError` for the write APIs), never a raw
error from lark, tantivy, numpy or sqlite; every score and contribution is finite and the
contributions sum left to right to the score; a rejected write changes nothing.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import NOW, NOW_TS, doc, left_sum, make_db, vec
from test_robustness_fuzz import build_db, check_result, dump
from typer.testing import CliRunner

import recallql
from recallql.sessions.lifecycle import SessionError

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIELDS = {"team": "str", "year": "int", "score": "float", "ok": "bool", "tags": "list[str]",
          "at": "timestamp"}
SURROGATE = "\ud800"
NON_FINITE = re.compile(r"\b(nan|inf)\b")
DAY = 86400.0


def small_db() -> recallql.Database:
    """Four `kb` items (one with a future date), field types of every kind."""
    return make_db([
        doc("a", "alpha backup", "beta retention", vec(1, 0, 0, 0), team="x", year=2020,
            ok=True, tags=["t1"], at="2024-01-01", created_at="2025-01-01"),
        doc("b", "beta", "gamma backup", vec(0, 1, 0, 0), team="y", year=2021,
            created_at="2026-11-01"),
        doc("c", "gamma", "delta", vec(1, 1, 0, 0), team="x", year=1999, score=1.5),
        doc("d", "delta alpha", "", vec(0, 0, 1, 0), created_at="2030-01-01"),
    ], fields=FIELDS)


def run_statement(db: recallql.Database, text: str, *args: object, **params: object):
    """Execute; a QueryError is an allowed outcome (returns None), anything else fails the test
    with its type (a pyo3 PanicException is a BaseException, so catch that too)."""
    try:
        return db.execute(text, *args, **params)
    except recallql.QueryError:
        return None
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{text!r} raised {type(exc).__module__}.{type(exc).__name__} "
                    f"(not a QueryError): {str(exc)[:200]}")


def assert_sound(result) -> None:
    """Finite scores and contributions, exact left-to-right sums, no NaN in reason details."""
    rows = result.rows if result is not None else []
    for row in rows:
        assert math.isfinite(row.score), (row.id, row.score, row.reasons)
        assert all(math.isfinite(r.contribution) for r in row.reasons), (row.id, row.reasons)
        assert left_sum(row) == row.score
        assert not any(NON_FINITE.search(r.detail) for r in row.reasons), (row.id, row.reasons)


# =================================================================================================
# 1. FIXED BUGS — each asserts the behaviour SPEC asks for; the docstring says what it was.
# =================================================================================================

# -- LIMIT / OFFSET / window: huge values reach tantivy's collector --------------------------------

def test_huge_limit_returns_every_row():
    """Was: `LIMIT 9223372036854775807` (a valid int64 literal) raises
    pyo3_runtime.PanicException "capacity overflow" from tantivy's top-N collector — a
    BaseException, so even `except Exception` does not catch it. SPEC §8: a QueryError or rows
    (SQL: LIMIT larger than the result returns every row)."""
    db = small_db()
    want = db.execute("SEARCH kb MATCHING 'alpha' LIMIT 10").ids()
    got = db.execute("SEARCH kb MATCHING 'alpha' LIMIT 9223372036854775807")
    assert got.ids() == want == ["d", "a"]


@pytest.mark.parametrize("clause", ["LIMIT 1000000000", "FUSE RRF (window = 1000000000)"])
def test_large_limit_or_window_does_not_abort_the_interpreter(clause):
    """Was: the lexical leg asks tantivy for top max(2N, N+16) hits, N = max(offset+limit,
    window): `LIMIT 1000000000` on a 1-item collection makes tantivy allocate 32 GB, fail, and
    abort the whole process ("memory allocation of 32000000000 bytes failed", SIGABRT). Run in a
    child process with a 3 GB address-space limit. SPEC §8: rows or a QueryError, never a crash."""
    child = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        f"sys.path[:0] = [{str(REPO)!r}, {str(TESTS)!r}]\n"
        "from engine_helpers import doc, make_db, vec\n"
        "import recallql\n"
        "db = make_db([doc('a', 'alpha', '', vec(1, 0, 0, 0))])\n"
        "try:\n"
        f"    print('ROWS', db.execute(\"SEARCH kb MATCHING 'alpha' {clause}\").ids())\n"
        "except recallql.QueryError as err:\n"
        "    print('QUERYERROR', err.message)\n"
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "RUST_BACKTRACE": "0"})
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-300:])
    assert proc.stdout.startswith(("ROWS ['a']", "QUERYERROR")), proc.stdout


@pytest.mark.parametrize("text", [
    "SEARCH kb MATCHING 'alpha' OFFSET 9223372036854775807",
    "SEARCH kb MATCHING 'alpha' LIMIT 10 OFFSET 9223372036854775807",
    "SEARCH kb MATCHING 'alpha' FUSE RRF (window = 9223372036854775807)",
])
def test_huge_offset_or_window_gives_rows(text):
    """Was: recallql.engine.executor.ExecutionError "LexicalScan failed: OverflowError: int too
    big to convert" (a RuntimeError, not a QueryError). Expected: a QueryError, or rows (an
    OFFSET past the end gives no rows)."""
    db = small_db()
    result = db.execute(text)
    assert result.ids() == ([] if "OFFSET" in text else ["d", "a"])


# -- values that break the arithmetic --------------------------------------------------------------

def test_tiny_half_life_keeps_scores_finite():
    """Was: `half_life = 1e-320 SECONDS` underflows to 0 days; a future-dated item (age 0)
    computes 0/0 and gets score NaN (RECENCY_FUTURE_CLAMPED contribution NaN). SPEC §4.6: every
    number finite (§4.5: half_life <= 0 is an error naming it; this one is > 0 as written)."""
    db = small_db()
    for shape in ("EXP", "GAUSS", "LINEAR"):
        result = run_statement(db, "SEARCH kb MATCHING 'alpha' WITH RECENCY "
                               f"(half_life = 1e-320 SECONDS, shape = {shape})")
        assert_sound(result)


def test_huge_boost_weights_keep_scores_finite():
    """Was: `keywords = 1e308` plus `WITH RECENCY (weight = 1e308)` gives score inf (each
    contribution is 1e308, the sum overflows). SPEC §4.6: every number finite — reject weights
    whose sum can overflow, or keep the arithmetic finite."""
    db = make_db([doc("a", "alpha", "", vec(1, 0, 0, 0), team="x", created_at="2030-01-01")],
                 fields={"team": "str"})
    db.sessions.create("s1", "agent", started_at=NOW_TS - DAY)
    db.sessions.annotate("s1", "x")
    result = run_statement(db, "SEARCH kb MATCHING 'alpha' FOR SESSION 's1' WITH SESSION BOOST "
                           "(keywords = 1e308) WITH RECENCY (weight = 1e308)")
    assert_sound(result)


def test_overflowing_signal_sum_saturates_instead_of_counting_zero():
    """Was: with a policy allowing large values, an entity whose decayed reward sum overflows
    to inf gets SESSION_ENTITY and SIGNAL_BOOST 0 (saturate() treats inf like NaN), so the most
    rewarded entity ranks below one rewarded once. SPEC §4.3/§4.4: s/(s+1) saturates towards 1;
    only negative, NaN or missing sums count as 0."""
    policy = recallql.SignalPolicy(bounds={"reward": (-1e308, 1e308)})
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS, signal_policy=policy)
    db.create_collection("kb", dim=4, embedder=None)
    db.ingest("kb", [doc("a", "alpha", "", vec(1, 0, 0, 0)),
                     doc("b", "alpha", "", vec(1, 0, 0, 0))])
    db.sessions.create("s1", "agent", started_at=NOW_TS - 10)
    db.sessions.signal("s1", "reward", 1e308, entity="a", at=NOW_TS - 5)
    with contextlib.suppress(recallql.SignalRejected):  # a fix may refuse the overflowing one
        db.sessions.signal("s1", "reward", 1e308, entity="a", at=NOW_TS - 5)
    db.sessions.signal("s1", "reward", 1.0, entity="b", at=NOW_TS - 5)
    result = db.execute("RETRIEVE FROM kb FOR SESSION 's1'")
    assert result.ids()[0] == "a", [(r.id, r.score, r.reasons) for r in result.rows]


def test_signals_that_cancel_sum_to_zero_not_to_an_overflow():
    """Was: decayed sums were added in recording order, so `+1.7e308, +1.7e308, -1.7e308,
    -1.7e308` (allowed by a permissive policy) overflowed to inf on the way and the entity, net
    zero, got the saturated boost (and the session velocity inf) over one rewarded once."""
    big = 1.7e308
    policy = recallql.SignalPolicy(bounds={"reward": (-big, big)})
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS, signal_policy=policy)
    db.create_collection("kb", dim=4, embedder=None)
    db.ingest("kb", [doc("a", "alpha", "", vec(1, 0, 0, 0)),
                     doc("b", "alpha", "", vec(1, 0, 0, 0))])
    db.sessions.create("s1", "agent", started_at=NOW_TS - 10)
    for value in (big, big, -big, -big):
        db.sessions.signal("s1", "reward", value, entity="a", at=NOW_TS - 5)
    db.sessions.signal("s1", "reward", 1.0, entity="b", at=NOW_TS - 5)
    result = db.execute("RETRIEVE FROM kb FOR SESSION 's1' WITHOUT RECENCY")
    assert result.ids() == ["b", "a"], [(r.id, r.score, r.reasons) for r in result.rows]
    snapshot = db.sessions.snapshot("s1")
    assert snapshot.entities["a"] == 0.0 and math.isfinite(snapshot.velocity)
    assert snapshot.velocity == snapshot.entities["b"] > 0
    with contextlib.suppress(recallql.SignalRejected):
        db.sessions.signal("s1", "reward", big, entity="c", at=NOW_TS - 5)
        db.sessions.signal("s1", "reward", big, entity="c", at=NOW_TS - 5)
        assert db.sessions.snapshot("s1").entities["c"] == math.inf  # a true overflow: inf


def test_as_of_the_last_microsecond_of_9999_runs():
    """Was: `AS OF TIMESTAMP '9999-12-31T23:59:59.999999Z'` (valid literal) and
    `AS OF :t` with `datetime.max` raise builtins.ValueError "year 10000 is out of range"
    (engine._stats rounds now to a float and formats it back). Expected: rows, or a QueryError."""
    db = small_db()
    assert_sound(run_statement(
        db, "SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '9999-12-31T23:59:59.999999Z'"))
    assert_sound(run_statement(db, "SEARCH kb MATCHING 'alpha' AS OF :t", t=datetime.max))


@pytest.mark.parametrize("where, params", [
    ("created_at > 1e300", {}),
    ("created_at > -1e18", {}),
    ("at > 9223372036854775807", {}),
    ("at > :v", {"v": 10**18}),
])
def test_out_of_range_epoch_in_where_is_a_semantic_error_with_a_caret(where, params):
    """Was: a number compared with a timestamp field outside years 1..9999 raises
    ExecutionError "LexicalScan failed: FilterError: field 'created_at': epoch seconds 1e+300 out
    of range" — neither a QueryError nor a caret. SPEC §8: QuerySemanticError with a caret
    (or, like SQL, just no rows)."""
    db = small_db()
    text = f"SEARCH kb MATCHING 'alpha' WHERE {where}"
    with pytest.raises(recallql.QuerySemanticError, match="outside years 1..9999") as err:
        db.execute(text, **params)
    start, end = err.value.span
    assert text[start:end] == where.split(" > ")[1]


# -- lone surrogates (valid Python str, not encodable as UTF-8) ------------------------------------

@pytest.mark.parametrize("text, params", [
    ("SEARCH kb MATCHING :q", {"q": f"alpha {SURROGATE} beta"}),
    (f"SEARCH kb MATCHING 'alpha{SURROGATE}'", {}),
    ("SEARCH kb MATCHING 'alpha' FOR SESSION :s", {"s": SURROGATE}),
    ("RETRIEVE FROM kb FOR SESSION :s", {"s": f"\x00{SURROGATE}"}),
    ("SHOW SESSION :s", {"s": SURROGATE}),
    ("SHOW LINEAGE :s", {"s": SURROGATE}),
])
def test_lone_surrogate_in_a_value_is_a_query_error(text, params):
    """Was: builtins.UnicodeEncodeError "'utf-8' codec can't encode character '\\ud800'" from
    the tantivy analyser (MATCHING) or sqlite (session ids). SPEC §3.3/§8: values are just values —
    a QueryError (e.g. ParameterError "not valid Unicode") or a normal result (an unknown session
    degrades with SESSION_NOT_FOUND)."""
    db = small_db()
    error = recallql.ParameterError if params else recallql.QuerySyntaxError
    with pytest.raises(error, match="not valid Unicode|valid Unicode text"):
        db.execute(text, **params)


def test_explain_with_a_surrogate_parameter_is_a_parameter_error():
    """Was: the statement runs, but `Explain.to_json()` (and `Result.model_dump_json()`) raise
    pydantic_core.PydanticSerializationError (UnicodeEncodeError) because the canonical statement
    text keeps the lone surrogate. Expected: reject the value at bind time (ParameterError), or
    produce JSON."""
    db = small_db()
    with pytest.raises(recallql.ParameterError, match="valid Unicode text"):
        db.execute("EXPLAIN FORMAT JSON SEARCH kb MATCHING 'alpha' WHERE id != :t", t=SURROGATE)


@pytest.mark.parametrize("field, value", [
    ("title", f"zeta {SURROGATE}"), ("team", SURROGATE), ("tags", [SURROGATE]),
    ("id", f"z{SURROGATE}"), ("doc_id", SURROGATE), ("entity", SURROGATE),
])
def test_lone_surrogate_in_an_item_is_an_ingest_error(field, value):
    """Was: builtins.UnicodeEncodeError from tantivy/sqlite (nothing is written, good).
    SPEC §7: an invalid item raises IngestError naming the item and the field."""
    db = small_db()
    item = doc("z", "zeta", "", vec(1, 0, 0, 0))
    item[field] = value
    before = dump(db)
    with pytest.raises(recallql.IngestError):
        db.ingest("kb", [item])
    assert dump(db) == before


@pytest.mark.parametrize("call", ["annotate", "title", "source", "end_reason", "entity",
                                  "collection"])
def test_lone_surrogate_in_a_session_write_is_rejected(call):
    """Was: builtins.UnicodeEncodeError from sqlite for annotation text, title, source,
    end_reason, signal entity and collection name. Expected: SignalRejected (annotations,
    signals), SessionError (create/close) or StoreError (create_collection), nothing written."""
    db = small_db()
    s = db.sessions
    s.create("s1", "agent", started_at=NOW_TS - DAY)
    before = dump(db)
    calls = {
        "annotate": (lambda: s.annotate("s1", f"ops {SURROGATE}"), recallql.SignalRejected),
        "title": (lambda: s.create("s2", "agent", title=SURROGATE), SessionError),
        "source": (lambda: s.create("s2", "agent", source=SURROGATE), SessionError),
        "end_reason": (lambda: s.close("s1", end_reason=SURROGATE), SessionError),
        "entity": (lambda: s.signal("s1", "reward", 1.0, entity=SURROGATE),
                   recallql.SignalRejected),
        "collection": (lambda: db.create_collection(SURROGATE, dim=4, embedder=None),
                       recallql.StoreError),
    }
    fn, error = calls[call]
    with pytest.raises(error):
        fn()
    assert dump(db) == before


# -- ingest validation -----------------------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("vector", [10**400, 0, 0, 0]),
    ("score", 10**400),
    ("created_at", 10**400),
    ("at", -(10**400)),
    ("id", 10**5000),
], ids=["vector", "float-field", "created_at", "timestamp-field", "id-5000-digits"])
def test_huge_python_int_in_an_item_is_an_ingest_error(field, value):
    """Was: builtins.OverflowError "int too large to convert to float" (vector, float and
    timestamp fields) or builtins.ValueError "Exceeds the limit (4300 digits) for integer string
    conversion" (id). SPEC §7: IngestError naming the item and field; nothing written."""
    db = small_db()
    item = doc("z", "zeta", "", vec(1, 0, 0, 0))
    item[field] = value
    before = dump(db)
    with pytest.raises(recallql.IngestError):
        db.ingest("kb", [item])
    assert dump(db) == before


@pytest.mark.parametrize("tiny", [[1e-45, 0, 0, 0], [1e-39, 1e-39, 0, 0]])
def test_tiny_norm_vector_is_an_ingest_error(tiny):
    """Was: a non-zero vector whose norm is below ~3e-39 is accepted; normalising it in float32
    overflows 1/norm to inf, and the stored row is [inf, nan, nan, nan]: SEMANTIC_MATCH shows
    `cosine=nan` and the row is ranked. SPEC §4.6/§7: a non-finite or zero vector never produces
    NaN — reject it (IngestError) or normalise it correctly (its cosine with itself is 1)."""
    db = small_db()
    before = dump(db)
    with pytest.raises(recallql.IngestError, match="too small to normalise"):
        db.ingest("kb", [doc("z", "zeta", "", tiny)])
    assert dump(db) == before


@pytest.mark.parametrize("moment", [
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
    datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))),
])
def test_timestamp_range_check_is_the_same_for_every_input_form(moment):
    """Was: `created_at = datetime(1, 1, 1, tzinfo=+05:00)` (= 0000-12-31T19:00Z) is accepted
    and stored as epoch -62135614800, while the same instant as epoch seconds is rejected with
    "out of range (years 1..9999)"; likewise just after 9999-12-31T23:59:59Z. SPEC §7 "dates are
    validated at ingest": the same instant gets the same verdict whatever its form."""
    verdicts = []
    for value in (moment, moment.timestamp(), moment.isoformat()):
        db = small_db()
        try:
            db.ingest("kb", [doc("z", "zeta", created_at=value)])
            verdicts.append("accepted")
        except recallql.IngestError:
            verdicts.append("rejected")
    assert len(set(verdicts)) == 1, verdicts


def test_declared_field_named_rowid_is_reserved():
    """Was: create_collection accepts a field named `rowid`, ingest stores it and WHERE filters
    on it, but `Row.fields` never contains it (the engine hides its internal `rowid`). Expected:
    reject the name as reserved (StoreError), or return the value."""
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    with pytest.raises(recallql.StoreError, match="reserved"):
        db.create_collection("x", fields={"rowid": "str"}, dim=4, embedder=None)
    assert "x" not in [c.name for c in db.collections()]


@pytest.mark.parametrize("as_of", [math.nan, math.inf, True], ids=["nan", "inf", "bool"])
def test_snapshot_as_of_a_non_time_is_a_value_error(as_of):
    """Was: `db.snapshot("kb", as_of=nan)` returned an empty snapshot (every commit-time
    comparison with NaN is false) and `as_of=True` the database as of 1970-01-01T00:00:01Z,
    where `AS OF :t` refuses both."""
    db = small_db()
    with pytest.raises(ValueError, match=r"^as_of must be a datetime or finite epoch seconds, "
                                         rf"got {re.escape(repr(as_of))}$"):
        db.snapshot("kb", as_of=as_of)
    assert db.snapshot("kb", as_of=NOW_TS).size == db.snapshot("kb").size == 4


# -- sessions --------------------------------------------------------------------------------------

@pytest.mark.parametrize("started_at", [1e300, -1e300,
                                        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
                                        datetime(9999, 12, 31, 23,
                                                 tzinfo=timezone(timedelta(hours=-14)))])
def test_out_of_range_start_time_is_rejected_and_writes_nothing(started_at):
    """Was: `sessions.create("s1", ..., started_at=1e300)` commits the row and then raises
    builtins.OverflowError (ValueError "year 0 is out of range" for the datetimes) while building
    the snapshot. From then on SHOW SESSIONS, snapshot(), SHOW SESSION and SEARCH ... FOR SESSION
    's1' all raise the same raw error. Expected (its docstring): SessionError "invalid time",
    nothing written."""
    db = small_db()
    before = dump(db)
    with pytest.raises(SessionError):
        db.sessions.create("s1", "agent", started_at=started_at)
    assert dump(db) == before
    db.execute("SHOW SESSIONS")
    db.execute("SEARCH kb MATCHING 'alpha' FOR SESSION 's1'")


def test_far_future_signal_or_close_time_leaves_the_session_readable():
    """Was: `signal(..., at=1e300)` is accepted (a signal 10^290 years ahead) and
    `signal(at=10**400)` raises builtins.OverflowError instead of SignalRejected;
    `snapshot(as_of=1e300)` raises OverflowError instead of SessionError; `close(at=1e300)`
    commits ended_at=1e300 and then raises OverflowError — from then on snapshot(), SHOW SESSION,
    SHOW SESSIONS and SEARCH ... FOR SESSION 's1' all raise OverflowError. Expected:
    SignalRejected (rule bad_time) / SessionError, nothing written, reads keep working."""
    db = small_db()
    s = db.sessions
    s.create("s1", "agent", started_at=NOW_TS - DAY)
    for at in (1e300, 10**400):
        with contextlib.suppress(recallql.SignalRejected):
            s.signal("s1", "reward", 1.0, entity="a", at=at)
    s.snapshot("s1")
    db.execute("SHOW SESSION s1")
    with pytest.raises(SessionError):
        s.snapshot("s1", as_of=1e300)
    with contextlib.suppress(SessionError):
        s.close("s1", at=1e300)
    db.execute("SHOW SESSIONS")
    s.snapshot("s1")


@pytest.mark.parametrize("sid", [["s1"], {"id": "s1"}, ("s1",)])
def test_session_id_of_wrong_type_is_a_session_error(sid):
    """Was: a list/dict/tuple session id raises sqlite3.ProgrammingError "Error binding
    parameter 1: type 'list' is not supported" from snapshot, archive, close, annotate, signal and
    messages.append. Expected: SessionError / SessionNotFound / SignalRejected (as for other
    invalid ids)."""
    db = small_db()
    db.sessions.create("s1", "agent", started_at=NOW_TS - DAY)
    expected = (SessionError, recallql.SignalRejected)
    for call in (lambda: db.sessions.snapshot(sid), lambda: db.sessions.archive(sid),
                 lambda: db.sessions.close(sid), lambda: db.sessions.annotate(sid, "x"),
                 lambda: db.sessions.signal(sid, "reward", 1.0),
                 lambda: db.messages.append(sid, "user", "hello")):
        with pytest.raises(expected):
            call()


def test_deeply_nested_metadata_is_a_session_error():
    """Was: metadata nested 5000 levels deep raises builtins.RecursionError from json.dumps
    (only TypeError/ValueError are turned into SessionError). Expected: SessionError."""
    db = small_db()
    metadata: dict = {}
    for _ in range(5000):
        metadata = {"a": metadata}
    with pytest.raises(SessionError):
        db.sessions.create("s1", "agent", metadata=metadata)


@pytest.mark.parametrize("flags", [{"active": "false", "compacted": "false"},
                                   {"active": "0", "compacted": "0"},
                                   {"active": float("nan"), "compacted": False}])
def test_message_flags_that_are_not_bools_are_rejected(flags):
    """Was: messages.append(..., active="false", compacted="false") stores active=True
    (`bool("false")`), so a message the caller marked as rewound is searchable. SPEC §2/§6:
    rewound messages are never searchable; §7: bad input gets a clear error. Expected: a
    SessionError/IngestError/TypeError for a flag that is not a bool, and nothing written."""
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    db.sessions.create("s1", "agent", started_at=NOW_TS - DAY)
    with pytest.raises((SessionError, recallql.IngestError, TypeError)):
        db.messages.append("s1", "user", "rewound words", **flags)
    assert db.execute("SEARCH messages MATCHING 'rewound' USING LEXICAL").ids() == []


@pytest.mark.parametrize("statement", [
    "RETRIEVE FROM kb WHERE team LIKE '%a%a%a%a%a%a%a%a%b'",
    "SHOW SESSIONS WHERE title LIKE '%a%a%a%a%a%a%a%a%b'",
])
def test_like_pattern_does_not_backtrack_catastrophically(statement):
    """Was: LIKE compiles each `%` to a regex `.*` and uses `re.fullmatch`, which backtracks
    polynomially in the number of `%`: eight `%a` against one 80-character value take minutes
    (6 take ~5 s), freezing the process. SQL LIKE is matchable in O(len(value) * len(pattern)).
    Run in a child process that must answer (no match) within 10 s."""
    child = (
        "import sys\n"
        f"sys.path[:0] = [{str(REPO)!r}, {str(TESTS)!r}]\n"
        "from engine_helpers import doc, make_db, vec\n"
        "db = make_db([doc('a', 'alpha', '', vec(1, 0, 0, 0), team='a' * 80)],\n"
        "             fields={'team': 'str'})\n"
        "db.sessions.create('s1', 'agent', title='a' * 80)\n"
        f"result = db.execute({statement!r})\n"
        "print('DONE', len(result))\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                              timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{statement!r} did not finish within 10 s")
    assert proc.stdout.strip() == "DONE 0", proc.stderr[-300:]


def test_show_sessions_not_in_with_null_is_never_true():
    """Was: `SHOW SESSIONS WHERE id NOT IN ('zz', NULL)` lists every session. Its evaluator
    claims SQL three-valued logic: `x NOT IN (..., NULL)` is never true (NULL when no element
    matches), so no rows (SQLite and PostgreSQL return none)."""
    db = small_db()
    db.sessions.create("s1", "agent", started_at=NOW_TS - DAY)
    assert db.execute("SHOW SESSIONS WHERE id NOT IN ('zz', NULL)").records == []


# -- pagination ------------------------------------------------------------------------------------

def test_pages_concatenate_when_they_share_the_window():
    """SPEC §4.1 (each leg returns N = max(offset + limit, window) candidates) and §4.7 (pages
    concatenate to the unpaged list) conflict once a boost can lift a row from below one page's
    window above the rows of another: 101 items, default window 100, the brand-new item 'new' is
    last by similarity. Resolution (docs/scoring.md): pages concatenate whenever they use the same
    N — every page within the default window, or an explicit `FUSE RRF (window = n)` covering
    the deepest page. Pinned here with a window of 200 for all pages and the unpaged list."""
    items = [doc(f"d{i:03d}", "", "", vec(1, i / 50, 0, 0), created_at="2000-01-01")
             for i in range(100)]
    items.append(doc("new", "", "", vec(0, 1, 0, 0), created_at=NOW.isoformat()))
    db = make_db(items)
    text = "SEARCH kb NEAR :v WITH RECENCY (weight = 1, half_life = 1 DAYS) FUSE RRF (window = 200)"
    full = db.execute(f"{text} LIMIT 101", v=[1, 0, 0, 0]).ids()
    assert full[0] == "new"
    pages: list[str] = []
    for offset in range(0, 101, 10):
        pages += db.execute(f"{text} LIMIT 10 OFFSET {offset}", v=[1, 0, 0, 0]).ids()
    assert pages == full
    shallow = "SEARCH kb NEAR :v WITH RECENCY (weight = 1, half_life = 1 DAYS)"
    assert db.execute(f"{shallow} LIMIT 10", v=[1, 0, 0, 0]).ids()[0] != "new"


@pytest.mark.parametrize("fields, item", [
    ({"session_id": "str", "active": "str", "compacted": "str"},
     {"session_id": "x", "active": "yes", "compacted": "no"}),
    ({"session_id": "str", "active": "bool", "compacted": "bool"}, {"session_id": "x"}),
    ({"session_id": "int", "active": "bool", "compacted": "bool"},
     {"session_id": 5, "active": True, "compacted": False}),
], ids=["str-flags", "flags-missing", "int-session-id"])
def test_user_collection_with_message_like_field_names_is_searched_like_any_other(fields, item):
    """Was: any collection whose fields include `session_id`, `active` and `compacted` is
    treated as a messages collection (engine.is_messages), whatever the types: with str flags
    every SEARCH raises ExecutionError "FilterError: field 'active' is str; cannot compare with
    True"; with the flags absent every row is silently filtered out ([] for a matching item);
    with an int session_id building the Row raises pydantic ValidationError. Expected: a user
    collection is searched like any other (or create_collection rejects the field names)."""
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    try:
        db.create_collection("chats", fields=fields, dim=4, embedder=None)
    except recallql.StoreError:
        return
    db.ingest("chats", [{"id": "c1", "title": "hello world", **item}])
    assert run_statement(db, "SEARCH chats MATCHING 'hello'").ids() == ["c1"]


@pytest.mark.parametrize("text", [b"SEARCH kb MATCHING 'alpha'", None, 5])
def test_execute_with_a_non_str_statement_raises_type_error(text):
    """Was: db.execute(b"SEARCH ...") raises builtins.AttributeError "'bytes' object has no
    attribute 'parameters'". docs/language.md: only QueryError subclasses escape, and TypeError
    when the text is not a str — which is what db.explain() and parse() already raise."""
    db = small_db()
    with pytest.raises(TypeError, match="str"):
        db.explain(text)
    with pytest.raises(TypeError, match="str"):
        db.execute(text)


@pytest.mark.parametrize("value", ["SEARCH kb MATCHING :q", None], ids=["text", "none"])
def test_bind_and_run_legs_of_something_else_raise_type_error(value):
    """Was: `recallql.bind("SEARCH ...", q=...)` and `db.run_legs(None)` raised a raw
    AttributeError ('str' object has no attribute 'parameters' / 'as_of'), as db.execute(b"...")
    did before it said TypeError."""
    db = small_db()
    with pytest.raises(TypeError, match=r"^bind takes a parsed statement \(parse\(text\)\), "
                                        rf"not {type(value).__name__}$"):
        recallql.bind(value, q="alpha")
    with pytest.raises(TypeError, match=r"^run_legs takes a QueryPlan \(db.plan\(text\)\), "
                                        rf"not {type(value).__name__}$"):
        db.run_legs(value)


def test_explain_text_and_warnings_show_control_characters_of_values_escaped():
    """Was: a MATCHING text or FOR SESSION id holding ESC sequences or U+202E came back raw in
    EXPLAIN's text (`text=`, `session=`) and in the SESSION_NOT_FOUND warning, so printing
    them (the CLI, the shell) let a value drive the terminal or reorder the line."""
    db = small_db()
    sid, text = "s\x1b[31m\u202e", "alpha\x1b[2J"
    result = db.execute("SEARCH kb MATCHING :q FOR SESSION :s", q=text, s=sid)
    (notice,) = [n for n in result.warnings if n.code.value == "SESSION_NOT_FOUND"]
    assert notice.message == ("session 's\\x1b[31m\\u202e' does not exist (never created, "
                              "or swept); ran without the session boost")
    shown = db.explain("SEARCH kb MATCHING :q FOR SESSION :s", q=text, s=sid).to_text()
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "    SessionBoost: session='s\\x1b[31m\\u202e' keywords=0.3 velocity=0.2 " \
           "entities=0.2" in shown.splitlines()


def test_tables_show_control_characters_of_stored_values_escaped():
    """Was: a stored id, text or field value holding ESC sequences or U+202E went raw into the
    CLI's and the shell's tables (a result's rows, SHOW / DESCRIBE records, a record view), so
    listing a hostile document cleared the screen or retitled the terminal."""
    import io

    from rich.console import Console

    from recallql.ui.render import record_view, records_table, result_table

    db = make_db([doc("e\x1b]0;t\x07", "alpha \x1b[2J", "beta \u202e", vec(1, 0, 0, 0),
                      team="x\x1b[31m")], fields=FIELDS)
    result = db.execute("SEARCH kb MATCHING 'alpha'")

    def shown(renderable):
        out = io.StringIO()
        Console(file=out, width=200, color_system=None).print(renderable)
        return out.getvalue()

    table = shown(result_table(result))
    records = shown(records_table(["id", "team"], [{"id": "e", "team": "x\x1b[31m"}]))
    view = shown(record_view({"team\x1b[1m": "x\x1b[31m"}))
    for text in (table, records, view):
        assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "e\\x1b]0;t\\x07" in table and "alpha \\x1b[2J" in table and "\\u202e" in table
    assert "x\\x1b[31m" in records and "team\\x1b[1m" in view and "x\\x1b[31m" in view


# -- Hermes import ---------------------------------------------------------------------------------

def _hermes_store(tmp_path: Path, sql: str) -> Path:
    """The Hermes fixture store with one hostile edit applied (WAL checkpointed into the file)."""
    import importlib.util
    import sqlite3

    spec = importlib.util.spec_from_file_location(
        "build_state_db", TESTS / "fixtures" / "hermes" / "build_state_db.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    path = tmp_path / "state.db"
    builder.build_state_db(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(sql)
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


@pytest.mark.parametrize("sql", [
    "UPDATE sessions SET started_at = 1e300 WHERE id = 'conv-root'",
    "UPDATE sessions SET started_at = -1e300 WHERE id = 'conv-root'",
    "UPDATE sessions SET ended_at = 1e999 WHERE id = 'conv-root'",
])
def test_hermes_import_of_out_of_range_session_time_keeps_the_database_queryable(tmp_path, sql):
    """Was: a Hermes store whose session has started_at = 1e300 (or -1e300, or ended_at = inf)
    imports "successfully", and afterwards SHOW SESSIONS and every GROUP BY CONVERSATION / FOR
    SESSION statement raise builtins.OverflowError "timestamp out of range for platform time_t".
    Expected: the row is skipped with a reason in ImportReport.skipped (as `no_start_time` is),
    or the import fails cleanly — and the database stays queryable."""
    path = _hermes_store(tmp_path, sql)
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    report = db.import_hermes(path)
    assert report.skipped["session_time_out_of_range"] == 1
    ids = [r["id"] for r in db.execute("SHOW SESSIONS").records]
    assert "conv-root" not in ids and "conv-tip" in ids
    db.execute("SEARCH messages MATCHING 'helm' GROUP BY CONVERSATION")
    db.execute("SEARCH messages MATCHING 'helm' FOR SESSION 'conv-tip'")


def test_hermes_import_of_invalid_utf8_text_is_skipped_or_a_format_error(tmp_path):
    """Was: one message whose TEXT column holds bytes that are not UTF-8 (a torn write, a
    legacy client) makes import_hermes raise sqlite3.OperationalError "Could not decode to UTF-8
    column 'content'" and nothing is imported. Expected: the row is skipped and counted in
    ImportReport.skipped (like `undecodable_json_content`), or a HermesFormatError naming the
    store — not a raw sqlite error."""
    from recallql.importers.hermes_store import HermesFormatError

    path = _hermes_store(tmp_path, "UPDATE messages SET content = CAST(x'61ff62' AS TEXT) "
                                   "WHERE rowid = 1")
    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    try:
        report = db.import_hermes(path)
    except HermesFormatError:
        return
    assert sum(report.skipped.values()) > 0


# -- API and CLI -----------------------------------------------------------------------------------

def test_execute_after_close_is_a_store_error(tmp_path):
    """Was: `db.execute(...)` after `db.close()` raises sqlite3.ProgrammingError "Cannot operate
    on a closed database." while `db.ingest` raises StoreError "the database ... is closed".
    Expected: StoreError for both."""
    db = make_db([doc("a", "alpha", "", vec(1, 0, 0, 0))], path=tmp_path / "db")
    db.close()
    with pytest.raises(recallql.StoreError):
        db.ingest("kb", [doc("b", "beta")])
    with pytest.raises(recallql.StoreError):
        db.execute("SEARCH kb MATCHING 'alpha'")


@pytest.mark.parametrize("line", [
    '{"id": "a", "title": "x\\ud800"}',
    '{"id": "b", "title": "x", "created_at": ' + "1" * 400 + "}",
    '{"id": "c", "title": "x", "vector": [' + "1" * 400 + "]}",
])
def test_cli_ingest_of_hostile_jsonl_exits_1_with_an_error(tmp_path, line):
    """Was: `recallql ingest` on a JSONL line with a "\\ud800" escape or a 400-digit number dies
    with an uncaught UnicodeEncodeError / OverflowError traceback. SPEC §8 CLI: exit code 1 with
    an `error:` message (as for NaN or bad JSON)."""
    from recallql.cli import app

    data = tmp_path / "items.jsonl"
    data.write_text(line + "\n")
    result = CliRunner().invoke(app, ["ingest", str(data), "--db", str(tmp_path / "db"),
                                      "--embedder", "hash"])
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1
    assert "error:" in result.output


# =================================================================================================
# 2. REGRESSION NET — edge cases that must keep passing.
# =================================================================================================

@pytest.fixture(scope="module")
def rich_db():
    db = build_db()
    yield db
    db.close()


EDGE_STATEMENTS = [
    ("SEARCH kb MATCHING 'alpha' FUSE RRF (k = 1e308)", {}),
    ("SEARCH kb MATCHING 'alpha' NEAR :v FUSE RRF (k = 5e-324)", {"v": [1, 0, 0, 0]}),
    ("SEARCH kb MATCHING 'alpha' FUSE RRF (window = 1)", {}),
    ("SEARCH kb MATCHING 'alpha' LIMIT 1000000", {}),
    ("SEARCH kb MATCHING 'alpha' OFFSET 1000000", {}),
    ("RETRIEVE FROM kb LIMIT 9223372036854775807 OFFSET 9223372036854775807", {}),
    ("RETRIEVE 9223372036854775807 FROM kb", {}),
    ("SEARCH kb NEAR :v LIMIT 9223372036854775807", {"v": [1, 0, 0, 0]}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = 0.0000001 SECONDS)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = 1e300 DAYS, shape = GAUSS)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = 1e-300 SECONDS, shape = LINEAR)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = 9223372036854775807 DAYS)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (weight = 1e308)", {}),
    ("RETRIEVE FROM kb WITH SIGNAL BOOST (reward = -1e308)", {}),
    ("RETRIEVE FROM kb WITH SIGNAL BOOST (reward = 5e-324)", {}),
    ("SEARCH kb MATCHING 'alpha' FOR SESSION 's1' WITH SESSION BOOST "
     "(keywords = 1e300, velocity = 1e300, entities = 1e300)", {}),
    ("SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '9999-12-31T23:59:59Z'", {}),
    ("SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '0001-01-01T00:00:00Z'", {}),
    ("SEARCH kb MATCHING 'alpha' AS OF :t", {"t": datetime.min}),
    ("SEARCH kb MATCHING 'alpha' WHERE created_at > TIMESTAMP '0001-01-01'", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE at < '9999-12-31T23:59:59-05:00'", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE at > '  2020-01-01 '", {}),  # blanks: as at ingest
    ("SEARCH kb MATCHING 'alpha' WHERE year = 1e308", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE score > 9223372036854775807", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE position = 9223372036854775807", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE team LIKE '%[a-z](%\\\\'", {}),  # regex chars, an escaped \\
    ("SEARCH kb MATCHING 'alpha' WHERE " + " AND ".join(["year > 0"] * 2000), {}),
    ("SEARCH kb MATCHING 'alpha' WHERE year IN (" + ", ".join(["1"] * 1000) + ")", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE year IN :ys", {"ys": [1] * 20000}),
    ("SEARCH kb MATCHING :q", {"q": "x" * (1 << 20)}),
    ("SEARCH kb MATCHING :q", {"q": "alpha " * 100000}),
    (f"SEARCH kb MATCHING '{'alpha ' * 50000}'", {}),
    ("SEARCH kb MATCHING :q", {"q": "alpha\x00beta"}),
    ("SEARCH kb MATCHING :q", {"q": "\u200f\u200dalpha\u200b \u202e 👩‍👩‍👧 \ufeff"}),
    ("SEARCH kb MATCHING :q", {"q": "C++ it's 36\" {0} a:b OR NOT -v session_id:s2 title:x"}),
    ("SEARCH kb MATCHING ' '", {}),
    ("SEARCH kb MATCHING 'the of and'", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE team = :v", {"v": "\x00"}),
    ("SEARCH kb MATCHING 'alpha' FOR SESSION :s", {"s": "x" * 1_000_000}),
    ("SEARCH kb MATCHING 'alpha' FOR SESSION :s", {"s": "'; DROP TABLE sessions; --"}),
    ("SHOW SESSIONS LIMIT 9223372036854775807 OFFSET 9223372036854775807", {}),
    ("SHOW SESSIONS WHERE started_at BETWEEN TIMESTAMP '0001-01-01' AND "
     "TIMESTAMP '9999-12-31T23:59:59Z'", {}),
    ("SHOW SESSIONS WHERE title LIKE '%\\%%'", {}),
    ("SHOW LINEAGE loop", {}),
    ("SHOW LINEAGE tip", {}),
    ("DESCRIBE messages", {}),
    ("SHOW COLLECTIONS", {}),
]


@pytest.mark.parametrize("text, params", EDGE_STATEMENTS,
                         ids=[f"edge{i}" for i in range(len(EDGE_STATEMENTS))])
def test_extreme_but_valid_values_give_sound_results(rich_db, text, params):
    """Extreme values that work today: no exception at all, and sound rows."""
    result = rich_db.execute(text, **params)
    if result.records is None:
        check_result(result, text, params)
    else:  # a catalog table: every record has exactly the listed columns
        assert all(list(record) == result.columns for record in result.records), result


ERROR_STATEMENTS = [
    ("", {}), (";;;", {}), ("-- only a comment", {}), ("\x00", {}),
    (f"SEARCH kb MATCHING 'alpha' {SURROGATE}", {}),
    ("SEARCH kb MATCHING 'alpha'; SEARCH kb MATCHING 'beta'", {}),
    ("SEARCH kb MATCHING 'alpha' LIMIT 9223372036854775808", {}),
    ("SEARCH kb MATCHING 'alpha' LIMIT 0", {}),
    ("SEARCH kb MATCHING 'alpha' FUSE RRF (k = 0)", {}),
    ("SEARCH kb MATCHING 'alpha' FUSE RRF (k = 1e999)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (weight = -1e-300)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = 0 DAYS)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = 30)", {}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (weight = :w)", {"w": float("nan")}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (weight = :w)", {"w": 10**30}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = :h)", {"h": timedelta(0)}),
    ("SEARCH kb MATCHING 'alpha' WITH RECENCY (half_life = :h)", {"h": timedelta(days=-1)}),
    ("SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '0001-01-01T00:00:00+05:00'", {}),
    ("SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '10000-01-01'", {}),
    ("SEARCH kb MATCHING 'alpha' AS OF :t", {"t": "next tuesday"}),  # ISO text binds
    ("SEARCH kb MATCHING 'alpha' AS OF :t",
     {"t": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))}),
    ("SEARCH kb MATCHING :q", {"q": ""}),
    ("SEARCH kb MATCHING :q", {"q": b"alpha"}),
    ("SEARCH kb MATCHING :q", {"q": None}),
    ("SEARCH kb MATCHING 'alpha' LIMIT :n", {"n": True}),
    ("SEARCH kb MATCHING 'alpha' LIMIT :n", {"n": 3.0}),
    ("SEARCH kb MATCHING 'alpha' LIMIT :n", {"n": 2**64}),
    ("SEARCH kb MATCHING 'alpha' LIMIT :n", {"n": np.uint64(2**64 - 1)}),
    ("SEARCH kb MATCHING 'alpha' WHERE year = :v", {"v": float("nan")}),
    ("SEARCH kb MATCHING 'alpha' WHERE year = :v", {"v": [1]}),
    ("SEARCH kb MATCHING 'alpha' WHERE year = :v", {"v": {}}),
    ("SEARCH kb MATCHING 'alpha' WHERE year = :v", {"v": object()}),
    ("SEARCH kb MATCHING 'alpha' WHERE at = :v", {"v": timedelta(1)}),
    ("SEARCH kb MATCHING 'alpha' WHERE ok = :v", {"v": None}),
    ("SEARCH kb MATCHING 'alpha' WHERE " + "(" * 70 + "year = 1" + ")" * 70, {}),
    ("SEARCH kb MATCHING 'alpha' WHERE " + "NOT " * 70 + "year = 1", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE year IN (" + ", ".join(["1"] * 20000) + ")", {}),
    ("SEARCH kb MATCHING '" + "alpha " * 200000 + "'", {}),
    ("SEARCH \"" + "k" * 10000 + "\" MATCHING 'alpha'", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE \"" + "k" * 10000 + "\" = 1", {}),
    ("SEARCH kb NEAR :v", {"v": [0, 0, 0, 0]}),
    ("SEARCH kb NEAR :v", {"v": [1, 0]}),
    ("SEARCH kb NEAR :v", {"v": [[1, 0, 0, 0]]}),
    ("SEARCH kb NEAR :v", {"v": [1, float("nan"), 0, 0]}),
    ("SEARCH kb NEAR :v", {"v": [1e39, 0, 0, 0]}),
    ("SEARCH kb NEAR :v", {"v": [10**400, 0, 0, 0]}),
    ("SEARCH kb NEAR :v", {"v": np.array([1, 0, 0, 0], dtype=object)}),
    ("SEARCH kb NEAR :v", {"v": np.array([1, 0, 0, 0], dtype=np.complex64)}),
    ("SEARCH kb NEAR :v", {"v": np.array([True, False, False, False])}),
    ("SEARCH kb NEAR :v", {"v": "abcd"}),
    ("SEARCH kb NEAR :v", {"v": np.float32(1)}),
    ("SEARCH kb NEAR :v", {"v": np.zeros(0)}),
    ("SEARCH kb MATCHING 'alpha' FOR SESSION :s", {"s": 5}),
    ("SEARCH kb MATCHING 'alpha' FOR SESSION :s", {"s": ""}),
    ("SEARCH kb MATCHING 'alpha' WITH SESSION BOOST", {}),
    ("SEARCH kb MATCHING 'alpha' WITH SIGNAL BOOST (nope = 1)", {}),
    ("SEARCH kb MATCHING 'alpha' GROUP BY CONVERSATION", {}),
    ("SEARCH kb MATCHING 'alpha' USING SEMANTIC", {}),
    ("SEARCH kbb MATCHING 'alpha'", {}),
    ("SEARCH kb MATCHING 'alpha' WHERE title = 'x'", {}),
    ("EXPLAIN EXPLAIN SEARCH kb MATCHING 'alpha'", {}),
    ("EXPLAIN SHOW SESSIONS", {}),
    ("SHOW SESSION nope", {}), ("SHOW LINEAGE nope", {}), ("SHOW SESSION :s", {"s": ""}),
    ("SHOW LINEAGE :s", {"s": "x" * 100000}),
    ("SHOW SESSIONS WHERE started_at > 'yesterday'", {}),
    ("SHOW SESSIONS WHERE nope = 'x'", {}),
    ("DESCRIBE nope", {}), ('DESCRIBE ""', {}), ("DESCRIBE :c", {"c": "kb"}),
    ("SEARCH kb MATCHING :q", {"q": "alpha", "extra": 1}),
    ("SEARCH kb MATCHING ?", {}),
]


@pytest.mark.parametrize("text, params", ERROR_STATEMENTS,
                         ids=[f"err{i}" for i in range(len(ERROR_STATEMENTS))])
def test_user_mistakes_raise_query_errors_with_a_caret(rich_db, text, params):
    """Each is a user mistake: a QueryError whose rendering starts with its class name and, when
    it has a position, shows a caret inside the text."""
    with pytest.raises(recallql.QueryError) as err:
        rich_db.execute(text, **params)
    rendered = str(err.value)
    assert rendered.startswith(type(err.value).__name__)
    if err.value.span is not None:
        assert "^" in rendered
        start, end = err.value.span
        assert 0 <= start <= end <= len(text)


def test_explain_of_every_statement_kind(rich_db):
    """db.explain: SEARCH and RETRIEVE (also written with EXPLAIN) give the statement's rows; the
    other kinds are a QuerySemanticError, never something else."""
    for text in ("SEARCH kb MATCHING 'alpha backup' NEAR :v FOR SESSION 's1' WITH SIGNAL BOOST",
                 "RETRIEVE 3 FROM kb FOR SESSION 'nobody' GROUP BY DOCUMENT",
                 "SEARCH messages MATCHING 'alpha keys' FOR SESSION 'tip' GROUP BY CONVERSATION",
                 "RETRIEVE FROM messages GROUP BY CONVERSATION (budget = 1)"):
        params = {"v": [1, 0, 0, 0]} if ":v" in text else {}
        plain = rich_db.execute(text, **params)
        for explained in (rich_db.explain(text, **params),
                          rich_db.explain("EXPLAIN ANALYZE VERBOSE FORMAT JSON " + text,
                                          **params)):
            assert explained.result.ids() == plain.ids()
            assert [r.reasons for r in explained.rows] == [r.reasons for r in plain.rows]
            assert recallql.Explain.model_validate_json(explained.to_json()) == explained
            assert explained.to_text()
    for text in ("SHOW COLLECTIONS", "SHOW SESSIONS", "SHOW SESSION s1", "SHOW LINEAGE tip",
                 "DESCRIBE kb"):
        with pytest.raises(recallql.QuerySemanticError):
            rich_db.explain(text)


def test_missing_session_lineage_and_collection_are_semantic_errors(rich_db):
    for text in ("SHOW SESSION nope", "SHOW LINEAGE nope", "DESCRIBE nope"):
        with pytest.raises(recallql.QuerySemanticError) as err:
            rich_db.execute(text)
        assert "nope" in err.value.message and err.value.column is not None


def test_recency_weight_zero_is_byte_identical_to_without_recency(rich_db):
    """SPEC §4.5 kill switch, also for -0.0 (which passes the `>= 0` check)."""
    for text in ("SEARCH kb MATCHING 'alpha backup gamma' NEAR :v", "RETRIEVE FROM kb",
                 "SEARCH kb NEAR :v FOR SESSION 's1' WITH SIGNAL BOOST"):
        params = {"v": [1, 0.3, 0, 0]} if ":v" in text else {}
        without = rich_db.execute(f"{text} WITHOUT RECENCY LIMIT 50", **params)
        for weight in ("0", "-0.0", "0.0"):
            zero = rich_db.execute(f"{text} WITH RECENCY (weight = {weight}) LIMIT 50", **params)
            assert [(r.id, r.score) for r in zero.rows] == \
                [(r.id, r.score) for r in without.rows]


# -- ingest: rejected batches, replacement, odd but valid values -----------------------------------

REJECTED_ITEMS = {
    "nan in int field": {"year": float("nan")},
    "float in int field": {"year": 3.0},
    "bool in int field": {"year": True},
    "int64 overflow": {"year": 2**63},
    "uint64 max": {"year": np.uint64(2**64 - 1)},
    "inf in float field": {"score": float("inf")},
    "float32 nan": {"score": np.float32("nan")},
    "decimal nan": {"score": __import__("decimal").Decimal("NaN")},
    "nested list": {"tags": [["a"]]},
    "str for list": {"tags": "abc"},
    "set for list": {"tags": {"a"}},
    "bool for str": {"team": True},
    "bytes text": {"title": b"zeta"},
    "nan created_at": {"created_at": float("nan")},
    "created_at year 10000": {"created_at": "10000-01-01"},
    "created_at numpy NaT": {"created_at": np.datetime64("NaT")},  # a datetime64 is a time
    "negative position": {"position": -1},
    "empty entity": {"entity": ""},
    "id too long": {"id": "x" * 1025},
    "float id": {"id": 1.5},
    "vector str": {"vector": "abcd"},
    "vector dict": {"vector": {"a": 1}},
    "vector complex": {"vector": [1j, 1, 0, 0]},
    "vector nested": {"vector": [[1, 0, 0, 0]]},
    "vector wrong dim": {"vector": [1, 2]},
    "vector zero": {"vector": [0, 0, 0, 0]},
    "vector nan": {"vector": [1, float("nan"), 0, 0]},
    "vector float32 overflow": {"vector": [1e39, 0, 0, 0]},
    "unknown field": {"colour": "red"},
    "non-str key": {1: "x"},
}


@pytest.mark.parametrize("update", list(REJECTED_ITEMS.values()), ids=list(REJECTED_ITEMS))
def test_rejected_items_leave_the_database_unchanged(update):
    db = small_db()
    before = dump(db)
    item = doc("z", "zeta", "", vec(1, 0, 0, 0))
    item.update(update)
    batch = [doc("ok1", "fine", "", vec(0, 1, 0, 0)), item, doc("ok2", "fine")]
    with pytest.raises(recallql.IngestError):
        db.ingest("kb", batch)
    assert dump(db) == before
    for not_a_list in ("abc", [None], [1], ["not a dict"]):
        with pytest.raises(recallql.IngestError):
            db.ingest("kb", not_a_list)
    assert dump(db) == before


def test_duplicate_ids_within_a_batch_are_rejected_and_across_batches_replace():
    db = small_db()
    before = dump(db)
    for batch in ([doc("z", "one"), doc("z", "two")], [{"id": 12, "title": "x"},
                                                      {"id": "12", "title": "y"}]):
        with pytest.raises(recallql.IngestError, match="duplicate"):
            db.ingest("kb", batch)
    assert dump(db) == before
    db.ingest("kb", [doc("a", "replaced", "", vec(0, 1, 0, 0), team="new")])
    rows = {r.id: r for r in db.execute("RETRIEVE FROM kb LIMIT 100").rows}
    assert sorted(rows) == ["a", "b", "c", "d"]
    assert rows["a"].fields["title"] == "replaced" and rows["a"].fields["team"] == "new"
    assert rows["a"].fields["year"] is None  # replaced as a whole, not merged
    assert "a" not in db.execute("SEARCH kb MATCHING 'alpha backup' USING LEXICAL").ids()
    assert db.execute("SEARCH kb MATCHING 'replaced' USING LEXICAL").ids() == ["a"]


def test_odd_but_valid_items_are_accepted_and_searchable():
    db = small_db()
    report = db.ingest("kb", [
        doc("nul\x00id", "zeta\x00zeta", "", vec(1, 0, 0, 0)),
        doc("big", "zeta", "", vec(3e38, 3e38, 3e38, 3e38), year=np.int64(3)),
        {"id": 10**100, "title": "zeta", "created_at": datetime(2020, 1, 1)},
        doc("rtl", "\u202ezeta\u200d👩‍👩‍👧", "", np.array([1, 0, 0, 0], dtype=object)),
        doc("frac", "zeta", "", None, score=__import__("fractions").Fraction(1, 3)),
        doc("empty", "", "", None, tags=[]),
    ])
    assert report.added == 6
    result = db.execute("SEARCH kb MATCHING 'zeta' NEAR :v LIMIT 20", v=[1, 1, 1, 1])
    assert_sound(result)
    assert {"nul\x00id", "big", str(10**100), "rtl", "frac"} <= set(result.ids())
    assert db.execute("RETRIEVE FROM kb WHERE id = :i", i="nul\x00id").ids() == ["nul\x00id"]


def test_an_empty_batch_writes_nothing_visible():
    db = small_db()
    rows_before = db.execute("RETRIEVE FROM kb LIMIT 100").ids()
    report = db.ingest("kb", [])
    assert report.added == report.replaced == 0
    assert db.execute("RETRIEVE FROM kb LIMIT 100").ids() == rows_before


# -- sessions --------------------------------------------------------------------------------------

def test_rejected_session_writes_change_nothing():
    db = small_db()
    s = db.sessions
    s.create("s1", "agent", started_at=NOW_TS - DAY)
    s.create("done", "agent", started_at=NOW_TS - DAY)
    s.close("done", at=NOW_TS - DAY / 2)
    before = dump(db)
    rejected = [
        (lambda: s.create("s1", "agent"), SessionError),
        (lambda: s.create("a'b", "agent"), SessionError),
        (lambda: s.create("x" * 129, "agent"), SessionError),
        (lambda: s.create("s2", "'; DROP TABLE sessions; --"), SessionError),
        (lambda: s.create("s2", "agent", parent="a b"), SessionError),
        (lambda: s.create("s2", "agent", started_at=float("nan")), SessionError),
        (lambda: s.create("s2", "agent", started_at="2025-01-01"), SessionError),
        (lambda: s.create("s2", "agent", metadata={"x": float("nan")}), SessionError),
        (lambda: s.create("s2", "agent", metadata={1: 2}), SessionError),
        (lambda: s.create("s2", "agent", source=""), SessionError),
        (lambda: s.signal("s1", "reward", float("nan")), recallql.SignalRejected),
        (lambda: s.signal("s1", "reward", float("inf")), recallql.SignalRejected),
        (lambda: s.signal("s1", "reward", 1.5), recallql.SignalRejected),
        (lambda: s.signal("s1", "reward", True), recallql.SignalRejected),
        (lambda: s.signal("s1", "reward", "1"), recallql.SignalRejected),
        (lambda: s.signal("s1", "nope", 1.0), recallql.SignalRejected),
        (lambda: s.signal("s1", "reward", 1.0, entity=""), recallql.SignalRejected),
        (lambda: s.signal("s1", "reward", 1.0, at="yesterday"), recallql.SignalRejected),
        (lambda: s.signal("s1", "reward", 1.0, at=0), recallql.SignalRejected),
        (lambda: s.signal("done", "reward", 1.0), recallql.SignalRejected),
        (lambda: s.signal("nobody", "reward", 1.0), recallql.SignalRejected),
        (lambda: s.annotate("s1", "   "), recallql.SignalRejected),
        (lambda: s.annotate("done", "x"), recallql.SignalRejected),
        (lambda: s.close("s1", end_reason=""), SessionError),
        (lambda: s.close("s1", at=0), SessionError),
        (lambda: s.close("done"), SessionError),
        (lambda: s.close("nobody"), recallql.SessionNotFound),
        (lambda: s.archive("nobody"), recallql.SessionNotFound),
        (lambda: s.sweep(float("nan")), SessionError),
        (lambda: s.sweep(timedelta(microseconds=-1)), SessionError),
        (lambda: s.sweep("1 day"), SessionError),
        (lambda: s.snapshot("nobody"), recallql.SessionNotFound),
        (lambda: db.messages.append("nobody", "user", "x"), recallql.SessionNotFound),
        (lambda: db.messages.append("done", "user", "x"), SessionError),
        (lambda: db.messages.append("s1", "", "x"), SessionError),
        (lambda: db.messages.append("s1", "user", None), SessionError),
        (lambda: db.messages.append("s1", "user", "x", at=1e300), recallql.IngestError),
    ]
    for call, error in rejected:
        with pytest.raises(error):
            call()
        assert dump(db) == before


def test_hostile_session_ids_travel_as_values(rich_db):
    for sid in ("'; DROP TABLE sessions; --", "s1' OR '1'='1", "\"s1\"", "s1 --", "%", "_"):
        for text in ("SEARCH kb MATCHING 'alpha' FOR SESSION :s", "RETRIEVE FROM kb FOR SESSION :s",
                     "SEARCH messages MATCHING 'alpha' FOR SESSION :s"):
            result = rich_db.execute(text, s=sid)
            assert [w.code.value for w in result.warnings].count("SESSION_NOT_FOUND") == 1
        for text in ("SHOW SESSION :s", "SHOW LINEAGE :s"):
            with pytest.raises(recallql.QuerySemanticError):
                rich_db.execute(text, s=sid)
    assert len(rich_db.execute("SHOW SESSIONS").records) == 5


# -- files and concurrency -------------------------------------------------------------------------

def test_connect_to_things_that_are_not_databases(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("hello")
    with pytest.raises(recallql.StoreError):
        recallql.connect(a_file, embedder=None)
    assert a_file.read_text() == "hello"
    other = tmp_path / "other_program"
    other.mkdir()
    (other / "x.db").write_text("not ours")
    with pytest.raises(recallql.StoreError):
        recallql.connect(other, embedder=None)
    assert sorted(p.name for p in other.iterdir()) == ["x.db"]
    with pytest.raises(recallql.StoreError):
        recallql.connect(tmp_path / "missing", embedder=None, readonly=True)
    assert not (tmp_path / "missing").exists()


def test_one_writer_many_readers(tmp_path):
    path = tmp_path / "db"
    writer = make_db([doc("a", "alpha", "", vec(1, 0, 0, 0))], path=path)
    second = recallql.connect(path, embedder=None, lock_timeout=0.05)  # writers take turns
    with writer.store.writing(), pytest.raises(recallql.DatabaseLocked):  # a write in progress
        second.ingest("kb", [doc("c", "gamma")])
    second.close()
    reader = recallql.connect(path, embedder=None, readonly=True)
    for write in (lambda: reader.ingest("kb", [doc("b", "beta")]),
                  lambda: reader.sessions.create("s1", "agent"),
                  lambda: reader.create_collection("kb2", dim=4, embedder=None)):
        with pytest.raises(recallql.StoreError):
            write()
    writer.ingest("kb", [doc("b", "alpha", "", vec(1, 0, 0, 0))])
    assert reader.execute("SEARCH kb MATCHING 'alpha'").ids() == ["a", "b"]
    writer.close()
    with recallql.connect(path, embedder=None) as again:
        assert again.execute("SEARCH kb MATCHING 'alpha'").ids() == ["a", "b"]
    reader.close()


def test_readers_see_whole_batches_while_a_writer_ingests(tmp_path):
    path = tmp_path / "db"
    writer = make_db([doc(f"seed{i}", "common", "", vec(1, i, 0, 0)) for i in range(10)],
                     path=path)
    reader = recallql.connect(path, embedder=None, readonly=True, clock=lambda: NOW_TS)
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                for text in ("RETRIEVE FROM kb LIMIT 100000",
                             "SEARCH kb MATCHING 'common' LIMIT 100000"):
                    seen.append(len(reader.execute(text).rows))
                seen.append(len(reader.execute("SEARCH kb NEAR :v LIMIT 100000",
                                               v=[1, 0, 0, 0]).rows))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for b in range(15):
            writer.ingest("kb", [doc(f"b{b}-{i}", "common", "", vec(1, i, b, 0))
                                 for i in range(10)])
    finally:
        done.set()
        thread.join()
    assert not errors, errors
    assert seen and all(n % 10 == 0 for n in seen), seen
    assert len(reader.execute("RETRIEVE FROM kb LIMIT 1000").rows) == 160
    reader.close()
    writer.close()


def test_utc_and_naive_times_agree():
    """Naive datetimes are UTC everywhere: AS OF, WHERE and ingest."""
    db = small_db()
    naive = db.execute("SEARCH kb MATCHING 'alpha beta' WHERE at < :w AS OF :t",
                       t=datetime(2026, 1, 1), w=datetime(2025, 1, 1))
    aware = db.execute("SEARCH kb MATCHING 'alpha beta' WHERE at < :w AS OF :t",
                       t=datetime(2026, 1, 1, tzinfo=UTC),
                       w=datetime(2025, 1, 1, 5, tzinfo=timezone(timedelta(hours=5))))
    assert [(r.id, r.score) for r in naive.rows] == [(r.id, r.score) for r in aware.rows]
