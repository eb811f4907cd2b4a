"""The analyser version per collection, BM25 statistics after deletes and replaces (the Lucene
rule), and `reindex` / `optimize` (recallql.index.reindex), on real tantivy indexes and SQLite.

`tests/fixtures/analyzer_v1_db` is a real database written by recallql before analyser 2 (see
its README): items ``cafe`` (title written in NFD), ``sha`` (a 40-hex git SHA in the body),
and ``plain`` (deleted)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import recallql
from recallql.index.analysis import CURRENT_VERSION
from recallql.index.embedders import HashEmbedder
from recallql.index.text import ANALYZER_FILE

FIXTURE = Path(__file__).parent / "fixtures" / "analyzer_v1_db"
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
REPO = Path(__file__).resolve().parents[1]


def _text_dir(db_path: Path, name: str = "docs") -> Path:
    return db_path / "collections" / name / "text"


@pytest.fixture
def old_db(tmp_path) -> Path:
    path = tmp_path / "old"
    shutil.copytree(FIXTURE, path)
    return path


def _lexical(db, text: str) -> list[str]:
    return db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=text).ids()


def _bm25(db, text: str) -> dict[str, str]:
    rows = db.execute("SEARCH docs MATCHING :q USING LEXICAL LIMIT 100", q=text).rows
    return {r.id: r.reasons[0].detail for r in rows}


# -- the analyser version -------------------------------------------------------------------------

def test_a_new_collection_records_the_current_analyser(tmp_path):
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(8)) as db:
        assert db.store.analyzer_versions() == {"docs": CURRENT_VERSION,
                                                "messages": CURRENT_VERSION}
    marker = json.loads((_text_dir(tmp_path / "db") / ANALYZER_FILE).read_text())
    assert marker == {"version": CURRENT_VERSION, "keywords": ["source", "tags"]}


def test_an_old_database_opens_with_a_warning_and_keeps_its_analyser(old_db):
    with pytest.warns(recallql.AnalyzerOutdatedWarning,
                      match=r"'docs', 'messages' were indexed by text analyser 1.*"
                            r"recallql reindex --db"):
        db = recallql.connect(old_db, embedder=HashEmbedder(16))
    with db:
        assert db.store.analyzer_versions()["docs"] == 1
        assert _lexical(db, "Café") == []        # analyser 1 indexed the NFD spelling apart
        assert _lexical(db, SHA) == []           # and dropped the 40-byte SHA
        assert _lexical(db, "menu") == ["cafe"]  # everything else works as before
        db.ingest("docs", [{"id": "new", "title": "menu card"}])  # written with analyser 1
        assert sorted(_lexical(db, "menu")) == ["cafe", "new"]


def test_reindex_migrates_an_old_database(old_db):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", recallql.AnalyzerOutdatedWarning)
        db = recallql.connect(old_db, embedder=HashEmbedder(16))
    with db:
        reports = db.reindex()
        assert [(r.collection, r.rows, r.old_version, r.new_version, r.counted_before)
                for r in reports] == [("docs", 2, 1, CURRENT_VERSION, None),
                                      ("messages", 0, 1, CURRENT_VERSION, None)]
        assert _lexical(db, "Café") == ["cafe"]
        assert _lexical(db, SHA) == ["sha"]
        assert db.execute("SEARCH docs MATCHING 'plain backup' USING LEXICAL").ids() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reopening warns no more
        with recallql.connect(old_db, embedder=HashEmbedder(16)) as db:
            assert db.store.analyzer_versions()["docs"] == CURRENT_VERSION
            assert _lexical(db, "cafe\u0301") == ["cafe"]


def _written_by_analyser(path, monkeypatch, version: int, items: list[dict]):
    """A database at `path` whose `items` an older recallql (text analyser `version`) wrote,
    opened again now: it warns that the collections are indexed by `version`."""
    monkeypatch.setattr("recallql.index.text.CURRENT_VERSION", version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", recallql.AnalyzerOutdatedWarning)
        with recallql.connect(path, embedder=HashEmbedder(8)) as db:
            db.ingest("docs", items)
    monkeypatch.undo()
    with pytest.warns(recallql.AnalyzerOutdatedWarning,
                      match=f"indexed by text analyser {version}"):
        return recallql.connect(path, embedder=HashEmbedder(8))


def test_an_analyser_2_database_keeps_its_terms_until_reindex_upgrades_it(tmp_path,
                                                                             monkeypatch):
    db = _written_by_analyser(tmp_path / "db", monkeypatch, 2, [
        {"id": "tr", "title": "İstanbul 🎉"}, {"id": "x", "title": "other"}])
    with db:
        assert db.store.analyzer_versions()["docs"] == 2
        assert _lexical(db, "İstanbul") == ["tr"]  # query terms in the index's analyser
        assert _lexical(db, "istanbul") == []
        assert [r.new_version for r in db.reindex()] == [CURRENT_VERSION, CURRENT_VERSION]
        assert _lexical(db, "istanbul") == ["tr"]
        assert _lexical(db, "🎉") == ["tr"]


def test_an_analyser_3_database_keeps_its_terms_until_reindex_moves_it_to_4(tmp_path,
                                                                               monkeypatch):
    """Analyser 4 makes a zero width space a word break; a collection indexed by analyser 3
    (which removed it) analyses its documents and its queries with 3 until `reindex`."""
    path = tmp_path / "db"
    db = _written_by_analyser(path, monkeypatch, 3, [
        {"id": "zw", "title": "foo\u200bbar ฉัน\u200bกิน"}, {"id": "x", "title": "other"}])
    with db:
        assert db.store.analyzer_versions() == {"docs": 3, "messages": 3}
        assert db.snapshot("docs").analyze("foo\u200bbar") == ["foobar"]  # the query, with 3
        assert _lexical(db, "foo\u200bbar") == ["zw"]
        assert _lexical(db, "foobar") == ["zw"]
        assert _lexical(db, "bar") == []
        assert _lexical(db, "นกิ") == ["zw"]  # analyser 3's bigram across the zero width space
        db.ingest("docs", [{"id": "new", "title": "baz\u200bqux"}])  # written with 3 too
        assert _lexical(db, "bazqux") == ["new"]
        assert [(r.collection, r.old_version, r.new_version) for r in db.reindex()] == [
            ("docs", 3, 4), ("messages", 3, 4)]
        assert db.snapshot("docs").analyze("foo\u200bbar") == ["foo", "bar"]
        assert _lexical(db, "bar") == ["zw"]
        assert _lexical(db, "qux") == ["new"]
        assert _lexical(db, "foobar") == []
        assert _lexical(db, "นกิ") == []
        assert _lexical(db, "กิน") == ["zw"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reopening warns no more
        with recallql.connect(path, embedder=HashEmbedder(8)) as db:
            assert db.store.analyzer_versions() == {"docs": 4, "messages": 4}
            assert json.loads((_text_dir(path) / ANALYZER_FILE).read_text())["version"] == 4
            assert _lexical(db, "foo") == ["zw"]
            assert db.check().ok


def test_an_unknown_analyser_version_is_a_clear_error(tmp_path):
    path = tmp_path / "db"
    recallql.connect(path, embedder=HashEmbedder(8)).close()
    (_text_dir(path) / ANALYZER_FILE).write_text('{"version": 99}')
    with pytest.raises(recallql.StoreError, match="text analyser version 99 is unknown to this "
                       r"recallql \(it knows \[1, 2, 3, 4\]\); upgrade recallql"):
        recallql.connect(path, embedder=HashEmbedder(8))


def test_the_marker_survives_tantivy_garbage_collection(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(8)) as db:
        for i in range(12):  # many commits, merges, deletes
            db.ingest("docs", [{"id": f"d{i}", "title": f"t{i}"}])
            db.delete("docs", [f"d{i - 1}"])
        db.store._state("docs").text.collect_garbage()
    assert (_text_dir(path) / ANALYZER_FILE).is_file()


# -- BM25 statistics after delete and replace: the Lucene rule, then exact ------------------------

DOCS = [{"id": f"d{i}", "title": "alpha " + "gamma " * (i % 3), "body": f"n{i}"}
        for i in range(30)]


def test_deleted_rows_count_in_bm25_statistics_until_optimize(tmp_path):
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(8)) as db, \
            recallql.connect(tmp_path / "fresh", embedder=HashEmbedder(8)) as fresh:
        db.ingest("docs", DOCS)
        db.delete("docs", [f"d{i}" for i in range(0, 30, 2)])
        db.ingest("docs", [dict(DOCS[1], title="alpha beta")])  # replace d1
        live = [d for d in DOCS if int(d["id"][1:]) % 2 and d["id"] != "d1"]
        fresh.ingest("docs", [*live, dict(DOCS[1], title="alpha beta")])
        snap = db.snapshot("docs")
        assert int(snap.live.sum()) == 15
        assert snap.bm25_documents() == 31  # 30 + the new version of d1: nothing merged away
        assert _bm25(db, "gamma") != _bm25(fresh, "gamma")  # N and n(t) still count them
        (report,) = db.reindex(["docs"], only_needed=True)
        assert (report.rows, report.counted_before) == (15, 31)
        assert db.snapshot("docs").bm25_documents() == 15
        assert _bm25(db, "gamma") == _bm25(fresh, "gamma")  # exact: equal to a fresh index
        assert _bm25(db, "alpha beta") == _bm25(fresh, "alpha beta")
        assert db.reindex(only_needed=True) == []  # nothing left to do


@pytest.mark.parametrize("deleted", [[], ["d0", "d3"]], ids=["no-deletes", "deletes"])
def test_a_rebuilt_index_passes_check(tmp_path, deleted):
    """Every rebuilt document carried the committed batch instead of its row's, so after any
    `reindex` / `recallql optimize` `recallql check` said DAMAGED ("documents carry another
    batch than their SQLite row")."""
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(8)) as db:
        db.ingest("docs", DOCS[:10])
        db.ingest("docs", DOCS[10:])  # rows of two batches
        db.delete("docs", deleted)
        db.reindex(["docs"])
        assert db.check().problems == []
        db.ingest("docs", [{"id": "after", "title": "gamma"}])
        assert db.check().problems == []
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(8)) as db:
        assert db.check().problems == []
        gamma = [d for d in DOCS if "gamma" in d["title"] and d["id"] not in deleted]
        assert len(_bm25(db, "gamma")) == len(gamma) + 1


