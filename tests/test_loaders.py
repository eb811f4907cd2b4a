"""Loaders on real data (CACM, Cranfield, Debian changelogs) and on small hand-made files."""

from __future__ import annotations

import datetime as dt
import gzip
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import recallql
from recallql.datasets import corpora
from recallql.importers import files as loaders
from recallql.index.embedders import HashEmbedder
from recallql.index.errors import IngestError


def test_cacm_documents(index_shared_data):
    docs = list(corpora.load_cacm(index_shared_data / "ir" / "cacm"))
    assert len(docs) == 3204 and len({d["id"] for d in docs}) == 3204
    dated = [d["created_at"] for d in docs if "created_at" in d]
    # Every .B line has a month and a year; 24 of them are written "July,1962" or "JUly, 1972",
    # which a parser requiring "Month, YYYY" misses (that is where "3,180" comes from).
    assert len(dated) == 3204
    assert min(dated) == dt.datetime(1958, 1, 1, tzinfo=dt.UTC)
    assert max(dated) == dt.datetime(1979, 12, 1, tzinfo=dt.UTC)
    first = docs[0]
    assert first["id"] == "cacm:1" and first["created_at"] == dt.datetime(1958, 12, 1,
                                                                         tzinfo=dt.UTC)
    assert first["title"] == "Preliminary Report-International Algebraic Language"
    assert first["authors"] == ["Perlis, A. J.", "Samelson,K."]
    assert sum(bool(d["body"]) for d in docs) == 1587  # .W abstracts; the rest are title-only
    assert "cacm:2856" in {d["id"] for d in docs}  # its ".I 28\n56" is split over two lines


@pytest.mark.parametrize(("line", "month"), [("CACM December, 1958", (1958, 12)),
                                             ("CACM July,1962", (1962, 7)),
                                             ("CACM JUly, 1972", (1972, 7)),
                                             (" CACM February, 1974 ", (1974, 2)),
                                             ("CACM June 1964", (1964, 6))])
def test_cacm_date_variants(line, month):
    assert corpora.cacm_date(line) == dt.datetime(*month, 1, tzinfo=dt.UTC)


def test_cacm_date_missing():
    assert corpora.cacm_date("no date here") is None


def test_cacm_queries_and_qrels(index_shared_data):
    root = index_shared_data / "ir" / "cacm"
    queries, qrels = corpora.load_cacm_queries(root), corpora.load_cacm_qrels(root)
    assert len(queries) == 64 and queries["1"].startswith("What articles exist which deal")
    assert len(qrels) == 52 and set(qrels) <= set(queries)
    assert sum(len(v) for v in qrels.values()) == 796
    assert qrels["1"]["cacm:1410"] == 1


def test_cranfield(index_shared_data):
    root = index_shared_data / "ir" / "cranfield"
    docs = list(corpora.load_cranfield(root))
    assert len(docs) == 1400 and not any("created_at" in d for d in docs)
    assert docs[0]["title"].startswith("experimental investigation of the aerodynamics")
    queries, qrels = corpora.load_cranfield_queries(root), corpora.load_cranfield_qrels(root)
    assert len(queries) == 225 and len(qrels) == 225
    assert list(queries)[-1] == "225"  # positional, not cran.qry's 1..365 numbering
    assert queries["3"].startswith("what problems of heat conduction in composite slabs")
    assert sum(len(v) for v in qrels.values()) == 1612


def test_cacm_ingests_into_docs(index_shared_data, tmp_path):
    items = loaders.load_path(index_shared_data / "ir" / "cacm")
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(16)) as db:
        report = db.ingest("docs", (item for item, _ in loaders.project(items, {"authors"})))
        assert report.added == 3204
        snap = db.snapshot("docs")
        assert not np.isnan(snap.created_at).any()
        rows, _ = snap.lexical_topn(snap.analyze("time sharing system"), 5)
        assert len(rows) == 5


DEBIAN = """\
demo (1.2-1) unstable; urgency=medium

  * New upstream release.
  * Fix the frobnicator (Closes: #123).

 -- Jane Doe <jane@example.org>  Mon, 02 Jan 2023 13:06:21 +0100

demo (1.1-1) unstable; urgency=low

  * Initial release.

 -- John Roe <john@example.org>  Sat, 31 Dec 2022 16:40:30 +0000

demo (1.1-1) unstable; urgency=low

  * Duplicate entry, dropped.

 -- John Roe <john@example.org>  not a date
"""


