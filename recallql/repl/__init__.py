"""The recallql shell (``recallql shell``): prompt_toolkit line editing, persistent history,
completion, syntax highlighting, multi-line statements ended by ``;``, results as tables (or
JSON, JSON Lines, CSV, Markdown; expanded with ``\\x``; to a file with ``\\o``; through a pager
when long) and EXPLAIN as a tree. Ctrl-C cancels a running statement and keeps the shell.

    >>> Repl(recallql.connect("mem.db", readonly=True)).run()    # doctest: +SKIP

With input that is not a terminal (a pipe, a file) it runs the statements and backslash commands
it reads in order, stops at the first error and exits with 1 (0 when all ran).
"""

from __future__ import annotations

import re
import sys
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from recallql.grammar import did_you_mean
from recallql.grammar.parser import NOT_UNICODE
from recallql.repl.commands import COMMANDS, HELP, Command, parse_command
from recallql.repl.input import (
    DOT_COMMAND,
    HELP_WORDS,
    QUIT_WORDS,
    is_complete,
    split_command,
    split_ready,
    split_statements,
)
from recallql.repl.output import Output
from recallql.ui.render import make_console

__all__ = ["Repl", "is_complete"]

DEFAULT_HISTORY = Path("~/.recallql_history")


#: DuckDB / sqlite3 dot commands and this shell's command for each (``.quit`` / ``.exit`` quit).
DOT_COMMANDS = {".help": "\\?", ".tables": "\\d", ".schema": "\\d <collection>",
                ".mode": "\\format", ".output": "\\o", ".once": "\\o", ".timer": "\\timing"}

