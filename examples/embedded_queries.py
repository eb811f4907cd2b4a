"""Embedded query strings with parameters: values never go into the statement text.

Run: python examples/embedded_queries.py

The statement text is fixed and written by the programmer; every value (the user's search text,
a session id, a filter value, a date, a vector) is passed as a parameter (`:name` or `?`). The
engine binds parameters into the parsed statement, so a value with quotes, semicolons or words
like OR / NOT is only ever data: there is no query string to inject into.
"""

from __future__ import annotations

from datetime import UTC, datetime

import recallql

DOCS = [
    {"id": "backup", "title": "Backup retention policy", "tags": ["ops"],
     "body": "Keep daily backups for 30 days and monthly backups for a year.",
     "created_at": "2024-03-01"},
    {"id": "restore", "title": "Restoring from backup", "tags": ["ops", "runbook"],
     "body": "Restore the latest snapshot, then replay the write-ahead log.",
     "created_at": "2023-11-15"},
    {"id": "oreilly", "title": "O'Reilly's notes on C++", "tags": ["build"],
     "body": "Use -O2 and -g for release builds; don't ship -O0.", "created_at": "2022-05-01"},
]

# The statements: constants in the program, written once, with parameters for every value.
SEARCH = "SEARCH docs MATCHING :text WHERE tags CONTAINS :tag LIMIT :n"
SINCE = "SEARCH docs MATCHING :text WHERE created_at >= :since LIMIT 5"
POSITIONAL = "SEARCH docs MATCHING ? LIMIT ?"
PINNED = "SEARCH docs MATCHING :text WITH RECENCY (half_life = 90 DAYS) AS OF :now LIMIT 2"
VECTOR = "SEARCH docs USING SEMANTIC NEAR :v LIMIT 1"


def _shown(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "__len__") and not isinstance(value, str):
        return f"<vector of {len(value)} floats>"  # type: ignore[arg-type]
    return value


def run(db: recallql.Database, title: str, statement: str, *args: object, **params: object
        ) -> None:
    """Run `statement` with its parameters and print the ranked ids."""
    result = db.execute(statement, *args, **params)
    shown = [_shown(v) for v in args] or {k: _shown(v) for k, v in params.items()}
    print(f"-- {title}\n   {statement}\n   parameters: {shown}")
    for row in result:
        print(f"   {row.id:<8} {row.score:.5f}  {row.fields['title']}")


def main() -> None:
    db = recallql.connect()  # in memory; recallql.connect("path/") opens or creates on disk
    db.ingest("docs", DOCS)

    run(db, "named parameters", SEARCH, text="backup policy", tag="ops", n=2)

    # A value full of quotes and query-like words is only text to search for.
    hostile = "O'Reilly' OR 1=1; -- DROP"
    run(db, "a hostile value is just words to search for", SEARCH, text=hostile, tag="build",
        n=5)
    run(db, "a datetime parameter", SINCE, text="backup",
        since=datetime(2024, 1, 1, tzinfo=UTC))
    run(db, "positional parameters", POSITIONAL, "restore snapshot", 1)
    # AS OF answers from the database as committed then, with "now" = then for recency: the
    # same statement gives the same answer after later writes.
    pinned = datetime.now(tz=UTC)
    run(db, "AS OF pins the database and 'now' (reproducible)", PINNED, text="backup",
        now=pinned)
    db.ingest("docs", [{"id": "backup-3", "title": "Backup policy v2",
                        "body": "New backup retention policy.", "created_at": pinned}])
    run(db, "... the same after a newer backup document was ingested", PINNED, text="backup",
        now=pinned)

    # A vector is only ever a parameter: here the embedding of a sentence.
    embedder = db.embedder("docs")  # None when a collection's vectors come from the caller
    assert embedder is not None
    vector = embedder(["Restore the latest snapshot"])[0]
    run(db, "a vector parameter (NEAR :v)", VECTOR, v=vector)

    # Mistakes are errors with a caret, never a traceback from a parser or index.
    try:
        db.execute(SEARCH, text="backup", tag="ops", n="two")
    except recallql.ParameterError as err:
        print("-- a mistyped parameter is an error naming it:")
        print(err)


if __name__ == "__main__":
    main()
