"""Parameter binding: replace ``:name`` / ``?`` parameters by literal nodes.

Python values map to literals by type (str -> string, bool -> boolean, int -> integer,
float -> float, None -> NULL, datetime -> timestamp with naive meaning UTC), a timedelta to a
Duration where a duration is expected, and a list / tuple / numpy array of numbers to a
:class:`VectorLiteral` at ``NEAR`` only. The value checks of parsing (``LIMIT`` >= 1,
``weight`` >= 0, ...) run again on the bound values, so every error names the parameter and
puts the caret under it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from datetime import time as dt_time
from typing import Any

import numpy as np

from recallql.grammar.checks import Slot, check_value, map_slots
from recallql.grammar.construct import trusted
from recallql.grammar.errors import ParameterError
from recallql.grammar.literals import INT64_MAX, INT64_MIN
from recallql.grammar.nodes import (
    BooleanLiteral,
    Duration,
    FloatLiteral,
    IntegerLiteral,
    Node,
    NullLiteral,
    Parameter,
    StringLiteral,
    TimestampLiteral,
    VectorLiteral,
)
from recallql.grammar.statements import StatementBase
from recallql.grammar.timestamps import datetime64_to_datetime, format_timestamp

__all__ = ["bind"]


class _Mistyped(Exception):
    """A value that cannot go in a slot; the message completes "<what> must be ...", `hint`
    says what to pass instead (or None)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def bind(statement: StatementBase, /, *args: Any, **params: Any) -> StatementBase:
    """Return ``statement`` with every parameter replaced by a literal node.

    Args:
        statement: a parsed statement (its ``source`` is used for carets).
        *args: values for ``?`` parameters, in order.
        **params: values for ``:name`` parameters.

    Returns:
        The bound statement (``parameters`` empty); ``statement`` itself when it has none.

    Raises:
        ParameterError: a value is missing, unexpected, of the wrong type or out of range;
            the message names the parameter and the caret points at it.
        TypeError: `statement` is not a parsed statement (text goes through `parse` first).
    """
    if not isinstance(statement, StatementBase):
        raise TypeError(f"bind takes a parsed statement (parse(text)), not "
                        f"{type(statement).__name__}")
    if not statement.parameters:
        if args or params:
            given = ", ".join([*(repr(a) for a in args[:3]), *(f":{k}" for k in params)])
            raise ParameterError(
                f"the statement has no parameters, but values were given: {given}",
                hint="remove the values, or add ? / :name to the statement",
            )
        return statement
    if statement.parameters[0].name is None:  # ? parameters (the parser forbids mixing)
        values = _positional(statement, args, params)
    else:
        values = _named(statement, args, params)
    return map_slots(statement, _binder(statement, values), {"parameters": ()})


def _binder(statement: StatementBase, values: dict[Any, Any]) -> Callable[[Slot, Node], Node]:
    """The slot visitor that replaces each parameter by its checked literal node."""

    def visit(slot: Slot, node: Node) -> Node:
        if not isinstance(node, Parameter):
            return node
        what = f"{slot.what} (parameter {node.label})"

        def fail(message: str, hint: str | None = None) -> Any:
            raise ParameterError(message, text=statement.source, span=node.span, hint=hint)

        value = values[node.name if node.name is not None else node.index]
        try:
            bound = _CONVERTERS[slot.kind](value, node)
        except _Mistyped as exc:
            fail(f"{what} must be {exc}, got {_describe(value)}", exc.hint)
        check_value(slot, what, bound, fail)
        return bound

    return visit


def _positional(stmt: StatementBase, args: tuple[Any, ...], params: dict[str, Any]) -> dict:
    parameters = stmt.parameters
    if params:
        given = ", ".join(":" + name for name in params)
        raise ParameterError(
            f"the statement uses ? parameters, but named values were given: {given}",
            hint="pass the values by position",
        )
    if len(args) < len(parameters):
        missing = parameters[len(args)]
        packed = len(args) == 1 and isinstance(args[0], list | tuple) \
            and len(args[0]) == len(parameters)
        raise ParameterError(
            f"missing value for parameter {missing.label}: {len(parameters)} needed, "
            f"{len(args)} given",
            text=stmt.source,
            span=missing.span,
            # sqlite3's execute(sql, (a, b)) habit: one sequence holding every value
            hint=f"the values went in as one {type(args[0]).__name__}: pass them as separate "
                 "arguments, execute(text, *values)" if packed else None,
        )
    if len(args) > len(parameters):
        raise ParameterError(
            f"too many values: the statement has {len(parameters)} ? "
            f"parameter{'' if len(parameters) == 1 else 's'}, {len(args)} values given"
        )
    return dict(enumerate(args))