def test_an_index_without_removed_rows_is_exact(tmp_path):
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(8)) as db:
        db.ingest("docs", DOCS)
        snap = db.snapshot("docs")
        assert snap.bm25_documents() == int(snap.live.sum()) == 30


def test_reindex_in_memory(tmp_path):
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", DOCS)
        db.delete("docs", ["d0", "d1"])
        (report,) = db.reindex(["docs"])
        assert (report.rows, report.counted_before) == (28, 30)
        assert db.snapshot("docs").bm25_documents() == 28
        db.ingest("docs", [{"id": "after", "title": "gamma gamma gamma"}])
        assert _lexical(db, "gamma")[0] == "after"


# -- crash recovery of a rebuild ------------------------------------------------------------------

def _crash_between_renames(path: Path) -> None:
    """What a kill between ``text`` → ``text.old`` and ``text.rebuild`` → ``text`` leaves."""
    text = _text_dir(path)
    with recallql.connect(tmp := path.parent / "built", embedder=HashEmbedder(8)) as other:
        other.ingest("docs", [dict(d) for d in DOCS if d["id"] != "d0"])
    shutil.copytree(_text_dir(tmp), text.with_name("text.rebuild"))
    text.rename(text.with_name("text.old"))


def _between_renames(tmp_path: Path) -> Path:
    """A database of `DOCS` with ``d0`` deleted, left between the two renames of a rebuild."""
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(8)) as db:
        db.ingest("docs", DOCS)
        db.delete("docs", ["d0"])
    _crash_between_renames(path)
    return path


