"""``recallql ingest``: files and directories into a collection, in all-or-nothing batches."""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from recallql.cli.common import (
    DEFAULT_DB,
    DbOption,
    EmbedderOption,
    embedder_for,
    err,
    fail,
    out,
)


@dataclass
class Tally:
    """What the committed batches of one ``recallql ingest`` added."""

    added: int = 0
    replaced: int = 0
    embedded: int = 0
    batches: int = 0

    def add(self, report) -> None:
        """Count one committed batch's `IngestReport`."""
        self.added += report.added
        self.replaced += report.replaced
        self.embedded += report.embedded
        self.batches += 1


def _batches(items: Iterable[dict], size: int) -> Iterator[list[dict]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _items(paths: list[Path], fmt: str, drop: set[str], dropped: set[str]) -> Iterator[dict]:
    """Items of all paths, without the loaders' extra keys in `drop` (collected in `dropped`);
    other unknown keys (e.g. from JSONL) stay and are reported as errors by ingest."""
    from recallql.index import loaders

    for item, gone in loaders.project(loaders.load_paths(paths, fmt), drop):
        dropped |= gone
        yield item


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories to ingest.")],
    db: DbOption = DEFAULT_DB,
    collection: Annotated[str, typer.Option(help="Target collection.")] = "docs",
    fmt: Annotated[str, typer.Option("--format", help="auto|jsonl|text|cacm|cranfield|debian"
                                     )] = "auto",
    embedder: EmbedderOption = "auto",
    batch_size: Annotated[int, typer.Option(min=1, help="Items per batch.")] = 2000,
) -> None:
    """Ingest files and directories into a collection, with a progress bar.

    Formats: JSONL (one item per line), text/Markdown (chunked by paragraph), CACM, Cranfield,
    Debian changelogs. Each batch of items is committed all-or-nothing.

    Examples:

      recallql ingest notes/ --db mem.db

      recallql ingest items.jsonl --collection docs --batch-size 500
    """
    import recallql
    from recallql.index.loaders import EXTRA_KEYS, FORMATS

    if fmt not in FORMATS:
        raise typer.BadParameter(f"use one of: {', '.join(FORMATS)}", param_hint="--format")
    created, tally = not db.exists(), Tally()
    try:
        database = recallql.connect(db, embedder=embedder_for(embedder, db))
    except (recallql.StoreError, recallql.DatabaseLocked) as exc:
        raise fail(str(exc)) from None
    try:
        with database:
            info = next((c for c in database.collections() if c.name == collection), None)
            if info is None:
                raise fail(f"no collection {collection!r} in {db}")
            drop = set(EXTRA_KEYS) - set(info.text_fields) - set(info.fields)
            _run_ingest(database, collection, _items(paths, fmt, drop, dropped := set()),
                        batch_size, dropped, tally)
    except BaseException:
        if created and not tally.batches:
            shutil.rmtree(db, ignore_errors=True)  # nothing was committed: leave no empty database
        raise


def _run_ingest(database, collection: str, items: Iterable[dict], batch_size: int,
                dropped: set[str], tally: Tally) -> None:
    import recallql

    started = time.perf_counter()
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task(f"ingesting into {collection}", total=None)
        try:
            for chunk in _batches(items, batch_size):
                tally.add(database.ingest(collection, chunk))
                progress.advance(task, len(chunk))
        except (recallql.IngestError, recallql.StoreError, OSError) as exc:
            progress.stop()
            note = (f" ({tally.added + tally.replaced} items in {tally.batches} earlier batches "
                    "were committed)")
            raise fail(f"{exc}{note if tally.batches else ''}") from None
    if dropped:
        err.print(f"note: fields not declared in {collection!r} were not stored: "
                  f"{', '.join(sorted(dropped))}")
    seconds = time.perf_counter() - started
    total = tally.added + tally.replaced
    out.print(f"ingested {total} items into {collection} ({tally.added} new, {tally.replaced} "
              f"replaced, {tally.embedded} embedded) in {tally.batches} batches, {seconds:.1f} s "
              f"({total / max(seconds, 1e-9):,.0f} items/s)", soft_wrap=True)
