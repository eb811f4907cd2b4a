"""One timestamp parser (`index.timestamps.parse_timestamp`) and one formatter
(`grammar.timestamps.format_timestamp`): ISO-8601 UTC with microseconds and Z for machines."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from engine_helpers import NOW_TS, doc, make_db, vec
from hypothesis import given, settings
from hypothesis import strategies as st

import recallql
from recallql.grammar import bind, format_timestamp, parse
from recallql.index.timestamps import parse_timestamp, shown_as, to_epoch, to_microsecond
from recallql.ui.render import cell, date_of, json_data

PACKAGE = Path(recallql.__file__).resolve().parent
MACHINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
PLUS2 = timezone(timedelta(hours=2))


@pytest.mark.parametrize(("text", "expected"), [
    ("2025-01-31T08:00:00Z", datetime(2025, 1, 31, 8, tzinfo=UTC)),
    ("2025-01-31T10:00:00+02:00", datetime(2025, 1, 31, 10, tzinfo=PLUS2)),  # offset kept
    ("2025-01-31T08:00:00", datetime(2025, 1, 31, 8, tzinfo=UTC)),           # naive: UTC
    ("2025-01-31 08:00", datetime(2025, 1, 31, 8, tzinfo=UTC)),
    ("2025-01-31", datetime(2025, 1, 31, tzinfo=UTC)),                       # midnight
    ("  2025-01-31T08:00:00.25Z ", datetime(2025, 1, 31, 8, 0, 0, 250000, tzinfo=UTC)),
], ids=["zulu", "offset", "naive", "space", "date", "blanks-fraction"])
def test_parse(text, expected):
    moment = parse_timestamp(text)
    assert moment == expected and moment.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("text", ["", "yesterday", "2025-13-01", "2025-01-32", "31/01/2025"])
def test_parse_rejects_what_is_not_iso_8601(text):
    with pytest.raises(ValueError, match="as an ISO-8601 timestamp"):
        parse_timestamp(text)


@pytest.mark.parametrize(("value", "text"), [
    (datetime(2025, 1, 31, 8, tzinfo=UTC), "2025-01-31T08:00:00.000000Z"),
    (datetime(2025, 1, 31, 10, tzinfo=PLUS2), "2025-01-31T08:00:00.000000Z"),
    (datetime(2025, 1, 31, 8), "2025-01-31T08:00:00.000000Z"),        # naive: UTC
    (1738310400.5, "2025-01-31T08:00:00.500000Z"),                    # epoch seconds
    (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00.000000Z"),   # four-digit years
    (datetime.max, "9999-12-31T23:59:59.999999Z"),
], ids=["utc", "offset", "naive", "epoch", "year-1", "max"])
def test_format(value, text):
    assert format_timestamp(value) == text


def test_format_sorts_as_the_instant_and_round_trips():
    moments = [datetime(2025, 1, 31, 8, 0, 0, us, tzinfo=UTC) for us in (0, 1, 500000)]
    moments += [datetime(999, 1, 1, tzinfo=UTC), datetime(2025, 1, 31, 7, 59, 59, tzinfo=UTC)]
    texts = [format_timestamp(m) for m in moments]
    assert sorted(texts) == [format_timestamp(m) for m in sorted(moments)]
    assert [parse_timestamp(t) for t in texts] == moments


def test_no_other_module_parses_or_formats_timestamp_text():
    """One parser, one formatter: the datetime text methods appear only in the two helpers."""
    calls = re.compile(r"\.(fromisoformat|isoformat|strftime|strptime)\(")
    users = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if calls.search(p.read_text(encoding="utf-8")))
    assert users == ["grammar/timestamps.py", "index/timestamps.py"]


def test_human_forms_in_tables_cut_the_machine_form():
    """Tables show the time to the second, and the results table the date (docs: architecture)."""
    moment = datetime(2025, 1, 6, 9, 0, 0, 123456, tzinfo=UTC)
    assert cell(moment) == cell(format_timestamp(moment)) == "2025-01-06T09:00:00Z"
    assert date_of(moment) == date_of(moment.timestamp()) == "2025-01-06"
    assert date_of(None) == date_of(float("nan")) == ""


def test_machine_outputs_use_the_one_format():
    db = make_db([doc("a", "alpha", "", vec(1, 0, 0, 0), created_at=date(2024, 1, 1))])
    db.sessions.create("s1", "agent", started_at=NOW_TS - 86400)
    result = db.execute("SEARCH kb MATCHING 'alpha'")
    assert json_data(result)["rows"][0]["fields"]["created_at"] == "2024-01-01T00:00:00.000000Z"
    (record,) = db.execute("SHOW SESSIONS").records
    snapshot = db.execute("SHOW SESSION s1").records[0]
    explain = db.execute("EXPLAIN SEARCH kb MATCHING 'alpha' AS OF :t", t=date(2026, 1, 1))
    for text in (record["started_at"], snapshot["started_at"], snapshot["as_of"],
                 explain.result.stats["now"]):
        assert MACHINE.match(text), text
    assert explain.result.stats["now"] == "2026-01-01T00:00:00.000000Z"
    bound = bind(parse("SEARCH kb MATCHING 'x' AS OF :t"), t=datetime(2026, 1, 1, 2, tzinfo=PLUS2))
    assert bound.to_text().endswith("AS OF TIMESTAMP '2026-01-01T00:00:00.000000Z'")


def test_out_of_range_as_of_is_an_invalid_timestamp():
    db = make_db([doc("a", "alpha", "", vec(1, 0, 0, 0))])
    with pytest.raises(recallql.QuerySyntaxError, match="outside years 1..9999 in UTC"):
        db.execute("SEARCH kb MATCHING 'alpha' AS OF TIMESTAMP '0001-01-01T00:00:00+05:00'")


NS_HALF = np.datetime64("2025-01-01T00:00:00.500000999", "ns")  # sub-µs digits are cut
EPOCH_HALF = 1_735_689_600.5


@pytest.mark.parametrize("value", [NS_HALF, np.datetime64("2025-01-01T00:00:00.5"),
                                   pd.Timestamp("2025-01-01T00:00:00.5")],
                         ids=["datetime64-ns", "datetime64-ms", "pandas"])
def test_numpy_and_pandas_times_are_utc_instants_everywhere(value):
    """A numpy datetime64 (no time zone: UTC, as numpy counts it) and a pandas Timestamp (a
    naive datetime: UTC) are the same instant as the naive datetime in every place a time
    goes: AS OF and WHERE parameters, an item's created_at, a session time."""
    for statement in ("SEARCH docs MATCHING 'x' AS OF :t",
                      "SEARCH docs MATCHING 'x' WHERE created_at > :t"):
        bound = bind(parse(statement), t=value).to_text()
        assert "TIMESTAMP '2025-01-01T00:00:00.500000Z'" in bound, bound
    db = recallql.connect(embedder=recallql.api.HashEmbedder(), clock=lambda: NOW_TS)
    db.ingest("docs", [{"id": "a", "title": "x", "created_at": value}])
    assert db.execute("SEARCH docs MATCHING 'x'")[0].fields["created_at"] == EPOCH_HALF
    assert db.sessions.create("s", "agent", started_at=value).started_at == datetime(
        2025, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)