def test_debian_changelog(tmp_path):
    path = tmp_path / "demo" / "changelog.Debian.gz"
    path.parent.mkdir()
    with gzip.open(path, "wt") as handle:
        handle.write(DEBIAN)
    items = list(loaders.load_path(tmp_path, "debian"))
    assert [i["id"] for i in items] == ["debian:demo:1.2-1", "debian:demo:1.1-1"]
    first = items[0]
    assert first["title"] == "demo 1.2-1" and first["doc_id"] == "debian:demo"
    assert first["body"] == "* New upstream release.\n  * Fix the frobnicator (Closes: #123)."
    assert first["created_at"] == dt.datetime(2023, 1, 2, 12, 6, 21, tzinfo=dt.UTC)
    assert first["authors"] == ["Jane Doe"] and [i["position"] for i in items] == [0, 1]


def test_one_run_over_several_paths_yields_a_shared_entry_once(tmp_path):
    """Binary packages of one source package ship the same changelog; `recallql ingest
    /usr/share/doc/*/changelog.Debian.gz` names each file, and each entry goes in once."""
    files = []
    for package in ("libdemo1", "demo-utils"):
        path = tmp_path / package / "changelog.Debian.gz"
        path.parent.mkdir()
        with gzip.open(path, "wt") as handle:
            handle.write(DEBIAN)
        files.append(path)
    items = list(loaders.load_paths(files))
    assert [i["id"] for i in items] == ["debian:demo:1.2-1", "debian:demo:1.1-1"]


def test_debian_system_changelogs():
    files = sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz"))
    if not files:
        pytest.skip("no Debian changelogs on this machine")
    items = list(corpora.load_debian(files[:40]))
    assert items and len({i["id"] for i in items}) == len(items)
    assert sum("created_at" in i for i in items) >= 0.95 * len(items)


def test_jsonl(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1, "title": "x"}\n\n{"id": "2"}\n')
    assert list(loaders.load_path(path)) == [{"id": 1, "title": "x"}, {"id": "2"}]
    path.write_text('{"id": 1}\n[1, 2]\n')
    with pytest.raises(IngestError, match="a.jsonl:2: expected a JSON object"):
        list(loaders.load_path(path))
    path.write_text('{"id": 1\n')
    with pytest.raises(IngestError, match="a.jsonl:1:9: invalid JSON: Expecting ',' delimiter"):
        list(loaders.load_path(path))  # was 1:1: the column on the line after the line break
    path.write_text('{"id": "ok"}\r\n{"id": "x",\r\n')
    with pytest.raises(IngestError, match="a.jsonl:2:12: invalid JSON: Expecting property name"):
        list(loaders.load_path(path))


@pytest.mark.parametrize(("line", "message"), [
    (b'{"id": "a", "title": "x\xff"}', r"a.jsonl:2: not valid UTF-8 \(byte 0xff at byte 24"),
    (b'{"id": 1' + b"1" * 5000 + b"}", "a.jsonl:2: invalid JSON: an integer of more than"),
    (b'{"id": "a", "t": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "a.jsonl:2: invalid JSON: nested too deeply"),
    (b'{"id": "a", "score": NaN}', "a.jsonl:2: invalid JSON: NaN is not a JSON number"),
    (b'{"id": "a", "score": -Infinity}', "a.jsonl:2: invalid JSON: -Infinity"),
    (b'{"id": "a", "title": "x\\ud800"}', r"a.jsonl:2: key 'title': .*lone surrogate"),
    (b'{"id": "a", "\\udc00": 1}', r"a.jsonl:2: key '\\udc00'"),
    (b'{"id": "a", "tags": [{"k": ["\\ud800"]}]}', r"a.jsonl:2: key 'tags'"),
], ids=["bad-utf8", "int-5000-digits", "deep", "nan", "infinity", "surrogate", "surrogate-key",
        "surrogate-nested"])
def test_jsonl_hostile_lines_name_the_line(tmp_path, line, message):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"id": "ok"}\n' + line + b"\n")
    items = loaders.load_path(path)
    assert next(items) == {"id": "ok"}
    with pytest.raises(IngestError, match=message):
        next(items)


