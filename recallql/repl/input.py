"""Reading input: when a statement is complete, and the prompt_toolkit session."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from recallql.repl.scanning import quote_before_line, scan

QUIT_WORDS = ("quit", "exit", ".quit", ".exit")
#: Typed alone, these words are answered at once, as psql does: `help` prints the help.
HELP_WORDS = ("help",)
#: A DuckDB / sqlite3 dot command on a line of its own (``.tables``, ``.mode csv``).
DOT_COMMAND = re.compile(r"\.[A-Za-z]+(?:[ \t][^\n]*)?")


def split_statements(text: str) -> list[str]:
    """`text` cut at the ``;`` that end statements (those found by `scan`), without the
    separators; blank pieces are left out. The last piece may be an unfinished statement."""
    pieces, start = [], 0
    for end in [*scan(text).separators, len(text)]:
        pieces.append(text[start:end])
        start = end + 1
    return [p for p in pieces if p.strip()]


def split_command(text: str) -> tuple[str, str | None]:
    """(the statement text before it, a backslash command on the last line, or None). As in
    psql, a ``\\`` outside strings, quoted identifiers and comments starts a command that runs
    to the end of the line: on a line of its own, on a continuation line, or after statements
    on the same line (``DESCRIBE docs; \\format json``)."""
    body = text.rstrip("\n")
    line_start = body.rfind("\n") + 1
    # scan(text), not scan(body): the trailing newlines change no offset, and the shell's
    # scanner then resumes from the text it scanned for the previous key
    at = next((i for i in scan(text).backslashes if line_start <= i < len(body)),
              None)
    if at is None:
        return text, None
    return body[:at], body[at:].strip()


def split_ready(text: str) -> tuple[str, str]:
    """(the statements of `text` ended by ``;``, the unfinished rest): ``"A; B"`` gives
    ``("A;", " B")``."""
    separators = scan(text).separators
    end = separators[-1] + 1 if separators else 0
    return text[:end], text[end:]


def is_complete(text: str) -> bool:
    """Whether the input is ready to run: blank, a backslash command (also on a continuation
    line), ``quit``/``exit``/``help``, or statements whose last character (outside strings and
    comments) is ``;``."""
    stripped = text.strip()
    if not stripped or split_command(text)[1] is not None:
        return True
    if stripped.rstrip(";").strip().lower() in (*QUIT_WORDS, *HELP_WORDS):
        return True
    if DOT_COMMAND.fullmatch(stripped):  # `.tables`: answered at once with the \ command
        return True
    found = scan(text)
    return found.last == ";" and not found.open_quote


def continuation(text: str, line_number: int) -> str:
    """The prompt of continuation line `line_number` (0-based) of `text`: ``'> `` inside a
    string, ``"> `` inside a quoted identifier, ``...> `` otherwise (psql's ``'>``)."""
    # the scanner's state at the line start: no rescan of the text before it per line
    return {"'": "..'> ", '"': '.."> '}.get(quote_before_line(text, line_number), "...> ")


def history_entry(text: str) -> str:
    """What history keeps of an input: a statement typed over several lines is one entry as
    typed; a backslash command run on a continuation line is kept alone (the unfinished
    statement is kept when it runs); statements and a command on one line stay one entry."""
    head, command = split_command(text)
    if command is None or not head.strip() or split_ready(head)[0].strip():
        return text
    return command


def make_session(history: Path, catalog: Callable[[], dict[str, list[str]]],
                 commands: Sequence[str], sessions: Callable[[], list[str]] | None = None
                 ) -> Any:
    """A prompt_toolkit `PromptSession`: file history (in memory when the file cannot be
    written or is no regular file, such as /dev/null or /dev/full; see `history_entry`),
    completion, highlighting, a continuation prompt that shows an open string, and Enter that
    runs the input once it is complete."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory
    from prompt_toolkit.lexers import PygmentsLexer

    from recallql.repl.lexer import RecallQLCompleter, RecallQLLexer

    class ShellHistory(FileHistory):
        def append_string(self, string: str) -> None:
            super().append_string(history_entry(string))

        def store_string(self, string: str) -> None:
            # a file that stops being writable (a full disk, a directory put in its place)
            # keeps the entry in memory: prompt_toolkit would print its traceback per Enter
            with contextlib.suppress(OSError):
                super().store_string(string)

    store: History
    try:
        if history.exists() and not history.is_file():  # /dev/full reads zeros for ever
            raise OSError(f"{history} is not a regular file")
        history.parent.mkdir(parents=True, exist_ok=True)
        with open(history, "ab"):  # fails on a directory, where touch() does not
            pass
        store = ShellHistory(str(history))
    except OSError:
        store = InMemoryHistory()
    session: PromptSession[str] = PromptSession(
        message="recallql> ",
        history=store,
        lexer=PygmentsLexer(RecallQLLexer),
        completer=RecallQLCompleter(catalog, commands, sessions),
        complete_while_typing=False,
        prompt_continuation=lambda width, line_number, soft_wrap: continuation(
            session.default_buffer.text, line_number).rjust(width),
        multiline=Condition(lambda: not is_complete(session.default_buffer.text)),
        enable_history_search=False,
    )
    return session
