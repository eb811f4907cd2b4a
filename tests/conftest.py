"""Shared fixtures. Storage-layer fixtures are prefixed ``index_``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
# The shared data folder sits beside the repository (CI: a copy beside the clone; developers'
# worktrees are one level deeper).
SHARED_DATA_CANDIDATES = (REPO / ".." / "shared" / "data", REPO / ".." / ".." / "shared" / "data")


@pytest.fixture(scope="session")
def index_shared_data() -> Path:
    """The shared real-data folder (`../shared/data`), or skip when it is not there."""
    for candidate in SHARED_DATA_CANDIDATES:
        if (candidate / "ir").is_dir():
            return candidate.resolve()
    pytest.skip("shared data folder ../shared/data (CACM, Cranfield, LoCoMo) is not beside the "
                "repo")


@pytest.fixture
def index_embedder():
    """The deterministic 16-d hash embedder."""
    from recallql.index.embedders import HashEmbedder

    return HashEmbedder(16)


@pytest.fixture
def index_db(tmp_path, index_embedder):
    """An on-disk database whose built-in collections use the 16-d hash embedder."""
    import recallql

    db = recallql.connect(tmp_path / "db", embedder=index_embedder)
    yield db
    db.close()


def index_unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """float32[n, dim] random unit vectors."""
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


INDEX_DOCS = [
    {"id": "backup-1", "title": "Backup retention policies",
     "body": "Keep daily backups for 30 days and monthly backups for a year.",
     "created_at": "2024-03-01T00:00:00Z", "tags": ["ops", "backup"], "source": "wiki"},
    {"id": "backup-2", "title": "Restoring from backup",
     "body": "Restore the latest snapshot, then replay the write-ahead log.",
     "created_at": "2023-11-15", "tags": ["ops"], "source": "runbook"},
    {"id": "creds", "title": "Rotate credentials",
     "body": "Rotate API keys every 90 days; revoke the old key after rollout.",
     "created_at": 1700000000, "source": "wiki"},
    {"id": "cpp", "title": "C++ build flags", "body": "Use -O2 and -g for release builds.",
     "tags": ["build"]},
    {"id": "empty", "title": "", "body": ""},
]


@pytest.fixture
def index_docs() -> list[dict]:
    """Five small hand-written documents for the built-in `docs` collection."""
    return [dict(d) for d in INDEX_DOCS]


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output instead of comparing")


@pytest.fixture
def golden(request):
    """Compare text with `tests/golden/<name>`; `--update-golden` rewrites the file."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = REPO / "tests" / "golden" / name
        if update or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n")
            if not update:
                pytest.fail(f"golden file {path} did not exist; wrote it - review and commit it")
        assert text + "\n" == path.read_text()

    return check
