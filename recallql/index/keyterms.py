"""Declared str fields as tantivy terms: the term filter of the lexical leg.

Every document of a text index created by this recallql carries, in the untokenized field
`KEYS_FIELD`, one term ``<field>\\x1f<value>`` per value of each of the collection's declared
``str`` and ``list[str]`` fields (Elasticsearch's ``keyword`` fields). A statement's filter then
becomes a tantivy query the text query must also match — ``BooleanQuery(Must text, Must
filter)`` with the filter scored 0, so BM25 scores are unchanged — instead of a term set of
every eligible rowid. `filter_query` translates what it can: ``=`` and ``IN`` on such a field
(IN: a SHOULD set of the few values), ``CONTAINS`` on a ``list[str]`` field, and AND / OR of
those; an AND whose other items cannot be translated (a range, LIKE, NOT …) keeps the
translatable ones as a superset, and the hits are checked against the exact eligible rows.

Which fields an index holds terms for is recorded with it (`recallql.index.text`): the
declared str fields when it was created or rebuilt. An index of an older recallql (no terms)
and a field declared after the index was created (`Store.add_fields`: its stored rows have no
terms) are filtered the old way until ``recallql optimize`` / ``recallql reindex`` rebuilds
the index.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from tantivy import Occur, Query, Schema

from recallql.index.filters import And, Cmp, Contains, In, Or
from recallql.index.schema import FieldType

#: The untokenized tantivy field holding the declared str fields' terms.
KEYS_FIELD = "keys"
#: Values longer than this (UTF-8 bytes) get no term (tantivy drops tokens near 64 KiB); a
#: filter naming one is checked on the rows instead.
KEY_MAX_BYTES = 4096
_SEP = "\x1f"


def keyword_fields(fields: Mapping[str, FieldType]) -> tuple[str, ...]:
    """The declared fields an index created now holds terms for (str and list[str]), sorted."""
    return tuple(sorted(name for name, kind in fields.items()
                        if kind in (FieldType.STR, FieldType.LIST_STR)))


def key_term(field: str, value: str) -> str:
    """The term of `value` of `field` in `KEYS_FIELD`."""
    return f"{field}{_SEP}{value}"


def document_terms(fields: Mapping[str, object] | None, keywords: Collection[str]
                   ) -> Iterator[str]:
    """The `KEYS_FIELD` terms of one row whose declared field values are `fields`."""
    if not fields:
        return
    for name in keywords:
        value = fields.get(name)
        values = value if isinstance(value, list) else (value,)
        for item in values:
            if isinstance(item, str) and len(item.encode("utf-8")) <= KEY_MAX_BYTES:
                yield key_term(name, item)


def _terms(schema: Schema, field: str, values: tuple) -> Query | None:
    if not all(isinstance(v, str) and len(v.encode("utf-8")) <= KEY_MAX_BYTES
               for v in values):
        return None
    clauses = [(Occur.Should, Query.term_query(schema, KEYS_FIELD, key_term(field, v)))
               for v in dict.fromkeys(values)]
    if len(clauses) == 1:
        return clauses[0][1]
    return Query.boolean_query(clauses)  # no clause: matches nothing, as IN () / IN (NULL)


def filter_query(expr: object, keywords: Mapping[str, FieldType], schema: Schema
                 ) -> tuple[Query | None, bool, list[str]]:
    """The term query of a filter expression over the `keywords` fields (name → type: the
    fields the index holds terms for).

    Returns:
        (query, exact, fields): `query` matches a superset of the rows `expr` holds for (None:
        nothing translatable), `exact` is True when it matches exactly those rows, `fields`
        are the fields it uses (for EXPLAIN).
    """
    if isinstance(expr, Cmp) and expr.op in ("=", "==") and expr.field in keywords:
        query = _terms(schema, expr.field, (expr.value,))
        return query, query is not None, [expr.field] if query is not None else []
    if isinstance(expr, In) and expr.field in keywords:
        query = _terms(schema, expr.field, tuple(v for v in expr.values if v is not None))
        return query, query is not None, [expr.field] if query is not None else []
    if isinstance(expr, Contains) and keywords.get(expr.field) is FieldType.LIST_STR:
        query = _terms(schema, expr.field, (expr.value,))  # (on a str field: a substring)
        return query, query is not None, [expr.field] if query is not None else []
    if isinstance(expr, And | Or) and expr.items:
        parts = [filter_query(item, keywords, schema) for item in expr.items]
        used = [q for q, _, _ in parts if q is not None]
        fields = sorted({f for _, _, fs in parts for f in fs})
        if isinstance(expr, Or) and len(used) < len(parts):
            return None, False, []  # an untranslatable alternative may hold anywhere
        if not used:
            return None, False, []
        occur = Occur.Must if isinstance(expr, And) else Occur.Should
        query = Query.boolean_query([(occur, q) for q in used])
        return query, len(used) == len(parts) and all(e for _, e, _ in parts), fields
    return None, False, []
