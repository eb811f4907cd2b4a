"""The `Database` object as a newcomer meets it at the prompt: its repr says where it is and
whether it writes, reads or is closed; `with connect(...)` closes it."""

from __future__ import annotations

import pytest

import recallql
from recallql.index.embedders import HashEmbedder


def test_a_database_shows_its_path_and_state(tmp_path):
    path = tmp_path / "mem.db"
    with recallql.connect(path, embedder=HashEmbedder()) as db:
        assert repr(db) == str(db) == f"<recallql.Database {str(path)!r} writer>"
        assert not db.closed and not db.readonly
        with recallql.connect(path, readonly=True, embedder=None) as reader:
            assert repr(reader) == f"<recallql.Database {str(path)!r} reader>"
            assert reader.readonly
    assert db.closed and repr(db) == f"<recallql.Database {str(path)!r} closed>"
    with pytest.raises(recallql.StoreError, match="is closed"):
        db.execute("SHOW SESSIONS")
    memory = recallql.connect(embedder=HashEmbedder())
    assert repr(memory) == "<recallql.Database in memory writer>"
    memory.close()
    memory.close()  # twice is harmless
    assert repr(memory) == "<recallql.Database in memory closed>"
