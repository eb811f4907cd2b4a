"""The shell's backslash commands and its help text."""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    """A backslash command as typed: ``name`` (e.g. ``\\timing``) and its argument (or "")."""

    name: str
    arg: str


#: (command, arguments, what it does)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("\\help", "", "this help (also \\h, \\?, help)"),
    ("\\q", "", "quit (also \\quit, quit, exit, Ctrl-D)"),
    ("\\r", "", "reset (clear) the statement being typed"),
    ("\\timing", "[on|off]", "print each statement's wall time"),
    ("\\format", "[table|json|jsonl|csv|markdown]", "how results print (full text in all "
     "but table)"),
    ("\\x", "[on|off]", "expanded display: each row vertically, its text in full"),
    ("\\o", "[FILE]", "results to FILE (\\o alone: back to the terminal)"),
    ("\\pager", "[on|off]", "page results longer than the screen (on a terminal)"),
    ("\\d", "[collection]", "SHOW COLLECTIONS, or DESCRIBE a collection"),
)
#: Commands whose argument keeps its case (a file name, a collection).
_CASED = {"\\d", "\\o"}


def parse_command(text: str) -> Command:
    """Split ``\\name arg`` (a trailing ';' is ignored)."""
    name, _, arg = text.strip().rstrip(";").strip().partition(" ")
    name = name.lower()
    return Command(name, arg.strip() if name in _CASED else arg.strip().lower())


def _help() -> str:
    lines = [
        "Statements end with ';' (Enter before it continues the statement; several per line",
        "run in order; the prompt shows '> inside a string). A backslash command on a",
        "continuation line runs at once and keeps the statement (\\r clears it). Tab completes",
        "keywords, collections, fields and session ids; Up/Down and Ctrl-R search the history",
        "(a multi-line statement is one entry); Ctrl-C clears the input, or cancels a running",
        "statement. Long results go through $PAGER on a terminal.",
        "",
        "  SEARCH docs MATCHING 'backup policy' LIMIT 5;",
        "  SEARCH docs MATCHING 'disk full' WHERE tags CONTAINS 'ops' WITH RECENCY "
        "(half_life = 30 DAYS);",
        "  RETRIEVE 5 FROM docs FOR SESSION 's-42';",
        "  SEARCH messages MATCHING 'deploy' FOR SESSION 's-42' GROUP BY CONVERSATION;",
        "  EXPLAIN ANALYZE SEARCH docs MATCHING 'rotate credentials';",
        "  SHOW COLLECTIONS;  SHOW SESSIONS;  SHOW SESSION 's-42';  SHOW LINEAGE 's-42';",
        "  DESCRIBE docs;",
        "",
        "Commands:",
    ]
    lines += [f"  {name + (' ' + args if args else ''):<42}{what}"
              for name, args, what in COMMANDS]
    lines += ["", "The language: docs/language.md (every statement and clause, with examples)."]
    return "\n".join(lines)


HELP = _help()
