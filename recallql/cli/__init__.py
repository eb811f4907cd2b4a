"""The ``recallql`` command line (typer). Each command is a small function over `recallql.api`.

    recallql ingest PATH...          files and directories into a collection
    recallql query "STATEMENTS"      run statements, print tables (or --json)
    recallql explain "STATEMENT"     plan and per-row score arithmetic
    recallql shell                   interactive shell
    recallql sessions ...            list, show, create, annotate, signal, close, archive, sweep
    recallql import hermes STATE_DB  import a Hermes Agent session store
    recallql demo                    build a demo database from real data and tour it
    recallql bench                   run the benchmarks (source checkout)

Exit codes: 0 ok, 1 query or data error (message on stderr; query errors show a caret under the
offending token), 2 usage.
"""

from __future__ import annotations

from typing import Annotated

import typer

from recallql.cli import ingest as _ingest
from recallql.cli import query as _query
from recallql.cli import sessions as _sessions
from recallql.cli import tools as _tools
from recallql.cli.common import EMBEDDERS, State, run_main

app = typer.Typer(
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Examples: recallql demo | recallql ingest notes/ | recallql query \"SEARCH docs "
           "MATCHING 'backup policy' LIMIT 5\" | recallql shell. Exit codes: 0 ok, 1 query or "
           "data error, 2 usage.",
)


def _version(value: bool) -> None:
    if value:
        import recallql

        typer.echo(f"recallql {recallql.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of unexpected errors."
                                        )] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """recallql: an embedded query engine for AI-agent memory (hybrid BM25 + vector search,
    sessions, conversation lineage, EXPLAIN)."""
    State.debug = State.debug or debug


app.command()(_ingest.ingest)
app.command()(_query.query)
app.command()(_query.explain)
app.command()(_tools.shell)
app.add_typer(_sessions.app, name="sessions")
app.add_typer(_tools.import_app, name="import")
app.command()(_tools.demo)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
            )(_tools.bench)


def main() -> None:
    """Console entry point (``recallql``)."""
    run_main(app)


__all__ = ["EMBEDDERS", "app", "main"]
