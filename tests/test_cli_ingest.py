"""``recallql ingest`` end to end (typer's CliRunner, real database on disk)."""

from __future__ import annotations

import gzip
import json
import os
import re

import pytest
from typer.testing import CliRunner

import recallql
from recallql.cli import app
from recallql.index.embedders import HashEmbedder

runner = CliRunner()


def _ingest(*args: str):
    return runner.invoke(app, ["ingest", *args])


def test_ingest_jsonl_and_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "items.jsonl").write_text(
        json.dumps({"id": "j1", "title": "JSON item", "tags": ["a"]}) + "\n")
    (data / "note.md").write_text("# Note\n\nHello world.\n")
    db = tmp_path / "db"
    result = _ingest(str(data), "--db", str(db), "--embedder", "hash")
    assert result.exit_code == 0, result.output
    summary = "ingested 2 items into docs (2 new, 0 replaced, 0 unchanged, 2 embedded) in 1 batch,"
    assert summary in result.stdout
    with recallql.connect(db, embedder=HashEmbedder(), readonly=True) as conn:
        assert sorted(conn.snapshot("docs").ids) == ["j1", "note.md#0"]


def test_a_reingest_of_unchanged_items_says_nothing_was_written(tmp_path):
    """Every item unchanged writes no batch: the summary says so (it said "ingested 2 items
    ... in 1 batch"), and a run's batch count leaves out the batches that wrote nothing."""
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "title": "alpha"}\n{"id": "b", "title": "beta"}\n')
    args = ("--db", str(tmp_path / "db"), "--embedder", "hash", "--batch-size", "1")
    assert _ingest(str(items), *args).exit_code == 0
    again = _ingest(str(items), *args)
    assert again.exit_code == 0, again.output
    assert re.fullmatch(r"nothing to write into docs: 2 items unchanged \(identical to the "
                        r"stored ones\), \d+\.\d s\n", again.stdout), again.stdout
    items.write_text('{"id": "a", "title": "alpha"}\n{"id": "b", "title": "beta, changed"}\n')
    changed = _ingest(str(items), *args)
    assert changed.stdout.startswith("ingested 2 items into docs (0 new, 1 replaced, 1 "
                                     "unchanged, 1 embedded) in 1 batch, "), changed.stdout


@pytest.mark.parametrize("args", [("--format", "JSONL"), ("--embedder", "HASH")],
                         ids=["format", "embedder"])
def test_ingest_choices_ignore_case(tmp_path, args):
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "title": "alpha"}\n')
    options = {"--format": "jsonl", "--embedder": "hash", **dict([args])}
    done = _ingest(str(items), "--db", str(tmp_path / "db"),
                   *(x for kv in options.items() for x in kv))
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("ingested 1 item into docs (1 new, 0 replaced, 0 unchanged, "
                                  "1 embedded) in 1 batch, ")


def test_ingest_cranfield_in_batches(tmp_path, index_shared_data):
    db = tmp_path / "db"
    result = _ingest(str(index_shared_data / "ir" / "cranfield"), "--db", str(db),
                     "--embedder", "hash", "--batch-size", "500")
    assert result.exit_code == 0, result.output
    assert "ingested 1400 items into docs" in result.stdout and "in 3 batches" in result.stdout
    assert "not stored" not in result.stderr  # the loaders' extra keys go silently
    with recallql.connect(db, embedder=HashEmbedder(), readonly=True) as conn:
        assert conn.snapshot("docs").size == 1400


