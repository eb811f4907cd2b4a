"""What the MCP tools send and receive: statements built from tool arguments (values always as
parameters, names quoted as identifiers), memory items, and compact JSON results.

A result row is ``{"id", "score", "text", "why", ...}`` plus, when present, ``created_at``
(ISO-8601 UTC), ``doc_id`` (when it differs from the id), ``session_id``, ``role``,
``message_id``, ``conversation_root`` and the row's other non-empty declared fields.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from recallql.grammar.keywords import quote_identifier
from recallql.grammar.suggest import closest, did_you_mean
from recallql.grammar.timestamps import format_timestamp
from recallql.index.errors import IngestError
from recallql.index.timestamps import to_epoch
from recallql.ui.render import row_text, why

#: Fields a row always carries in `row_json` (the others go under their own names).
_BUILTIN = {"id", "doc_id", "entity", "position", "created_at", "session_id", "message_id",
            "role", "seq", "active", "compacted"}


def dumps(data: Any) -> str:
    """Compact JSON text (no spaces, Unicode as is)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


class ArgumentError(ValueError):
    """A tool argument that cannot be used, named as the agent wrote it (``collection``,
    ``filters.tags``, ``reason``), never by the statement a tool builds from it.

    Attributes:
        argument: the argument's path (``filters.created_at``).
        message: what is wrong with it and what to give instead.
    """

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument
        self.message = message


def check_collection(name: str, collections: list[str]) -> None:
    """Refuse a `collection` argument that names no collection.

    Raises:
        ArgumentError: ``collection: no collection 'dcos' (did you mean 'docs'?)``.
    """
    if name in collections:
        return
    hint = did_you_mean(name, collections, listing=False)
    raise ArgumentError("collection", f"no collection '{name}' ("
                        + (hint or f"collections: {', '.join(collections)}") + ")")


#: How a timestamp filter value may be written, for its error.
TIMESTAMP_FORMATS = ('ISO-8601 text ("2026-01-05T10:00:00Z", "2026-01-05T12:00:00+02:00", or '
                     'a date "2026-01-05" for its midnight UTC) or epoch seconds')


