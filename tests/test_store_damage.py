"""Damage is detected, never repaired by re-creation (SPEC §7, issue 13).

Found by trials: a 0-byte meta.sqlite or a deleted tantivy meta.json made a writer silently
re-create an empty store (and re-creating the collection then returned old documents for new
rows); NaN bytes in a vector segment ranked the damaged rows first (cosine=nan); a truncated
segment raised a raw ``ValueError: mmap length ...``; a deleted segment gave an error naming no
file. Each variant must raise `StoreError` naming the file and leave the directory byte-identical.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import recallql
from recallql.index.embedders import HashEmbedder
from recallql.index.errors import StoreError
from recallql.index.store import check_directory

REPO = Path(__file__).resolve().parents[1]
#: SQLite's own transient files: a read-only connection may leave them (empty) behind.
SQLITE_TRANSIENT = {"meta.sqlite-wal", "meta.sqlite-shm"}


def build(path: Path) -> None:
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.ingest("docs", [{"id": f"d{i}", "title": f"token {i}"} for i in range(5)])
        db.ingest("docs", [{"id": "v", "title": "vector row", "vector": [1.0] + [0.0] * 15}])


def files(path: Path) -> dict[str, bytes]:
    """Every file under `path` with its bytes."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def segment(path: Path) -> Path:
    return sorted((path / "collections" / "docs" / "vectors").glob("*.npy"))[0]


def empty_meta(path: Path) -> Path:
    (path / "meta.sqlite").write_bytes(b"")
    return path / "meta.sqlite"


def deleted_meta(path: Path) -> Path:
    (path / "meta.sqlite").unlink()
    return path / "meta.sqlite"


def deleted_meta_json(path: Path) -> Path:
    target = path / "collections" / "docs" / "text" / "meta.json"
    target.unlink()
    return target


def deleted_text_dir(path: Path) -> Path:
    import shutil

    target = path / "collections" / "docs" / "text"
    shutil.rmtree(target)
    return target


def truncated_segment(path: Path) -> Path:
    target = segment(path)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) - 20])
    return target


def deleted_segment(path: Path) -> Path:
    target = segment(path)
    target.unlink()
    return target


def nan_segment(path: Path) -> Path:
    target = segment(path)
    data = bytearray(target.read_bytes())
    data[-64:-60] = np.array([np.nan], "<f4").tobytes()
    target.write_bytes(bytes(data))
    return target


def deleted_analyzer_marker(path: Path) -> Path:
    """Without its marker an index of analyser 2 or later was read as analyser 1 (an index
    of before the marker): queries analysed apart from the documents, and check said ok."""
    target = path / "collections" / "docs" / "text" / "recallql-analyzer.json"
    target.unlink()
    return target


DAMAGE = [empty_meta, deleted_meta, deleted_meta_json, deleted_text_dir, truncated_segment,
          deleted_segment, nan_segment, deleted_analyzer_marker]


@pytest.mark.parametrize("damage", DAMAGE, ids=[d.__name__ for d in DAMAGE])
@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "reader"])
def test_damage_is_refused_by_name_and_nothing_changes(tmp_path, damage, readonly):
    path = tmp_path / "db"
    build(path)
    damaged = damage(path)
    before = files(path)
    with pytest.raises(StoreError) as info:
        recallql.connect(path, embedder=HashEmbedder(16), readonly=readonly)
    assert str(damaged) in str(info.value)
    after = files(path)
    if readonly:  # SQLite may leave its empty -wal/-shm next to the file
        after = {k: v for k, v in after.items() if k not in SQLITE_TRANSIENT or k in before}
    assert after == before
    # and again: the refused open did not "repair" anything
    with pytest.raises(StoreError):
        recallql.connect(path, embedder=HashEmbedder(16))


@pytest.mark.parametrize("damage", DAMAGE, ids=[d.__name__ for d in DAMAGE])
def test_check_reports_each_damage_naming_the_file(tmp_path, damage):
    path = tmp_path / "db"
    build(path)
    assert check_directory(path).ok
    damaged = damage(path)
    report = check_directory(path)
    assert not report.ok
    assert any(str(damaged) in p.file or str(damaged) in p.detail for p in report.problems
               if p.severity == "error"), report.to_text()


