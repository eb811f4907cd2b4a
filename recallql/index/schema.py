"""Collection schemas: field types, `CollectionInfo`, and the built-in collections."""

from __future__ import annotations

import datetime as dt
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from recallql.index.errors import StoreError

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

#: Keys every item may carry besides its text and declared fields.
CORE_KEYS = frozenset({"id", "created_at", "entity", "doc_id", "position", "vector"})
#: Names no text or declared field may have: the core keys, and ``rowid`` (the internal row
#: number that `CollectionSnapshot.fetch` returns beside the fields).
RESERVED_NAMES = CORE_KEYS | {"rowid"}


class FieldType(StrEnum):
    """Type of a declared (filterable) metadata field."""

    STR = "str"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    TIMESTAMP = "timestamp"
    LIST_STR = "list[str]"


_PY_TYPES: dict[object, FieldType] = {
    str: FieldType.STR,
    int: FieldType.INT,
    float: FieldType.FLOAT,
    bool: FieldType.BOOL,
    dt.datetime: FieldType.TIMESTAMP,
    list: FieldType.LIST_STR,
    list[str]: FieldType.LIST_STR,
    typing.List[str]: FieldType.LIST_STR,  # noqa: UP006 - accepted spelling from callers
}


def field_type(spec: object) -> FieldType:
    """Normalise a field type given as a Python type, `FieldType` or its name.

    Args:
        spec: ``str``, ``int``, ``float``, ``bool``, ``datetime``, ``list[str]`` (or ``list``),
            a `FieldType`, or one of the names ``"str"``, ``"int"``, ``"float"``, ``"bool"``,
            ``"timestamp"``, ``"list[str]"``.

    Raises:
        StoreError: for anything else.
    """
    if isinstance(spec, str):
        try:
            return FieldType(spec)
        except ValueError:
            pass
    else:
        try:
            found = _PY_TYPES.get(spec)
        except TypeError:
            found = None
        if found is not None:
            return found
    allowed = ", ".join(t.value for t in FieldType)
    raise StoreError(f"unsupported field type {spec!r} (use one of: {allowed})")


def check_name(name: object, what: str) -> str:
    """Return `name` if it is a valid identifier (letters, digits, `_`; 1–64 chars).

    Raises:
        StoreError: otherwise.
    """
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise StoreError(
            f"invalid {what} name {name!r}: use 1-64 letters, digits or '_', not starting "
            "with a digit"
        )
    return name


@dataclass(frozen=True)
class CollectionInfo:
    """A collection's schema.

    Attributes:
        name: collection name.
        text_fields: names of the text fields, concatenated (joined with ``"\\n"``) into the one
            BM25 field.
        fields: declared metadata fields and their types.
        dim: vector dimension.
        embedder_name: name of the embedder the collection's vectors come from, or ``None`` when
            vectors are only ever supplied by the caller.
    """

    name: str
    text_fields: tuple[str, ...]
    fields: Mapping[str, FieldType] = field(default_factory=dict)
    dim: int = 0
    embedder_name: str | None = None

    def same_schema(self, other: CollectionInfo) -> bool:
        """True when names, text fields and declared fields are equal."""
        return (
            self.name == other.name
            and self.text_fields == other.text_fields
            and dict(self.fields) == dict(other.fields)
        )


def check_fields(fields: object, collection: str) -> Mapping[str, object]:
    """`fields` of `create_collection` / `add_fields`: a mapping of names to types (or None).

    Raises:
        StoreError: anything else, e.g. a list of names without their types.
    """
    if fields is None:
        return {}
    if not isinstance(fields, Mapping):
        raise StoreError(f"collection {collection!r}: fields must be a mapping of field name to "
                         f"type, e.g. {{'tag': str, 'year': int}}, got "
                         f"{type(fields).__name__} {fields!r:.60}")
    return fields


def make_info(
    name: str,
    text_fields: Sequence[str],
    fields: Mapping[str, object] | None,
    dim: int,
    embedder_name: str | None,
) -> CollectionInfo:
    """Validate a collection definition and build its `CollectionInfo`.

    Raises:
        StoreError: bad names, duplicate or reserved field names, no text field, bad dimension.
    """
    check_name(name, "collection")
    if isinstance(text_fields, str):
        text_fields = (text_fields,)
    if not isinstance(text_fields, Sequence):
        raise StoreError(f"collection {name!r}: text_fields must be a list of field names, "
                         f"e.g. ('title', 'body'), got {type(text_fields).__name__} "
                         f"{text_fields!r:.60}")
    texts = tuple(check_name(t, "text field") for t in text_fields)
    if not texts:
        raise StoreError(f"collection {name!r} needs at least one text field")
    declared = {check_name(k, "field"): field_type(v)
                for k, v in check_fields(fields, name).items()}
    names = list(texts) + list(declared)
    clash = sorted({n for n in names if n in RESERVED_NAMES or names.count(n) > 1})
    if clash:
        raise StoreError(
            f"collection {name!r}: field names {clash} are reserved or duplicated "
            f"(reserved: {sorted(RESERVED_NAMES)})"
        )
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 65536:
        raise StoreError(f"collection {name!r}: vector dimension must be 1..65536, got {dim!r}")
    return CollectionInfo(name, texts, declared, dim, embedder_name)


BUILTIN_COLLECTIONS: dict[str, tuple[tuple[str, ...], dict[str, FieldType]]] = {
    "docs": (("title", "body"), {"source": FieldType.STR, "tags": FieldType.LIST_STR}),
    "messages": (
        ("content",),
        {
            "session_id": FieldType.STR,
            "message_id": FieldType.INT,
            "seq": FieldType.INT,
            "role": FieldType.STR,
            "active": FieldType.BOOL,
            "compacted": FieldType.BOOL,
            "source": FieldType.STR,
            "agent_id": FieldType.STR,
        },
    ),
}


def describe_schema(info: CollectionInfo) -> str:
    """A definition as its user reads it: ``text fields title, body and fields source=str,
    tags=list[str]`` (the types by their names, not Python reprs)."""
    texts = ", ".join(info.text_fields) or "(none)"
    fields = ", ".join(f"{name}={kind.value}" for name, kind in info.fields.items()) or "(none)"
    return f"text fields {texts} and fields {fields}"


def check_same(stored: CollectionInfo, wanted: CollectionInfo) -> None:
    """Raise `StoreError` naming both definitions when they differ."""
    if not stored.same_schema(wanted):
        raise StoreError(
            f"collection {stored.name!r} exists with {describe_schema(stored)}; asked for "
            f"{describe_schema(wanted)}")
    check_same_embedder(stored, wanted)


def check_same_embedder(stored: CollectionInfo, wanted: CollectionInfo) -> None:
    """Raise `StoreError` naming both embedders (and dims) when they differ."""
    if stored.embedder_name != wanted.embedder_name or stored.dim != wanted.dim:
        raise StoreError(
            f"collection {stored.name!r} uses embedder {stored.embedder_name!r} (dim "
            f"{stored.dim}); asked for embedder {wanted.embedder_name!r} (dim {wanted.dim})")