def _named(stmt: StatementBase, args: tuple[Any, ...], params: dict[str, Any]) -> dict:
    parameters = stmt.parameters
    if not args and params.keys() == {p.name for p in parameters}:
        return params  # exactly the statement's names
    names = ", ".join(dict.fromkeys(p.label for p in parameters))
    if args:
        if len(args) == 1 and isinstance(args[0], Mapping):  # sqlite3's execute(sql, {...})
            raise ParameterError(
                f"the statement uses named parameters ({names}), but their values came as "
                "one positional mapping",
                hint="unpack it into named values: execute(text, **values)",
            )
        raise ParameterError(
            f"the statement uses named parameters ({names}), but "
            f"{len(args)} positional value{' was' if len(args) == 1 else 's were'} given",
            hint=f"pass the values by name, e.g. {parameters[0].name}='backup'",
        )
    for parameter in parameters:
        if parameter.name not in params:
            holder = next((k for k, v in params.items()  # execute(text, params={"q": ...})
                           if isinstance(v, Mapping) and parameter.name in v), None)
            raise ParameterError(
                f"missing value for parameter {parameter.label}",
                text=stmt.source,
                span=parameter.span,
                hint=f"pass {parameter.name}=..." if holder is None else
                f"it is inside {holder}=: unpack that mapping, execute(text, **{holder})",
            )
    extra = [name for name in params if name not in {p.name for p in parameters}]
    if extra:
        raise ParameterError(f"unexpected parameter :{extra[0]}; the statement has {names}")
    return params


def _describe(value: Any) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:39] + "…"
    return f"{type(value).__name__} {shown}"


def _scalar(value: Any) -> Any:
    """A numpy scalar as its Python value; a ``datetime64`` as an aware UTC datetime (its
    `item()` would be an int of nanoseconds, or None for NaT)."""
    if isinstance(value, np.datetime64):
        try:
            return datetime64_to_datetime(value)
        except ValueError as exc:
            raise _Mistyped(f"a datetime ({exc})") from None
    return value.item() if isinstance(value, np.generic) else value


def _string(value: Any, node: Parameter) -> Node:
    value = _scalar(value)
    if not isinstance(value, str):
        raise _Mistyped("a str")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _Mistyped(f"valid Unicode text (a lone surrogate {value[exc.start]!r} at "
                            f"index {exc.start} cannot be stored or searched)") from None
    return trusted(StringLiteral, {"value": value, "span": node.span})


def _integer(value: Any, node: Parameter) -> Node:
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Mistyped("a whole number (int)")
    if not INT64_MIN <= value <= INT64_MAX:
        raise _Mistyped("a whole number within the 64-bit range")
    return trusted(IntegerLiteral, {"value": value, "span": node.span})


def _number(value: Any, node: Parameter) -> Node:
    value = _scalar(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Mistyped("a finite number")
        return trusted(FloatLiteral, {"value": value, "span": node.span})
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Mistyped("a number (int or float)")
    return _integer(value, node)


def _is_nat(value: Any) -> bool:
    """pandas' ``NaT``: a `datetime` instance unequal to itself."""
    return isinstance(value, datetime) and value != value


def _timestamp(value: Any, node: Parameter) -> Node:
    value = _scalar(value)
    if _is_nat(value):
        raise _Mistyped("a datetime (not NaT)")
    if isinstance(value, str):  # ISO-8601 text, as a WHERE value on a timestamp field takes
        # (JSON, e.g. the MCP server's run_statement, has no datetime): kept as the text of a
        # TIMESTAMP literal, which the engine reads with the one parser
        # (`recallql.index.timestamps.parse_timestamp`) and refuses with a caret if no time
        return trusted(TimestampLiteral, {"value": value.strip(), "span": node.span})
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, dt_time.min)  # a calendar date: midnight UTC
    if not isinstance(value, datetime):
        raise _Mistyped("a datetime (or a date, a numpy datetime64 or ISO-8601 text)")
    try:
        text = format_timestamp(value)  # naive means UTC
    except OverflowError:
        raise _Mistyped("a datetime within the representable UTC range") from None
    return trusted(TimestampLiteral, {"value": text, "span": node.span})


