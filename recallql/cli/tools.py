"""``recallql shell``, ``demo``, ``bench`` and ``import hermes``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from recallql.cli.common import (
    DEFAULT_DB,
    DEMO_DB,
    Command,
    DbOption,
    EmbedderOption,
    JsonOption,
    State,
    choice,
    err,
    fail,
    group_db,
    handled,
    is_database,
    no_database,
    open_db,
    out,
    removed_if_left_empty,
)

import_app = typer.Typer(no_args_is_help=True, help="Import another agent's memory store.",
                         epilog="Example: recallql import hermes ~/.hermes/state.db --db "
                                "memory.db")
import_app.callback()(group_db)  # `recallql import --db X hermes STATE_DB`


def shell(
    db: DbOption = DEFAULT_DB,
    history: Annotated[Path | None, typer.Option(
        envvar="RECALLQL_HISTORY", metavar="FILE",
        help="History file (default ~/.recallql_history).")] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                     help="table, json, jsonl, csv or markdown (\\format "
                                          "changes it).")] = "table",
    pager: Annotated[bool, typer.Option("--pager/--no-pager", help="Page results longer "
                                        "than the screen through $PAGER (on a terminal).")
                     ] = True,
    create: Annotated[bool, typer.Option("--create", help="Create an empty database when "
                                         "there is none at --db.")] = False,
) -> None:
    """Interactive shell: line editing, history, completion, tables.

    Statements end with ';' (Enter before it continues the statement); \\help lists the
    backslash commands (\\format, \\x, \\o FILE, \\pager, \\timing, \\d, \\r), \\q quits.
    Ctrl-C cancels a running statement; long results go through $PAGER on a terminal. The
    database is opened read-only (it never blocks a writer). With input from a pipe it runs
    the script, stops at the first error and exits 1.

    \b
    Examples:
      recallql shell --db mem.db
      recallql shell --db scratch.db --create
      echo "SHOW COLLECTIONS; DESCRIBE docs;" | recallql shell --db mem.db
    """
    from recallql.repl import Repl
    from recallql.ui.formats import FORMATS

    fmt = choice(fmt, FORMATS, "--format")
    if not is_database(db):
        _create_empty(db, create)
    with open_db(db) as database:
        code = Repl(database, history=history, fmt=fmt, debug=State.debug, pager=pager).run()
    raise typer.Exit(code)


def _create_empty(db: Path, create: bool) -> None:
    """Create an empty database at `db` for ``shell --create``.

    Raises:
        typer.Exit: (code 1) without --create, or where no database can be created.
    """
    occupied = (db.exists() and not db.is_dir()) or (db.is_dir() and any(db.iterdir()))
    if not create or occupied:
        raise fail(no_database(db, f"start an empty one with `recallql shell --db {db} "
                                   f"--create`, or ingest first: `recallql ingest FILES --db "
                                   f"{db}`"))
    open_db(db, write=True, create=True).close()
    err.print(f"created an empty database at {db}; the shell only reads it: fill it with "
              f"`recallql ingest FILES --db {db}` (or from Python)", markup=False, soft_wrap=True)


def demo(
    db: Annotated[Path, typer.Option("--db", metavar="PATH",
                                     help="Where to build the demo database (rebuilt if it was "
                                          "built by the demo and not written to since)."
                                     )] = DEMO_DB,
    small: Annotated[bool, typer.Option("--small", help="A few hundred documents and "
                                        "messages (seconds, for tests).")] = False,
    all_docs: Annotated[bool, typer.Option("--all", help="Every changelog entry on the "
                                           "machine (minutes).")] = False,
    embedder: Annotated[str, typer.Option(metavar="NAME", help="default (all-MiniLM-L6-v2) "
                                          "or hash (no model, fastest).")] = "default",
) -> None:
    """Build a demo database from real data on this machine, then tour it.

    Documents are Debian changelog entries (/usr/share/doc/*/changelog.Debian.gz; Python's NEWS
    or CACM when there are none), conversations are real chats from the chitchat-dataset
    package rotated into session chains. Then it runs SEARCH, FOR SESSION, GROUP BY
    CONVERSATION and EXPLAIN statements and prints what they return.

    \b
    Examples:
      recallql demo
      recallql demo --small --embedder hash --db /tmp/demo.db
    """
    from recallql.demo import DemoError, run_demo

    if small and all_docs:
        raise typer.BadParameter("choose one of --small and --all", param_hint="--small/--all")
    if embedder not in ("default", "hash"):
        raise typer.BadParameter("use default or hash", param_hint="--embedder")
    size = "small" if small else "all" if all_docs else "default"
    with handled():
        try:
            run_demo(db, size=size, embedder=embedder, console=out)
        except DemoError as exc:
            raise fail(str(exc)) from None


def bench(ctx: typer.Context) -> None:
    """Run the benchmarks from a source checkout (python -m benchmarks).

    Extra arguments are passed on to the benchmark runner.

    \b
    Examples:
      recallql bench
      recallql bench -- --help
    """
    root = Path(__file__).resolve().parents[2]
    if not (root / "benchmarks").is_dir():
        raise fail("the benchmarks ship with the source, not the installed package: clone the "
                   "repository and run `make bench` (or `recallql bench` from the checkout)")
    if not (root / "benchmarks" / "__main__.py").is_file():
        raise fail(f"{root / 'benchmarks'} has no __main__.py: this checkout has no benchmark "
                   "runner")
    command = [sys.executable, "-m", "benchmarks", *ctx.args]
    err.print(f"running {' '.join(command[1:])} in {root}", markup=False)
    raise typer.Exit(subprocess.call(command, cwd=root))


def _import_with_progress(database, store: Path):
    """`Database.import_hermes` with a progress bar when it reports progress."""
    import inspect

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    if "progress" not in inspect.signature(database.import_hermes).parameters:
        return database.import_hermes(store)
    with Progress(TextColumn("importing messages"), BarColumn(), MofNCompleteColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("import", total=None)
        return database.import_hermes(
            store, progress=lambda done, total: bar.update(task, completed=done, total=total))


@import_app.command("hermes", cls=Command,
                    short_help="Import a Hermes Agent store (read-only).")
def import_hermes(
    store: Annotated[Path, typer.Argument(metavar="STATE_DB", help="A Hermes Agent state.db "
                                          "(read-only; never written), e.g. "
                                          "~/.hermes/state.db.")],
    db: DbOption = DEFAULT_DB,
    embedder: EmbedderOption = "auto",
    as_json: JsonOption = False,
) -> None:
    """Import a Hermes Agent session store (sessions, lineage markers, messages).

    The store is read-only and never written. Re-importing the same file adds nothing twice.

    \b
    Examples:
      recallql import hermes ~/.hermes/state.db --db memory.db
      recallql import hermes state.db --db memory.db --json
    """
    from recallql.ui.render import cell, print_table, records_table

    if store.is_dir():
        raise fail(f"{store} is a directory, not a Hermes store: name its SQLite file (e.g. "
                   "~/.hermes/state.db)")
    if not store.is_file():
        raise fail(f"{store}: no such file")
    with removed_if_left_empty(db), open_db(db, write=True, create=True,
                                            embedder=embedder) as database, handled():
        report = _import_with_progress(database, store)
    if as_json:
        out.print(report.model_dump_json(), markup=False, soft_wrap=True)
        return
    out.print(f"imported {store} into {db}", markup=False)
    rows = [{"what": k, "value": cell(v)} for k, v in report.model_dump(mode="json").items()]
    print_table(out, records_table(["what", "value"], rows))
