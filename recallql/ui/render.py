"""Terminal rendering of results for the CLI, the REPL and the demo (rich).

- `result_table`: SEARCH / RETRIEVE rows as a table (rank, id, score, date, text, why).
- `records_table`: SHOW / DESCRIBE records as a table.
- `explain_text`: EXPLAIN in its text format (`Explain.to_text()`), wrapped and coloured.
- `render`: any of the above for a statement's outcome, in ``table`` or ``json`` format.

User data never goes through rich markup: every cell is a `rich.text.Text`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich import box
from rich.cells import cell_len, set_cell_size
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from recallql.engine.models import Explain, ReasonEntry, Result, Row
from recallql.engine.reasons import Reason
from recallql.grammar.errors import printable
from recallql.grammar.timestamps import format_timestamp

FORMATS = ("table", "json")
#: Output width when stdout is not a terminal and ``COLUMNS`` is not set.
PIPE_WIDTH = 120
TEXT_WIDTH = 72
#: Leg reasons: the short label, and the leg name it stands for (other legs show their name).
_LEG_SHORT = {Reason.LEXICAL_MATCH: ("lex", "lexical"),
              Reason.SEMANTIC_MATCH: ("sem", "semantic")}
_SHORT = {Reason.SESSION_KEYWORDS: "keywords", Reason.SESSION_VELOCITY: "velocity",
          Reason.SESSION_ENTITY: "entity", Reason.SIGNAL_BOOST: "signal",
          Reason.RECENCY: "recency", Reason.RECENCY_FUTURE_CLAMPED: "recency(future)",
          Reason.CONTEXT_MATCH: "context"}


@dataclass(frozen=True)
class Catalog:
    """What rendering needs to know of the collections (`Catalog.of(db)`).

    Attributes:
        text_fields: each collection's text fields (the text column of result tables).
        timestamps: each collection's timestamp fields besides ``created_at`` (ISO strings in
            JSON output).
    """

    text_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    timestamps: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, db: Any) -> Catalog:
        """The catalog of a `Database`."""
        from recallql.api import FieldType

        infos = db.collections()
        return cls({i.name: tuple(i.text_fields) for i in infos},
                   {i.name: frozenset(n for n, t in i.fields.items() if t == FieldType.TIMESTAMP)
                    for i in infos})

    def fields_of(self, collection: str | None) -> tuple[str, ...]:
        """The text fields of `collection` (empty when unknown)."""
        return self.text_fields.get(collection or "", ())

    def timestamp_fields(self, collection: str | None) -> frozenset[str]:
        """``created_at`` and the declared timestamp fields of `collection`."""
        return self.timestamps.get(collection or "", frozenset()) | {"created_at"}


def shorten(text: str, width: int = TEXT_WIDTH) -> str:
    """`text` on one line, cut to `width` terminal cells with an ellipsis (a CJK character or
    an emoji takes two cells: cutting by characters made such text twice as wide as its
    column, and the table squeezed the other columns to nothing)."""
    flat = " ".join(str(text).split())
    if cell_len(flat) <= width:
        return flat
    return set_cell_size(flat, width - 1).rstrip() + "…"


def date_of(value: Any) -> str:
    """An epoch-seconds or datetime value as ``YYYY-MM-DD`` (UTC; the date part of
    `format_timestamp`, for the results table's date column); ``""`` when missing."""
    if isinstance(value, datetime) or (isinstance(value, int | float) and value == value):
        return format_timestamp(value)[:10]
    return ""


def row_text(row: Row, text_fields: Sequence[str] = ()) -> str:
    """The row's text: its collection's text fields joined with `` — ``.

    Without `text_fields`, the row's string fields other than the built-in ones are used.
    """
    fields = row.fields
    names = list(text_fields) or [k for k, v in fields.items() if isinstance(v, str) and k not in
                                  {"id", "doc_id", "entity", "session_id", "role", "source"}]
    return " — ".join(str(fields[n]) for n in names if fields.get(n))


def why(reasons: Sequence[ReasonEntry]) -> str:
    """A compact account of a row's score: leg ranks, then the boosts that added something.

    Example: ``lex#1 sem#3 · keywords +0.300 · recency +0.004``.
    """
    legs, boosts = [], []
    for r in reasons:
        if r.code in _LEG_SHORT:
            short, default = _LEG_SHORT[r.code]
            label = short if r.leg in (None, default) else r.leg
            legs.append(label + (f"#{r.rank}" if r.rank is not None else ""))
        elif r.code is Reason.NO_RELEVANCE:
            legs.append("boosts only")
        elif r.code in _SHORT and r.contribution >= 0.0005:
            boosts.append(f"{_SHORT[r.code]} +{r.contribution:.3f}")
        elif r.code is Reason.RECENCY_MISSING_DATE:
            boosts.append("no date")
    return " · ".join([" ".join(legs)] + boosts if legs else boosts)


WHY_WIDTH = 34
MIN_TEXT = 30


def wrap_parts(text: str, width: int, sep: str = " · ") -> str:
    """`text` made of `sep`-separated parts, broken into lines of at most `width` characters
    between parts (a part longer than `width` gets a line of its own)."""
    lines: list[str] = []
    for part in text.split(sep):
        if lines and len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines.append(part)
    return "\n".join(lines)


def _widths(heads: list[str], rows: list[list[str]]) -> list[int]:
    return [max([len(h), *(cell_len(line) for r in rows for line in r[i].split("\n"))])
            for i, h in enumerate(heads)]


def _room(heads: list[str], rows: list[list[str]], width: int) -> int:
    """The width left for the text column once the others have theirs."""
    return width - 3 * (len(heads) - 1) - sum(
        w for h, w in zip(heads, _widths(heads, rows), strict=True) if h != "text")


def _cells(result: Result, text_fields: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """Column names and the cells of every row (text and ids not yet cut to width), with
    control and bidi characters escaped (`printable`): a stored text's ESC sequences would
    otherwise drive the terminal (clear it, retitle it, recolour what follows)."""
    messages = any(row.session_id for row in result.rows)
    grouped = any(row.conversation_root for row in result.rows)
    heads = ["#", "id", "score", "date", *(("session", "role") if messages else ()),
             *(("conversation",) if grouped else ()), "text", "why"]
    rows = []
    for rank, row in enumerate(result.rows, start=1):
        cells = [str(rank), row.id, f"{row.score:.5f}", date_of(row.fields.get("created_at"))]
        if messages:
            cells += [shorten(row.session_id or "", 24), str(row.fields.get("role") or "")]
        if grouped:
            cells.append(shorten(row.conversation_root or "", 24))
        rows.append([*cells, row_text(row, text_fields), why(row.reasons)])
    return heads, [[printable(c) for c in cells] for cells in rows]


def _narrow_why(heads: list[str], rows: list[list[str]], width: int) -> list[list[str]]:
    """Wrap the why column between its parts: at `WHY_WIDTH`, narrower (down to 16) while the
    text column has less than `MIN_TEXT` columns."""
    at = heads.index("why")
    longest = max([3, *(len(r[at]) for r in rows)])
    plain = [[*r[:at], "", *r[at + 1:]] for r in rows]
    room = _room(heads, plain, width)
    cap = max(16, min(WHY_WIDTH, room - MIN_TEXT, longest))
    return [[*r[:at], wrap_parts(r[at], cap), *r[at + 1:]] for r in rows]


def _fit(heads: list[str], rows: list[list[str]], width: int
         ) -> tuple[list[str], list[list[str]]]:
    """Wrap the why column, drop the date (then the role) column, then shorten ids, until the
    text column has some room; then cut the text to the room left. The why column stays: it is
    the point of the table."""
    rows = _narrow_why(heads, rows, width)
    for optional in ("date", "role"):  # narrow terminals: the text matters more
        if _room(heads, rows, width) >= MIN_TEXT or optional not in heads:
            continue
        at = heads.index(optional)
        heads, rows = heads[:at] + heads[at + 1:], [r[:at] + r[at + 1:] for r in rows]
    room = _room(heads, rows, width)
    id_width = max([2, *(cell_len(r[1]) for r in rows)])
    if room < 24 and id_width > 16:
        cut = min(id_width - 16, 24 - room)
        rows = [[r[0], shorten(r[1], id_width - cut), *r[2:]] for r in rows]
        room += cut
    text_at = heads.index("text")
    for cells in rows:
        cells[text_at] = shorten(cells[text_at], max(12, room))
    return heads, rows


def result_table(result: Result, text_fields: Sequence[str] = (), title: str | None = None,
                 width: int = 100) -> Table:
    """SEARCH / RETRIEVE rows as a table fitting `width` columns (the text column takes what the
    others leave; the why column wraps between its parts); message rows also show session,
    role and (when grouped) conversation."""
    heads, rows = _fit(*_cells(result, text_fields), width)
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False,
                  show_edge=False)
    for head in heads:
        table.add_column(head, justify="right" if head in ("#", "score") else "left",
                         style="dim" if head in ("#", "why") else None,
                         no_wrap=True, overflow="ellipsis")
    for cells in rows:
        table.add_row(*(Text(c) for c in cells))
    return table


_ISO_FRACTION = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\.\d+(Z|[+-]\d{2}:\d{2})?$")


def cell(value: Any) -> str:
    """A record value as table text: lists comma-joined, dicts as ``k=v``, None empty,
    timestamps to the second (``2025-01-06T09:00:00Z``; JSON output keeps the full value)."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={cell(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.5g}"
    if isinstance(value, datetime):
        value = format_timestamp(value)
    text = str(value)
    fraction = _ISO_FRACTION.match(text)
    return fraction.group(1) + (fraction.group(2) or "") if fraction else text


def _single_token(cells: Sequence[str]) -> bool:
    return all(not any(ch.isspace() for ch in c) for c in cells)


def _least_width(name: str, cells: Sequence[str]) -> int:
    """The narrowest a records column can be without cutting a word: single-token columns (ids,
    timestamps, statuses) need their longest value, others wrap between words."""
    longest = max([len(name), *(cell_len(c) for c in cells)])
    if _single_token(cells):
        return longest
    longest_word = max([cell_len(w) for c in cells for w in c.split()] or [0])
    return max(len(name), min(longest, max(longest_word, 16)))


def _add_column(table: Table, name: str, cells: Sequence[str]) -> None:
    """A column that never splits a word: single-token values stay on one line, others wrap
    between words; a word too long for the column ends in '…'."""
    table.add_column(name, no_wrap=_single_token(cells), overflow="ellipsis")


_ISO_SECOND = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}):\d{2}Z$")


def short_time(text: str) -> str:
    """``2025-01-06T09:00:00Z`` as ``2025-01-06 09:00`` (UTC, to the minute) for tables; other
    text unchanged."""
    match = _ISO_SECOND.match(text)
    return f"{match.group(1)} {match.group(2)}" if match else text


def fit_columns(columns: Sequence[str], rows: list[list[str]]
                ) -> tuple[list[str], list[list[str]]]:
    """Drop the columns that are empty in every row (when there are rows), and shorten
    timestamps to the minute, so wide records fit."""
    if not rows:
        return list(columns), rows
    keep = [i for i in range(len(columns)) if any(r[i] for r in rows)]
    return [columns[i] for i in keep], [[short_time(r[i]) for i in keep] for r in rows]


def records_table(columns: Sequence[str], records: Sequence[Mapping[str, Any]],
                  title: str | None = None, width: int | None = None) -> RenderableType:
    """SHOW / DESCRIBE output (or any list of records) as a table, without the columns empty
    in every record and with timestamps to the minute; when it still cannot fit `width`
    columns without cutting values, each record vertically instead (like psql's expanded
    display, which keeps every field and full timestamps)."""
    full = [[printable(cell(record.get(c))) for c in columns] for record in records]
    if width is not None and len(columns) > 2 and _too_wide(*fit_columns(columns, full), width):
        return Group(*(record_view(dict(zip(columns, row, strict=True)), title=f"-[ {i} ]-")
                       for i, row in enumerate(full, start=1)))
    columns, rows = fit_columns(columns, full)
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False,
                  show_edge=False)
    for i, name in enumerate(columns):
        _add_column(table, name, [r[i] for r in rows])
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    return table


def _too_wide(columns: Sequence[str], rows: list[list[str]], width: int) -> bool:
    least = sum(_least_width(n, [r[i] for r in rows]) for i, n in enumerate(columns))
    return least + 3 * (len(columns) - 1) > width


def record_view(record: Mapping[str, Any], title: str | None = None) -> Table:
    """One record vertically, a ``field  value`` line per field (``SHOW SESSION``,
    ``recallql sessions show``; under a `title` and without the header in expanded display)."""
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False,
                  show_edge=False, show_header=title is None, title_style="dim")
    values = [printable(cell(v)) for v in record.values()]
    table.add_column("field", no_wrap=True)
    _add_column(table, "value", values)
    for name, value in zip(record, values, strict=True):
        table.add_row(Text(printable(str(name))), Text(value))
    return table


_ROW_HEAD = re.compile(r"#\d+ ")
_REASON_BREAK = re.compile(r"  (?=[A-Z][A-Z_]+(?:\(| [+-]\d))")
_EXPLAIN_STYLES = (  # (pattern, style) applied in order over EXPLAIN's text format
    (re.compile(r"^ *(?:[A-Za-z]+(?=:)|[A-Z][A-Za-z]+(?=  rows=|$))", re.MULTILINE),
     "bold cyan"),  # an operator's name (one without properties has no colon)
    (re.compile(r"(?<= )[a-z_]+(?==)"), "dim"),
    (re.compile(r"rows=\S+ time=\S+"), "yellow"),
    (re.compile(r"^(?:warning|stats): .*$", re.MULTILINE), "yellow"),
    (re.compile(r"^#\d+ \S+", re.MULTILINE), "bold"),
    (re.compile(r"(?<= )\+0\.0*[1-9]\d*\b"), "green"),
    (re.compile(r"(?<= )[+-]0\.0+\b"), "dim"),
    (re.compile(r"^\(no rows\)$", re.MULTILINE), "dim"),
)


def wrap_reasons(line: str, width: int) -> list[str]:
    """A row's reason line of EXPLAIN's text format, cut between reasons (never inside one) so
    it fits `width` columns; continuation lines keep the line's indent."""
    indent = line[:len(line) - len(line.lstrip(" "))]
    parts = _REASON_BREAK.split(line.strip())
    lines, current = [], indent + parts[0]
    for part in parts[1:]:
        if len(current) + 2 + len(part) > width:
            lines.append(current)
            current = indent + part
        else:
            current += "  " + part
    return [*lines, current]


def explain_text(explain: Explain, width: int = 100) -> Text:
    """EXPLAIN in its text format (`Explain.to_text()`: the plan root first, one
    ``Operator: key=value`` line per operator, then each row's score arithmetic), with long
    reason lines wrapped to `width` and colours that only show on a terminal."""
    lines: list[str] = []
    in_rows = False
    for line in explain.to_text().splitlines():
        in_rows = in_rows or bool(_ROW_HEAD.match(line))
        reason = in_rows and line.startswith("   ") and not line.startswith("    ")
        lines.extend(wrap_reasons(line, width) if reason and len(line) > width else [line])
    text = Text("\n".join(lines), no_wrap=True, overflow="ignore")
    for pattern, style in _EXPLAIN_STYLES:
        text.highlight_regex(pattern, style)
    return text


def warnings_text(result: Result) -> Text | None:
    """The statement's warnings (and truncation), one per line, or None."""
    lines = [f"warning: {n.code.value}: {n.message}" for n in result.warnings]
    if result.truncated:
        lines.append("note: the result is a truncated (safe ranked) prefix")
    return Text("\n".join(lines), style="yellow") if lines else None


def json_data(outcome: Result | Explain, catalog: Catalog | None = None) -> dict[str, Any]:
    """The outcome as JSON data (the pydantic dump: rows with reasons, warnings, snapshot,
    stats), with row fields that are timestamps (``created_at`` and the collection's declared
    timestamp fields) as ISO-8601 UTC strings instead of epoch seconds. An EXPLAIN's
    ``format`` is ``"json"``: the format it is shown in (``--json`` asks for it as much as
    ``EXPLAIN FORMAT JSON`` does)."""
    data = outcome.model_dump(mode="json")
    if isinstance(outcome, Explain):
        data["format"] = "json"
    result = data["result"] if isinstance(outcome, Explain) else data
    for row in result["rows"]:
        stamps = (catalog or Catalog()).timestamp_fields(row["collection"])
        for fields in [row["fields"], *(item["fields"] for item in row.get("context") or ())]:
            for name in stamps:
                value = fields.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool) \
                        and math.isfinite(value):
                    fields[name] = format_timestamp(value)
    return data