def test_jsonl_accepts_a_bom_and_valid_surrogate_pairs(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "title": "\\ud83d\\ude00 \xc3\xa9"}\n')
    assert list(loaders.load_path(path)) == [{"id": "a", "title": "\U0001F600 \u00e9"}]


def test_text_chunks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    doc = tmp_path / "notes" / "ops.md"
    doc.write_text("# Operations\n\nFirst paragraph.\n\n" + ("long " * 300) + "\n\n\nLast one.\n")
    os.utime(doc, (1700000000, 1700000000))
    (tmp_path / "notes" / "skip.bin").write_bytes(b"\0\1")
    items = list(loaders.load_path(tmp_path))
    # the 1,500-character paragraph is split at a space; its tail merges with the last one
    assert [i["id"] for i in items] == ["notes/ops.md#0", "notes/ops.md#1", "notes/ops.md#2"]
    assert items[0]["body"] == "First paragraph."
    assert len(items[1]["body"]) <= 1200 and items[2]["body"].endswith("long\n\nLast one.")
    assert {i["title"] for i in items} == {"Operations"}
    assert {i["created_at"] for i in items} == {dt.datetime.fromtimestamp(1700000000, dt.UTC)}
    assert [i["position"] for i in items] == [0, 1, 2]
    assert Counter(i["doc_id"] for i in items) == {"notes/ops.md": 3}


@pytest.mark.parametrize(("named", "expected"), [
    (["notes/ops.md"], "ops.md#0"), (["./notes/../notes/ops.md"], "ops.md#0"),
    (["notes"], "ops.md#0"), (["notes/"], "ops.md#0"), (["."], "notes/ops.md#0"),
    (["{abs}"], "ops.md#0"), (["notes", "notes/ops.md"], "ops.md#0"),
], ids=["file", "unnormalised", "dir", "dir-slash", "cwd", "absolute", "dir-and-file"])
def test_text_doc_id_is_relative_to_the_path_given(tmp_path, monkeypatch, named, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "ops.md").write_text("# Ops\n\nOne paragraph.\n")
    paths = [p.format(abs=tmp_path / "notes" / "ops.md") for p in named]
    assert [i["id"] for i in loaders.load_paths(paths)] == [expected]


def test_text_doc_id_does_not_depend_on_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "kb" / "sub").mkdir(parents=True)
    (tmp_path / "kb" / "sub" / "a.md").write_text("# A\n\nText.\n")
    ids = []
    for cwd in (tmp_path, tmp_path / "kb", tmp_path / "kb" / "sub"):
        monkeypatch.chdir(cwd)
        ids.append([i["doc_id"] for i in loaders.load_paths([tmp_path / "kb"])])
    assert ids == [["sub/a.md"]] * 3


def test_split_long_cuts_after_sentences_then_spaces():
    from recallql.importers.files import split_long

    text = "One two three. Four five six. " * 10
    pieces = split_long(text.strip(), 100)
    assert all(len(p) <= 100 for p in pieces) and all(p.endswith(".") for p in pieces)
    assert " ".join(pieces) == text.strip()
    assert split_long("x" * 250, 100) == ["x" * 100, "x" * 100, "x" * 50]


def test_missing_path_and_unknown_format(tmp_path):
    with pytest.raises(IngestError, match="no such file"):
        list(loaders.load_path(tmp_path / "nope"))
    with pytest.raises(IngestError, match="unknown format"):
        list(loaders.load_path(tmp_path, "xml"))


def test_opening_markdown_heading_is_the_title_only(tmp_path):
    from recallql.importers.files import load_text

    text = "# Backup policy\n\nDaily backups.\n\n## Monthly\n\nKept a year.\n"
    (tmp_path / "b.md").write_text(text)
    (item,) = list(load_text(tmp_path / "b.md", max_chars=10_000))
    assert item["title"] == "Backup policy"
    assert item["body"] == "Daily backups.\n\n## Monthly\n\nKept a year."