def _value(value: Any, node: Parameter) -> Node:
    value = _scalar(value)
    if value is None:
        return trusted(NullLiteral, {"value": None, "span": node.span})
    if isinstance(value, bool):
        return trusted(BooleanLiteral, {"value": value, "span": node.span})
    if isinstance(value, str):
        return _string(value, node)
    if isinstance(value, int | float):
        return _number(value, node)
    if isinstance(value, date):
        return _timestamp(value, node)
    several = isinstance(value, list | tuple | set | frozenset) or (
        isinstance(value, np.ndarray) and value.ndim == 1)
    raise _Mistyped(
        "a str, bool, int, float, datetime or None (vectors go only at NEAR, "
        "durations only where a duration is expected)",
        hint=f"to match any of several values, write IN {node.label} (WHERE field IN "
             f"{node.label})" if several else None,
    )


def _list(value: Any, node: Parameter) -> tuple[Node, ...]:
    """`IN :list`: a non-empty list, tuple, set or 1-D array of scalar values."""
    if isinstance(value, np.ndarray):
        value = value.tolist() if value.ndim == 1 else None
    if isinstance(value, set | frozenset):
        value = sorted(value, key=repr)
    if not isinstance(value, list | tuple) or not value:
        raise _Mistyped("a non-empty list, tuple or set of values")
    return tuple(_value(item, node) for item in value)


def _duration(value: Any, node: Parameter) -> Node:
    if not isinstance(value, timedelta):
        raise _Mistyped("a duration (datetime.timedelta)")
    seconds = value.total_seconds()
    for unit, size in (("DAYS", 86400), ("HOURS", 3600), ("MINUTES", 60), ("SECONDS", 1)):
        if seconds % size == 0:
            return Duration.model_construct(value=int(seconds // size), unit=unit, span=node.span)
    return trusted(Duration, {"value": seconds, "unit": "SECONDS", "span": node.span})


def _vector(value: Any, node: Parameter) -> Node:
    if not isinstance(value, list | tuple | np.ndarray):
        raise _Mistyped("a vector (a list, tuple or 1-D numpy array of numbers)")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        raise _Mistyped("a vector of numbers") from None
    if array.dtype.kind not in "iuf" or array.ndim != 1:
        one_row = array.dtype.kind in "iuf" and array.ndim == 2 and array.shape[0] == 1
        raise _Mistyped("a 1-D vector of numbers", hint=(
            f"it has shape {array.shape}, one row as an embedder returns for one text: pass "
            "that row (vectors[0])") if one_row else None)
    if array.size == 0:
        raise _Mistyped("a non-empty vector")
    if array.dtype == np.float32:
        vector = array.copy()  # later changes by the caller cannot leak
    else:
        with np.errstate(all="ignore"):  # overflow to inf is reported below, not warned about
            vector = array.astype(np.float32)  # a copy, as above
    if not np.isfinite(vector).all():
        raise _Mistyped("a vector of finite numbers (no NaN or infinity, within float32)")
    vector.setflags(write=False)
    return trusted(VectorLiteral, {"value": vector, "name": node.name, "span": node.span})


#: Slot kind -> converter of a Python value to its literal node (a tuple of nodes for IN lists).
_CONVERTERS: dict[str, Callable[[Any, Parameter], Any]] = {
    "text": _string,
    "session": _string,
    "pattern": _string,
    "vector": _vector,
    "value": _value,
    "list": _list,
    "timestamp": _timestamp,
    "count": _integer,
    "offset": _integer,
    "weight": _number,
    "leg_weight": _number,
    "signal_weight": _number,
    "positive": _number,
    "fraction": _number,
    "duration": _duration,
}
