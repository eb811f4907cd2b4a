"""The analyser shared by indexing and query terms."""

import pytest

from recallql.index.analysis import analyze


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Backup retention policies", ["backup", "retent", "polici"]),
        ("C++", ["c"]),
        ("it's", ["s"]),
        ("{0}", ["0"]),
        ("a:b", ["b"]),
        ("OR", []),
        ("-v", ["v"]),
        ("session_id:s2", ["session", "id", "s2"]),
        ('36"', ["36"]),
        ("", []),
        ("the and of", []),
        ("x" * 41 + " kept", ["kept"]),
    ],
    ids=["spec", "cpp", "apostrophe", "braces", "colon", "or-stopword", "dash", "field-syntax",
         "inch", "empty", "stopwords", "remove-long"],
)
def test_analyze(text, terms):
    assert analyze(text) == terms


def test_snapshot_analyze_is_the_index_analyser(index_db, index_docs):
    index_db.ingest("docs", index_docs)
    snap = index_db.snapshot("docs")
    assert snap.analyze("Backup retention policies") == ["backup", "retent", "polici"]
    rows, _ = snap.lexical_topn(snap.analyze("RETAINED backups"), 5)
    assert [snap.ids[r] for r in rows][:2] == ["backup-1", "backup-2"]