def search_statement(collection: str, *, session: str | None, filters: Mapping[str, Any],
                     field_types: Mapping[str, str], group_by: str | None,
                     text_fields: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """``SEARCH <collection> MATCHING :text [WHERE ...] [FOR SESSION :session] [GROUP BY ...]
    LIMIT :limit`` and the parameters it needs besides ``text`` and ``limit``.

    A filter ``field → value`` becomes ``field = :fN``; a list value ``field IN (...)``; on a
    ``list[str]`` field, ``field CONTAINS :fN`` (a list value: any of them). On a timestamp
    field, a value matches the microsecond a row shows it with, as in WHERE (``created_at``
    copied from a result finds that row).

    Args:
        field_types: every filterable field of the collection (built-in and declared) and its
            type name (``str``, ``list[str]``, ``timestamp``, ...).
        text_fields: the collection's text fields (searched by `text`, not filterable).

    Raises:
        ArgumentError: a filter naming no filterable field, a value that does not fit its
            field, or an empty list, as ``filters.<field>: ...``.
    """
    params: dict[str, Any] = {}
    parts = []
    for number, (name, value) in enumerate(filters.items()):
        kind = _filter_field(collection, name, field_types, text_fields)
        parts.append(_condition(name, value, kind, number, params))
    text = f"SEARCH {quote_identifier(collection)} MATCHING :text"
    if parts:
        text += " WHERE " + " AND ".join(parts)
    if session is not None:
        text += " FOR SESSION :session"
        params["session"] = session
    if group_by is not None:
        text += f" GROUP BY {group_by.upper()}"
    return text + " LIMIT :limit", params


def _filter_field(collection: str, name: str, field_types: Mapping[str, str],
                  text_fields: tuple[str, ...]) -> str:
    """The type of filter `name`'s field.

    Raises:
        ArgumentError: a text field, or no field of the collection (with a did-you-mean).
    """
    kind = field_types.get(name)
    if kind is not None:
        return kind
    where = f"filters.{name}"
    if name in text_fields:
        raise ArgumentError(where, f"'{name}' is a text field of collection '{collection}': "
                            "its words are searched by the `text` argument, not filtered")
    hint = did_you_mean(name, [*field_types, *text_fields], listing=False)
    raise ArgumentError(where, f"unknown field '{name}' in collection '{collection}' ("
                        + (hint or f"its filterable fields: {', '.join(field_types)}") + ")")


def _condition(name: str, value: Any, kind: str, number: int,
               params: dict[str, Any]) -> str:
    where = f"filters.{name}"
    if value == []:  # `IN ()` or `()`: a statement the caller never wrote, failing to parse
        raise ArgumentError(where, "an empty list; a list means any of its values, so give "
                            "at least one (or leave the filter out)")
    values = value if isinstance(value, list) else [value]
    _check_filter(where, kind, values)
    field = quote_identifier(name)
    keys = [f"f{number}_{i}" for i in range(len(values))]
    params.update(zip(keys, values, strict=True))
    if kind == "list[str]":
        contains = [f"{field} CONTAINS :{k}" for k in keys]
        return contains[0] if len(contains) == 1 else "(" + " OR ".join(contains) + ")"
    if isinstance(value, list):
        return f"{field} IN ({', '.join(':' + k for k in keys)})"
    return f"{field} = :{keys[0]}"


def _is_instant(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False
    try:
        to_epoch(value)
    except (ValueError, OverflowError):
        return False
    return True


#: What a filter value of a field must be: (test, what to give).
_FILTER_VALUES: dict[str, tuple[Any, str]] = {
    "str": (lambda v: isinstance(v, str), "a string or a list of strings"),
    "list[str]": (lambda v: isinstance(v, str), "a string or a list of strings"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool),
            "a whole number or a list of them"),
    "float": (lambda v: isinstance(v, int | float) and not isinstance(v, bool),
              "a number or a list of them"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "timestamp": (_is_instant, f"{TIMESTAMP_FORMATS}, or a list of them"),
}


def _check_filter(where: str, kind: str, values: list[Any]) -> None:
    """Refuse a filter value that does not fit its field, naming the filter (not the
    statement built from it).

    Raises:
        ArgumentError: ``filters.tags: field 'tags' is list[str]; give a string or a list of
            strings, got 5``.
    """
    test, words = _FILTER_VALUES.get(kind, (None, ""))
    bad = [v for v in values if test is not None and not test(v)]
    if bad and kind == "timestamp" and isinstance(bad[0], str):
        raise ArgumentError(where, f"{json.dumps(bad[0])} is not a timestamp (years 1..9999); "
                            f"give {words}")
    if bad:
        name = where.removeprefix("filters.")
        raise ArgumentError(where, f"field '{name}' is {kind}; give {words}, got "
                            f"{json.dumps(bad[0])}")


def memory_id(collection: str, text: str) -> str:
    """A stable id for a remembered text: the same text in the same collection gets the same
    id, so remembering it twice stores it once (the second is `unchanged`)."""
    digest = hashlib.blake2b(f"{collection}\0{text}".encode(), digest_size=8).hexdigest()
    return f"mem:{digest}"


def check_fields(collection: str, number: int, fields: Mapping[str, Any], known: list[str],
                 text_fields: list[str]) -> None:
    """Refuse a key of a memory's `fields` that the collection has no field for (the ingest
    error named the generated item id and listed Python lists).

    Raises:
        ArgumentError: ``items.0.fields.colour: unknown field 'colour' in collection 'docs'
            (its declared fields: source, tags)``.
    """
    for key in fields:
        if key in known or key in text_fields:  # text fields: memory_item says why not
            continue
        settable = [name for name in known if name not in _OWN_ARGUMENTS]
        match = closest(key, [*settable, *(name for name in known if name in _OWN_ARGUMENTS)])
        if match in _OWN_ARGUMENTS:
            hint = f"did you mean '{match}'? give it as the memory's own '{match}'"
        elif match is not None:
            hint = f"did you mean '{match}'?"
        else:
            hint = f"'fields' can set: {', '.join(settable) or 'nothing'}"
        raise ArgumentError(f"items.{number}.fields.{key}", f"unknown field '{key}' in "
                            f"collection '{collection}' ({hint})")


def memory_item(collection: str, text_fields: list[str], memory: Mapping[str, Any],
                now: float) -> dict[str, Any]:
    """A `remember` item as an ingest item: ``text`` into the collection's body text field
    (``body``, else its last text field), ``title`` into ``title`` when the collection has
    one, ``created_at`` now unless given; ``fields`` spread as declared fields."""
    body = "body" if "body" in text_fields else text_fields[-1]
    item: dict[str, Any] = {"id": memory.get("id") or memory_id(collection, memory["text"]),
                            body: memory["text"],
                            "created_at": memory.get("created_at") or now}
    title = memory.get("title")
    if title is not None and "title" in text_fields:
        item["title"] = title
    elif title is not None:
        item[body] = f"{title}\n\n{memory['text']}"
    for key in ("tags", "source", "entity", "doc_id"):
        if memory.get(key) is not None:
            item[key] = memory[key]
    extra = memory.get("fields") or {}
    for key in extra:
        if key in text_fields:
            hint = "the collection's text fields are filled from 'text' and 'title'"
        elif key in _OWN_ARGUMENTS:
            hint = f"give it as the memory's own {key!r}"
        else:
            continue
        raise IngestError(f"cannot be set through 'fields' ({hint})", item=str(item["id"]),
                          field=key)
    item.update(extra)
    return item


#: Keys of an ingest item that `remember` sets from its own arguments: ``fields`` may not
#: override them (an id, a text or a time given there silently replaced the argument's).
_OWN_ARGUMENTS = frozenset({"id", "text", "title", "tags", "source", "entity", "created_at",
                            "doc_id"})


def row_json(row: Any, text_fields: tuple[str, ...]) -> dict[str, Any]:
    """One result row as compact JSON data (see the module docstring)."""
    fields = row.fields
    data: dict[str, Any] = {"id": row.id, "score": round(row.score, 5),
                            "text": row_text(row, text_fields), "why": why(row.reasons)}
    created = fields.get("created_at")
    if isinstance(created, int | float) and math.isfinite(created):
        data["created_at"] = format_timestamp(created)
    if fields.get("doc_id") not in (None, row.id):
        data["doc_id"] = fields["doc_id"]
    for key in ("session_id", "role", "message_id", "conversation_root"):
        value = getattr(row, key, None) if key != "role" else fields.get("role")
        if value is not None:
            data[key] = value
    for name, value in fields.items():
        if name not in _BUILTIN and name not in text_fields and value not in (None, [], ""):
            data[name] = value
    return data


def result_json(result: Any, text_fields: tuple[str, ...]) -> dict[str, Any]:
    """A `Result` as compact JSON data: ``{"collection", "rows": [...]}`` for SEARCH /
    RETRIEVE, ``{"columns", "records"}`` for SHOW / DESCRIBE, with ``warnings`` when any."""
    data: dict[str, Any]
    if result.records is not None:
        data = {"columns": result.columns, "records": result.records}
    else:
        data = {"collection": result.collection,
                "rows": [row_json(row, text_fields) for row in result.rows]}
    if result.warnings:
        data["warnings"] = [f"{n.code.value}: {n.message}" for n in result.warnings]
    if result.truncated:
        data["truncated"] = True
    return data