def test_a_rebuild_killed_between_its_renames_is_finished_on_open(tmp_path):
    path = _between_renames(tmp_path)
    with recallql.connect(path, embedder=HashEmbedder(8)) as db:
        assert db.snapshot("docs").bm25_documents() == 29
        assert len(_lexical(db, "alpha")) == 10
    names = sorted(p.name for p in (path / "collections" / "docs").iterdir())
    assert names == ["text", "vectors"]


def test_a_reader_opened_between_the_renames_of_a_rebuild_goes_on_after_them(tmp_path):
    """A reader that opened the collection between the two renames of another process's
    rebuild opens ``text.rebuild`` (``text`` is missing then). After the second rename that
    name was gone, and each of its statements after the next batch failed for good with
    tantivy's raw "Failed to acquire Lockfile: IoError(... NotFound ...)"."""
    path = _between_renames(tmp_path)  # as seen while the rebuilding writer is between them
    with recallql.connect(path, embedder=HashEmbedder(8), readonly=True) as reader:
        assert len(_lexical(reader, "n7")) == 1
        text = _text_dir(path)
        text.with_name("text.rebuild").rename(text)  # the writer's second rename
        shutil.rmtree(text.with_name("text.old"))
        with recallql.connect(path, embedder=HashEmbedder(8)) as db:
            db.ingest("docs", [{"id": "new", "title": "delta"}])
        assert _lexical(reader, "delta") == ["new"]
        assert len(_lexical(reader, "n7")) == 1