@pytest.mark.parametrize(("name", "text", "place"), [
    ("bad.jsonl", '{"id": "a"}\n\n{"id": "b"}\n{"id": "c", "year": 1}\n',
     "bad.jsonl:4: item 'c', field 'year': unknown field"),
    ("bad.jsonl", '{"id": "a"}\n{"id": "b"}\n{"id": "c"}\n{not json\n',
     "bad.jsonl:4:2: invalid JSON: Expecting property name enclosed in double quotes; nothing "
     "was written"),
    ("bad.json", '[{"id": "a"},\n {"id": }]', "bad.json:2:9: invalid JSON: Expecting value;"),
    ("bad.jsonl", '{"id": "a"}\n{"id": "b"}\n{"id": "c"}\n{"id": "b"}\n',
     "bad.jsonl:4: item 'b', field 'id': duplicate id (first at "),
    ("bad.json", '[{"id": "a"}, {"id": "b"}, {"id": "c", "title": 5}]',
     "bad.json: element #2: item 'c', field 'title': text must be a string, got int"),
    ("bad.jsonl", '{"id": "a"}\n{"id": "b"}\n{"id": "c", "vector": [0.0, 1.0]}\n',
     "bad.jsonl:3: item 'c', field 'vector': wrong vector dimension"),
], ids=["unknown-field", "bad-json", "bad-json-file", "duplicate-id", "json-element",
        "vector"])
def test_a_bad_item_anywhere_writes_nothing_and_names_its_place(tmp_path, name, text, place):
    """A bad item after the first batch: exit 1 naming FILE:LINE (or the JSON element), and
    nothing of the run is written — neither a new database nor a batch into an existing one."""
    (tmp_path / "good.jsonl").write_text('{"id": "g", "title": "kept"}\n')
    path = tmp_path / name
    path.write_text(text)
    fresh, existing = tmp_path / "fresh", tmp_path / "existing"
    result = _ingest(str(path), "--db", str(fresh), "--embedder", "hash", "--batch-size", "1")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"error: {path.parent / place}" in result.stderr.replace("\n", " "), result.stderr
    assert "nothing was written" in result.stderr and not fresh.exists()
    assert _ingest(str(tmp_path / "good.jsonl"), "--db", str(existing), "--embedder", "hash"
                   ).exit_code == 0
    result = _ingest(str(path), "--db", str(existing), "--embedder", "hash", "--batch-size", "1")
    assert result.exit_code == 1 and "nothing was written" in result.stderr
    with recallql.connect(existing, embedder=HashEmbedder(), readonly=True) as conn:
        assert list(conn.snapshot("docs").ids) == ["g"]


def test_doc_ids_are_relative_to_the_path_given_from_any_directory(tmp_path, monkeypatch):
    for name in ("p1", "p2", "kb/sub", "elsewhere"):
        (tmp_path / name).mkdir(parents=True)
    for name in ("p1", "p2"):
        (tmp_path / name / "README.md").write_text(f"# {name}\n\nAbout {name}.\n")
    (tmp_path / "kb" / "sub" / "kafka.md").write_text("# Kafka\n\nPartitions.\n")
    db = str(tmp_path / "db")
    args = ("--db", db, "--embedder", "hash")
    monkeypatch.chdir(tmp_path)
    assert _ingest("kb/", *args).exit_code == 0
    monkeypatch.chdir(tmp_path / "elsewhere")  # another current directory: the same ids
    again = _ingest(str(tmp_path / "kb"), *args)
    assert again.stdout.startswith("nothing to write into docs: 1 item unchanged"), again.output
    assert _ingest(str(tmp_path / "p1" / "README.md"), *args).exit_code == 0
    with recallql.connect(db, embedder=HashEmbedder(), readonly=True) as conn:
        snap = conn.snapshot("docs")
        assert {snap.ids[i] for i in snap.live.nonzero()[0]} == {"sub/kafka.md#0",
                                                                  "README.md#0"}


