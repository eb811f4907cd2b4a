"""Item validation: raw dicts → a columnar, fully checked `ItemBatch` (nothing written yet).

Every problem raises `IngestError` naming the item (its id, or ``#<index>`` in the batch) and the
field, before any store is touched.
"""

from __future__ import annotations

import contextlib
import json
import json.encoder
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import cast

import numpy as np

from recallql.index.errors import IngestError, show
from recallql.index.schema import CORE_KEYS, CollectionInfo, FieldType
from recallql.index.timestamps import item_epoch
from recallql.index.vectors import (
    NotRealNumbers,
    norm_problem,
    normalise_rows,
    real_float32,
    row_norms,
    usable_norms,
)

_INT64 = (-(2**63), 2**63 - 1)
MAX_ID_CHARS = 1024
#: Integers with more bits than this have more than `MAX_ID_CHARS` digits (and may exceed
#: Python's 4300-digit limit for ``str(int)``): they are described, never converted.
_MAX_ID_BITS = 3402


def check_utf8(text: str, item: str, field: str) -> str:
    """Return `text` if it can be stored (encoded as UTF-8: no lone surrogates).

    Raises:
        IngestError: naming the item, the field and the first offending character.
    """
    if text.isascii():  # O(1) in CPython
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise IngestError(f"text is not valid Unicode: lone surrogate {text[exc.start]!r} at "
                          f"index {exc.start} (cannot be stored as UTF-8)", item=item,
                          field=field) from None
    return text


@dataclass
class ItemBatch:
    """One validated batch, columnar. `n` items; lists are indexed by position in the batch.

    Attributes:
        ids: item ids.
        doc_ids: document ids, ``None`` where equal to the item id (saves space).
        entities: entities, ``None`` where equal to the document id.
        positions: chunk positions (≥ 0).
        created_at: epoch seconds UTC or ``None``.
        texts: the text fields joined with ``"\\n"`` (what BM25 and the embedder see).
        text_json: JSON object of the non-empty text fields.
        fields_json: JSON object of the present declared fields (timestamps as epoch seconds), or
            ``None`` when there are none.
        fields: the same values as dicts (or ``None``).
        vectors: float32[n, dim]; L2-normalised where `has_vector` (rows without a vector are 0).
        has_vector: bool[n].
    """

    ids: list[str] = field(default_factory=list)
    doc_ids: list[str | None] = field(default_factory=list)
    entities: list[str | None] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    created_at: list[float | None] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    text_json: list[str] = field(default_factory=list)
    fields_json: list[str | None] = field(default_factory=list)
    fields: list[dict[str, object] | None] = field(default_factory=list)
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    has_vector: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, rows: Sequence[int]) -> ItemBatch:
        """A new batch of the items at positions `rows` (in that order)."""
        def pick(values: list) -> list:
            return [values[i] for i in rows]

        index = np.asarray(rows, dtype=np.int64)
        return ItemBatch(pick(self.ids), pick(self.doc_ids), pick(self.entities),
                         pick(self.positions), pick(self.created_at), pick(self.texts),
                         pick(self.text_json), pick(self.fields_json), pick(self.fields),
                         self.vectors[index], self.has_vector[index])


def item_id(value: object, where: str, field: str = "id") -> str:
    """Check an item id (as `ingest` and `delete` take it) and return it as stored.

    Args:
        value: a non-empty string (not only whitespace) or an integer (not a bool), at most
            `MAX_ID_CHARS` characters, valid Unicode (no lone surrogates).
        where: how errors name the value (``#<index>`` in the batch).
        field: the argument errors name.

    Returns:
        The id as a `str` (``str(value)`` for an integer).

    Raises:
        IngestError: naming `where` and `field`.
    """
    if (type(value) is str and 0 < len(value) <= MAX_ID_CHARS and value.isascii()
            and not value.isspace()):
        return value
    if isinstance(value, bool) or not isinstance(value, str | Integral):
        raise IngestError(f"id must be a string or an integer, got {show(value)}", item=where,
                          field=field)
    if not isinstance(value, str) and int(value).bit_length() > _MAX_ID_BITS:
        raise IngestError(f"id longer than {MAX_ID_CHARS} characters", item=where, field=field)
    text = str(value)
    if not text.strip():
        raise IngestError("id must not be empty", item=where, field=field)
    if len(text) > MAX_ID_CHARS:
        raise IngestError(f"id longer than {MAX_ID_CHARS} characters", item=where, field=field)
    return check_utf8(text, where, field)


def _item_id(value: object, index: int) -> str:
    if (type(value) is str and 0 < len(value) <= MAX_ID_CHARS and value.isascii()
            and not value.isspace()):
        return value  # the common case, without a call
    return item_id(value, f"#{index}")


def _opt_str(raw: Mapping, key: str, item: str) -> str | None:
    value = raw.get(key)
    return None if value is None else ref_id(value, item, key)


