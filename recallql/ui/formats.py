"""Output formats besides the table: ``json``, ``jsonl``, ``csv``, ``markdown``, and the
expanded (one field per line) display — shared by ``recallql query --format`` and the shell's
``\\format`` / ``\\x``.

Every format shows the full text of each row (a table cuts it to the terminal's width):

- ``json``: the statement's outcome as one JSON object (rows with reasons, warnings, stats);
- ``jsonl``: one JSON object per row or record (`flat_rows`), for ``jq`` or DuckDB;
- ``csv``: a header and a line per row or record (RFC 4180 quoting);
- ``markdown``: a pipe table (``|``, newlines and control characters escaped).

EXPLAIN prints its text format in ``csv`` and ``markdown`` (its JSON in ``json``/``jsonl``).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType

from recallql.engine.models import Explain, Result
from recallql.grammar.errors import printable
from recallql.grammar.timestamps import format_timestamp
from recallql.ui.render import Catalog, cell, record_view, row_text, to_json, why

FORMATS = ("table", "json", "jsonl", "csv", "markdown")


def flat_rows(result: Result, catalog: Catalog | None = None) -> tuple[list[str], list[dict]]:
    """Columns and one flat dict per entry: a ranked row as ``rank, id, score, created_at``
    (ISO-8601 UTC), ``session_id, role`` (message rows), ``conversation_root`` (grouped),
    ``text`` (in full), ``why``; a SHOW / DESCRIBE record as its columns."""
    if result.records is not None:
        columns = list(result.columns or [])
        return columns, [{c: r.get(c) for c in columns} for r in result.records]
    catalog = catalog or Catalog()
    messages = any(row.session_id for row in result.rows)
    grouped = any(row.conversation_root for row in result.rows)
    columns = ["rank", "id", "score", "created_at", *(("session_id", "role") if messages else ()),
               *(("conversation_root",) if grouped else ()), "text", "why"]
    rows = []
    for rank, row in enumerate(result.rows, start=1):
        created = row.fields.get("created_at")
        data = {"rank": rank, "id": row.id, "score": round(row.score, 5),
                "created_at": format_timestamp(created) if isinstance(created, int | float)
                and created == created else None}
        if messages:
            data.update(session_id=row.session_id, role=row.fields.get("role"))
        if grouped:
            data["conversation_root"] = row.conversation_root
        data.update(text=row_text(row, catalog.fields_of(row.collection)),
                    why=why(row.reasons))
        rows.append(data)
    return columns, rows


def to_csv(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """A header line and one line per row; lists and mappings as `cell` text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_plain(row.get(c)) for c in columns])
    return buffer.getvalue().rstrip("\n")


def to_markdown(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """A GitHub-flavoured Markdown pipe table (``|`` escaped, newlines as ``<br>``, control and
    bidi characters as escapes such as ``\\x1b``, as the table view shows them: a document to
    read, unlike csv and json, which keep the data as stored)."""
    def esc(value: Any) -> str:
        text = printable(_plain(value).replace("\\", "\\\\"))
        return text.replace("|", "\\|").replace("\n", "<br>")

    lines = ["| " + " | ".join(esc(c) for c in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(esc(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def to_jsonl(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """One JSON object per row (keys in column order), one per line."""
    return "\n".join(json.dumps({c: row.get(c) for c in columns}, ensure_ascii=False,
                                default=str) for row in rows)


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return cell(value)


def format_text(outcome: Result | Explain, fmt: str, catalog: Catalog | None = None) -> str:
    """A statement's outcome in a text format (``json``, ``jsonl``, ``csv``, ``markdown``).

    Raises:
        ValueError: an unknown format (or ``table``, which `render` draws).
    """
    if fmt == "json":
        return to_json(outcome, catalog, indent=None)
    if isinstance(outcome, Explain):
        if fmt == "jsonl":
            return to_json(outcome, catalog, indent=None)
        if fmt in ("csv", "markdown"):
            return outcome.render()
    writers = {"jsonl": to_jsonl, "csv": to_csv, "markdown": to_markdown}
    if fmt not in writers:
        raise ValueError(f"unknown format {fmt!r} (use one of: {', '.join(FORMATS)})")
    assert isinstance(outcome, Result)
    return writers[fmt](*flat_rows(outcome, catalog))


def expanded(outcome: Result, catalog: Catalog | None = None) -> RenderableType:
    """Each row or record vertically, one ``field  value`` line per field under a
    ``-[ RECORD n ]-`` title, text in full (psql's ``\\x``)."""
    columns, rows = flat_rows(outcome, catalog)
    return Group(*(record_view({c: row.get(c) for c in columns}, title=f"-[ RECORD {i} ]-")
                   for i, row in enumerate(rows, start=1)))