def test_two_files_that_would_share_a_doc_id_are_refused_before_anything_is_written(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("p1", "p2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# {name}\n\nAbout {name}.\n")
    result = _ingest("p1", "p2/README.md", "--db", "db", "--embedder", "hash")
    assert result.exit_code == 1
    assert "p1/README.md and p2/README.md would both be document 'README.md'" in result.stderr
    assert not (tmp_path / "db").exists()
    assert _ingest("p1/README.md", "p1/", "--db", "db", "--embedder", "hash").exit_code == 0


def test_binary_undecodable_and_other_files_are_skipped_with_a_named_warning(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "good.md").write_text("# Good\n\nBackups are kept 30 days.\n")
    (notes / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (notes / "latin1.md").write_bytes("# Caf\xe9\n\nna\xefve text\n".encode("latin-1"))
    (notes / "paper.pdf").write_bytes(b"%PDF-1.4")
    (notes / "photo.png").write_bytes(b"\x89PNG")
    result = _ingest(str(notes), "--db", str(tmp_path / "db"), "--embedder", "hash")
    assert result.exit_code == 0, result.output
    assert "ingested 1 item into docs" in result.stdout
    err = result.stderr
    assert f"warning: skipped {notes / 'image.txt'}: a binary file" in err
    assert f"warning: skipped {notes / 'latin1.md'}: not valid UTF-8 (byte 0xe9 at offset 5)" \
        in err
    assert f"skipped 2 files of other types in {notes} (.pdf, .png)" in err
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(), readonly=True) as conn:
        bodies = [r["body"] for r in conn.snapshot("docs").fetch([0])]
        assert bodies == ["Backups are kept 30 days."] and "\ufffd" not in bodies[0]


def test_json_files_are_parsed(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps([{"id": "a", "title": "Alpha"},
                                                    {"id": "b", "title": "Beta"}]))
    (tmp_path / "one.json").write_text(json.dumps({"id": "c", "title": "Gamma"}))
    (tmp_path / "wrapped.json").write_text(json.dumps({"items": [{"id": "d", "body": "x"}]}))
    result = _ingest(str(tmp_path), "--db", str(tmp_path / "db"), "--embedder", "hash")
    assert result.exit_code == 0, result.output
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(), readonly=True) as conn:
        assert sorted(conn.snapshot("docs").ids) == ["a", "b", "c", "d"]
    (tmp_path / "bad.json").write_text(json.dumps([{"id": "e"}, 3]))
    bad = _ingest(str(tmp_path / "bad.json"), "--db", str(tmp_path / "db"), "--embedder", "hash")
    assert bad.exit_code == 1 and "bad.json: element #1 is not a JSON object" in bad.stderr


def test_an_oversize_paragraph_is_split(tmp_path):
    (tmp_path / "long.md").write_text("# Long\n\n" + "A sentence of words here. " * 200)
    result = _ingest(str(tmp_path / "long.md"), "--db", str(tmp_path / "db"), "--embedder",
                     "hash")
    assert result.exit_code == 0, result.output
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(), readonly=True) as conn:
        snap = conn.snapshot("docs")
        bodies = [r["body"] for r in snap.fetch(list(range(snap.size)))]
    assert len(bodies) == 5 and all(len(b) <= 1200 for b in bodies)
    assert all(b.endswith("here.") for b in bodies)
    assert " ".join(bodies) == ("A sentence of words here. " * 200).strip()


def test_ctrl_c_keeps_the_committed_batches_and_exits_130(tmp_path, monkeypatch):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"i{n}"}) + "\n" for n in range(5)))
    real, calls = recallql.Database.ingest, []

    def interrupted_second_batch(self, collection, items, **kwargs):
        calls.append(len(items))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, collection, items, **kwargs)

    monkeypatch.setattr(recallql.Database, "ingest", interrupted_second_batch)
    result = _ingest(str(path), "--db", str(tmp_path / "db"), "--embedder", "hash",
                     "--batch-size", "2")
    assert result.exit_code == 130
    assert ("interrupted: 2 items committed in 1 batch; the current batch was discarded"
            in result.stderr)
    monkeypatch.setattr(recallql.Database, "ingest", real)
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(), readonly=True) as conn:
        assert sorted(conn.snapshot("docs").ids) == ["i0", "i1"]


