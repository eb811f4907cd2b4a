"""Input limits, checked before parsing (SPEC §3.2): statement size, nesting depth, IN-list length.

Lark builds a parse tree for any input before the AST builder can refuse it: 100,000 nested
parentheses took seconds to parse only to be rejected as too deep. `check_limits` scans the text
once with one regular expression (strings, quoted names and comments are skipped as wholes, so
their contents are never mistaken for syntax) and raises a `QuerySyntaxError` with a caret on the
first token over a limit, so no input takes seconds to reject.

* **Size**: at most `MAX_STATEMENT_BYTES` (1 MiB) of UTF-8 per call; long texts and lists travel
  as parameters, which have no such limit.
* **Nesting**: at most `MAX_DEPTH` levels of ``(`` and ``NOT`` (a group or a negation is one
  level; ``AND``/``OR`` chains are flat). The AST builder enforces the same limit on the
  predicate tree, which is never shallower than this count.
* **IN lists**: at most `MAX_IN_LIST` literal values (the limit of Oracle's ORA-01795); a
  list parameter (``IN :ids``) takes any number.
* **Tokens**: at most `MAX_TOKENS` tokens per input (a string literal is one token), the
  analogue of Elasticsearch's ``max_clause_count``: a flat chain of 100,000 ORs is within the
  size limit but took 11 s to parse; 10,000 tokens parse in about 0.2 s.
"""

from __future__ import annotations

import re

from recallql.grammar.errors import QuerySyntaxError

__all__ = ["MAX_DEPTH", "MAX_IN_LIST", "MAX_STATEMENT_BYTES", "MAX_TOKENS", "check_limits"]

MAX_STATEMENT_BYTES = 1 << 20
"""Longest accepted input, in UTF-8 bytes (1 MiB)."""
MAX_DEPTH = 64
"""Deepest predicate nesting accepted (keeps every recursive pass far from Python's limit)."""
MAX_IN_LIST = 1000
"""Most literal values in one ``IN ( ... )`` list."""
MAX_TOKENS = 10_000
"""Most tokens in one input (strings, names, numbers, operators and punctuation)."""

# One token per match (an operator character counts alone); spaces are skipped. Strings, quoted
# names and comments match as wholes (an unterminated one runs to the end).
_TOKEN = re.compile(r"""'[^']*+(?:''[^']*+)*+'?|"[^"]*+(?:""[^"]*+)*+"?|--[^\n]*"""
                    r"""|:?[A-Za-z_][A-Za-z0-9_]*|[+-]?\.?\d[\w.]*|\S""")


def check_limits(text: str) -> None:
    """Refuse input over a limit before it is parsed.

    Args:
        text: the whole input (one statement or a ``;``-separated script).

    Raises:
        QuerySyntaxError: the input is over `MAX_STATEMENT_BYTES`, nests deeper than
            `MAX_DEPTH`, or has an IN list of more than `MAX_IN_LIST` values; the caret is on
            the first offending token.
    """
    _check_size(text)
    _Scan(text).run()


def _check_size(text: str) -> None:
    if len(text) * 4 <= MAX_STATEMENT_BYTES:  # at most 4 bytes a character: surely small
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_STATEMENT_BYTES:
        return
    cut = len(text.encode("utf-8", "surrogatepass")[:MAX_STATEMENT_BYTES]
              .decode("utf-8", "ignore"))
    raise QuerySyntaxError(
        f"the statement is {size:,} bytes long; the limit is {MAX_STATEMENT_BYTES:,} bytes "
        "(1 MiB)", text=text, span=(cut, cut + 1),
        hint="pass long text and long lists as parameters (MATCHING :q, WHERE id IN :ids)")


class _Scan:
    """One pass over the tokens that matter: parentheses, NOT, IN, commas, semicolons."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reset()

    def reset(self) -> None:
        """Forget the nesting state: a new statement starts."""
        self.depth = 0  # nesting levels open at this point
        self.nots = 0  # NOTs directly before this point (each one nests)
        self.stack: list[tuple[int, int | None]] = []  # (depth before, IN-list count before)
        self.in_list: int | None = None  # values so far when directly inside IN ( ... )
        self.after_in = False

    def run(self) -> None:
        overflow = False  # the last comma started value MAX_IN_LIST + 1
        for count, match in enumerate(_TOKEN.finditer(self.text), 1):
            token = match.group()
            if overflow:
                self._too_many(match.span())
            if count > MAX_TOKENS:
                self._too_long(match.span())
            first = token[0]
            if first == "(":
                self._open(match.span())
            elif first == ")":
                self._close()
            elif first == ",":
                overflow = self._comma()
            elif first == ";":
                self.reset()
            elif first == "-" and token.startswith("--"):
                continue  # a comment
            elif token.upper() == "NOT":
                self.nots += 1
                if self.depth + self.nots > MAX_DEPTH:
                    self._too_deep(match.span())
                self.after_in = False
            else:
                self.nots = 0
                self.after_in = token.upper() == "IN"
        if overflow:
            self._too_many((len(self.text), len(self.text)))

    def _open(self, span: tuple[int, int]) -> None:
        level = self.depth + self.nots + 1
        if level > MAX_DEPTH:
            self._too_deep(span)
        self.stack.append((self.depth, self.in_list))
        self.depth, self.nots = level, 0
        self.in_list = 1 if self.after_in else None
        self.after_in = False

    def _close(self) -> None:
        self.depth, self.in_list = self.stack.pop() if self.stack else (0, None)
        self.nots, self.after_in = 0, False

    def _comma(self) -> bool:
        self.nots, self.after_in = 0, False
        if self.in_list is None:
            return False
        self.in_list += 1
        return self.in_list > MAX_IN_LIST

    def _too_deep(self, span: tuple[int, int]) -> None:
        raise QuerySyntaxError(
            f"the statement is nested more than {MAX_DEPTH} levels deep (parentheses and NOTs)",
            text=self.text, span=span, hint="use fewer nested parentheses or NOTs")

    def _too_long(self, span: tuple[int, int]) -> None:
        raise QuerySyntaxError(
            f"the statement has more than {MAX_TOKENS:,} tokens", text=self.text, span=span,
            hint="pass lists as parameters (WHERE id IN :ids) and split very long predicates")

    def _too_many(self, span: tuple[int, int]) -> None:
        raise QuerySyntaxError(
            f"the IN list has more than {MAX_IN_LIST:,} values", text=self.text, span=span,
            hint="bind the values to one list parameter instead: WHERE id IN :ids, "
                 "db.execute(text, ids=[...])")
