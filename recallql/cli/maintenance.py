"""``recallql check`` and ``recallql vacuum``: verify a database, purge deleted rows."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer

from recallql.cli.common import (
    DEFAULT_DB,
    DbOption,
    JsonOption,
    fail,
    handled,
    no_database,
    open_db,
    out,
)


def check(db: DbOption = DEFAULT_DB, as_json: JsonOption = False) -> None:
    """Verify a database: SQLite integrity, the agreement of SQLite, the text index and the
    vector segments on every row and batch, and vector finiteness. Reports what it finds and
    repairs nothing; works on a damaged database (which every other command refuses).

    Exit code 0 when the stores agree (warnings allowed: leftovers of an interrupted write,
    removed by the next writer), 1 when something is damaged.

    \b
    Examples:
      recallql check --db mem.db
      recallql check --db mem.db --json
    """
    from recallql.index.store import check_directory

    if not db.exists():
        raise fail(no_database(db))
    with handled():
        report = check_directory(db)
    if as_json:
        out.print(json.dumps({**asdict(report), "ok": report.ok}), markup=False,
                  soft_wrap=True)
    else:
        out.print(report.to_text(), markup=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(1)


def vacuum(db: DbOption = DEFAULT_DB) -> None:
    """Purge deleted and replaced rows now: their text-index documents and vectors, which are
    otherwise kept for the AS OF retention window (7 days). AS OF an earlier time then no
    longer shows them (its result says so).

    \b
    Examples:
      recallql vacuum --db mem.db
    """
    with open_db(db, write=True, embedder="none") as database, handled():
        batches = database.vacuum()
    out.print(f"vacuumed {db}: {len(batches)} batches written" if batches
              else f"nothing to vacuum in {db}", markup=False)