def test_nothing_to_ingest_says_where_it_looked(tmp_path):
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "a.pdf").write_bytes(b"%PDF-1.4")
    result = _ingest(str(tmp_path / "papers"), "--db", str(tmp_path / "db"), "--embedder",
                     "hash")
    assert result.exit_code == 1 and result.stdout == ""
    assert "error: nothing to ingest into docs in" in result.stderr
    assert ".md" in result.stderr and ".jsonl" in result.stderr and "--format" in result.stderr
    assert f"skipped 1 file of other types in {tmp_path / 'papers'} (.pdf)" in result.stderr
    assert not (tmp_path / "db").exists()  # no empty database left behind


def test_missing_path_is_an_error_before_anything_is_created(tmp_path):
    result = _ingest(str(tmp_path / "nope"), "--db", str(tmp_path / "db"), "--embedder", "hash")
    assert result.exit_code == 1 and "nope: no such file or directory" in result.stderr
    assert not (tmp_path / "db").exists()


def test_loader_extras_go_silently_but_jsonl_keys_are_the_users(tmp_path):
    from test_loaders import DEBIAN

    path = tmp_path / "demo" / "changelog.Debian.gz"
    path.parent.mkdir()
    with gzip.open(path, "wt") as handle:
        handle.write(DEBIAN)
    result = _ingest(str(path), "--db", str(tmp_path / "db"), "--embedder", "hash")
    assert result.exit_code == 0 and result.stderr == ""
    (tmp_path / "a.jsonl").write_text('{"id": "a", "authors": ["x"]}\n')
    result = _ingest(str(tmp_path / "a.jsonl"), "--db", str(tmp_path / "db"), "--embedder",
                     "hash")
    assert result.exit_code == 1 and "field 'authors': unknown field" in result.stderr


def test_items_are_counted_first_and_progress_moves_per_embedded_chunk(tmp_path):
    from recallql.cli.ingest import check, find_sources, read
    from recallql.ui.progress import ProgressEmbedder

    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"id": n}) + "\n" for n in range(7)))
    (tmp_path / "b.md").write_text("one\n\n" + "two " * 400 + "\n\nthree\n")
    sources = find_sources([tmp_path], "auto")
    with recallql.connect(embedder=HashEmbedder()) as db:
        docs = next(c for c in db.collections() if c.name == "docs")
        total, seen = check(docs, sources, set(), 4)
        assert (total, seen.skipped, seen.empty) == (7 + 3, [], [])
    assert [where for where, _ in read(sources, set())] == [
        *(f"{tmp_path / 'a.jsonl'}:{n}" for n in range(1, 8)),
        *(f"{tmp_path / 'b.md'} (chunk {n})" for n in range(3))]
    reports: list[int] = []
    embed = ProgressEmbedder(HashEmbedder(), chunk=128)
    embed.on_progress = reports.append
    embed(["x"] * 300)
    assert reports == [128, 128, 44]


def test_changelogs_named_one_by_one_share_their_entries(tmp_path):
    from test_loaders import DEBIAN

    files = []
    for package in ("libdemo1", "demo-utils"):
        path = tmp_path / package / "changelog.Debian.gz"
        path.parent.mkdir()
        with gzip.open(path, "wt") as handle:
            handle.write(DEBIAN)
        files.append(str(path))
    result = _ingest(*files, "--db", str(tmp_path / "deb.db"), "--embedder", "hash")
    assert result.exit_code == 0, result.output
    assert "ingested 2 items into docs" in result.stdout


def test_a_failed_first_ingest_leaves_no_database_behind(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "year": 1}\n')
    db = tmp_path / "new.db"
    result = _ingest(str(tmp_path / "bad.jsonl"), "--db", str(db), "--embedder", "hash")
    assert result.exit_code == 1 and "unknown field" in result.stderr
    assert not db.exists()
    (tmp_path / "good.jsonl").write_text('{"id": "g"}\n')
    assert _ingest(str(tmp_path / "good.jsonl"), "--db", str(db), "--embedder", "hash"
                   ).exit_code == 0
    result = _ingest(str(tmp_path / "bad.jsonl"), "--db", str(db), "--embedder", "hash")
    assert result.exit_code == 1 and db.is_dir()  # a database it did not create stays