def test_an_open_racing_the_second_rename_of_a_rebuild_succeeds(tmp_path, monkeypatch):
    """Opening ``text.rebuild`` because ``text`` was missing (another process between the
    two renames of its rebuild) raced the second rename: that name was gone by the time its
    marker was read, and the open failed with "meta.json is missing: ... damaged". The open
    is retried at ``text``."""
    from recallql.index import text as text_module

    path = _between_renames(tmp_path)
    text = _text_dir(path)
    real = text_module.stored_version

    def stored_version(where):
        if where.name == "text.rebuild" and where.exists():  # the writer's second rename
            where.rename(text)                                # lands right now
            shutil.rmtree(text.with_name("text.old"))
        return real(where)

    monkeypatch.setattr(text_module, "stored_version", stored_version)
    with recallql.connect(path, embedder=HashEmbedder(8), readonly=True) as reader:
        assert reader.store._state("docs").text.path == text
        assert len(_lexical(reader, "n7")) == 1


def test_an_open_checking_text_as_the_second_rename_of_a_rebuild_lands_succeeds(
        tmp_path, monkeypatch):
    """The open-time check (`integrity.validate`) found ``text`` missing (another process
    between the two renames of its rebuild) and looked for ``text.rebuild``: when the second
    rename landed between those two looks, neither was there, and the open was refused with
    "the text index ... is missing: the database is damaged". It looks at ``text`` again."""
    from recallql.index import integrity

    path = _between_renames(tmp_path)
    text = _text_dir(path)
    real = integrity.siblings
    landed = []

    def siblings(where):
        found = real(where)
        if found[0].exists():  # `text` was just seen missing: the second rename lands now
            found[0].rename(where)
            shutil.rmtree(found[1])
            landed.append(where)
        return found

    monkeypatch.setattr(integrity, "siblings", siblings)
    with recallql.connect(path, embedder=HashEmbedder(8), readonly=True) as reader:
        assert landed == [text]
        assert reader.store._state("docs").text.path == text
        assert reader.snapshot("docs").bm25_documents() == 29
        assert len(_lexical(reader, "n7")) == 1