@pytest.mark.parametrize("value", [np.datetime64("NaT"), pd.NaT, np.datetime64("12000-01-01")],
                         ids=["numpy-NaT", "pandas-NaT", "year-12000"])
def test_nat_and_out_of_range_numpy_times_are_clear_errors(value):
    why = "NaT" if value is pd.NaT or np.isnat(value) else "out of range"
    with pytest.raises(recallql.ParameterError, match=why):
        bind(parse("SEARCH docs MATCHING 'x' AS OF :t"), t=value)
    db = recallql.connect(embedder=recallql.api.HashEmbedder(), clock=lambda: NOW_TS)
    with pytest.raises(recallql.IngestError, match=f"field 'created_at': .*{why}"):
        db.ingest("docs", [{"id": "a", "title": "x", "created_at": value}])
    with pytest.raises(recallql.SessionError, match=why):
        db.sessions.create("s", "agent", started_at=value)


# Microsecond resolution: a time is stored as it is shown, and compared at the microsecond.

@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.floats(min_value=-62135596799.0, max_value=253402300798.0),
                 st.floats(min_value=-5.0, max_value=5.0)))  # floats dense near 1970
def test_shown_as_is_exactly_the_floats_shown_as_one_microsecond(epoch):
    lo, hi = shown_as(epoch)
    shown = format_timestamp(epoch)
    assert lo <= epoch < hi
    assert format_timestamp(lo) == shown == format_timestamp(math.nextafter(hi, -math.inf))
    assert format_timestamp(math.nextafter(lo, -math.inf)) != shown != format_timestamp(hi)


