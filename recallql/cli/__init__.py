"""The ``recallql`` command line (typer). Each command is a small function over `recallql.api`.

    recallql ingest PATH...          files and directories into a collection
    recallql query "STATEMENTS"      run statements, print tables (or --json)
    recallql explain "STATEMENT"     plan and per-row score arithmetic
    recallql shell                   interactive shell
    recallql check                   verify a database (SQLite, text index, vectors agree)
    recallql vacuum                  purge deleted rows now
    recallql mcp                     the database as an MCP server for agents
    recallql sessions ...            list, show, create, annotate, signal, close, archive, sweep
    recallql import hermes STATE_DB  import a Hermes Agent session store
    recallql reindex / optimize      rebuild text indexes (new analyser; exact BM25 statistics)
    recallql cluster serve           shard actors on Ray (recallql[cluster]; docs/cluster.md)
    recallql demo                    build a demo database from real data and tour it
    recallql bench                   run the benchmarks (source checkout)

Exit codes: 0 ok, 1 query or data error (message on stderr; query errors show a caret under the
offending token), 2 usage, 130 an ingest interrupted with Ctrl-C.
"""

from __future__ import annotations

from typing import Annotated

import typer

from recallql.cli import cluster as _cluster
from recallql.cli import delete as _delete
from recallql.cli import ingest as _ingest
from recallql.cli import maintenance as _maintenance
from recallql.cli import mcp as _mcp
from recallql.cli import query as _query
from recallql.cli import sessions as _sessions
from recallql.cli import tools as _tools
from recallql.cli.common import EMBEDDERS, Command, GroupDbOption, State, global_db, run_main

EPILOG = """\b
Examples:
  recallql demo
  recallql ingest notes/ --db mem.db
  recallql query "SEARCH docs MATCHING 'backup policy' LIMIT 5" --db mem.db
  recallql shell --db mem.db

Exit codes: 0 ok, 1 query or data error (message on stderr), 2 usage, 130 an ingest
interrupted with Ctrl-C. The language:
docs/language.md; every command has --help with examples."""

app = typer.Typer(
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EPILOG,
)


def _version(value: bool) -> None:
    if value:
        import recallql

        typer.echo(f"recallql {recallql.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: GroupDbOption = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of unexpected errors."
                                        )] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    wait: Annotated[float | None, typer.Option(
        "--wait", min=0.0, metavar="SECONDS",
        help="How long each write waits while another process writes to the database "
             "(default 5; 0: fail at once). Also accepted after the command.")] = None,
) -> None:
    """recallql: an embedded query engine for AI-agent memory.

    Hybrid BM25 + vector search over documents and conversations, agent sessions and their
    signals, conversation lineage, and EXPLAIN for every score. A database is a directory
    (--db, default ./recallql.db or $RECALLQL_DB).
    """
    State.debug = State.debug or debug
    if wait is not None:
        State.wait, State.wait_given = wait, True
    if db is not None:
        global_db(ctx, db)


app.command(cls=Command, short_help="Ingest files and directories into a collection."
            )(_ingest.ingest)
app.command(cls=Command, short_help="Delete items or whole documents.")(_delete.delete)
app.command(cls=Command, short_help="Run statements and print their results.")(_query.query)
app.command(cls=Command, short_help="Show a statement's plan and each row's score arithmetic."
            )(_query.explain)
app.command(cls=Command, short_help="Interactive shell (or run a piped script).")(_tools.shell)
app.command(cls=Command, short_help="Verify a database; report damage (repairs nothing)."
            )(_maintenance.check)
app.command(cls=Command, short_help="Purge deleted rows now (AS OF then stops showing them)."
            )(_maintenance.vacuum)
app.command(cls=Command, short_help="Serve the database to agents over MCP (stdio or HTTP)."
            )(_mcp.mcp)
app.command(cls=Command, short_help="Rebuild text indexes with the current analyser."
            )(_maintenance.reindex)
app.command(cls=Command, short_help="Make BM25 statistics exact after deletes and replaces."
            )(_maintenance.optimize)
app.add_typer(_sessions.app, name="sessions")
app.add_typer(_tools.import_app, name="import")
app.add_typer(_cluster.app, name="cluster")
app.command(cls=Command, short_help="Build a demo database from real data and tour it."
            )(_tools.demo)
app.command(cls=Command, short_help="Run the benchmarks (source checkout).",
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
            )(_tools.bench)


def main() -> None:
    """Console entry point (``recallql``)."""
    run_main(app)


__all__ = ["EMBEDDERS", "app", "main"]