def to_json(outcome: Result | Explain, catalog: Catalog | None = None,
            indent: int | None = 2) -> str:
    """The outcome as JSON text (see `json_data`); one line when `indent` is None."""
    return json.dumps(json_data(outcome, catalog), indent=indent, ensure_ascii=False)


def json_lines(outcomes: Sequence[Result | Explain], catalog: Catalog | None = None) -> str:
    """``--json`` output: one JSON object per statement, one per line (JSON Lines)."""
    return "\n".join(to_json(o, catalog, indent=None) for o in outcomes)


def summary(outcome: Result | Explain) -> Text:
    """A one-line footer: row count and statement-level notes."""
    result = outcome.result if isinstance(outcome, Explain) else outcome
    count = len(result)
    noun = "row" if count == 1 else "rows"
    return Text(f"({count} {noun})", style="dim")


def _is_one_session(outcome: Result) -> bool:
    """Whether `outcome` is SHOW SESSION's: one session's snapshot as a record."""
    return (outcome.session_snapshot is not None and outcome.columns is not None
            and len(outcome.records or []) == 1)


def render(outcome: Result | Explain, catalog: Catalog | None = None,
           width: int = 100) -> RenderableType:
    """A statement's outcome for the terminal: EXPLAIN in the format it asked for (JSON for
    ``EXPLAIN FORMAT JSON``, else `explain_text`), catalog records or ranked rows as tables."""
    catalog = catalog or Catalog()
    if isinstance(outcome, Explain):
        if outcome.format == "json":
            return Text(to_json(outcome, catalog), no_wrap=True, overflow="ignore")
        return explain_text(outcome, width)
    parts: list[RenderableType] = []
    if _is_one_session(outcome) and outcome.records and outcome.columns:
        return record_view({c: outcome.records[0].get(c) for c in outcome.columns})
    if outcome.columns is not None:
        parts.append(records_table(outcome.columns, outcome.records or [], width=width))
    elif outcome.rows:
        parts.append(result_table(outcome, catalog.fields_of(outcome.collection), width=width))
    notes = warnings_text(outcome)
    if notes is not None:
        parts.append(notes)
    parts.append(summary(outcome))
    return Group(*parts)