def ref_id(value: object, item: str, key: str) -> str:
    """Check a `doc_id` or `entity` value (a non-empty string or an integer, valid Unicode) and
    return it as stored.

    Raises:
        IngestError: naming `item` and `key`.
    """
    if type(value) is str and value.isascii() and not value.isspace() and value:
        return value
    if isinstance(value, Integral) and not isinstance(value, bool):
        if int(value).bit_length() > _MAX_ID_BITS:
            raise IngestError(f"longer than {MAX_ID_CHARS} characters", item=item, field=key)
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise IngestError(f"must be a non-empty string, got {show(value)}", item=item, field=key)
    return check_utf8(value, item, key)


def _position(raw: Mapping, item: str) -> int:
    value = raw.get("position", 0)
    if type(value) is int and 0 <= value <= _INT64[1]:
        return value
    if value is None:
        return 0
    if (isinstance(value, bool) or not isinstance(value, Integral)
            or not 0 <= int(value) <= _INT64[1]):
        raise IngestError(f"must be an integer >= 0, got {show(value)}", item=item,
                          field="position")
    return int(value)


def _timestamp(value: object, item: str, key: str) -> float | None:
    if value is None:
        return None
    try:
        return item_epoch(value)
    except ValueError as exc:
        raise IngestError(str(exc), item=item, field=key) from None


def _plain_ok(kind: FieldType, value: object) -> bool:
    """Fast path: a value of exactly the plain Python type of `kind`, in range."""
    kind_of = type(value)
    if kind_of is str:
        return kind is FieldType.STR and cast(str, value).isascii()
    if kind_of is bool:
        return kind is FieldType.BOOL
    if kind_of is int:
        return kind is FieldType.INT and _INT64[0] <= value <= _INT64[1]  # type: ignore[operator]
    if kind_of is float:
        return kind is FieldType.FLOAT and math.isfinite(value)  # type: ignore[arg-type]
    return False


def _finite_float(value: object) -> float | None:
    """`value` as a finite float, or ``None`` (not a real number, a bool, NaN, infinite, or an
    int beyond float64)."""
    if not isinstance(value, Real) or isinstance(value, bool | np.bool_):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _field_value(kind: FieldType, value: object, item: str, key: str) -> object:
    """Check one declared field value; returns the stored (JSON-able) value."""
    if _plain_ok(kind, value):
        return value
    ok = True
    if kind is FieldType.STR:
        ok = isinstance(value, str)
        if ok:
            check_utf8(value, item, key)  # type: ignore[arg-type]
    elif kind is FieldType.INT:
        ok = isinstance(value, Integral) and not isinstance(value, bool | np.bool_)
        if ok:
            whole = int(cast(Integral, value))
            ok = _INT64[0] <= whole <= _INT64[1]
            value = whole if ok else value
    elif kind is FieldType.FLOAT:
        number = _finite_float(value)
        ok = number is not None
        value = number if ok else value
    elif kind is FieldType.BOOL:
        ok = isinstance(value, bool | np.bool_)
        value = bool(value) if ok else value
    elif kind is FieldType.TIMESTAMP:
        return _timestamp(value, item, key)
    elif kind is FieldType.LIST_STR:
        ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        value = [check_utf8(v, item, key) for v in value] if ok else value  # type: ignore
    if not ok:
        raise IngestError(f"expected {kind.value}, got {show(value)}", item=item, field=key)
    return value


def _json_encoder() -> Callable[[object], str]:
    """A compact UTF-8 JSON encoder built once (``json.dumps`` rebuilds its C encoder per call,
    which costs more than the encoding of a small object)."""
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # pragma: no cover - pure-Python json
        return json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
    encoder = c_make_encoder(None, None, json.encoder.encode_basestring, None, ":", ",",
                             False, False, False)
    return lambda value: "".join(encoder(value, 0))


_encode = _json_encoder()


class _Validator:
    """Validates items of one collection into an `ItemBatch`."""

    def __init__(self, info: CollectionInfo):
        self.info = info
        self.allowed = CORE_KEYS | set(info.text_fields) | set(info.fields)
        self.batch = ItemBatch()
        self.vectors: list[tuple[int, object]] = []
        self.seen: set[str] = set()

    def add(self, raw: object, index: int) -> None:
        if type(raw) is not dict and not isinstance(raw, Mapping):
            raise IngestError(f"an item must be a dict, got {type(raw).__name__}", item=f"#{index}")
        item = _item_id(raw.get("id"), index)
        if item in self.seen:
            raise IngestError("duplicate id within the batch", item=repr(item), field="id")
        self.seen.add(item)
        where = repr(item)
        if not self.allowed.issuperset(raw):
            unknown = next(k for k in raw if k not in self.allowed)
            raise IngestError(
                f"unknown field (collection {self.info.name!r} has text fields "
                f"{list(self.info.text_fields)} and fields {sorted(self.info.fields)})",
                item=where, field=unknown if isinstance(unknown, str) else show(unknown))
        b = self.batch
        b.ids.append(item)
        doc_id = _opt_str(raw, "doc_id", where)
        entity = _opt_str(raw, "entity", where)
        b.doc_ids.append(None if doc_id == item else doc_id)
        b.entities.append(None if entity == (doc_id or item) else entity)
        b.positions.append(_position(raw, where))
        b.created_at.append(_timestamp(raw.get("created_at"), where, "created_at"))
        self._texts(raw, where)
        self._fields(raw, where)
        if raw.get("vector") is not None:
            self.vectors.append((index, raw["vector"]))

    def _texts(self, raw: Mapping, where: str) -> None:
        values = {}
        for name in self.info.text_fields:
            value = raw.get(name)
            if value is None or value == "":
                continue
            if not isinstance(value, str):
                raise IngestError(f"text must be a string, got {type(value).__name__}",
                                  item=where, field=name)
            values[name] = check_utf8(value, where, name)
        self.batch.texts.append("\n".join(values.values()))
        self.batch.text_json.append(_encode(values))

    def _fields(self, raw: Mapping, where: str) -> None:
        values = {}
        for name, kind in self.info.fields.items():
            value = raw.get(name)
            if value is not None:
                values[name] = _field_value(kind, value, where, name)
        self.batch.fields.append(values or None)
        self.batch.fields_json.append(_encode(values) if values else None)


