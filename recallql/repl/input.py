"""Reading input: when a statement is complete, and the prompt_toolkit session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_QUIT_WORDS = ("quit", "exit")


def _last_significant(text: str) -> tuple[str, bool]:
    """The last character outside comments and whitespace, and whether the text ends inside a
    string or quoted identifier."""
    last, quote, i = "", "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                if text[i + 1:i + 2] == quote:  # '' or "" escape
                    i += 1
                else:
                    quote = ""
            last = ch
        elif ch in "'\"":
            quote, last = ch, ch
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif not ch.isspace():
            last = ch
        i += 1
    return last, bool(quote)


def is_complete(text: str) -> bool:
    """Whether the input is ready to run: blank, a backslash command, ``quit``/``exit``, or
    statements whose last character (outside strings and comments) is ``;``."""
    stripped = text.strip()
    if not stripped or stripped.startswith("\\"):
        return True
    if stripped.rstrip(";").strip().lower() in _QUIT_WORDS:
        return True
    last, open_quote = _last_significant(text)
    return last == ";" and not open_quote


def make_session(history: Path, catalog: Callable[[], dict[str, list[str]]],
                 commands: Sequence[str]) -> Any:
    """A prompt_toolkit `PromptSession`: file history (in memory when the file cannot be
    written), completion, highlighting, and Enter that runs the input once it is complete."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory
    from prompt_toolkit.lexers import PygmentsLexer

    from recallql.repl.lexer import RecallQLCompleter, RecallQLLexer

    store: History
    try:
        history.parent.mkdir(parents=True, exist_ok=True)
        history.touch(exist_ok=True)
        store = FileHistory(str(history))
    except OSError:
        store = InMemoryHistory()
    session: PromptSession[str] = PromptSession(
        message="recallql> ",
        history=store,
        lexer=PygmentsLexer(RecallQLLexer),
        completer=RecallQLCompleter(catalog, commands),
        complete_while_typing=False,
        prompt_continuation=lambda width, line_number, soft_wrap: "...> ".rjust(width),
        multiline=Condition(lambda: not is_complete(session.default_buffer.text)),
        enable_history_search=False,
    )
    return session