def make_console(stderr: bool = False) -> Console:
    """A console for tables and messages: the terminal's width on a terminal, else ``COLUMNS``
    or `PIPE_WIDTH` (rich's 80 would squeeze tables written to a pipe or a file)."""
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").strip().isdigit():
        console.width = PIPE_WIDTH
    return console


def print_outcome(console: Console, outcome: Result | Explain,
                  catalog: Catalog | None = None) -> None:
    """Print `render(outcome)` on `console` at its width (EXPLAIN's text and JSON unwrapped and
    uncropped: they wrap where they were laid out)."""
    shown = render(outcome, catalog, width=console.width)
    if isinstance(shown, Text):
        console.print(shown, soft_wrap=True)
    else:
        print_table(console, shown)


def print_table(console: Console, table: RenderableType) -> None:
    """Print a table (or tables with their notes) on `console`. To a pipe or a file, each
    line goes without the spaces rich pads its last cell with (the columns before it keep
    their widths, so the alignment is unchanged); a terminal gets the table as drawn."""
    if console.is_terminal:
        console.print(table)
        return
    with console.capture() as captured:
        console.print(table)
    lines = captured.get().split("\n")
    console.file.write("\n".join(line.rstrip(" ") for line in lines))
    console.file.flush()


__all__ = ["FORMATS", "Catalog", "cell", "date_of", "explain_text", "json_data",
           "json_lines", "make_console", "print_outcome", "print_table", "record_view",
           "records_table", "render", "result_table", "row_text",
           "shorten", "summary", "to_json", "warnings_text", "why", "wrap_parts", "wrap_reasons"]
