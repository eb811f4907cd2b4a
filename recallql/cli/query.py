"""``recallql query`` and ``recallql explain``."""

from __future__ import annotations

import functools
import sys
from typing import Annotated, Any

import typer

from recallql.cli.common import (
    DEFAULT_DB,
    DbOption,
    StatementsJsonOption,
    choice,
    fail,
    handled,
    open_db,
    out,
)
from recallql.cli.params import (
    bind_with_fallback,
    check_unused,
    parse_params,
    refuse_positional,
    used_by,
)

ParamOption = Annotated[list[str] | None, typer.Option(
    "--param", "-p", metavar="NAME=VALUE",
    help="A statement parameter (repeatable), bound by name, never put into the text. "
         "name=value infers numbers, true/false, null and ISO dates (falling back to a string "
         "where the statement wants one); name:=json takes a JSON value, e.g. v:=[0.1,0.2].")]
FormatOption = Annotated[str, typer.Option(
    "--format", "-f", metavar="FORMAT",
    help="table (default), json (one object per statement, as --json), jsonl (one object per "
         "row), csv or markdown; all but table give each row's full text.")]
TextArgument = Annotated[str, typer.Argument(
    metavar="STATEMENTS", help="One or more ';'-separated statements, or '-' to read stdin.")]


def _source(text: str) -> str:
    return sys.stdin.read() if text == "-" else text


def _execute(database: Any, stmt: Any, values: dict[str, Any]) -> Any:
    return database.execute(stmt, **values)


def _one_statement(source: str) -> Any:
    """The one statement `recallql explain` takes; a second is refused with the caret under
    it and a hint for the command line (the parser's names parse_script, a Python function).

    Raises:
        QuerySyntaxError: more than one statement.
    """
    from recallql.grammar import parse_script
    from recallql.grammar.errors import QuerySyntaxError

    statements = parse_script(source)
    if len(statements) > 1:
        raise QuerySyntaxError(
            "expected one statement, found a second one", text=source,
            span=(statements[1].span.start, statements[1].span.end),
            hint='recallql explain takes one statement; explain several with recallql query '
                 '"EXPLAIN ...; EXPLAIN ..."')
    return statements[0] if statements else None


def query(
    text: TextArgument,
    db: DbOption = DEFAULT_DB,
    param: ParamOption = None,
    as_json: StatementsJsonOption = False,
    fmt: FormatOption = "table",
) -> None:
    """Run statements and print their results as tables (or --format json|jsonl|csv|markdown).

    Statements run in order; the first error stops the rest (exit 1). SEARCH and RETRIEVE
    return 10 rows unless they say LIMIT n. EXPLAIN prints the plan and each row's score
    arithmetic (JSON with EXPLAIN FORMAT JSON).

    \b
    Examples:
      recallql query "SEARCH docs MATCHING 'backup policy' LIMIT 5"
      recallql query "SEARCH docs MATCHING :q WHERE tags CONTAINS :tag" \\
          -p q='disk full' -p tag=ops
      recallql query "RETRIEVE 5 FROM docs FOR SESSION :s" -p s=agent-7 --json
      recallql query "SHOW COLLECTIONS; DESCRIBE docs"
      recallql query "SEARCH docs MATCHING 'backup'" --format csv > hits.csv
      echo "SHOW SESSIONS;" | recallql query -
    """
    from recallql.grammar import parse_script
    from recallql.ui.render import Catalog

    fmt = _check_format("json" if as_json else fmt)
    params = parse_params(param)
    with handled():
        statements = parse_script(_source(text))
        refuse_positional(statements)
    if not statements:
        raise fail("no statement given (the text holds only blanks, ';' or comments)")
    check_unused(statements, params)
    with open_db(db) as database, handled():
        catalog = Catalog.of(database)
        for number, stmt in enumerate(statements):
            used = used_by(stmt, params)
            outcome = bind_with_fallback(functools.partial(_execute, database, stmt), used)
            if number and fmt in ("csv", "markdown"):
                out.print()  # a blank line between the statements' tables
            show(outcome, catalog, fmt)


def _check_format(fmt: str) -> str:
    from recallql.ui.formats import FORMATS

    return choice(fmt, FORMATS, "--format")


def show(outcome: Any, catalog: Any, fmt: str) -> None:
    """Print one outcome on stdout in `fmt` (a table, or a text format unwrapped)."""
    from recallql.ui.formats import format_text
    from recallql.ui.render import print_outcome

    if fmt == "table":
        print_outcome(out, outcome, catalog)
    else:
        out.print(format_text(outcome, fmt, catalog), markup=False, soft_wrap=True,
                  highlight=False)


def explain(
    text: Annotated[str, typer.Argument(metavar="STATEMENT",
                                        help="A SEARCH or RETRIEVE (or EXPLAIN ...) statement.")],
    db: DbOption = DEFAULT_DB,
    analyze: Annotated[bool, typer.Option("--analyze", help="Add rows and time per operator."
                                          )] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Add tantivy's BM25 explanation "
                                          "per row.")] = False,
    param: ParamOption = None,
    as_json: StatementsJsonOption = False,
) -> None:
    """Show a statement's plan and every row's score arithmetic (--json: as JSON).

    The plan comes root first, one operator a line; then each row with its reason codes and
    their contributions, which add up to the score.

    \b
    Examples:
      recallql explain "SEARCH docs MATCHING 'rotate credentials' WITH RECENCY LIMIT 3"
      recallql explain --analyze "SEARCH messages MATCHING :q GROUP BY CONVERSATION" \\
          -p q=deploy
      recallql explain "RETRIEVE 5 FROM docs FOR SESSION 's-42'" --json
    """
    from recallql.ui.render import Catalog, print_outcome, to_json

    params = parse_params(param)
    source = _source(text)
    with handled():
        statement = _one_statement(source)
        refuse_positional([statement] if statement is not None else [])
    check_unused([statement] if statement is not None else [], params)
    with open_db(db) as database, handled():
        catalog = Catalog.of(database)
        outcome = bind_with_fallback(
            lambda values: database.explain(source, analyze=analyze, verbose=verbose,
                                            **values), params)
    if as_json:
        out.print(to_json(outcome, catalog, indent=None), markup=False, soft_wrap=True)
    else:
        print_outcome(out, outcome, catalog)
