"""AST nodes for names, values and predicates (statements and clauses: ``statements.py``).

Every node is a frozen pydantic model (``extra="forbid"``) with a ``span``: the ``(start, end)``
character offsets of the text it came from, so errors about it can put a caret under it.
``to_text()`` renders canonical text (see ``render.py``).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

__all__ = [
    "Span", "Node", "Identifier", "ScalarLiteral", "StringLiteral", "IntegerLiteral",
    "FloatLiteral", "BooleanLiteral", "NullLiteral", "TimestampLiteral", "Duration",
    "VectorLiteral", "Parameter", "Scalar", "Value", "Predicate", "AnyPredicate", "Comparison",
    "InList", "Between", "Like", "Contains", "IsNull", "And", "Or", "Not", "ComparisonOp",
    "TimeUnit",
]  # fmt: skip


class Span(NamedTuple):
    """Character offsets ``[start, end)`` into the source text."""

    start: int
    end: int


NO_SPAN = Span(0, 0)


class Node(BaseModel):
    """Base of every AST node: immutable, validated, with a source span."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    span: Span = NO_SPAN

    def to_text(self) -> str:
        """Canonical text of this node (keywords upper-case, one space between tokens)."""
        from recallql.grammar.render import render

        return render(self)


class Identifier(Node):
    """A name: collection, field, option or signal name.

    Attributes:
        name: the name, case preserved, quotes removed and ``""`` decoded.
        quoted: whether the source double-quoted it (rendering quotes only when needed).
    """

    name: str
    quoted: bool = False


class ScalarLiteral(Node):
    """Base of the literal values a predicate can compare with."""


class StringLiteral(ScalarLiteral):
    """A single-quoted string; ``value`` is decoded (``'it''s'`` -> ``it's``)."""

    value: str


class IntegerLiteral(ScalarLiteral):
    """A whole number (within the signed 64-bit range)."""

    value: int


class FloatLiteral(ScalarLiteral):
    """A finite floating-point number; canonical text prints ``repr(value)``."""

    value: float


class BooleanLiteral(ScalarLiteral):
    """``TRUE`` or ``FALSE``."""

    value: bool


class NullLiteral(ScalarLiteral):
    """``NULL``."""

    value: None = None


class TimestampLiteral(ScalarLiteral):
    """``TIMESTAMP '<ISO-8601>'``; ``value`` is an aware UTC datetime (naive input means UTC)."""

    value: datetime


TimeUnit = Literal["DAYS", "HOURS", "MINUTES", "SECONDS"]
_DAYS_PER_UNIT: dict[str, float] = {"DAYS": 1.0, "HOURS": 1 / 24, "MINUTES": 1 / 1440,
                                    "SECONDS": 1 / 86400}  # fmt: skip


class Duration(Node):
    """A length of time: ``30 DAYS``, ``12 HOURS``, ``1.5 MINUTES``.

    Attributes:
        value: the number as written (int or float).
        unit: the plural unit; singular spellings (``1 DAY``) are normalised.
    """

    value: int | float
    unit: TimeUnit

    @property
    def days(self) -> float:
        """The duration in days (float)."""
        return self.value * _DAYS_PER_UNIT[self.unit]

    @property
    def seconds(self) -> float:
        """The duration in seconds (float)."""
        return self.days * 86400.0


class VectorLiteral(Node):
    """A query vector; only ever produced by binding a parameter at ``NEAR``.

    Attributes:
        value: read-only 1-D ``float32`` array, non-empty, all components finite.
        name: the name of the parameter it was bound from (None for ``?`` or when built by hand);
            canonical text prints that parameter (``:v`` or ``?``), as a vector has no literal form.
    """

    value: np.ndarray
    name: str | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _as_vector(cls, value: Any) -> np.ndarray:
        array = np.array(value, dtype=np.float32)
        if array.ndim != 1 or array.size == 0 or not np.isfinite(array).all():
            raise ValueError("a vector is a non-empty 1-D array of finite numbers")
        array.setflags(write=False)
        return array

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VectorLiteral):
            return NotImplemented
        return (self.span, self.name) == (other.span, other.name) and bool(
            np.array_equal(self.value, other.value)
        )

    def __hash__(self) -> int:
        return hash((self.span, self.name, self.value.tobytes()))


class Parameter(Node):
    """A parameter: ``:name`` (``name`` set) or ``?`` (``index`` set, 0-based in the statement)."""

    name: str | None = None
    index: int | None = None

    @property
    def label(self) -> str:
        """How error messages name it: ``:name`` or ``?`` with its 1-based position."""
        return f":{self.name}" if self.name is not None else f"?{(self.index or 0) + 1}"


Scalar = (
    StringLiteral | IntegerLiteral | FloatLiteral | BooleanLiteral | NullLiteral | TimestampLiteral
)
"""Any scalar literal (the concrete classes, so that dumps keep every field)."""

Value = Scalar | Parameter
"""What a predicate compares with: a scalar literal, or a parameter until bound."""


class Predicate(Node):
    """Base of WHERE predicates."""


ComparisonOp = Literal["=", "!=", "<", "<=", ">", ">="]


class Comparison(Predicate):
    """``field <op> value``; ``<>`` is read as ``!=``."""

    field: Identifier
    op: ComparisonOp
    value: Value


class InList(Predicate):
    """``field [NOT] IN (v1, v2, ...)``."""

    field: Identifier
    values: tuple[Value, ...]
    negated: bool = False


class Between(Predicate):
    """``field [NOT] BETWEEN low AND high`` (inclusive)."""

    field: Identifier
    low: Value
    high: Value
    negated: bool = False


class Like(Predicate):
    """``field [NOT] LIKE pattern`` (SQL ``%`` and ``_`` wildcards)."""

    field: Identifier
    pattern: Value
    negated: bool = False


class Contains(Predicate):
    """``field CONTAINS value``: a list field holds the value, or a text field the substring."""

    field: Identifier
    value: Value


class IsNull(Predicate):
    """``field IS [NOT] NULL``."""

    field: Identifier
    negated: bool = False


class And(Predicate):
    """``a AND b AND ...``: at least two items, in source order."""

    items: tuple[AnyPredicate, ...]


class Or(Predicate):
    """``a OR b OR ...``: at least two items, in source order."""

    items: tuple[AnyPredicate, ...]


class Not(Predicate):
    """``NOT item``."""

    item: AnyPredicate


AnyPredicate = Comparison | InList | Between | Like | Contains | IsNull | And | Or | Not
"""Any predicate node (the concrete classes)."""

for _model in (And, Or, Not):
    _model.model_rebuild()


def is_finite_number(value: object) -> bool:
    """True for an int or a finite float (bool excluded)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