@pytest.mark.parametrize(("line", "message"), [
    (b'{"id": "a", "title": "x\xff"}', "items.jsonl:1: not valid UTF-8"),
    (b'{"id": 1' + b"1" * 5000 + b"}", "items.jsonl:1: invalid JSON"),
    (b'{"id": "a", "t": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"id": "a", "title": "x\\ud800"}', "items.jsonl:1: key 'title'"),
    (b'{"id": "a", "created_at": 1e400}', "item 'a', field 'created_at': epoch seconds inf"),
    (b'{"id": "a", "vector": [1e400' + b", 0" * 63 + b"]}",
     "item 'a', field 'vector': vector has a non-finite component"),
], ids=["bad-utf8", "int-5000-digits", "deep", "surrogate", "float-overflow", "vector-inf"])
def test_hostile_jsonl_is_a_data_error(tmp_path, line, message):
    """SPEC section 8: exit code 1 and an `error:` line naming where, never a traceback."""
    path = tmp_path / "items.jsonl"
    path.write_bytes(line + b"\n")
    result = _ingest(str(path), "--db", str(tmp_path / "db"), "--embedder", "hash")
    assert result.exit_code == 1, repr(result.exception)
    assert "error:" in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--embedder", "hash", "--format", "xml"], 2, "--format"),
        (["--embedder", "bert"], 2, "--embedder"),
        (["--embedder", "hash", "--batch-size", "0"], 2, "--batch-size"),
        (["--embedder", "hash", "--collection", "nope"], 1, "no collection 'nope'"),
    ],
)
def test_usage_and_unknown_collection(tmp_path, args, code, message):
    (tmp_path / "a.jsonl").write_text('{"id": "a"}\n')
    result = _ingest(str(tmp_path / "a.jsonl"), "--db", str(tmp_path / "db"), *args)
    assert result.exit_code == code
    assert message in result.output


def test_locked_database_is_a_clean_error(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"id": "a"}\n')
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder()) as db, db.store.writing():
        result = runner.invoke(app, ["--wait", "0.1", "ingest", str(tmp_path / "a.jsonl"),
                                     "--db", str(tmp_path / "db"), "--embedder", "hash"])
    assert result.exit_code == 1 and "locked by another writer" in result.stderr
    assert f"this process ({os.getpid()}" in result.stderr and "waited 0.1 s" in result.stderr
    assert "wait for the other writer" in result.stderr and "`recallql query`" in result.stderr
    assert "readonly=True" not in result.stderr


def test_no_arguments_shows_help():
    result = runner.invoke(app, [])
    assert result.exit_code in (0, 2) and "ingest" in result.output


def test_a_shrunk_file_leaves_no_stale_chunks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    big = tmp_path / "kb" / "big.md"
    big.write_text("# Big\n\n" + "\n\n".join(f"vacuum paragraph {i}. " * 60 for i in range(8)))
    args = ("--db", "db", "--embedder", "hash")
    first = _ingest("kb/", *args)
    assert first.exit_code == 0, first.output
    big.write_text("# Big\n\nOne short paragraph about vacuum.\n")
    again = _ingest("kb/", *args, "--batch-size", "1")
    assert again.exit_code == 0, again.output
    assert "stale chunks removed" in again.stdout
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(), readonly=True) as conn:
        rows = conn.execute("SEARCH docs MATCHING 'vacuum' LIMIT 50").rows
        assert [r.id for r in rows] == ["big.md#0"]
        assert rows[0].fields["body"] == "One short paragraph about vacuum."


@pytest.mark.parametrize("emptied", ["", "  \n\n", "# Only a heading\n"],
                         ids=["empty", "blank", "heading-alone"])
