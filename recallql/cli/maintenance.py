"""``recallql reindex`` and ``recallql optimize``: rebuild text indexes from the stored texts."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from recallql.cli.common import (
    DEFAULT_DB,
    DbOption,
    err,
    fail,
    handled,
    is_database,
    no_database,
    out,
)
from recallql.cli.common import open_db as _open_db

CollectionOption = Annotated[list[str] | None, typer.Option(
    "--collection", "-c", metavar="NAME",
    help="Only this collection (repeat for several; default: all).")]


def reindex(db: DbOption = DEFAULT_DB, collection: CollectionOption = None) -> None:
    """Rebuild text indexes with the current text analyser, from the stored texts.

    Migrates a database written by an older recallql (its collections keep their old
    analyser, with a warning on every open, until reindexed) and makes BM25's statistics
    exact. Nothing is lost: texts, vectors, sessions and signals are not touched. Needs the
    writer lock (no other writer may be open).

    \b
    Examples:
      recallql reindex --db mem.db
      recallql reindex --db mem.db -c docs
    """
    _run(db, collection, only_needed=False)


def optimize(db: DbOption = DEFAULT_DB, collection: CollectionOption = None) -> None:
    """Make BM25's statistics exact: rebuild the collections that need it.

    After deletes and replacements, BM25 keeps counting removed rows (number of documents,
    document frequencies, average length) until tantivy merges their segments, as Lucene
    does, so scores drift a little from those of a fresh index. `optimize` rebuilds the text
    index of each collection where that is the case (or whose analyser is out of date) and
    leaves the others alone.

    \b
    Examples:
      recallql optimize --db mem.db
    """
    _run(db, collection, only_needed=True)


def _run(db: Path, collections: list[str] | None, only_needed: bool) -> None:
    if not is_database(db):
        raise fail(no_database(db))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the outdated-analyser warning: this command fixes it
        database = _open_db(db, write=True)
    with handled(), database, _bar() as bar:
        tasks: dict[str, TaskID] = {}

        def tick(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done)

        reports = database.reindex(collections, only_needed=only_needed, progress=tick)
    for r in reports:
        change = (f"analyser {r.old_version} → {r.new_version}" if r.old_version != r.new_version
                  else f"analyser {r.new_version}")
        counted = ("" if r.counted_before is None or r.counted_before == r.rows else
                   f", BM25 statistics counted {r.counted_before:,} documents, now {r.rows:,}")
        out.print(f"{r.collection}: {r.rows:,} rows reindexed ({change}{counted}) "
                  f"in {r.seconds:.2f} s", markup=False)
    if not reports:
        out.print("nothing to do: every text index is on the current analyser with exact "
                  "statistics", markup=False)


def _bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn(
        "{task.completed:,}/{task.total:,} rows"), TimeRemainingColumn(), console=err,
        transient=True)
