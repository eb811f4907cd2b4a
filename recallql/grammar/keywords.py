"""Keywords of the recallql language, and when a name needs quoting.

Keywords are case-insensitive whole words. Following PostgreSQL, they come in two kinds:

* **Reserved** words start statements and clauses or act as operators and constants. They are
  never identifiers; to use one as a name, double-quote it (``WHERE "limit" = 3``).
* **Non-reserved** words have a meaning only in one place (``FORMAT JSON``, ``GROUP BY DOCUMENT``,
  ``30 DAYS``) and are plain identifiers everywhere else (``FOR SESSION format``).

The lists must match the keyword terminals of ``recallql.lark`` (a test checks this).
"""

from __future__ import annotations

import re

RESERVED: frozenset[str] = frozenset(
    {
        "SEARCH", "RETRIEVE", "EXPLAIN", "SHOW", "DESCRIBE",
        "FROM", "MATCHING", "USING", "NEAR", "WHERE", "FOR", "WITH", "WITHOUT", "FUSE",
        "GROUP", "BY", "AS", "OF", "LIMIT", "OFFSET",
        "AND", "OR", "NOT", "IN", "BETWEEN", "LIKE", "CONTAINS", "IS",
        "NULL", "TRUE", "FALSE", "TIMESTAMP",
    }
)  # fmt: skip

NON_RESERVED: frozenset[str] = frozenset(
    {
        "ANALYZE", "VERBOSE", "FORMAT", "TEXT", "JSON",
        "COLLECTIONS", "SESSIONS", "SESSION", "LINEAGE",
        "HYBRID", "LEXICAL", "SEMANTIC", "RECENCY", "SIGNAL", "BOOST", "RRF", "CONVEX", "CONTEXT",
        "DOCUMENT", "CONVERSATION",
        "DAYS", "DAY", "HOURS", "HOUR", "MINUTES", "MINUTE", "SECONDS", "SECOND",
    }
)  # fmt: skip

KEYWORDS: frozenset[str] = RESERVED | NON_RESERVED

STATEMENT_KEYWORDS: tuple[str, ...] = ("SEARCH", "RETRIEVE", "EXPLAIN", "SHOW", "DESCRIBE")

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def needs_quoting(name: str) -> bool:
    """Tell whether ``name`` must be double-quoted to be read back as the same identifier.

    Args:
        name: an identifier as stored in the AST (unquoted, case preserved).

    Returns:
        True when ``name`` is not of the form ``[A-Za-z_][A-Za-z0-9_]*`` or is a reserved word.
    """
    return _BARE_NAME.match(name) is None or name.upper() in RESERVED


def quote_identifier(name: str) -> str:
    """Render ``name`` as an identifier: bare when possible, else ``"..."`` with ``""`` escapes."""
    if needs_quoting(name):
        return '"' + name.replace('"', '""') + '"'
    return name
