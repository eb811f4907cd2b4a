"""``recallql reindex`` and ``recallql optimize`` (rebuild text indexes from the stored texts),
``recallql check`` (verify a database) and ``recallql vacuum`` (purge deleted rows now)."""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from recallql.cli.common import (
    DEFAULT_DB,
    DbOption,
    JsonOption,
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
    exact. Nothing is lost: texts, vectors, sessions and signals are not touched. Holds the
    writer lock while it rebuilds (other writers wait, up to --wait); AS OF an earlier time
    then no longer shows rows deleted before the rebuild (it says so).

    \b
    Examples:
      recallql reindex --db mem.db
      recallql reindex --db mem.db -c docs
    """
    _run(db, collection, only_needed=False)


def optimize(db: DbOption = DEFAULT_DB, collection: CollectionOption = None) -> None:
    """Make BM25's statistics exact and the semantic leg cheaper.

    After deletes and replacements, BM25 keeps counting removed rows (number of documents,
    document frequencies, average length) until tantivy merges their segments, as Lucene
    does, so scores drift a little from those of a fresh index. `optimize` rebuilds the text
    index of each collection where that is the case (or whose analyser is out of date, or
    whose index lacks the filter terms of a declared str field: an index written before them,
    or a field added later), then merges each collection's vector segments into one with its
    ANN (HNSW) graph and its int8 copy, so a query searches one graph instead of one per
    segment (the largest existing graph is reused) and a filtered query pre-scans its rows in
    int8 (a database written before int8 copies gets them this way). Answers do not change.
    Holds the writer lock meanwhile (minutes for a million rows).

    \b
    Examples:
      recallql optimize --db mem.db
    """
    _run(db, collection, only_needed=True, vectors=True)


def _run(db: Path, collections: list[str] | None, only_needed: bool,
         vectors: bool = False) -> None:
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
        merged = database.optimize_vectors(collections, progress=lambda name, done, total:
                                           tick(f"{name} (ANN index)", done, total)
                                           ) if vectors else []
    for r in reports:
        change = (f"analyser {r.old_version} → {r.new_version}" if r.old_version != r.new_version
                  else f"analyser {r.new_version}")
        counted = ("" if r.counted_before is None or r.counted_before == r.rows else
                   f", BM25 statistics counted {r.counted_before:,} documents, now {r.rows:,}")
        out.print(f"{r.collection}: {r.rows:,} rows reindexed ({change}{counted}) "
                  f"in {r.seconds:.2f} s", markup=False)
    for m in merged:
        if m.segments_before == 1 and m.int8_rows and not m.graph_added:
            out.print(f"{m.collection}: int8 copy of {m.int8_rows:,} vectors written (the "
                      "exact pre-scan of filtered queries)", markup=False)
        elif m.graph_added or m.graph_reused or m.segments_before > 1:
            out.print(f"{m.collection}: {m.segments_before} vector segments merged into one "
                      f"({m.rows:,} rows; ANN index: {m.graph_reused:,} rows reused, "
                      f"{m.graph_added:,} added{'; int8 copy written' if m.int8_rows else ''})",
                      markup=False)
    if not reports and not any(m.segments_before > 1 or m.graph_added or m.int8_rows
                               for m in merged):
        out.print("nothing to do: every text index is on the current analyser with exact "
                  "statistics" + (", and every collection has one vector segment" if vectors
                                  else ""), markup=False)


def _bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn(
        "{task.completed:,}/{task.total:,} rows"), TimeRemainingColumn(), console=err,
        transient=True, disable=not err.is_terminal)


def check(db: DbOption = DEFAULT_DB, as_json: JsonOption = False) -> None:
    """Verify a database: SQLite integrity, the agreement of SQLite, the text index and the
    vector segments on every row and batch, vector finiteness, and each session's stored
    conversation root against a walk of the lineage edges. Reports what it finds and
    repairs nothing; works on a damaged database (which every other command refuses).

    Exit code 0 when the stores agree (warnings allowed: leftovers of an interrupted write,
    removed by the next writer), 1 when something is damaged.

    \b
    Examples:
      recallql check --db mem.db
      recallql check --db mem.db --json
    """
    from recallql.api import check_database

    if not db.exists():
        raise fail(no_database(db))
    with handled():
        report = check_database(db)
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
    with _open_db(db, write=True, embedder="none") as database, handled():
        batches = database.vacuum()
    collections = len(batches) // 2  # two batches per collection purged (index.maintenance)
    out.print(f"vacuumed {db}: deleted and replaced rows purged from {collections} "
              f"collection{'s' if collections != 1 else ''} ({len(batches)} batches written)"
              if batches else f"nothing to vacuum in {db}", markup=False)