def check_vectors(matrix: np.ndarray, dim: int, label: Callable[[int], str],
                  source: str) -> np.ndarray:
    """Check float32[n, dim] rows can be normalised; return them L2-normalised.

    Norms and the division are computed in float64 (see `recallql.index.vectors.row_norms`), so
    a tiny or huge but valid float32 row normalises exactly.

    Args:
        matrix: the vectors.
        dim: expected dimension.
        label: item label of a row (for errors).
        source: ``"vector"`` or the embedder name (for errors).

    Raises:
        IngestError: wrong shape, a non-finite component, or a norm that is zero or below
            `recallql.index.vectors.MIN_NORM` (names the item).
    """
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        raise IngestError(f"{source} returned shape {matrix.shape}, expected "
                          f"(n, {dim})", field="vector")
    norms = row_norms(matrix)
    bad = np.flatnonzero(~usable_norms(norms))
    if len(bad):
        i = int(bad[0])
        raise IngestError(f"vector has {norm_problem(float(norms[i]))} (from {source})",
                          item=label(i), field="vector")
    return normalise_rows(matrix, norms)


def _one_vector(raw: object, dim: int, label: str) -> np.ndarray:
    try:
        arr = real_float32(raw)
    except NotRealNumbers as exc:
        raise IngestError(f"vector {exc}", item=label, field="vector") from None
    if arr.ndim != 1 or arr.shape[0] != dim:
        raise IngestError(f"wrong vector dimension: expected {dim}, got "
                          f"{arr.shape[0] if arr.ndim == 1 else arr.shape}",
                          item=label, field="vector")
    return arr


def _stack_supplied(v: _Validator, dim: int) -> None:
    b = v.batch
    n, rows = len(b.ids), [index for index, _ in v.vectors]
    b.has_vector = np.zeros(n, bool)
    b.has_vector[rows] = True
    stacked = None
    # fast path: one conversion for the whole batch (a bad item: one by one, below)
    with contextlib.suppress(NotRealNumbers):
        stacked = real_float32([raw for _, raw in v.vectors])
    if stacked is None or stacked.shape != (len(rows), dim):
        stacked = np.stack([_one_vector(raw, dim, repr(b.ids[i])) for i, raw in v.vectors]
                           or [np.zeros(dim, np.float32)])[: len(rows)]
    normalised = check_vectors(stacked, dim, lambda i: repr(b.ids[rows[i]]), "vector")
    if len(rows) == n:
        b.vectors = normalised
    else:
        b.vectors = np.zeros((n, dim), np.float32)
        b.vectors[rows] = normalised


#: ``sink(first_index, ids, texts, fields)``: validated items ``first_index …`` (ids, joined
#: texts and declared field values).
TextSink = Callable[[int, list[str], list[str], list[dict[str, object] | None]], object]


def validate(info: CollectionInfo, items: Iterable[object], sink: TextSink | None = None,
             chunk: int = 1024) -> ItemBatch:
    """Validate raw items of `info`'s collection.

    Args:
        info: the collection schema.
        items: iterable of dicts (see SPEC §8 `ingest`).
        sink: called as ``sink(first_index, ids, texts, fields)`` with the ids, joined texts
            and declared field values of every `chunk` validated items (so the caller can start
            indexing them while validation goes on; on an error it must discard what it
            received).
        chunk: items per `sink` call.

    Returns:
        The batch; supplied vectors are normalised, the others still zero (see `has_vector`).

    Raises:
        IngestError: the first invalid item.
    """
    validator = _Validator(info)
    ids, texts, sent = validator.batch.ids, validator.batch.texts, 0
    fields = validator.batch.fields
    for index, raw in enumerate(items):
        validator.add(raw, index)
        if sink is not None and index + 1 - sent >= chunk:
            sink(sent, ids[sent:index + 1], texts[sent:index + 1], fields[sent:index + 1])
            sent = index + 1
    _stack_supplied(validator, info.dim)
    if sink is not None and sent < len(texts):
        sink(sent, ids[sent:], texts[sent:], fields[sent:])
    return validator.batch
