"""Shared pieces of the CLI: consoles, options, opening a database, turning errors into exits.

Exit codes: 0 ok, 1 query or data error (message on stderr; query errors show the caret),
2 usage (typer/click).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text
from typer.core import TyperCommand

from recallql.ui.render import make_console

if TYPE_CHECKING:
    from recallql.api import Database

err = make_console(stderr=True)
out = make_console()

DEFAULT_DB = Path("recallql.db")
#: Where `recallql demo` builds its database (in the current directory, as `make demo` runs it).
DEMO_DB = Path("recallql-demo.db")
EMBEDDERS = ("auto", "default", "none", "hash")


def _json_mode(value: bool) -> bool:
    """``--json``'s callback: errors of this command print as JSON objects."""
    State.json = value
    return value


DbOption = Annotated[Path, typer.Option(
    "--db", envvar="RECALLQL_DB", show_default=True, metavar="PATH",
    help="Database directory.")]
JsonOption = Annotated[bool, typer.Option(
    "--json", callback=_json_mode, is_eager=True,
    help="Print the result as JSON, one object on one line; errors as a JSON object on "
         "stderr.")]
#: `--json` of the commands that run statements (query, explain).
StatementsJsonOption = Annotated[bool, typer.Option(
    "--json", callback=_json_mode, is_eager=True,
    help="Print JSON: one object per statement, one per line; errors as a JSON object on "
         "stderr.")]
EmbedderOption = Annotated[str, typer.Option(
    metavar="NAME",
    help="auto (what the database was built with; 'default' for a new one), default "
         "(all-MiniLM-L6-v2), none (vectors from the caller), hash (a tiny test embedder).")]


#: `--db` of the root command and of command groups (`recallql --db X ...`, `recallql sessions
#: --db X list`): the default of every `--db` below it (see `global_db`).
GroupDbOption = Annotated[Path | None, typer.Option(
    "--db", metavar="PATH", show_default=False,
    help="Database directory, for every command below: `recallql --db X query ...` is "
         "`recallql query ... --db X`, `recallql sessions --db X list` is `recallql sessions "
         "list --db X`.")]


def db_defaults(group: Any, db: str) -> dict[str, Any]:
    """A click ``default_map`` giving every command of `group` (nested groups included) that
    has a ``--db`` option the default `db`."""
    defaults: dict[str, Any] = {}
    for name, command in getattr(group, "commands", {}).items():
        if hasattr(command, "commands"):
            defaults[name] = db_defaults(command, db)
        elif any(p.name == "db" for p in command.params):
            defaults[name] = {"db": db}
    return defaults


def global_db(ctx: typer.Context, db: Path) -> None:
    """``recallql [GROUP] --db X COMMAND`` as ``COMMAND --db X``: X is the default of every
    ``--db`` below the root or group `ctx` runs, for this invocation, ahead of
    ``$RECALLQL_DB`` (a ``--db`` after the command still wins; a group's ``--db`` wins over
    the root's)."""
    ctx.default_map = db_defaults(ctx.command, str(db))
    saved = os.environ.get("RECALLQL_DB")
    os.environ["RECALLQL_DB"] = str(db)

    def restore() -> None:
        if saved is None:
            os.environ.pop("RECALLQL_DB", None)
        else:
            os.environ["RECALLQL_DB"] = saved
    ctx.call_on_close(restore)


def group_db(ctx: typer.Context, db: GroupDbOption = None) -> None:
    """The callback of a command group (``sessions``, ``import``): its ``--db``."""
    if db is not None:
        global_db(ctx, db)


def _argument_name(param: Any, usage: bool = False) -> str:
    """An argument as click writes it: ``NAME`` (its metavar), ``NAME...`` for several,
    ``[NAME]`` in the usage line when optional."""
    name = param.metavar or (param.name or "").upper()
    name += "..." if param.nargs != 1 else ""
    return f"[{name}]" if usage and not param.required else name


class Command(TyperCommand):
    """A typer command whose help names arguments the classic way (``STATEMENTS``, not
    ``{STATEMENTS}`` or ``STATEMENTS <str>``); options show their metavar."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(_argument_name(param, usage=True))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append((_argument_name(param), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class State:
    """Process-wide CLI flags: `debug` (root callback, ``--debug``), `json` (a command's
    ``--json``: errors become JSON objects on stderr), `wait` (``--wait SECONDS``, global:
    how long each write waits for another process's write before `DatabaseLocked`;
    `wait_given` says whether the user gave it, for commands with another default)."""

    debug: bool = False
    json: bool = False
    wait: float = 5.0  # --wait SECONDS: how long a write waits for another writer
    wait_given: bool = False


def error_json(error: BaseException | str) -> str:
    """An error as one line of JSON: ``{"error": message, "type": class name, "line": n,
    "column": n, "hint": text}`` (line, column and hint null when the error has none)."""
    import json

    from recallql.grammar.errors import QueryError

    data: dict[str, Any] = {"error": str(error), "type": "error", "line": None,
                            "column": None, "hint": None}
    if isinstance(error, QueryError):
        data.update(error=error.message, type=type(error).__name__, line=error.line,
                    column=error.column, hint=error.hint)
    elif isinstance(error, BaseException):
        data["type"] = type(error).__name__
    return json.dumps(data, ensure_ascii=False)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr (verbatim, no markup; a JSON object under ``--json``)
    and return the Exit to raise."""
    if State.json:
        err.print(error_json(message), markup=False, soft_wrap=True)
        return typer.Exit(code)
    text = Text("error: ", style="bold red")
    text.append(message)
    err.print(text, soft_wrap=True)
    return typer.Exit(code)


