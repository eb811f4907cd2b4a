"""The shell's backslash commands and its help text."""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    """A backslash command as typed: ``name`` (e.g. ``\\timing``) and its argument (or "")."""

    name: str
    arg: str


#: (command, arguments, what it does)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("\\help", "", "this help (also \\h, \\?)"),
    ("\\q", "", "quit (also \\quit, quit, exit, Ctrl-D)"),
    ("\\timing", "[on|off]", "print each statement's wall time"),
    ("\\format", "[table|json]", "results as tables (default) or JSON"),
    ("\\d", "[collection]", "SHOW COLLECTIONS, or DESCRIBE a collection"),
)


def parse_command(text: str) -> Command:
    """Split ``\\name arg`` (a trailing ';' is ignored)."""
    name, _, arg = text.strip().rstrip(";").strip().partition(" ")
    return Command(name.lower(), arg.strip().lower() if name.lower() != "\\d" else arg.strip())


def _help() -> str:
    lines = [
        "Statements end with ';' (Enter before it continues the statement; several per line",
        "run in order). Tab completes keywords, collections and fields; Up/Down and Ctrl-R",
        "search the history; Ctrl-C clears the input.",
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
    lines += [f"  {name + (' ' + args if args else ''):<24}{what}" for name, args, what in COMMANDS]
    lines += ["", "The language: docs/language.md (every statement and clause, with examples)."]
    return "\n".join(lines)


HELP = _help()
