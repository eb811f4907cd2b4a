"""``recallql ingest``: files and directories into a collection, in all-or-nothing batches.

The items are counted first, so the progress bar has a total and an ETA; it moves as each chunk
of texts is embedded. Ctrl-C keeps the batches already committed and says how many.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from recallql.cli.common import (
    DEFAULT_DB,
    DbOption,
    EmbedderOption,
    State,
    embedder_for,
    err,
    fail,
    locked_message,
    out,
)

#: What an ``ingest`` that found nothing says about where it looked.
NOTHING_FOUND = (
    "directories are searched for .jsonl files and text files ({suffixes}); a file named "
    "changelog.Debian.gz, cacm.all or cran.all.1400 is read in its format, any other file as "
    "text. Use --format jsonl|text|cacm|cranfield|debian to choose the format")


@dataclass
class Tally:
    """What the committed batches of one ``recallql ingest`` did."""

    items: int = 0
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    removed: int = 0
    embedded: int = 0
    batches: int = 0

    def add(self, size: int, report: Any) -> None:
        """Count one committed batch of `size` items and its `IngestReport`."""
        self.items += size
        self.added += report.added
        self.replaced += report.replaced
        self.unchanged += report.unchanged
        self.removed += report.removed
        self.embedded += report.embedded
        self.batches += 1


@dataclass(frozen=True)
class Source:
    """One file (or data set directory) to read, and its format (a `loaders.FORMATS` name)."""

    path: Path
    kind: str


def find_sources(paths: Sequence[Path], fmt: str) -> list[Source]:
    """The files to read: a plain directory is walked for ``.jsonl`` and text files (as
    `loaders.load_path` does), a CACM or Cranfield directory is one data set, a file is itself.

    Raises:
        typer.Exit: (code 1) a path that does not exist.
    """
    from recallql.index import loaders

    found: list[Source] = []
    for path in paths:
        if not path.exists():
            raise fail(f"{path}: no such file or directory")
        kind = loaders.detect(path) if fmt == "auto" else fmt
        if path.is_dir() and kind in ("tree", "jsonl", "text"):
            found += [Source(f, "jsonl" if f.suffix == ".jsonl" else "text")
                      for f in sorted(path.rglob("*")) if f.is_file() and _walked(f, kind)]
        else:
            found.append(Source(path, kind))
    return found


def _walked(file: Path, kind: str) -> bool:
    from recallql.index.loaders import TEXT_SUFFIXES

    if file.suffix == ".jsonl":
        return kind in ("tree", "jsonl")
    return file.suffix in TEXT_SUFFIXES and kind in ("tree", "text")


def read(sources: Sequence[Source], drop: set[str]) -> Iterator[dict]:
    """The items of all sources, as one loading run (an entry or file met twice goes in once).

    The built-in loaders' extra keys in `drop` (``authors``, ``citation``: fields the collection
    does not declare) are left out; JSONL items are the user's and go in as written, so an
    unknown key there is reported by `Database.ingest`.
    """
    from recallql.index import loaders

    seen = loaders.Seen()
    for source in sources:
        items = loaders.load_path(source.path, source.kind, seen=seen)
        if source.kind == "jsonl":
            yield from items
        else:
            yield from ({k: v for k, v in item.items() if k not in drop} for item in items)


def count(sources: Sequence[Source]) -> int | None:
    """How many items `read` will yield (None when a source cannot be read: the real run
    reports that, after committing the batches before it)."""
    import recallql

    try:
        return sum(1 for _ in read(sources, set()))
    except (recallql.IngestError, OSError, ValueError):
        return None


def _doc(item: dict) -> object:
    return item.get("doc_id", item.get("id"))


def _batches(items: Iterable[dict], size: int) -> Iterator[list[dict]]:
    """Batches of about `size` items, cut only between documents: a document's chunks always
    travel in one batch, which `replace_documents` relies on (it replaces a document's stored
    chunks by the ones in the batch)."""
    chunk: list[dict] = []
    for item in items:
        if len(chunk) >= size and _doc(item) != _doc(chunk[-1]):
            yield chunk
            chunk = []
        chunk.append(item)
    if chunk:
        yield chunk


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories to ingest.")],
    db: DbOption = DEFAULT_DB,
    collection: Annotated[str, typer.Option(metavar="NAME", help="Target collection.")
                          ] = "docs",
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                     help="auto (by file name), jsonl, text, cacm, cranfield or "
                                          "debian.")] = "auto",
    embedder: EmbedderOption = "auto",
    batch_size: Annotated[int, typer.Option(min=1, metavar="N",
                                            help="Items per all-or-nothing batch.")] = 2000,
    replace_documents: Annotated[bool, typer.Option(
        "--replace-documents/--keep-old-chunks",
        help="A document's chunks in the input replace all its stored chunks (a shrunk file "
             "leaves no stale chunks).")] = True,
) -> None:
    """Ingest files and directories into a collection, with a progress bar.

    Formats: JSONL (one item per line), text and Markdown (.txt .md .markdown .rst .text,
    chunked by paragraph; doc_id is the file's path relative to the current directory), CACM,
    Cranfield, Debian changelogs (changelog.Debian.gz). Directories are searched for .jsonl and
    text files. An item whose id exists replaces it; an item identical to the stored one is left
    as it is (not re-embedded); with --replace-documents (the default) a document's stored
    chunks that the input no longer has are removed. Each batch is committed all-or-nothing;
    Ctrl-C keeps the committed batches and exits 130. Creates the database when missing.

    \b
    Examples:
      recallql ingest notes/ --db mem.db
      recallql ingest /usr/share/doc/*/changelog.Debian.gz --db deb.db
      recallql ingest items.jsonl --collection docs --batch-size 500
    """
    from recallql.index.loaders import FORMATS

    if fmt not in FORMATS:
        raise typer.BadParameter(f"use one of: {', '.join(FORMATS)}", param_hint="--format")
    sources = find_sources(paths, fmt)
    created, tally = not db.exists(), Tally()
    started = time.perf_counter()
    try:
        _ingest_into(db, collection, sources, embedder, batch_size, tally, replace_documents)
    except BaseException:
        if created and not tally.batches:
            shutil.rmtree(db, ignore_errors=True)  # nothing was committed: leave no empty database
        raise
    _summary(collection, tally, time.perf_counter() - started, paths)


def _ingest_into(db: Path, collection: str, sources: Sequence[Source], embedder: str,
                 batch_size: int, tally: Tally, replace_documents: bool = True) -> None:
    import recallql
    from recallql.cli.progress import ProgressEmbedder
    from recallql.index.embedders import resolve
    from recallql.index.loaders import EXTRA_KEYS

    inner = resolve(embedder_for(embedder, db))
    embed = ProgressEmbedder(inner) if inner is not None else None
    try:
        database = recallql.connect(db, embedder=embed, lock_timeout=State.wait)
    except recallql.DatabaseLocked as exc:
        raise fail(locked_message(db, exc)) from None
    except recallql.StoreError as exc:
        raise fail(str(exc)) from None
    with database:
        info = next((c for c in database.collections() if c.name == collection), None)
        if info is None:
            raise fail(f"no collection {collection!r} in {db}")
        drop = set(EXTRA_KEYS) - set(info.text_fields) - set(info.fields)
        _run(database, collection, read(sources, drop), count(sources), batch_size, tally, embed,
             replace_documents)


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn("items"), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), console=err, transient=True,
                    disable=not err.is_terminal)


def _run(database: Any, collection: str, items: Iterable[dict], total: int | None,
         batch_size: int, tally: Tally, embed: Any, replace_documents: bool = True) -> None:
    """Commit `items` in batches with a progress bar that moves per embedded chunk."""
    import recallql

    with _progress() as progress:
        task = progress.add_task(f"ingesting into {collection}", total=total)
        if embed is not None:
            embed.on_progress = lambda n: progress.advance(task, n)
        try:
            for chunk in _batches(items, batch_size):
                report = database.ingest(collection, chunk, replace_documents=replace_documents)
                tally.add(len(chunk), report)
                progress.update(task, completed=tally.items)
        except (recallql.IngestError, recallql.StoreError, recallql.DatabaseLocked,
                OSError) as exc:
            progress.stop()
            note = f" ({tally.items} items in {tally.batches} earlier batches were committed)"
            text = locked_message(database.store.path, exc) if isinstance(
                exc, recallql.DatabaseLocked) else str(exc)
            raise fail(f"{text}{note if tally.batches else ''}") from None
        except KeyboardInterrupt:
            progress.stop()
            err.print(f"interrupted: {tally.items} items committed in {tally.batches} batches; "
                      "the current batch was discarded", markup=False)
            raise typer.Exit(130) from None


def _summary(collection: str, tally: Tally, seconds: float, paths: Sequence[Path]) -> None:
    from recallql.index.loaders import TEXT_SUFFIXES

    if not tally.items:
        suffixes = " ".join(sorted(TEXT_SUFFIXES))
        named = ", ".join(str(p) for p in paths)
        out.print(f"ingested 0 items into {collection}: nothing to read in {named}", markup=False)
        err.print("hint: " + NOTHING_FOUND.format(suffixes=suffixes), markup=False,
                  soft_wrap=True)
        return
    removed = f", {tally.removed} stale chunks removed" if tally.removed else ""
    out.print(f"ingested {tally.items} items into {collection} ({tally.added} new, "
              f"{tally.replaced} replaced, {tally.unchanged} unchanged{removed}, "
              f"{tally.embedded} embedded) in {tally.batches} batches, "
              f"{seconds:.1f} s ({tally.items / max(seconds, 1e-9):,.0f} items/s)", soft_wrap=True)