def print_error(exc: BaseException) -> None:
    """Print a query error as its full rendering (caret included), others as ``error: ...``;
    under ``--json`` a JSON object (see `error_json`)."""
    from recallql.grammar.errors import QueryError

    if State.json:
        err.print(error_json(exc), markup=False, soft_wrap=True)
    elif isinstance(exc, QueryError):
        err.print(Text(str(exc)), soft_wrap=True)
    else:
        fail(str(exc))


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that are the user's or the data's fault: printed, exit 1, no traceback
    (`recallql.api.USER_ERRORS`)."""
    from recallql.api import USER_ERRORS

    return USER_ERRORS


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Turn user and data errors into a message on stderr and exit code 1."""
    import recallql

    try:
        yield
    except recallql.DatabaseLocked as exc:
        if State.debug:
            raise
        raise fail(locked_message(getattr(exc, "path", None) or Path("."), exc)) from None
    except user_errors() as exc:
        if State.debug:
            raise
        print_error(exc)
        raise typer.Exit(1) from None


def is_database(path: Path) -> bool:
    """Whether `path` is an existing recallql database directory."""
    from recallql.api import is_database as exists

    return exists(path)


def recorded_embedder(path: Path) -> Any:
    """The embedder the built-in `docs` collection of an existing database was created with
    (an `Embedder`, or None for caller-supplied vectors); ``"default"`` for a new database."""
    from recallql.api import stored_embedder

    if not is_database(path):
        return "default"
    return stored_embedder(path, "docs")


def choice(value: str, choices: Sequence[str], option: str) -> str:
    """`value` as one of `choices` (lower-case names), ignoring case: ``--format JSON`` is
    ``--format json``.

    Raises:
        typer.BadParameter: (exit 2) none of them, naming `option` and listing `choices`.
    """
    if value.lower() in choices:
        return value.lower()
    raise typer.BadParameter(f"use one of: {', '.join(choices)}", param_hint=option)


def embedder_for(name: str, path: Path) -> Any:
    """Resolve an ``--embedder`` choice (any case) for the database at `path`."""
    from recallql.api import HashEmbedder

    name = choice(name, EMBEDDERS, "--embedder")
    if name == "auto":
        return recorded_embedder(path)
    return {"default": "default", "none": None, "hash": HashEmbedder()}[name]


def no_database(path: Path, create: str | None = None) -> str:
    """Why there is no database at `path`, with a hint that works there. Every caller is a
    command that does not create a database at `path` (a reader, a writer with nothing to act
    on in a new one), so a file or a directory holding other things only gets "pass --db an
    existing database directory".

    Args:
        path: the ``--db`` path.
        create: how to create one, for a path where one can be created (default: ingest or
            the demo).
    """
    existing = ("pass --db an existing database directory (this command does not create "
                "one)")
    if path.is_file() or (path.exists() and not path.is_dir()):
        return (f"{path} is a file, not a recallql database (a database is a directory); "
                f"{existing}")
    if path.is_dir() and (path / "collections").exists():  # parts of one: say it is damaged
        from recallql.index.errors import StoreError
        from recallql.index.layout import check_directory

        try:
            check_directory(path, readonly=True)
        except StoreError as exc:
            return str(exc)
    if path.is_dir() and any(path.iterdir()):
        return f"{path} is a directory but not a recallql database; {existing}"
    create = create or (f"create one with `recallql ingest FILES --db {path}` or "
                        f"`recallql demo --db {path}`")
    if not path.exists() and is_database(DEMO_DB) and path.absolute() != DEMO_DB.absolute():
        create = f"the demo's database here is {DEMO_DB}: pass --db {DEMO_DB}; or {create}"
    return f"no recallql database at {path} ({create})"


def locked_message(path: Path, exc: BaseException | None = None) -> str:
    """The CLI's account of `DatabaseLocked`: who holds the lock and what to do meanwhile."""
    from recallql.index.lock import holder

    pid = getattr(exc, "pid", None)
    waited = getattr(exc, "waited", State.wait)
    return (f"the database {path} is locked by another writer, {holder(pid)} (a running "
            "`recallql ingest`, `recallql sessions` command, `recallql import` or a program "
            f"writing to it); waited {waited:g} s; wait for the other writer to finish and "
            "retry, pass --wait SECONDS to wait longer, or run read-only commands such as "
            "`recallql query`, `recallql explain` or `recallql shell` meanwhile")


