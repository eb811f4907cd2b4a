"""AST nodes for names, values and predicates (statements and clauses: ``statements.py``).

Every node is a frozen pydantic model (``extra="forbid"``) with a ``span``: the ``(start, end)``
character offsets of the text it came from, so errors about it can put a caret under it.
``to_text()`` renders canonical text (see ``render.py``).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, NamedTuple, TypeAlias

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "Span", "Node", "SCALAR_TYPES", "Identifier", "ScalarLiteral", "StringLiteral",
    "IntegerLiteral",
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
        return render(self)


@functools.singledispatch
def render(node: Node) -> str:
    """The canonical text of an AST node. One renderer per node class is registered by
    `recallql.grammar.render`, which the package imports, so nodes never import rendering.

    Raises:
        TypeError: for an object that is not an AST node.
    """
    raise TypeError(f"cannot render {type(node).__name__}")


class Identifier(Node):
    """A name: collection, field, option or signal name.

    Attributes:
        name: the name, case preserved, quotes removed and ``""`` decoded.
        quoted: whether the source double-quoted it (rendering quotes only when needed).
    """

    kind: Literal["identifier"] = Field(default="identifier", repr=False)

    name: str
    quoted: bool = False


class ScalarLiteral(Node):
    """Base of the literal values a predicate can compare with."""


class StringLiteral(ScalarLiteral):
    """A single-quoted string; ``value`` is decoded (``'it''s'`` -> ``it's``)."""

    kind: Literal["string"] = Field(default="string", repr=False)

    value: str


class IntegerLiteral(ScalarLiteral):
    """A whole number (within the signed 64-bit range)."""

    kind: Literal["integer"] = Field(default="integer", repr=False)

    value: int


class FloatLiteral(ScalarLiteral):
    """A finite floating-point number; canonical text prints ``repr(value)``."""

    kind: Literal["float"] = Field(default="float", repr=False)

    value: float


class BooleanLiteral(ScalarLiteral):
    """``TRUE`` or ``FALSE``."""

    kind: Literal["boolean"] = Field(default="boolean", repr=False)

    value: bool


class NullLiteral(ScalarLiteral):
    """``NULL``."""

    kind: Literal["null"] = Field(default="null", repr=False)

    value: None = None


class TimestampLiteral(ScalarLiteral):
    """``TIMESTAMP '<ISO-8601>'``; ``value`` is the text as written (a bound datetime: its
    `recallql.grammar.timestamps.format_timestamp` text). The engine parses it when the
    statement runs (`recallql.index.timestamps.parse_timestamp`; naive text means UTC), so an
    invalid one is reported then, with the caret under the string."""

    kind: Literal["timestamp"] = Field(default="timestamp", repr=False)

    value: str


TimeUnit = Literal["DAYS", "HOURS", "MINUTES", "SECONDS"]
_DAYS_PER_UNIT: dict[str, float] = {"DAYS": 1.0, "HOURS": 1 / 24, "MINUTES": 1 / 1440,
                                    "SECONDS": 1 / 86400}  # fmt: skip


class Duration(Node):
    """A length of time: ``30 DAYS``, ``12 HOURS``, ``1.5 MINUTES``.

    Attributes:
        value: the number as written (int or float).
        unit: the plural unit; singular spellings (``1 DAY``) are normalised.
    """

    kind: Literal["duration"] = Field(default="duration", repr=False)

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

    kind: Literal["vector"] = Field(default="vector", repr=False)

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

    kind: Literal["parameter"] = Field(default="parameter", repr=False)

    name: str | None = None
    index: int | None = None

    @property
    def label(self) -> str:
        """How error messages name it: ``:name`` or ``?`` with its 1-based position."""
        return f":{self.name}" if self.name is not None else f"?{(self.index or 0) + 1}"


SCALAR_TYPES = (StringLiteral, IntegerLiteral, FloatLiteral, BooleanLiteral, NullLiteral,
                TimestampLiteral)  # fmt: skip

Scalar: TypeAlias = Annotated[
    StringLiteral | IntegerLiteral | FloatLiteral | BooleanLiteral | NullLiteral | TimestampLiteral,
    Field(discriminator="kind"),
]
"""Any scalar literal (a union of the concrete classes, so that dumps keep every field)."""

Value: TypeAlias = Annotated[
    StringLiteral | IntegerLiteral | FloatLiteral | BooleanLiteral | NullLiteral | TimestampLiteral
    | Parameter,
    Field(discriminator="kind"),
]
"""What a predicate compares with: a scalar literal, or a parameter until bound."""


class Predicate(Node):
    """Base of WHERE predicates."""


ComparisonOp = Literal["=", "!=", "<", "<=", ">", ">="]


class Comparison(Predicate):
    """``field <op> value``; ``<>`` is read as ``!=``."""

    kind: Literal["comparison"] = Field(default="comparison", repr=False)

    field: Identifier
    op: ComparisonOp
    value: Value


class InList(Predicate):
    """``field [NOT] IN (v1, v2, ...)``, or ``field [NOT] IN :list`` — one parameter bound to a
    list of values (``list_parameter``; `bind` expands it into the values)."""

    kind: Literal["in"] = Field(default="in", repr=False)

    field: Identifier
    values: tuple[Value, ...]
    negated: bool = False
    list_parameter: bool = False


class Between(Predicate):
    """``field [NOT] BETWEEN low AND high`` (inclusive)."""

    kind: Literal["between"] = Field(default="between", repr=False)

    field: Identifier
    low: Value
    high: Value
    negated: bool = False


class Like(Predicate):
    """``field [NOT] LIKE pattern`` (SQL ``%`` and ``_`` wildcards)."""

    kind: Literal["like"] = Field(default="like", repr=False)

    field: Identifier
    pattern: Value
    negated: bool = False


class Contains(Predicate):
    """``field CONTAINS value``: a list field holds the value, or a text field the substring."""

    kind: Literal["contains"] = Field(default="contains", repr=False)

    field: Identifier
    value: Value


class IsNull(Predicate):
    """``field IS [NOT] NULL``."""

    kind: Literal["is_null"] = Field(default="is_null", repr=False)

    field: Identifier
    negated: bool = False


class And(Predicate):
    """``a AND b AND ...``: at least two items, in source order."""

    kind: Literal["and"] = Field(default="and", repr=False)

    items: tuple[AnyPredicate, ...]


class Or(Predicate):
    """``a OR b OR ...``: at least two items, in source order."""

    kind: Literal["or"] = Field(default="or", repr=False)

    items: tuple[AnyPredicate, ...]


class Not(Predicate):
    """``NOT item``."""

    kind: Literal["not"] = Field(default="not", repr=False)

    item: AnyPredicate


AnyPredicate: TypeAlias = Annotated[
    Comparison | InList | Between | Like | Contains | IsNull | And | Or | Not,
    Field(discriminator="kind"),
]
"""Any predicate node (a union of the concrete classes)."""

for _model in (And, Or, Not):
    _model.model_rebuild()