def test_a_file_emptied_since_the_last_ingest_loses_its_chunks(tmp_path, monkeypatch, emptied):
    """A file that shrank lost its stale chunks, but one that shrank to no text kept them all:
    it yielded no item, so its document was never in a batch to replace."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb" / "sub").mkdir(parents=True)
    (tmp_path / "kb" / "sub" / "x.md").write_text("# Same\n\nnested words\n\nmore words\n")
    (tmp_path / "kb" / "y.md").write_text("kept words\n")
    args = ("--db", "db", "--embedder", "hash")
    assert _ingest("kb/", *args).exit_code == 0
    (tmp_path / "kb" / "sub" / "x.md").write_text(emptied)
    again = _ingest("kb/", *args)
    assert again.exit_code == 0, again.output
    assert "warning: skipped kb/sub/x.md: it holds no text" in again.stderr
    assert "1 unchanged, 1 stale chunk removed" in again.stdout
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(), readonly=True) as conn:
        assert conn.execute("RETRIEVE 10 FROM docs").ids() == ["y.md#0"]
    kept = _ingest("kb/", *args, "--keep-old-chunks")  # nothing to remove, nothing new
    assert kept.exit_code == 0
    assert kept.stdout.startswith("nothing to write into docs: 1 item unchanged (identical to "
                                  "the stored ones), "), kept.stdout


def test_batches_never_split_a_document():
    from recallql.cli.ingest import _batches

    items = [("x", {"id": f"{d}#{p}", "doc_id": d}) for d in "abc" for p in range(3)]
    batches = list(_batches(items, 2))
    assert [[i["id"] for _, i in b] for b in batches] == [
        ["a#0", "a#1", "a#2"], ["b#0", "b#1", "b#2"], ["c#0", "c#1", "c#2"]]


def test_delete_removes_documents_and_counts_missing_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("# A\n\nalpha text\n")
    (tmp_path / "b.md").write_text("# B\n\nbeta text\n")
    assert _ingest("a.md", "b.md", "--db", "db", "--embedder", "hash").exit_code == 0
    result = CliRunner().invoke(app, ["delete", "--doc-id", "a.md", "--id", "nope", "--db", "db"])
    assert result.exit_code == 0, result.output
    assert "deleted 1 item from docs, 1 not found" in result.stdout
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(), readonly=True) as conn:
        assert conn.execute("SEARCH docs MATCHING 'text'").ids() == ["b.md#0"]
    usage = CliRunner().invoke(app, ["delete", "--db", "db"])
    assert usage.exit_code == 2 and "give at least one --id or --doc-id" in usage.output


def test_the_delete_help_examples_delete_what_they_name(tmp_path, monkeypatch):
    """`recallql delete --help`'s examples, run as written after the `recallql ingest notes/`
    they name, find their rows (they said notes/old.md, a doc_id that ingest never stores)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "old.md").write_text("# Old\n\nan old note\n")
    (tmp_path / "notes" / "big.md").write_text(
        "\n\n".join(f"paragraph {n} " + "word " * 250 for n in range(6)) + "\n")
    assert _ingest("notes/", "--db", "mem.db", "--embedder", "hash").exit_code == 0
    helped = CliRunner().invoke(app, ["delete", "--help"], terminal_width=200)
    examples = [line.split()[2:] for line in helped.output.splitlines()
                if line.strip().startswith("recallql delete ")]
    assert len(examples) == 2, helped.output
    printed = []
    for args in examples:
        result = CliRunner().invoke(app, ["delete", *args])
        assert result.exit_code == 0, result.output
        printed.append(result.stdout.strip())
    assert printed == ["deleted 1 item from docs", "deleted 2 items from docs"]