def test_an_unfinished_rebuild_is_discarded_on_open(tmp_path):
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(8)) as db:
        db.ingest("docs", DOCS)
    half = _text_dir(path).with_name("text.rebuild")
    half.mkdir()
    (half / "meta.json").write_text("{not json")
    with recallql.connect(path, embedder=HashEmbedder(8)) as db:
        assert db.snapshot("docs").bm25_documents() == 30
    assert not half.exists()


def test_a_writer_open_while_another_one_reindexes_goes_on_with_the_new_analyser(old_db):
    """Found by trials: a database open for writing in one process (an MCP server) while
    another process ran `recallql reindex` (as the open warning advises) went on indexing its
    documents and analysing its queries with the old analyser, into and against the rebuilt
    index: a document it wrote then was never found by the SHA in its body (analyser 1 drops
    40-byte tokens), in that process or any other, and `check` saw nothing. A store now
    reopens a collection whose text index another store swapped in."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", recallql.AnalyzerOutdatedWarning)
        server = recallql.connect(old_db, embedder=HashEmbedder(16))
        cli = recallql.connect(old_db, embedder=HashEmbedder(16))  # its own Store and lock
    assert _lexical(server, "menu") == ["cafe"]  # the server has the collection open
    with cli:
        assert [r.new_version for r in cli.reindex()] == [CURRENT_VERSION, CURRENT_VERSION]
    with server:
        server.ingest("docs", [{"id": "new", "title": "fix", "body": f"fixed again in {SHA}"}])
        assert server.store.analyzer_versions()["docs"] == CURRENT_VERSION
        assert sorted(_lexical(server, SHA)) == ["new", "sha"]
        assert _lexical(server, "Café") == ["cafe"]  # queries go through the new analyser too
    with recallql.connect(old_db, embedder=HashEmbedder(16)) as fresh:
        assert sorted(_lexical(fresh, SHA)) == ["new", "sha"]
        assert fresh.check().ok


# -- the commands ---------------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recallql.cli", *args], capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(REPO), "NO_COLOR": "1",
                                                       "PATH": "/usr/bin:/bin"})


def test_cli_warns_then_reindex_and_optimize(old_db):
    query = _cli("query", "SEARCH docs MATCHING 'menu' USING LEXICAL", "--db", str(old_db))
    assert query.returncode == 0
    assert query.stderr.startswith("warning: ")
    assert f"recallql reindex --db {old_db}" in query.stderr
    done = _cli("reindex", "--db", str(old_db), "-c", "docs")
    assert done.returncode == 0, done.stderr
    assert f"docs: 2 rows reindexed (analyser 1 → {CURRENT_VERSION})" in done.stdout
    again = _cli("optimize", "--db", str(old_db), "-c", "docs")
    assert "nothing to do" in again.stdout
    missing = _cli("optimize", "--db", str(old_db.parent / "none"))
    assert missing.returncode == 1 and "no recallql database" in missing.stderr


def test_check_names_the_cause_of_documents_an_earlier_rebuild_stamped(tmp_path):
    """Indexes rebuilt before the fix carry the committed batch on every document: `check`
    names that cause and the cure, and `reindex` cures it."""
    with recallql.connect(tmp_path / "db", embedder=HashEmbedder(8)) as db:
        db.ingest("docs", DOCS[:10])
        db.ingest("docs", DOCS[10:])
        with db.store.writing():
            text = db.store._state("docs").text
            text.delete_rows(range(10))
            text.add(list(range(10)), 2, [d["title"] for d in DOCS[:10]])  # rows of batch 1
            text.commit()
        (problem,) = db.check().problems
        assert problem.detail.endswith("(each a later one: what a reindex or optimize of an "
                                       "earlier recallql wrote; `recallql reindex` rewrites them)")
        db.reindex(["docs"])
        assert db.check().problems == []