def test_a_healthy_store_checks_ok_with_counts(tmp_path):
    path = tmp_path / "db"
    build(path)
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.delete("docs", ["d1"])
        report = db.check()
    assert report.ok and report.problems == [] and report.committed_batch == 3
    docs = next(c for c in report.collections if c.name == "docs")
    assert (docs.rows, docs.live, docs.documents, docs.vectors) == (6, 5, 6, 6)
    assert report.to_text().endswith("ok: the stores agree")


def test_check_text_counts_in_the_singular_and_plural(tmp_path):
    """`recallql check` printed "1 rows (1 live), 1 text documents, 1 vectors in 1 segments"."""
    path = tmp_path / "db"
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        db.ingest("docs", [{"id": "a", "title": "one row"}])
        report = db.check()
    assert report.to_text().splitlines() == [
        f"database {path}: committed batch 1",
        "  docs: 1 row (1 live), 1 text document, 1 vector in 1 segment",
        "  messages: 0 rows (0 live), 0 text documents, 0 vectors in 0 segments",
        "ok: the stores agree"]


def test_check_finds_a_ghost_document_the_stores_disagree_on(tmp_path):
    """An old document for a row of another batch (what re-creating a store left): an error;
    a document of a rowid SQLite does not have is an unfinished batch's: a warning."""
    path = tmp_path / "db"
    build(path)
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        with db.store.writing():
            text = db.store._state("docs").text
            text.add([99], 9, ["unfinished"])
            text.commit()
        report = db.check()
        assert report.ok and [p.kind for p in report.problems] == ["uncommitted"]
        with db.store.writing():
            text.add([5], 1, ["ghost text"])  # row 5 is of batch 2
            text.commit()
        report = db.check()
    assert not report.ok
    details = " ".join(p.detail for p in report.problems)
    assert "more than one document" in details and "another batch" in details, details


def test_recallql_check_cli_exit_codes(tmp_path):
    path = tmp_path / "db"
    build(path)

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "recallql.cli", "check", "--db", str(path)],
                              capture_output=True, text=True, cwd=REPO, timeout=120)

    good = run()
    assert good.returncode == 0, good.stderr
    assert "ok: the stores agree" in good.stdout
    vacuumed = subprocess.run([sys.executable, "-m", "recallql.cli", "vacuum", "--db", str(path)],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
    assert vacuumed.returncode == 0 and "nothing to vacuum" in vacuumed.stdout, vacuumed.stderr
    damaged = nan_segment(path)
    bad = run()
    assert bad.returncode == 1
    assert str(damaged) in bad.stdout and "non-finite" in bad.stdout
    assert "DAMAGED" in bad.stdout


def test_non_finite_vectors_that_appear_later_are_skipped_with_a_reason(tmp_path):
    """Damage after open (the file changed under a running process): the semantic leg skips the
    row (never ranks it, never reports cosine=nan) and the result says why."""
    path = tmp_path / "db"
    build(path)
    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        v = np.array([1.0] + [0.0] * 15, np.float32)
        first = db.execute("SEARCH docs NEAR :v LIMIT 10", v=v)
        assert first.ids()[0] == "v" and not first.warnings
        target = sorted((path / "collections" / "docs" / "vectors").glob("*.npy"))[-1]
        with open(target, "r+b") as file:  # in place (row 'v'): the memory map sees it
            data = bytearray(file.read())
            data[-64:] = np.full(16, np.nan, "<f4").tobytes()
            file.seek(0)
            file.write(bytes(data))
        after = db.execute("SEARCH docs NEAR :v LIMIT 10", v=v)
    assert "v" not in after.ids()
    assert all(np.isfinite(r.score) for r in after.rows)
    codes = {w.code: w.message for w in after.warnings}
    assert "VECTORS_NOT_FINITE" in codes and target.name in codes["VECTORS_NOT_FINITE"]


def test_a_directory_with_store_parts_but_no_meta_is_never_created_over(tmp_path):
    path = tmp_path / "db"
    build(path)
    deleted_meta(path)
    before = files(path)
    with pytest.raises(StoreError, match="meta.sqlite is missing"):
        recallql.connect(path, embedder=HashEmbedder(16))
    assert files(path) == before
