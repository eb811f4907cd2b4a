"""Python conveniences of `Result` (a mixin, kept apart from the result model itself).

One rule for every statement: a result is a sequence of its *entries* — the ranked `Row`s of
SEARCH / RETRIEVE, or the record dicts of SHOW / DESCRIBE — and `len`, iteration, indexing,
slicing, `to_dicts()`, `to_pandas()` and `to_arrow()` all see the same entries in the same order.

    >>> result = db.execute("SEARCH docs MATCHING 'backup' LIMIT 5")   # doctest: +SKIP
    >>> result[0].id, len(result[:2]), result.to_pandas().columns[:3]  # doctest: +SKIP

Timestamps in `to_dicts()` (and so in pandas and Arrow) are timezone-aware `datetime`s in UTC:
a row's ``created_at`` and its collection's declared timestamp fields (epoch seconds in
`Row.fields`), and a record's ISO-8601 columns (``started_at``, ``ended_at``, ...).
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload

from recallql.grammar.errors import printable
from recallql.grammar.timestamps import format_timestamp
from recallql.index.timestamps import parse_timestamp

if TYPE_CHECKING:
    from recallql.engine.models import Row

#: Record columns holding ISO-8601 UTC text (SHOW SESSIONS, SHOW SESSION, SHOW LINEAGE).
RECORD_TIMESTAMPS = frozenset({"started_at", "ended_at", "last_activity_at", "at", "created_at",
                               "updated_at", "archived_at"})
#: Entries shown by `repr` and `_repr_html_`.
PREVIEW = 5
HTML_ROWS = 50


def _missing(extra: str, package: str, method: str) -> ImportError:
    return ImportError(f"Result.{method}() needs the optional package {package!r}: "
                       f"pip install 'recallql[{extra}]'")


def epoch_to_datetime(value: Any) -> Any:
    """Epoch seconds (int/float, finite) as an aware UTC `datetime`; anything else unchanged."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value \
            and abs(value) < 2.5e11:
        return datetime.fromtimestamp(value, tz=UTC)
    return value


def iso_to_datetime(value: Any) -> Any:
    """ISO-8601 text (``...Z`` or with an offset) as an aware `datetime`; else unchanged."""
    if isinstance(value, str) and len(value) >= 10 and value[4:5] == "-":
        try:
            return parse_timestamp(value)
        except ValueError:
            return value
    return value