class Repl:
    """An interactive shell over a `Database`.

    Args:
        db: the database (usually opened read-only: statements never write).
        history: history file (default ``~/.recallql_history``).
        fmt: ``table``, ``json``, ``jsonl``, ``csv`` or ``markdown``.
        debug: print tracebacks of unexpected errors.
        console: where output goes (default: stdout).
        errors: where errors go (default: stderr, as in psql, so a script's errors do not end
            up among the results it writes to a file; `console` when only that is given).
        pager: page results longer than the screen (on a terminal only).
    """

    def __init__(self, db: Any, history: Path | None = None, fmt: str = "table",
                 debug: bool = False, console: Console | None = None,
                 pager: bool = True, errors: Console | None = None) -> None:
        self.db = db
        self.history = (history or DEFAULT_HISTORY).expanduser()
        self.fmt = fmt
        self.debug = debug
        self.timing = False
        self.expanded = False
        self.console = console or make_console()
        self.errors = errors or (self.console if console else make_console(stderr=True))
        self.out = Output(self.console, pager=pager)
        self.failed = False
        self.pending = ""  # a statement kept while a backslash command ran on its last line
        self.lines: list[int] | None = None  # in a script: the line numbers of the input run

    # -- loops ---------------------------------------------------------------------------------

    def run(self, stream: TextIO | None = None) -> int:
        """Run interactively on a terminal, else read `stream` (default stdin). Returns the exit
        code: 0, or 1 when reading a stream and a statement failed."""
        stream = stream or sys.stdin
        if stream.isatty() and sys.stdout.isatty():
            self.interactive()
            return 0
        self.run_lines(stream)
        return 1 if self.failed else 0

    def interactive(self) -> None:
        """The prompt loop (Ctrl-C clears the input or cancels a running statement, Ctrl-D or
        \\q quits)."""
        from recallql.repl.input import make_session

        session = make_session(self.history, self.catalog, [c for c, *_ in COMMANDS],
                               self.session_ids)
        self.console.print(Text("recallql shell — statements end with ';'. \\help for help, "
                                "\\q to quit.", style="dim"))
        try:
            while True:
                try:
                    text = session.prompt(default=self.pending)
                except KeyboardInterrupt:
                    self.pending = ""
                    continue
                except EOFError:
                    return
                self.pending = ""
                try:
                    if not self.handle(text):
                        return
                except KeyboardInterrupt:
                    self.console.print(Text("cancelled: the statement was interrupted (Ctrl-C)",
                                            style="yellow"))
        finally:
            self.out.close()

    def run_lines(self, lines: Iterable[str]) -> None:
        """Run a script read line by line (a statement may span lines, a line may hold several):
        statements and commands in order, stopping at the first error (`failed` is then
        True)."""
        buffer, numbers = "", []  # numbers: the script line of each line of the buffer
        for number, line in enumerate(lines, start=1):
            piece = line if line.endswith("\n") else line + "\n"
            buffer += piece
            numbers += [number] * piece.count("\n")
            if is_complete(buffer):
                text, buffer, self.lines = buffer, "", numbers
                if not self.handle(text) or self.failed:
                    return
                buffer, self.pending = self.pending, ""
                numbers = self.lines if buffer else []
        if buffer.strip():
            self.lines = numbers
            self.handle(buffer)
        self.out.close()

    # -- one input -----------------------------------------------------------------------------

    def handle(self, text: str) -> bool:
        """Run one input: statements, or a backslash command — on its own line, after
        statements on its line (they run first; the command does not run when one fails), or
        on the last line of an unfinished statement, which is then kept in `pending` (except
        by ``\\r``). Returns False to quit."""
        stripped = text.strip()
        if not stripped:
            return True
        word = stripped.rstrip(";").strip().lower()
        if word in QUIT_WORDS:
            return False
        if word in HELP_WORDS:  # psql answers a bare `help` too (it is no statement)
            return self.command(parse_command("\\help"))
        if DOT_COMMAND.fullmatch(stripped):  # a DuckDB / sqlite3 dot command
            name = stripped.split()[0]
            same = DOT_COMMANDS.get(name.lower())
            return self._error(f"unknown command {name}; this shell's commands start "
                               "with a backslash" + (f": use {same}" if same else
                                                     " (\\? lists them)"))
        head, command = split_command(text)
        if command is not None:
            cmd = parse_command(command)
            if cmd.name == "\\r":
                self.console.print("query buffer reset (cleared)", markup=False)
                return True
            ready, rest = split_ready(head)
            if ready.strip() and not self.execute(ready):
                return True
            self.pending = rest.rstrip("\n") + "\n" if rest.strip() else ""
            if self.lines:  # in a script: the lines of the statement kept
                at = ready.count("\n")
                kept = self.lines[at:at + self.pending.count("\n")]
                self.lines = [self.lines[-1]]  # the command's own, for its errors (\\d)
                try:
                    return self.command(cmd)
                finally:
                    self.lines = kept
            return self.command(cmd)
        self.execute(text)
        return True

    def command(self, cmd: Command) -> bool:
        """Run a backslash command. Returns False to quit."""
        name, arg = cmd
        if name in ("\\q", "\\quit"):
            return False
        if name in ("\\help", "\\h", "\\?"):
            self.console.print(Text(HELP))
        elif name in ("\\format", "\\x", "\\o", "\\pager", "\\timing"):
            return self.output_command(name, arg)
        elif name == "\\d":
            from recallql.grammar.keywords import quote_identifier

            # \\d "docs", as psql takes a name; extra arguments are ignored, as psql does
            found = re.fullmatch(r'("(?:[^"]|"")+"|\S+)(?:\s+(.*))?', arg, re.DOTALL)
            if found is not None and found.group(2):
                arg, extra = found.group(1), found.group(2).split()
                self.errors.print(f"\\d: extra argument{'s' if len(extra) > 1 else ''} "
                                  f"{' '.join(extra)} ignored", markup=False)
            quoted = arg.startswith('"') and arg.endswith('"') and len(arg) > 1
            name = arg if quoted else quote_identifier(arg)
            self.execute(f"DESCRIBE {name}" if arg else "SHOW COLLECTIONS")
        else:
            hint = did_you_mean(name, [c for c, *_ in COMMANDS], listing=False)
            return self._error(f"unknown command {name}; " + (hint or "\\help lists the commands"))
        return True

    def output_command(self, name: str, arg: str) -> bool:
        """``\\format``, ``\\x``, ``\\o``, ``\\pager`` and ``\\timing``."""
        from recallql.ui.formats import FORMATS

        if name == "\\format":
            if arg in FORMATS:
                self.fmt = arg
            elif arg:
                return self._error(f"unknown format {arg!r} (use {', '.join(FORMATS)})")
            self.console.print(f"output format is {self.fmt}", markup=False)
        elif name in ("\\x", "\\pager", "\\timing"):
            return self.toggle(name, arg)
        else:
            try:
                self.out.redirect(arg or None)
            except OSError as exc:
                return self._error(f"cannot write {arg}: {exc.strerror or exc}")
            where = f"results go to {arg}" if arg else "results go to the terminal"
            self.console.print(where, markup=False)
        return True

    def toggle(self, name: str, arg: str) -> bool:
        """``\\x``, ``\\pager`` and ``\\timing``: ``on``, ``off``, or nothing to flip."""
        if arg not in ("", "on", "off"):
            return self._error(f"{name} takes on or off, not {arg!r}")
        current = {"\\x": self.expanded, "\\pager": self.out.pager, "\\timing": self.timing}
        value = {"on": True, "off": False}.get(arg, not current[name])
        if name == "\\x":
            self.expanded = value
        elif name == "\\pager":
            self.out.pager = value
        else:
            self.timing = value
        what = {"\\x": "expanded display", "\\pager": "pager", "\\timing": "timing"}[name]
        self.console.print(f"{what} is {'on' if value else 'off'}", markup=False)
        return True

    def execute(self, text: str) -> bool:
        """Run the ';'-separated statements of `text` in order, each parsed when its turn comes
        (so those before a syntax error run); stop at the first error. Error positions are
        within the failing statement. Returns whether all of them ran."""
        from recallql.grammar import parse_script

        at = first = 0  # where the piece being run starts: offset, and line index in `text`
        try:
            for piece in split_statements(text):
                at = text.index(piece, at)
                first = text[:at + len(piece) - len(piece.lstrip())].count("\n")
                for stmt in parse_script(piece.strip()):
                    self.run_statement(stmt)
                at += len(piece)
        except Exception as exc:  # noqa: BLE001 - the shell reports every error and goes on
            self.report(exc, first)
            return False
        return True

    def run_statement(self, stmt: Any) -> None:
        """Execute one parsed statement and print its outcome (and time with \\timing).

        Raises:
            ParameterError: the statement has a parameter (``:q``, ``?``): the shell has no
                values to bind, so the caret goes under the first, with a hint that works here
                (the statement's own, "pass q=...", is for `db.execute`).
        """
        if stmt.parameters:
            from recallql.grammar.errors import ParameterError

            first = stmt.parameters[0]
            named = "" if first.name else "use a named parameter :name instead and "
            raise ParameterError(
                f"the shell has no value for parameter {first.label}", text=stmt.source,
                span=first.span, hint="write the value into the statement (MATCHING 'disk "
                f"full', LIMIT 5), or {named}run it with recallql query \"...\" "
                "-p name=value")
        started = time.perf_counter()
        outcome = self.db.execute(stmt)
        self.show(outcome)
        if self.timing:
            ms = (time.perf_counter() - started) * 1000
            self.console.print(Text(f"Time: {ms:.3f} ms", style="dim"))

    def show(self, outcome: Any) -> None:
        """Print a statement's outcome in the current format (expanded with ``\\x``)."""
        from recallql.engine.models import Explain
        from recallql.ui.formats import expanded, format_text
        from recallql.ui.render import Catalog, render, summary, to_json

        catalog = Catalog.of(self.db)
        if self.fmt == "json":
            self.out.show(to_json(outcome, catalog), soft_wrap=True, plain=True)
        elif self.fmt != "table":
            self.out.show(format_text(outcome, self.fmt, catalog), soft_wrap=True, plain=True)
        elif self.expanded and not isinstance(outcome, Explain):
            from rich.console import Group

            self.out.show(Group(expanded(outcome, catalog), summary(outcome)))
        else:
            shown = render(outcome, catalog, width=self.out.width)
            self.out.show(shown, soft_wrap=isinstance(shown, Text))

    def report(self, exc: Exception, first: int = 0) -> None:
        """Print an error: a query error's rendering (with the caret), a one-line message for
        data and database errors, an internal error otherwise (traceback with --debug). In a
        script, also the script line it is on (the statement's first line, `first` lines into
        the input, for an error without a position): the caret's line and column count within
        the statement."""
        from recallql.api import USER_ERRORS
        from recallql.grammar.errors import QueryError

        self.failed = True
        if isinstance(exc, QueryError) and exc.line:
            first += exc.line - 1
        if isinstance(exc, QueryError) and exc.message == NOT_UNICODE:
            # bytes that are not UTF-8, read with surrogateescape: the shell has no parameters
            exc.hint = "the input holds bytes that are not UTF-8: the shell reads UTF-8 text"
        if isinstance(exc, QueryError):
            self.errors.print(Text(str(exc), style="red"), soft_wrap=True)
        elif isinstance(exc, USER_ERRORS):
            self._error(str(exc))
        else:
            self._error(f"internal error: {type(exc).__name__}: {exc}")
            if self.debug:
                self.errors.print(Text(traceback.format_exc()), soft_wrap=True)
        if self.lines:
            line = self.lines[min(first, len(self.lines) - 1)]
            self.errors.print(f"  at line {line} of the script", markup=False)

    def _error(self, message: str) -> bool:
        self.failed = True
        self.errors.print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)
        return True

    # -- catalog -------------------------------------------------------------------------------

    def catalog(self) -> dict[str, list[str]]:
        """``{collection: field names}`` for completion."""
        from recallql.api import BUILTIN_FIELDS

        return {c.name: [*c.text_fields, *c.fields, *BUILTIN_FIELDS]
                for c in self.db.collections()}

    def session_ids(self) -> list[str]:
        """The ids of the most recently started sessions (at most 500), for completion."""
        records = self.db.execute("SHOW SESSIONS").records or []
        ordered = sorted(records, key=lambda r: str(r.get("started_at") or ""), reverse=True)
        return [str(r["id"]) for r in ordered[:500]]
