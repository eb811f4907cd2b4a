"""Value checks that need no catalog, and the walk over a statement's value slots.

A *slot* is a place in a statement that holds a value: the MATCHING text, the LIMIT, an
option such as ``weight``, a value in WHERE. :func:`map_slots` visits every slot with its
:class:`Slot` (what kind of value belongs there and how messages name it) and rebuilds the
statement with whatever the visitor returns. Parsing uses it to check literals
(:func:`validate`); binding uses it to replace parameters and check the bound values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

from recallql.grammar.errors import QueryError, QuerySemanticError
from recallql.grammar.nodes import (
    And,
    Between,
    Comparison,
    Contains,
    Duration,
    FloatLiteral,
    Identifier,
    InList,
    IntegerLiteral,
    Like,
    Node,
    Not,
    Or,
    Parameter,
    StringLiteral,
    TimestampLiteral,
    VectorLiteral,
)
from recallql.grammar.statements import (
    Explain,
    Fuse,
    GroupBy,
    OptionList,
    RecencyBoost,
    SessionBoost,
    SignalBoost,
    StatementBase,
    WithContext,
)
from recallql.grammar.suggest import did_you_mean

__all__ = ["Slot", "map_slots", "check_value", "validate", "SHAPES", "NORMALIZATIONS"]

SHAPES = ("EXP", "GAUSS", "LINEAR")
NORMALIZATIONS = ("minmax", "tmm")


class Slot(NamedTuple):
    """A value position: ``kind`` says what belongs there, ``what`` names it in messages.

    Kinds: text, session, vector, value, pattern, timestamp, count (whole number >= 1),
    offset (whole number >= 0), weight and leg_weight (number >= 0), signal_weight (number),
    positive (number > 0), duration (> 0), name (an identifier), shape (EXP | GAUSS | LINEAR),
    normalization (minmax | tmm), weights (a list of ``leg = leg_weight``).
    """

    kind: str
    what: str


Visitor = Callable[[Slot, Node], Node]

_FIELD_SLOTS: dict[str, Slot] = {
    "matching": Slot("text", "MATCHING text"),
    "near": Slot("vector", "NEAR"),
    "session": Slot("session", "session id"),
    "as_of": Slot("timestamp", "AS OF"),
    "count": Slot("count", "RETRIEVE count"),
    "limit": Slot("count", "LIMIT"),
    "offset": Slot("offset", "OFFSET"),
}

_OPTION_SLOTS: dict[tuple[type, str], Slot] = {
    (RecencyBoost, "weight"): Slot("weight", "weight"),
    (RecencyBoost, "half_life"): Slot("duration", "half_life"),
    (RecencyBoost, "field"): Slot("name", "field"),
    (RecencyBoost, "shape"): Slot("shape", "shape"),
    (SessionBoost, "keywords"): Slot("weight", "keywords"),
    (SessionBoost, "velocity"): Slot("weight", "velocity"),
    (SessionBoost, "entities"): Slot("weight", "entities"),
    (Fuse, "k"): Slot("positive", "RRF k"),
    (Fuse, "window"): Slot("count", "window"),
    (Fuse, "weights"): Slot("weights", "weights"),
    (Fuse, "alpha"): Slot("fraction", "alpha"),
    (Fuse, "normalization"): Slot("normalization", "normalization"),
    (WithContext, "before"): Slot("offset", "before"),
    (WithContext, "after"): Slot("offset", "after"),
    (GroupBy, "budget"): Slot("count", "budget"),
}

_HINTS = {
    "LIMIT": "LIMIT takes a positive whole number, e.g. LIMIT 10",
    "OFFSET": "OFFSET takes a whole number >= 0, e.g. OFFSET 20",
    "RETRIEVE count": "the count is a positive whole number, e.g. RETRIEVE 10 FROM docs",
    "budget": "budget is how many session rows lineage may fetch, e.g. budget = 2000",
    "weight": "weights are numbers >= 0; 0 turns the boost off",
    "RRF k": "k is a positive number, usually 60",
    "window": "window is how many candidates each leg returns, e.g. window = 100",
    "FUSE weight": "leg weights are numbers >= 0, e.g. weights = (lexical = 1.0, semantic = 0.5)",
}


_SOURCE_ORDER = ("count", "matching", "near", "where", "session", "boosts", "context", "fuse",
                 "group_by", "as_of", "limit", "offset")  # fmt: skip
"""Statement fields holding values, in clause order (which the parser enforces), so the first
error reported is the first in the text."""


def map_slots(stmt: StatementBase, visit: Visitor, also: dict[str, Any] | None = None
              ) -> StatementBase:
    """Return ``stmt`` with every value slot replaced by ``visit(slot, node)``.

    Slots are visited in source order. Nodes are rebuilt only where a visit returned a
    different node, so a visitor that returns its input gives back ``stmt`` itself (unless
    `also` is given: fields set in the same copy, on an EXPLAIN and on its statement).
    """
    if isinstance(stmt, Explain):
        inner = map_slots(stmt.statement, visit, also)
        return stmt if inner is stmt.statement and not also else \
            stmt.model_copy(update={**(also or {}), "statement": inner})
    updates: dict[str, Any] = dict(also) if also else {}
    for name in _SOURCE_ORDER:
        old = getattr(stmt, name, None)
        if old is None:
            continue
        new = _map_field(name, old, visit)
        if _changed(new, old):
            updates[name] = new
    return stmt.model_copy(update=updates) if updates else stmt


def _map_field(name: str, node: Any, visit: Visitor) -> Any:
    if name == "where":
        return _map_predicate(node, visit)
    if name == "boosts":
        return tuple(_map_options(boost, visit) for boost in node)
    if name in ("fuse", "group_by", "context"):
        return _map_options(node, visit)
    return visit(_FIELD_SLOTS[name], node)


def _changed(new: Any, old: Any) -> bool:
    """Whether a visit replaced anything (tuples are compared item by item, by identity)."""
    if isinstance(new, tuple):
        return any(a is not b for a, b in zip(new, old, strict=True))
    return new is not old


def _map_options(clause: Any, visit: Visitor) -> Any:
    options = getattr(clause, "options", None)
    if not options:  # WITHOUT RECENCY / WITHOUT SIGNAL BOOST, or no options written
        return clause
    new_options = []
    for option in options:
        key = option.name.name
        slot = _OPTION_SLOTS.get((type(clause), key))
        if slot is None and isinstance(clause, SignalBoost):
            slot = Slot("signal_weight", f"signal weight {key}")
        value: Any
        if slot is not None and isinstance(option.value, OptionList):
            value = _map_list(option.value, visit)
        else:
            value = visit(slot, option.value) if slot is not None else option.value
        if value is not option.value:
            option = option.model_copy(update={"value": value})
        new_options.append(option)
    return _rebuilt(clause, {"options": tuple(new_options)})


def _map_list(node: OptionList, visit: Visitor) -> OptionList:
    """A ``weights = (leg = w, ...)`` list with each weight visited."""
    items = []
    for item in node.items:
        value = visit(Slot("leg_weight", "FUSE weight"), item.value)
        items.append(item if value is item.value else item.model_copy(update={"value": value}))
    return _rebuilt(node, {"items": tuple(items)})


def _map_predicate(node: Any, visit: Visitor) -> Any:
    if isinstance(node, And | Or):
        return _rebuilt(node, {"items": tuple(_map_predicate(i, visit) for i in node.items)})
    if isinstance(node, Not):
        return _rebuilt(node, {"item": _map_predicate(node.item, visit)})
    slot = Slot("value", f"value for {node.field.name}")
    if isinstance(node, Comparison | Contains):
        return _rebuilt(node, {"value": visit(slot, node.value)})
    if isinstance(node, InList) and node.list_parameter:
        expanded = visit(Slot("list", f"IN list for {node.field.name}"), node.values[0])
        if isinstance(expanded, tuple):  # bound: the list's values, as written literals
            return node.model_copy(update={"values": expanded, "list_parameter": False})
        return node
    if isinstance(node, InList):
        return _rebuilt(node, {"values": tuple(visit(slot, value) for value in node.values)})
    if isinstance(node, Between):
        return _rebuilt(node, {"low": visit(slot, node.low), "high": visit(slot, node.high)})
    if isinstance(node, Like):
        pattern_slot = Slot("pattern", f"LIKE pattern for {node.field.name}")
        return _rebuilt(node, {"pattern": visit(pattern_slot, node.pattern)})
    return node  # IsNull


def _rebuilt(node: Any, updates: dict[str, Any]) -> Any:
    """``node`` with ``updates`` applied, or ``node`` itself when nothing changed."""
    if any(_changed(new, getattr(node, key)) for key, new in updates.items()):
        return node.model_copy(update=updates)
    return node


def validate(stmt: StatementBase) -> StatementBase:
    """Check every literal value of a freshly parsed statement (parameters are left alone).

    Raises:
        QuerySemanticError: a value out of range or of the wrong kind, with the caret under it.
        QuerySyntaxError: never; structural problems are found by the transformer.
    """

    def visit(slot: Slot, node: Node) -> Node:
        if isinstance(node, Parameter):
            if slot.kind == "weights":
                _raise(QuerySemanticError, stmt.source, node,
                       "weights takes a list of leg weights, not a parameter",
                       "e.g. weights = (lexical = 1.0, semantic = :w)")
            if slot.kind == "normalization":
                _raise(QuerySemanticError, stmt.source, node, "normalization takes a name, "
                       "minmax or tmm, not a parameter", _NORMALIZATION_HINT)
            if slot.kind in ("name", "shape"):
                example = "shape = EXP" if slot.kind == "shape" else "field = created_at"
                message = f"{slot.what} takes a name, not a parameter"
                _raise(QuerySemanticError, stmt.source, node, message, f"e.g. {example}")
            return node
        check_value(slot, slot.what, node, _failer(QuerySemanticError, stmt.source, node))
        return node

    return map_slots(stmt, visit)


def _raise(
    cls: type[QueryError], text: str, node: Node, message: str, hint: str | None
) -> NoReturn:
    raise cls(message, text=text, span=node.span, hint=hint)


def _failer(cls: type[QueryError], text: str, node: Node) -> Callable[..., NoReturn]:
    def fail(message: str, hint: str | None = None) -> NoReturn:
        _raise(cls, text, node, message, hint)

    return fail


def check_value(slot: Slot, what: str, node: Node, fail: Callable[..., NoReturn]) -> None:
    """Check that ``node`` (a literal) is valid in ``slot``; ``fail(message, hint)`` if not.

    Args:
        slot: where the value sits.
        what: how to name the value in the message (e.g. ``"LIMIT (parameter :n)"``).
        node: the literal node.
        fail: raises the error (it knows the error class, the text and the span).
    """
    _CHECKS[slot.kind](slot, what, node, fail)


Check = Callable[[Slot, str, Node, Callable[..., NoReturn]], None]


def _check_text(slot: Slot, what: str, node: Node, fail: Callable[..., NoReturn]) -> None:
    if not isinstance(node, StringLiteral):
        fail(f"{what} must be a string, found {node.to_text()}")
    if node.value == "":
        hint = (
            "give some text, e.g. MATCHING 'backup policy'"
            if slot.kind == "text"
            else "give the session id, e.g. FOR SESSION 's-42'"
        )
        fail(f"{what} is empty", hint)


def _check_instance(types: tuple[type, ...], noun: str) -> Check:
    def check(slot: Slot, what: str, node: Node, fail: Callable[..., NoReturn]) -> None:
        if not isinstance(node, types):
            fail(f"{what} must be {noun}, found {node.to_text()}")

    return check


def _check_number(integer: bool, ok: Callable[[float], bool], rule: str) -> Check:
    types = (IntegerLiteral,) if integer else (IntegerLiteral, FloatLiteral)
    noun = "a whole number" if integer else "a number"

    def check(slot: Slot, what: str, node: Node, fail: Callable[..., NoReturn]) -> None:
        hint = _HINTS.get(slot.what)
        if not isinstance(node, types):
            fail(f"{what} must be {noun}, found {node.to_text()}", hint)
        if not ok(node.value):  # type: ignore[attr-defined]
            fail(f"{what} must {rule}, got {node.to_text()}", hint)

    return check


def _check_duration(slot: Slot, what: str, node: Node, fail: Callable[..., NoReturn]) -> None:
    if isinstance(node, IntegerLiteral | FloatLiteral):
        fail(
            f"{what} must be a duration such as 30 DAYS, found {node.to_text()}",
            f"add a unit: {slot.what} = {node.to_text()} DAYS",
        )
    if not isinstance(node, Duration):
        fail(f"{what} must be a duration such as 30 DAYS, found {node.to_text()}")
    if node.value <= 0:
        fail(f"{what} must be positive, got {node.to_text()}", f"e.g. {slot.what} = 365 DAYS")


def _check_shape(slot: Slot, what: str, node: Node, fail: Callable[..., NoReturn]) -> None:
    name = node.name.upper() if isinstance(node, Identifier) else None
    if name not in SHAPES:
        hint = _unquoted(node, SHAPES, slot.what) or did_you_mean(name or "", SHAPES,
                                                                  listing=False)
        fail(f"{what} must be EXP, GAUSS or LINEAR, found {node.to_text()}", hint)


_NORMALIZATION_HINT = ("minmax: the window's lowest and highest score; tmm: theoretical "
                       "minimum")


def _check_normalization(slot: Slot, what: str, node: Node,
                         fail: Callable[..., NoReturn]) -> None:
    name = node.name.lower() if isinstance(node, Identifier) else None
    if name not in NORMALIZATIONS:
        fail(f"{what} takes a name, minmax or tmm, not {node.to_text()}",
             _unquoted(node, NORMALIZATIONS, slot.what)
             or did_you_mean(name or "", NORMALIZATIONS, listing=False) or _NORMALIZATION_HINT)


def _unquoted(node: Node, names: tuple[str, ...], option: str) -> str | None:
    """The hint for a choice written as a string (``shape = 'EXP'``): write the name bare."""
    if isinstance(node, StringLiteral):
        found = next((c for c in names if c.lower() == node.value.strip().lower()), None)
        if found is not None:
            return f"write the name without quotes: {option} = {found}"
    return None


_CHECKS: dict[str, Check] = {
    "text": _check_text,
    "session": _check_text,
    "vector": _check_instance((VectorLiteral,), "a vector"),
    "value": lambda slot, what, node, fail: None,
    "list": lambda slot, what, node, fail: None,
    "pattern": _check_instance((StringLiteral,), "a string"),
    "timestamp": _check_instance((TimestampLiteral,), "a TIMESTAMP"),
    "count": _check_number(True, lambda v: v >= 1, "be at least 1"),
    "offset": _check_number(True, lambda v: v >= 0, "not be negative"),
    "weight": _check_number(False, lambda v: v >= 0, "not be negative"),
    "leg_weight": _check_number(False, lambda v: v >= 0, "not be negative"),
    "weights": _check_instance((OptionList,), "a list such as (lexical = 1.0, semantic = 0.5)"),
    "signal_weight": _check_number(False, lambda v: True, "be a number"),
    "positive": _check_number(False, lambda v: v > 0, "be positive"),
    "fraction": _check_number(False, lambda v: 0 <= v <= 1, "be between 0 and 1"),
    "duration": _check_duration,
    "name": _check_instance((Identifier,), "a field name"),
    "shape": _check_shape,
    "normalization": _check_normalization,
}
