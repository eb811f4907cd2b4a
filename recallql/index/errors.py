"""Errors raised by the storage layer.

`recallql/__init__.py` re-exports them; see `docs/architecture.md` for where each error lives.
"""

from __future__ import annotations

import re

#: How a `SignalRejected` message names its rule.
_RULE = re.compile(r"\(rule (\w+)\)")


def show(value: object, width: int = 80) -> str:
    """`repr(value)` for error messages: safe for huge integers (``repr(10**5000)`` raises),
    cut to `width` characters."""
    if isinstance(value, int) and value.bit_length() > 256:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


class IngestError(ValueError):
    """An item of a batch is invalid; nothing of the batch was written.

    Attributes:
        item: the offending item's id, or ``#<index>`` (0-based position in the batch) when the
            id itself is missing or invalid; ``None`` for batch-level problems.
        field: the offending field name, or ``None``.
    """

    def __init__(self, message: str, *, item: str | None = None, field: str | None = None):
        self.item = item
        self.field = field
        where = []
        if item is not None:
            where.append(f"item {item}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class SignalRejected(ValueError):
    """A session signal or annotation was rejected (raised by the sessions layer); nothing
    was written.

    Attributes:
        rule: the rule that refused it, as the message names it (``signal rejected (rule
            unknown_session): ...``): ``unknown_session``, ``session_not_open``,
            ``unknown_name``, ``not_finite``, ``out_of_bounds``, ``bad_entity``,
            ``bad_signal``, ``bad_time``, ``in_future``, ``before_start``, ``empty_text``,
            ``bad_text``; None when the message names none.
    """

    @property
    def rule(self) -> str | None:
        found = _RULE.search(str(self))
        return found.group(1) if found else None


class DatabaseLocked(RuntimeError):
    """Another process (or another connection of this process) held the database's writer lock
    for longer than the writer's `lock_timeout`; nothing was written.

    Attributes:
        path: the database directory (None when unknown).
        pid: the holder's process id, as its lock file says (None when unknown).
        waited: the seconds this writer waited.
    """

    def __init__(self, message: str, *, path: object = None, pid: int | None = None,
                 waited: float = 0.0):
        super().__init__(message)
        self.path, self.pid, self.waited = path, pid, waited


class IdempotencyKeyReused(ValueError):
    """An idempotency ``key=`` was already used for a different request; nothing was
    written."""


class StoreError(RuntimeError):
    """The store cannot be used as asked: a missing or damaged file (named), foreign files, a
    wrong embedder or schema on open, a missing collection, a write on a read-only store, or a
    storage failure (disk full, permissions, I/O: the file and the cause are named, and the
    database stays at its last committed batch)."""


class FilterError(ValueError):
    """A filter expression does not fit the collection (unknown field, wrong value type)."""


class AnalyzerOutdatedWarning(UserWarning):
    """A collection's text index was built by an older text analyser: statements keep using
    that analyser (results stay consistent) until ``recallql reindex`` rebuilds the index."""