def test_ingest_into_a_damaged_database_is_a_data_error_not_an_internal_one(tmp_path):
    """`--embedder auto` (the default) reads the database's embedder before connecting: a
    damaged database there was reported as 'internal error: StoreError ... --debug'."""
    db = tmp_path / "db"
    with recallql.connect(db, embedder=HashEmbedder()) as conn:
        conn.ingest("docs", [{"id": "a", "title": "backup"}])
    (db / "collections" / "docs" / "text" / "meta.json").unlink()
    path = tmp_path / "more.jsonl"
    path.write_text('{"id": "b", "title": "more"}\n')
    result = _ingest(str(path), "--db", str(db))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert "meta.json is missing" in result.stderr
    assert "internal error" not in result.stderr and "--debug" not in result.stderr


def test_items_without_text_are_stored_with_a_warning_naming_their_place(tmp_path):
    """Newcomer: a JSONL line ``{"id": "x"}`` went in silently and SEARCH could never match it
    (no terms; its vector embeds empty text). It is still stored — `Database.ingest` takes
    such items, RETRIEVE ... WHERE finds them, and corpora hold some (Cranfield's cran:471) —
    but the command warns with FILE:LINE; an item with a vector is not warned about."""
    path = tmp_path / "items.jsonl"
    lines = [{"id": "a", "body": "hello world"}, {"id": "x"}, {"id": "v", "vector": [1.0] * 64},
             *({"id": f"e{n}", "title": " "} for n in range(6))]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = _ingest(str(path), "--db", str(tmp_path / "db"), "--embedder", "hash")
    assert result.exit_code == 0, result.output
    note = ("has no text (its text fields title, body are all empty or missing): it is stored, "
            "but SEARCH can match it only by chance (no terms; its vector embeds empty text)")
    assert result.stderr.replace("\n", " ").split("warning: ")[1:] == [
        f"{path}:2: item 'x' {note} ", *(f"{path}:{n + 4}: item 'e{n}' {note} " for n in range(4)),
        "2 more item(s) have no text "]
    assert "ingested 9 items" in result.stdout


def test_an_unknown_collection_names_the_known_ones_and_how_to_add_one(tmp_path, monkeypatch):
    """`--collection notez` said only "no collection 'notez' in db", with no way on from there
    (the CLI cannot declare a collection), and a new path was left without a database."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("# A\n\nalpha text\n")
    fresh = _ingest("a.md", "--db", "db", "--embedder", "hash", "--collection", "notez")
    assert fresh.exit_code == 1
    assert fresh.stderr.strip() == (
        "error: no collection 'notez' in db (collections: docs, messages); ingest writes into "
        "an existing collection: declare a new one with its fields in Python, "
        "recallql.connect(DB).create_collection(NAME, ...)")
    assert not (tmp_path / "db").exists()
    assert _ingest("a.md", "--db", "db", "--embedder", "hash").exit_code == 0
    typo = _ingest("a.md", "--db", "db", "--collection", "doc")
    assert typo.exit_code == 1
    assert "no collection 'doc' in db (did you mean 'docs'? collections: docs, messages)" in (
        " ".join(typo.stderr.split()))


def test_an_ingest_without_db_says_where_it_created_the_database(tmp_path, monkeypatch):
    """With no --db, ingest created ./recallql.db silently; a newcomer who then ran the next
    command elsewhere (or with --db mem.db, as the README) could not find the notes."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECALLQL_DB", raising=False)
    (tmp_path / "note.md").write_text("# Note\n\nHello world.\n")
    first = _ingest("note.md", "--embedder", "hash")
    assert first.exit_code == 0, first.output
    assert first.stderr == (f"created the database {tmp_path / 'recallql.db'} (no --db given: "
                            "./recallql.db is every command's default, so run them from this "
                            "directory, or pass --db)\n")
    (tmp_path / "other.md").write_text("# Other\n\nMore.\n")
    again = _ingest("other.md", "--embedder", "hash")  # it exists now: nothing to say
    named = _ingest("note.md", "--db", str(tmp_path / "mem.db"), "--embedder", "hash")
    assert again.exit_code == named.exit_code == 0
    assert again.stderr == named.stderr == ""