class ResultConversions:
    """`len`, iteration, indexing, slicing, conversions and notebook display of a `Result`.

    Needs the model's ``rows``, ``records``, ``columns``, ``statement`` and
    ``timestamp_fields``.
    """

    rows: list[Row]
    records: list[dict[str, Any]] | None
    columns: list[str] | None
    statement: str
    timestamp_fields: list[str]

    def _entries(self) -> list[Any]:
        return list(self.rows) if self.records is None else list(self.records)

    def __len__(self) -> int:
        return len(self._entries())

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        """The rows (SEARCH / RETRIEVE) or records (SHOW / DESCRIBE), in order."""
        return iter(self._entries())

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> Any: ...

    def __getitem__(self, index: int | slice) -> Any:
        """``result[i]``: a `Row` (or a record dict); ``result[i:j]``: a `Result` of those
        entries, keeping the statement, warnings and snapshot.

        Raises:
            IndexError: `i` out of range. TypeError: not an int or a slice.
        """
        if isinstance(index, slice):
            if self.records is None:
                return self.model_copy(update={"rows": self.rows[index]})  # type: ignore[attr-defined]
            return self.model_copy(update={"records": self.records[index]})  # type: ignore[attr-defined]
        if isinstance(index, int) and not isinstance(index, bool):
            return self._entries()[index]
        raise TypeError(f"Result indices must be integers or slices, not {type(index).__name__}")

    # -- conversions ---------------------------------------------------------------------------

    def to_dicts(self) -> list[dict[str, Any]]:
        """The entries as flat dicts, one per row or record, all with the same keys.

        A row gives ``rank`` (1-based), ``id``, ``collection``, ``score``, then
        ``session_id`` / ``message_id`` / ``conversation_root`` when any row has one, its
        stored fields, ``reasons`` (``"CODE(detail) +contribution"`` strings) and, under
        ``WITH CONTEXT``, ``context`` (the surrounding items as dicts with ``offset``).
        Timestamps are aware UTC `datetime`s (see the module docstring).
        """
        if self.records is not None:
            return [self._record_dict(record) for record in self.records]
        extra = [k for k in ("session_id", "message_id", "conversation_root")
                 if any(getattr(row, k) is not None for row in self.rows)]
        stamps = {"created_at", *self.timestamp_fields}
        return [self._row_dict(rank, row, extra, stamps)
                for rank, row in enumerate(self.rows, start=1)]

    @staticmethod
    def _row_dict(rank: int, row: Row, extra: list[str], stamps: set[str]) -> dict[str, Any]:
        data: dict[str, Any] = {"rank": rank, "id": row.id, "collection": row.collection,
                                "score": row.score}
        data.update((k, getattr(row, k)) for k in extra)
        for name, value in row.fields.items():
            if name not in data:
                data[name] = epoch_to_datetime(value) if name in stamps else value
        data["reasons"] = [r.render() for r in row.reasons]
        if row.context is not None:
            data["context"] = [{"offset": c.offset, "id": c.id, **{
                k: epoch_to_datetime(v) if k in stamps else v for k, v in c.fields.items()
                if k != "id"}} for c in row.context]
        return data

    def _record_dict(self, record: Mapping[str, Any]) -> dict[str, Any]:
        names = self.columns or list(record)
        return {name: iso_to_datetime(record.get(name)) if name in RECORD_TIMESTAMPS
                else record.get(name) for name in names}

    def to_pandas(self) -> Any:
        """The entries as a `pandas.DataFrame` (columns as in `to_dicts`; timestamps as
        ``datetime64[ns, UTC]``).

        Raises:
            ImportError: pandas is not installed (``pip install 'recallql[pandas]'``).
        """
        try:
            import pandas as pd
        except ImportError:
            raise _missing("pandas", "pandas", "to_pandas") from None
        dicts = self.to_dicts()
        return pd.DataFrame(dicts, columns=self._keys(dicts))

    def to_arrow(self) -> Any:
        """The entries as a `pyarrow.Table` (columns as in `to_dicts`; mappings such as
        DESCRIBE's field types as JSON text, since their keys differ from row to row).

        Raises:
            ImportError: pyarrow is not installed (``pip install 'recallql[arrow]'``).
        """
        try:
            import pyarrow as pa
        except ImportError:
            raise _missing("arrow", "pyarrow", "to_arrow") from None
        import json

        dicts = [{k: json.dumps(v, default=str) if isinstance(v, Mapping) else v
                  for k, v in d.items()} for d in self.to_dicts()]
        keys = self._keys(dicts)
        return pa.table({k: pa.array([d.get(k) for d in dicts]) for k in keys})

    def _keys(self, dicts: list[dict[str, Any]]) -> list[str]:
        if self.records is not None and self.columns is not None:
            return list(self.columns)
        keys: dict[str, None] = {}
        for d in dicts:
            keys.update(dict.fromkeys(d))
        return list(keys) or ["rank", "id", "collection", "score", "reasons"]

    # -- display -------------------------------------------------------------------------------

    def _words(self) -> str:
        """The statement's first four words (`` …`` after them when there are more)."""
        words = printable(" ".join(self.statement.split())).split(" ")  # a bound text may hold ESC
        return " ".join(words[:4]) + (" …" if len(words) > 4 else "")

    def _count(self) -> str:
        n = len(self)
        noun = ("record" if self.records is not None else "row") + ("" if n == 1 else "s")
        return f"{n} {noun}"

    def _head(self) -> str:
        return f"{self._words()}: {self._count()}"

    def _preview(self) -> str:
        """`` ['a' 1.00066, …]``: the first rows' ids and scores ('' for records or no rows)."""
        if self.records is not None:
            return ""
        shown = ", ".join(f"{row.id!r} {row.score:.5f}" for row in self.rows[:PREVIEW])
        more = ", …" if len(self.rows) > PREVIEW else ""
        return f" [{shown}{more}]" if shown else ""

    def __repr__(self) -> str:
        return f"<Result {self._head()}{self._preview()}>"

    __str__ = __repr__

    def _repr_html_(self) -> str:
        """A notebook table: the first `HTML_ROWS` entries of `to_dicts()` (text escaped)."""
        dicts = self.to_dicts()
        keys = [k for k in self._keys(dicts) if k != "reasons"]
        head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_short(d.get(k)))}</td>"
                                        for k in keys) + "</tr>" for d in dicts[:HTML_ROWS])
        more = (f"<p>… {len(dicts) - HTML_ROWS} more</p>" if len(dicts) > HTML_ROWS else "")
        return (f"<p><code>{html.escape(self._head())}</code></p><table><thead><tr>{head}"
                f"</tr></thead><tbody>{body}</tbody></table>{more}")


def _short(value: Any, width: int = 80) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.5f}"
    if isinstance(value, datetime):
        return format_timestamp(value)
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[:width - 1] + "…"
