"""Storage failures as `StoreError`: disk full, permissions, I/O errors, with the file and the
cause.

The commit protocol (`recallql.index.batch`) leaves the database at its last committed batch
when any step fails; these helpers only make sure the caller learns what failed and where,
instead of a raw `OSError`, `sqlite3.OperationalError` or tantivy `ValueError`.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from recallql.index.errors import StoreError

AFTER = "the database is at its last committed batch"


def describe(exc: BaseException) -> str:
    """The cause of a storage failure in words: ``No space left on device (ENOSPC)``."""
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{exc.strerror or exc} ({name})"
    return str(exc) or type(exc).__name__


@contextlib.contextmanager
def storage_errors(where: Path | None, action: str = "write") -> Iterator[None]:
    """Re-raise an `OSError` as a `StoreError` naming the file (the error's own file name, else
    `where`) and the cause; `StoreError` and everything else pass through.

    Raises:
        StoreError: with the `OSError` as its ``__cause__``.
    """
    try:
        yield
    except OSError as exc:
        file = exc.filename or where or "(in memory)"
        raise StoreError(f"cannot {action} {file}: {describe(exc)}; {AFTER}") from exc


def tantivy_error(path: Path | None, action: str, exc: BaseException) -> StoreError:
    """A `StoreError` for a failure tantivy reported (as `ValueError` or `OSError`)."""
    where = path or "(in memory)"
    return StoreError(f"cannot {action} the text index {where}: {describe(exc)}; {AFTER}")