def open_db(path: Path, *, write: bool = False, create: bool = False,
            embedder: str = "auto") -> Database:
    """Open the database at `path`.

    Readers (`write=False`) take no lock, so they work beside a writer (a shell, an ingest).
    The database must exist, unless `create` (a writer that starts one: `sessions create`,
    `import hermes`, `shell --create`); a command with nothing to act on in a new database
    (vacuum, annotate, signal, close, sweep) must not leave one at a mistyped path.

    Raises:
        typer.Exit: (code 1) no database there, locked, or an embedder mismatch.
    """
    import recallql

    if not (write and create) and not is_database(path):
        raise fail(no_database(path))
    with handled():
        return recallql.connect(path, embedder=embedder_for(embedder, path),
                                readonly=not write, lock_timeout=State.wait)


@contextlib.contextmanager
def removed_if_left_empty(path: Path) -> Iterator[None]:
    """Around a command that may create the database at `path` (`sessions create`, `import
    hermes`): when the path did not exist and the command fails leaving the new database
    without a session or an item, remove it, so a failed first write leaves nothing behind (as
    `recallql ingest` does). A database with anything committed stays."""
    import shutil

    new = not path.exists()
    try:
        yield
    except BaseException:
        if new and path.is_dir() and _holds_nothing(path):
            shutil.rmtree(path, ignore_errors=True)
        raise


def _holds_nothing(path: Path) -> bool:
    import recallql

    try:
        with recallql.connect(path, embedder=None, readonly=True) as db:
            records = db.execute("SHOW COLLECTIONS").records or []
            return not db.execute("SHOW SESSIONS").records and not any(
                r["items"] for r in records)
    except (recallql.StoreError, recallql.QueryError):
        return False


def take_debug(argv: list[str]) -> tuple[list[str], bool]:
    """`argv` without ``--debug`` (a global flag, accepted before or after the subcommand;
    arguments after ``--`` are left alone), and whether it was there."""
    end = argv.index("--") if "--" in argv else len(argv)
    kept = [a for a in argv[:end] if a != "--debug"] + argv[end:]
    return kept, len(kept) != len(argv)


def take_wait(argv: list[str]) -> list[str]:
    """`argv` with a ``--wait SECONDS`` (or ``--wait=SECONDS``) given after the subcommand
    moved to the front, where the root command parses it (a global option, like ``--debug``)."""
    end = argv.index("--") if "--" in argv else len(argv)
    for i, arg in enumerate(argv[:end]):
        if arg.startswith("--wait=") or (arg == "--wait" and i + 1 < end):
            taken = argv[i:i + 1] if "=" in arg else argv[i:i + 2]
            return taken + argv[:i] + argv[i + len(taken):]
    return argv


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Print a warning as ``warning: message`` on stderr (no source location)."""
    text = Text("warning: ", style="bold yellow")
    text.append(str(message))
    err.print(text, soft_wrap=True)


#: pydantic error types (typer converts option values with pydantic) → the product's words.
_REWORDED = {
    "int_parsing": "expected a whole number, got {input!r}",
    "int_from_float": "expected a whole number, got {input!r}",
    "float_parsing": "expected a number, got {input!r}",
    "bool_parsing": "expected true or false, got {input!r}",
    "greater_than_equal": "must be at least {ge}, got {input}",
    "greater_than": "must be more than {gt}, got {input}",
    "less_than_equal": "must be at most {le}, got {input}",
    "less_than": "must be less than {lt}, got {input}",
}


def reword(exc: BaseException) -> None:
    """Rewrite a usage error that typer built from a pydantic `ValidationError` ("Input
    should be a valid integer, unable to parse string as an integer") in the product's words
    ("expected a whole number, got 'x'"); click still names the option or argument."""
    from pydantic import ValidationError

    cause = exc.__cause__
    if not isinstance(exc, typer.BadParameter) or not isinstance(cause, ValidationError):
        return
    error = cause.errors()[0]
    template = _REWORDED.get(error["type"])
    if template is not None:
        exc.message = template.format(input=error.get("input"), **(error.get("ctx") or {}))
    else:
        exc.message = str(error["msg"]).replace("Input should be", "expected")


def run_main(app: typer.Typer) -> None:
    """Run the typer app; an unexpected exception prints one line (the traceback with
    ``--debug`` or ``RECALLQL_DEBUG=1``) and exits 1; a usage error (exit 2) is worded by
    `reword`."""
    args, debug = take_debug(sys.argv[1:])
    args = take_wait(args)
    State.debug = debug or os.environ.get("RECALLQL_DEBUG", "") not in ("", "0")
    warnings.showwarning = _show_warning
    try:
        code = app(args=args, prog_name="recallql", standalone_mode=False)
    except typer.Abort:
        err.print("Aborted!", markup=False)
        sys.exit(1)
    except typer.TyperException as exc:  # click's usage errors (typer bundles click)
        reword(exc)
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        if State.debug:
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