@settings(max_examples=2000, deadline=None)
@given(st.floats(min_value=-62135596799.0, max_value=253402300798.0))
def test_to_microsecond_is_the_float_of_the_shown_microsecond(epoch):
    stored = to_microsecond(epoch)
    assert format_timestamp(stored) == format_timestamp(epoch)
    assert stored == to_epoch(format_timestamp(epoch))  # what a datetime of that µs gives


def test_shown_as_near_the_epoch_is_immediate():
    """Near 1970 a microsecond holds ~10^9 floats: the ends are computed, not walked to."""
    assert shown_as(1.0000003) == (0.9999995, 1.0000005)
    # the fraction rounds half to even: ±0.5 µs are shown as 0
    assert shown_as(0.0) == (-5e-7, math.nextafter(5e-7, math.inf))


def test_item_epoch_seconds_are_stored_to_the_microsecond():
    db = make_db([doc("a", "alpha", "alpha", vec(1, 0, 0, 0), created_at=1700000000.1234567)])
    (row,) = db.execute("SEARCH kb MATCHING 'alpha' USING LEXICAL").rows
    assert row.fields["created_at"] == 1700000000.123457 == datetime(
        2023, 11, 14, 22, 13, 20, 123457, tzinfo=UTC).timestamp()
    found = db.execute("SEARCH kb MATCHING 'alpha' USING LEXICAL WHERE created_at = "
                       "TIMESTAMP '2023-11-14T22:13:20.123457Z'").rows
    assert [r.id for r in found] == ["a"]


def test_a_time_copied_from_output_finds_its_row_with_a_real_clock(tmp_path):
    """Messages stamped by `time.time` (finer than a microsecond) are stored as shown, so each
    row's `created_at` in WHERE finds exactly the rows shown with that time."""
    db = recallql.connect(tmp_path / "db", embedder=None)
    db.sessions.create("s1", "agent")
    for i in range(20):
        db.messages.append("s1", "user", f"alpha note {i}")
    rows = db.execute("SEARCH messages MATCHING 'alpha' USING LEXICAL LIMIT 50").to_dicts()
    assert len(rows) == 20
    for row in rows:
        at = row["created_at"]
        same = {r["id"] for r in rows if r["created_at"] == at}
        before = {r["id"] for r in rows if r["created_at"] < at}
        for where, expected in [("created_at = :t", same), ("created_at IN (:t)", same),
                                ("created_at BETWEEN :t AND :t", same),
                                ("created_at < :t", before),
                                ("created_at <= :t", before | same),
                                ("created_at > :t", {r["id"] for r in rows} - before - same),
                                ("created_at != :t", {r["id"] for r in rows} - same)]:
            found = db.execute(f"SEARCH messages MATCHING 'alpha' USING LEXICAL WHERE {where} "
                               "LIMIT 50", t=format_timestamp(at)).rows
            assert {r.id for r in found} == expected, where
    db.close()


def test_times_stored_finer_than_shown_compare_at_the_shown_microsecond():
    """Rows written before times were stored to the microsecond (here: plain rows, as SHOW
    SESSIONS filters the session table) still compare as they are shown."""
    from recallql.index.filters import Between, Cmp, In, rows_mask
    from recallql.index.schema import FieldType

    rows = [{"t": 1700000000.1234567}, {"t": 1700000000.1234574}, {"t": 1700000000.1234556}]
    fields = {"t": FieldType.TIMESTAMP}
    shown = "2023-11-14T22:13:20.123457Z"
    assert [format_timestamp(r["t"]) for r in rows] == [shown, shown,
                                                         "2023-11-14T22:13:20.123456Z"]
    assert rows_mask(Cmp("t", "=", shown), rows, fields).tolist() == [True, True, False]
    assert rows_mask(Cmp("t", "<", shown), rows, fields).tolist() == [False, False, True]
    assert rows_mask(Cmp("t", ">=", shown), rows, fields).tolist() == [True, True, False]
    assert rows_mask(Cmp("t", ">", shown), rows, fields).tolist() == [False, False, False]
    assert rows_mask(In("t", (shown,)), rows, fields).tolist() == [True, True, False]
    more = [*rows, {"t": None}, {"t": 1.0}]
    assert rows_mask(In("t", ("2023-11-14T22:13:20.123456Z", 1.0000004, shown)), more,
                     fields).tolist() == [True, True, True, False, True]
    assert rows_mask(In("t", (1.0000006,)), more, fields).tolist() == [False] * 5
    assert rows_mask(Between("t", shown, shown), rows, fields).tolist() == [True, True, False]
    assert rows_mask(Cmp("t", "=", 1700000000.1234571), rows, fields).tolist() == [True, True,
                                                                                  False]
