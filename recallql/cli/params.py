"""``--param name=value`` for the CLI: values are bound as parameters, never put into the text.

- ``name=value``: the value's type is inferred (whole number, decimal number, ``true``/``false``,
  ``null``, ISO-8601 date or timestamp, otherwise a string). When the inferred type does not fit
  where the parameter is used (``FOR SESSION :s`` with ``s=42``), the plain string is used.
- ``name:=json``: a JSON value, taken as is (``v:=[0.1, 0.2]`` for a vector, ``s:="42"``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import typer

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?")
T = TypeVar("T")


@dataclass
class Param:
    """One parameter: the text given, its value, and whether the value was inferred."""

    raw: str
    value: Any
    inferred: bool


def infer(text: str) -> Any:
    """The typed value of a ``name=value`` text (see the module docstring)."""
    lowered = text.lower()
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text) and math.isfinite(float(text)):
        return float(text)
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    if _DATE.fullmatch(text):
        from recallql.api import parse_timestamp

        try:
            return parse_timestamp(text)
        except ValueError:
            return text
    return text


def parse_params(specs: Sequence[str] | None) -> dict[str, Param]:
    """Parse ``--param`` options.

    Raises:
        typer.BadParameter: (exit 2) not ``name=value`` / ``name:=json``, a bad name or JSON, or
            a name given twice.
    """
    params: dict[str, Param] = {}
    for spec in specs or ():
        name, sep, raw = spec.partition("=")
        explicit = name.endswith(":")
        name = name[:-1] if explicit else name
        if not sep or not _NAME.fullmatch(name):
            raise typer.BadParameter(f"expected name=value or name:=json, got {spec!r}",
                                     param_hint="--param")
        if name in params:
            raise typer.BadParameter(f"parameter {name!r} given twice", param_hint="--param")
        if explicit:
            try:
                params[name] = Param(raw, json.loads(raw), False)
            except json.JSONDecodeError as exc:
                raise typer.BadParameter(f"{name}: invalid JSON ({exc.msg})",
                                         param_hint="--param") from None
        else:
            value = infer(raw)
            params[name] = Param(raw, value, not isinstance(value, str))
    return params


def culprit(exc: Exception) -> str | None:
    """The ``:name`` parameter a query error points at, if any."""
    text, span = getattr(exc, "text", None), getattr(exc, "span", None)
    if not text or not span:
        return None
    start, end = tuple(span)[:2]
    token = text[start:end]
    return token[1:] if token.startswith(":") else None


def bind_with_fallback(run: Callable[[dict[str, Any]], T], params: dict[str, Param]) -> T:
    """Call ``run(values)``; when a query error points at a parameter whose type was inferred,
    retry with that parameter as the plain string it was given as. When the string does not
    fit either, the error about the inferred value is raised (``LIMIT :n`` with ``n=1e30``:
    out of range, not 'got str'). A parameter given no value gets the hint the command line
    takes (``-p q=VALUE``, not db.execute's ``pass q=...``)."""
    from recallql.grammar.errors import ParameterError, QueryError

    values = {name: p.value for name, p in params.items()}
    first: dict[str, QueryError] = {}
    while True:
        try:
            return run(values)
        except QueryError as exc:
            name = culprit(exc)
            if name is not None and name not in params and isinstance(exc, ParameterError):
                exc.hint = f"give its value with -p {name}=VALUE"
                raise
            param = params.get(name) if name else None
            if name is None or param is None or not param.inferred:
                raise
            if values[name] == param.raw:
                raise first.get(name, exc) from None
            first[name] = exc
            values[name] = param.raw


#: What to write instead of ``?`` on the command line (``-p`` binds by name only).
POSITIONAL_HINT = ("use a named parameter :name instead (e.g. MATCHING :q) and give its value "
                   "with -p name=value (-p q='disk full')")


def refuse_positional(statements: Sequence[Any], hint: str = POSITIONAL_HINT) -> None:
    """Refuse a ``?`` parameter before anything runs: ``-p`` gives values by name, so a ``?``
    could only ever fail as "missing value" (or make every ``-p`` look unused).

    Raises:
        ParameterError: the caret under the first ``?``, with `hint`.
    """
    from recallql.grammar.errors import ParameterError

    for stmt in statements:
        first = next((p for p in getattr(stmt, "parameters", ()) if p.name is None), None)
        if first is not None:
            raise ParameterError("a ? parameter takes its value by position; the command "
                                 "line gives values only by name (-p name=value)",
                                 text=stmt.source, span=first.span, hint=hint)


def check_unused(statements: Sequence[Any], params: dict[str, Param]) -> None:
    """Refuse a ``-p`` the statements do not use (a typo would otherwise go unnoticed).

    Raises:
        typer.BadParameter: (exit 2) naming the unused parameters.
    """
    from recallql.grammar import did_you_mean

    used = list(dict.fromkeys(p.name for s in statements for p in getattr(s, "parameters", ())
                              if p.name))
    unused = sorted(set(params) - set(used))
    if not unused:
        return
    close = did_you_mean(unused[0], used, listing=False) if len(unused) == 1 else None
    if close:
        why = close
    elif used:
        why = "its parameters: " + ", ".join(f":{name}" for name in used)
    else:
        why = "it has no :name parameters"
    raise typer.BadParameter(f"not used by the statement: {', '.join(unused)} ({why})",
                             param_hint="--param")


def used_by(stmt: Any, values: dict[str, T]) -> dict[str, T]:
    """The subset of `values` that the statement's ``:name`` parameters use."""
    names = {p.name for p in getattr(stmt, "parameters", ()) if p.name}
    return {k: v for k, v in values.items() if k in names}
