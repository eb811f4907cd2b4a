"""``recallql ingest`` never silently replaces a document stored from another file (newcomer
#44): a text chunk records its file (``source``), and a later run whose file of the same
doc_id is another one is refused before anything is written, unless --replace-other-files.
CliRunner over a real database on disk, real files."""

from __future__ import annotations

from typer.testing import CliRunner

import recallql
from recallql.cli import app
from recallql.index.embedders import HashEmbedder

runner = CliRunner()


def _ingest(*args: str):
    return runner.invoke(app, ["ingest", *args, "--db", "pab.db", "--embedder", "hash"])


def _live(db) -> dict[str, tuple[str, str]]:
    """``{id: (body, source)}`` of the live docs rows."""
    with recallql.connect(db, embedder=HashEmbedder(), readonly=True) as conn:
        snap = conn.snapshot("docs")
        rows = snap.fetch(snap.live.nonzero()[0])
    return {r["id"]: (r["body"], r["source"]) for r in rows}


def _projects(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in (("pa", "Alpha uses postgres."), ("pb", "Beta uses mysql.")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# Project {name}\n\n{text}\n")


def test_a_second_directory_with_the_same_file_name_is_refused_and_writes_nothing(
        tmp_path, monkeypatch):
    _projects(tmp_path, monkeypatch)
    assert _ingest("pa/").exit_code == 0
    stored = _live(tmp_path / "pab.db")
    origin = (tmp_path / "pa" / "README.md").resolve().as_posix()
    assert stored == {"README.md#0": ("Alpha uses postgres.", origin)}
    result = _ingest("pb/")
    assert result.exit_code == 1, result.output
    assert (f"'README.md' is stored from {origin}, pb/README.md would replace it; nothing was "
            "written") in result.stderr
    assert "--replace-other-files" in result.stderr
    assert _live(tmp_path / "pab.db") == stored


def test_the_same_directory_re_ingested_from_anywhere_still_replaces_its_documents(
        tmp_path, monkeypatch):
    _projects(tmp_path, monkeypatch)
    assert _ingest("pa/").exit_code == 0
    (tmp_path / "pa" / "README.md").write_text("# Project pa\n\nAlpha moved to sqlite.\n")
    monkeypatch.chdir(tmp_path / "pa")
    result = runner.invoke(app, ["ingest", ".", "--db", "../pab.db", "--embedder", "hash"])
    assert result.exit_code == 0, result.output
    assert "(0 new, 1 replaced, 0 unchanged" in result.stdout
    assert [body for body, _ in _live(tmp_path / "pab.db").values()] == ["Alpha moved to sqlite."]


def test_replace_other_files_lets_the_new_file_replace_the_stored_document(
        tmp_path, monkeypatch):
    _projects(tmp_path, monkeypatch)
    assert _ingest("pa/").exit_code == 0
    result = _ingest("pb/", "--replace-other-files")
    assert result.exit_code == 0, result.output
    origin = (tmp_path / "pb" / "README.md").resolve().as_posix()
    assert _live(tmp_path / "pab.db") == {"README.md#0": ("Beta uses mysql.", origin)}


def test_the_common_parent_keeps_both_documents(tmp_path, monkeypatch):
    _projects(tmp_path, monkeypatch)
    assert _ingest(".", "--format", "text").exit_code == 0
    assert sorted(_live(tmp_path / "pab.db")) == ["pa/README.md#0", "pb/README.md#0"]


def test_chunks_stored_before_origins_were_recorded_are_replaced_as_before(
        tmp_path, monkeypatch):
    """A chunk whose ``source`` is the old format name ``text`` has no known file: the run
    replaces it (and records the file from then on)."""
    _projects(tmp_path, monkeypatch)
    with recallql.connect(tmp_path / "pab.db", embedder=HashEmbedder()) as db:
        db.ingest("docs", [{"id": "README.md#0", "doc_id": "README.md", "position": 0,
                            "body": "old", "source": "text"}])
    result = _ingest("pb/")
    assert result.exit_code == 0, result.output
    origin = (tmp_path / "pb" / "README.md").resolve().as_posix()
    assert _live(tmp_path / "pab.db") == {"README.md#0": ("Beta uses mysql.", origin)}
