"""``recallql ingest``: files and directories into a collection, in all-or-nothing batches.

All items are read and validated first, batch by batch as they will be written, so a bad item
anywhere (named by its place: ``FILE:LINE``) stops the run before anything is written, and the
progress bar has a total and an ETA; it moves as each chunk of texts is embedded. Ctrl-C keeps
the batches already committed and says how many.
"""

from __future__ import annotations

import os
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
    choice,
    embedder_for,
    err,
    fail,
    locked_message,
    out,
)

#: Items per all-or-nothing batch: a few seconds of embedding on two cores, so an interrupted
#: run loses little, and large enough that the per-batch commit costs little.
BATCH_SIZE = 256

#: What an ``ingest`` that found nothing says about where it looked.
NOTHING_FOUND = (
    "directories are searched for .jsonl and .json files and text files ({suffixes}); a file named "
    "changelog.Debian.gz, cacm.all or cran.all.1400 is read in its format, any other file as "
    "text. Use --format jsonl|json|text|cacm|cranfield|debian to choose the format")


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
        """Count one `Database.ingest` call of `size` items and its `IngestReport` (a batch
        only when it wrote one: every item unchanged writes none, batch 0)."""
        self.items += size
        self.added += report.added
        self.replaced += report.replaced
        self.unchanged += report.unchanged
        self.removed += report.removed
        self.embedded += report.embedded
        self.batches += 1 if report.batch else 0

    def removed_all(self, report: Any) -> None:
        """Count the `DeleteReport` of the documents whose files now hold no text."""
        self.removed += report.deleted
        self.batches += 1 if report.deleted else 0


@dataclass(frozen=True)
class Source:
    """One file (or data set directory) to read, its format (a `loaders.FORMATS` name) and the
    directory its text doc_ids are relative to (the directory named, or the file's own)."""

    path: Path
    kind: str
    root: Path | None = None


def find_sources(paths: Sequence[Path], fmt: str) -> list[Source]:
    """The files to read: a plain directory is walked for ``.jsonl`` and text files (as
    `loaders.load_path` does), a CACM or Cranfield directory is one data set, a file is itself.

    Raises:
        typer.Exit: (code 1) a path that does not exist.
    """
    from recallql.importers import files as loaders

    found: list[Source] = []
    for path in paths:
        if not path.exists():
            raise fail(f"{path}: no such file or directory")
        kind = loaders.detect(path) if fmt == "auto" else fmt
        if path.is_dir() and kind in ("tree", "jsonl", "json", "text"):
            found.append(Source(path, kind, path))  # walked by the loaders (skips noted)
        elif kind in ("jsonl", "json", "text"):
            found.append(Source(path, kind, path.parent))
        else:
            found.append(Source(path, kind))
    text_documents(found)
    return found


def text_documents(sources: Sequence[Source]) -> dict[str, Path]:
    """``{doc_id: file}`` of the text files the sources hold (files not read yet). Two
    different files that would get the same doc_id (the same relative path under two
    directories named) are refused: the second would replace the first.

    Raises:
        typer.Exit: (code 1) naming both files; nothing is read or written.
    """
    from recallql.importers import files as loaders

    owners: dict[str, Path] = {}
    for source in sources:
        if source.root is None:
            continue
        files = loaders.walk_files(source.path) if source.path.is_dir() else [source.path]
        for file in files:
            if source.path.is_dir() and loaders.walked_kind(file, source.kind) != "text":
                continue
            if not source.path.is_dir() and source.kind != "text":
                continue
            doc_id = loaders.doc_id_under(file, source.root)
            other = owners.setdefault(doc_id, file)
            if other.resolve() != file.resolve():
                raise fail(f"{other} and {file} would both be document {doc_id!r} (a text "
                           "file's doc_id is its path relative to the directory named); "
                           "ingest them in separate runs into different collections, or name "
                           "their common parent directory")
    return owners


def read(sources: Sequence[Source], drop: set[str], seen: Any = None
         ) -> Iterator[tuple[str, dict]]:
    """The items of all sources with their places (see `recallql.importers.located`), as one
    loading run (an entry or file met twice goes in once; files left out are noted in
    `seen.skipped`).

    The built-in loaders' extra keys in `drop` (``authors``, ``citation``: fields the collection
    does not declare) are left out; JSONL and JSON items are the user's and go in as written,
    so an unknown key there is reported by `Database.ingest`.
    """
    from recallql.importers import files as loaders
    from recallql.importers.located import located_path

    seen = seen if seen is not None else loaders.Seen()
    for source in sources:
        pairs = located_path(source.path, source.kind, seen)
        if source.kind in ("jsonl", "json"):
            yield from pairs
        else:
            yield from ((where, {k: v for k, v in item.items() if k not in drop})
                        for where, item in pairs)


def check(info: Any, sources: Sequence[Source], drop: set[str], batch_size: int
          ) -> tuple[int, Any]:
    """Read and validate every item, in the batches the write will use, before anything is
    written: how many items there are, and the run's `loaders.Seen` (the files left out, the
    text files without text).

    Raises:
        typer.Exit: (code 1) an unreadable file or an invalid item, named by its place
            (``FILE:LINE: item 'x', field 'y': ...``); nothing was written.
    """
    import recallql
    from recallql.importers import files as loaders

    seen, total, places = loaders.Seen(), 0, dict[str, str]()
    try:
        for chunk in _batches(read(sources, drop, seen), batch_size):
            seen.textless.extend(_validate(info, chunk))
            _unique(chunk, places)
            total += len(chunk)
    except (recallql.IngestError, OSError) as exc:
        raise fail(f"{exc}; nothing was written") from None
    return total, seen


def _validate(info: Any, chunk: list[tuple[str, dict]]) -> list[str]:
    """`Database.ingest`'s item checks on one batch; an error is prefixed with the place of
    the item it names. Returns the items with no text and no vector (``FILE:LINE: item
    'x'``): `Database.ingest` takes them (RETRIEVE ... WHERE finds them by their fields), but
    SEARCH has nothing to match, so the command warns (corpora such as Cranfield hold a few)."""
    from recallql.index.errors import IngestError
    from recallql.index.items import validate

    current, done = [""], [False]

    def items() -> Iterator[dict]:
        for where, item in chunk:
            current[0] = where
            yield item
        done[0] = True

    try:
        batch = validate(info, items())
    except IngestError as exc:
        if done[0]:  # a check after the loop (vectors): find the item by the id it names
            current[0] = next((where for where, item in chunk
                               if repr(str(item.get("id"))) == exc.item), current[0])
        raise IngestError(f"{current[0]}: {exc}") from None
    return [f"{chunk[i][0]}: item {batch.ids[i]!r}" for i, text in enumerate(batch.texts)
            if not text.strip() and not batch.has_vector[i]]


def _unique(chunk: list[tuple[str, dict]], places: dict[str, str]) -> None:
    """Refuse an id met twice in one run (in one batch `validate` refuses it; across batches
    the later item would silently replace the earlier, depending on --batch-size)."""
    from recallql.index.errors import IngestError

    for where, item in chunk:
        key = str(item.get("id"))
        first = places.setdefault(key, where)
        if first != where:
            raise IngestError(f"{where}: item {key!r}, field 'id': duplicate id (first at "
                              f"{first})")


def _doc(pair: tuple[str, dict]) -> object:
    return pair[1].get("doc_id", pair[1].get("id"))


def _batches(items: Iterable[tuple[str, dict]], size: int
             ) -> Iterator[list[tuple[str, dict]]]:
    """Batches of about `size` (place, item) pairs, cut only between documents: a document's
    chunks always travel in one batch, which `replace_documents` relies on (it replaces a
    document's stored chunks by the ones in the batch)."""
    chunk: list[tuple[str, dict]] = []
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
    collection: Annotated[str, typer.Option(
        metavar="NAME", help="Target collection: one that exists (the built-ins docs and "
        "messages, or one declared with Database.create_collection).")] = "docs",
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                     help="auto (by file name), jsonl, json, text, cacm, "
                                          "cranfield or debian.")] = "auto",
    embedder: EmbedderOption = "auto",
    batch_size: Annotated[int, typer.Option(min=1, metavar="N",
                                            help="Items per all-or-nothing batch (Ctrl-C "
                                                 "loses at most the batch being written)."
                                            )] = BATCH_SIZE,
    replace_documents: Annotated[bool, typer.Option(
        "--replace-documents/--keep-old-chunks",
        help="A document's chunks in the input replace all its stored chunks (a shrunk file "
             "leaves no stale chunks).")] = True,
    replace_other_files: Annotated[bool, typer.Option(
        "--replace-other-files",
        help="Let a text file replace a stored document whose chunks came from another file "
             "with the same relative path (refused by default: a/README.md then b/README.md "
             "are both README.md); for a moved directory.")] = False,
) -> None:
    """Ingest files and directories into a collection, with a progress bar.

    Formats: JSONL (one item per line), JSON (an array of items, one item, or an object whose
    "items" is an array), text and Markdown (.txt .md .markdown .rst .text, chunked by
    paragraph, long paragraphs split; doc_id is the file's path relative to the directory named,
    or its name when the file is named, from any current directory), CACM, Cranfield, Debian
    changelogs (changelog.Debian.gz). Directories are searched for .jsonl, .json and text files;
    binary files, text that is not UTF-8 and files of other types are skipped with a warning
    naming them. An item whose id exists replaces it; an item identical to the stored one is
    left as it is (not re-embedded); with --replace-documents (the default) a document's stored
    chunks that the input no longer has are removed. A text chunk records its file's absolute
    path (source); a document stored from another file is not replaced (exit 1, nothing
    written) unless --replace-other-files. Every item is read and checked before anything is
    written: a bad item (named by FILE:LINE) exits 1 and writes nothing. Each batch is then
    committed all-or-nothing; Ctrl-C keeps the committed batches and exits 130. Creates the
    database when missing; exits 1 and creates nothing when there is nothing to ingest.

    \b
    Examples:
      recallql ingest notes/ --db mem.db
      recallql ingest /usr/share/doc/*/changelog.Debian.gz --db deb.db
      recallql ingest items.jsonl --collection docs --batch-size 500
    """
    from recallql.importers.files import FORMATS

    fmt = choice(fmt, FORMATS, "--format")
    sources = find_sources(paths, fmt)
    created, tally = not db.exists(), Tally()
    started = time.perf_counter()
    try:
        _ingest_into(db, collection, sources, embedder, batch_size, tally, replace_documents,
                     paths, replace_other_files)
    except BaseException:
        if created and not tally.batches:
            shutil.rmtree(db, ignore_errors=True)  # nothing was committed: leave no empty database
        raise
    _summary(collection, tally, time.perf_counter() - started, paths)
    if created and db == DEFAULT_DB and "RECALLQL_DB" not in os.environ:
        err.print(f"created the database {db.absolute()} (no --db given: ./{DEFAULT_DB} is "
                  "every command's default, so run them from this directory, or pass --db)",
                  markup=False, soft_wrap=True)


def _no_collection(collection: str, db: Path, names: Sequence[str]) -> str:
    """Why `recallql ingest --collection NAME` has nowhere to write, and what to do: the CLI
    writes into collections that exist; a new one is declared in Python (its fields)."""
    from recallql.grammar import did_you_mean

    close = did_you_mean(collection, names, listing=False)
    return (f"no collection {collection!r} in {db} ({close + ' ' if close else ''}collections: "
            f"{', '.join(names)}); ingest writes into an existing collection: declare a new one "
            "with its fields in Python, recallql.connect(DB).create_collection(NAME, ...)")


def _ingest_into(db: Path, collection: str, sources: Sequence[Source], embedder: str,
                 batch_size: int, tally: Tally, replace_documents: bool,
                 paths: Sequence[Path], replace_other_files: bool = False) -> None:
    import recallql
    from recallql.api import resolve_embedder as resolve
    from recallql.importers.files import EXTRA_KEYS
    from recallql.ui.progress import ProgressEmbedder

    try:
        inner = resolve(embedder_for(embedder, db))  # reads a damaged database's catalog
        embed = ProgressEmbedder(inner) if inner is not None else None
        database = recallql.connect(db, embedder=embed, lock_timeout=State.wait)
    except recallql.DatabaseLocked as exc:
        raise fail(locked_message(db, exc)) from None
    except recallql.StoreError as exc:
        raise fail(str(exc)) from None
    with database:
        info = next((c for c in database.collections() if c.name == collection), None)
        if info is None:
            raise fail(_no_collection(collection, db, [c.name for c in database.collections()]))
        drop = set(EXTRA_KEYS) - set(info.text_fields) - set(info.fields)
        total, seen = check(info, sources, drop, batch_size)
        for note in [*seen.skipped, *_textless(info, seen.textless)]:
            err.print(f"warning: {note}", style="yellow", markup=False, soft_wrap=True)
        emptied = list(seen.empty) if replace_documents else []
        if total == 0 and not emptied:
            _nothing(collection, paths)
        if not replace_other_files:
            _refuse_other_files(database, collection, sources)
        _run(database, collection, read(sources, drop), total, batch_size, tally, embed,
             replace_documents, emptied)


def _textless(info: Any, places: Sequence[str], shown: int = 5) -> list[str]:
    """Warnings for the items without text (the first `shown`, then how many more)."""
    fields = ", ".join(info.text_fields)
    notes = [f"{place} has no text (its text fields {fields} are all empty or missing): it is "
             "stored, but SEARCH can match it only by chance (no terms; its vector embeds empty "
             "text)" for place in places[:shown]]
    if len(places) > shown:
        notes.append(f"{len(places) - shown} more item(s) have no text")
    return notes


def _refuse_other_files(database: Any, collection: str, sources: Sequence[Source]) -> None:
    """Refuse a run that would replace documents stored from other files (`ingest_origins`).

    Raises:
        typer.Exit: (code 1) naming the documents and both files; nothing was written.
    """
    from recallql.cli.ingest_origins import conflicts, refusal

    found = conflicts(database, collection, text_documents(sources))
    if found:
        raise fail(refusal(found))


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn("items"), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), console=err, transient=True,
                    disable=not err.is_terminal)


def _run(database: Any, collection: str, items: Iterable[tuple[str, dict]], total: int,
         batch_size: int, tally: Tally, embed: Any, replace_documents: bool = True,
         emptied: Sequence[str] = ()) -> None:
    """Commit `items` in batches with a progress bar that moves per embedded chunk, then
    delete the stored chunks of the `emptied` documents (text files now without text)."""
    import recallql

    with _progress() as progress:
        task = progress.add_task(f"ingesting into {collection}", total=total)
        if embed is not None:
            embed.on_progress = lambda n: progress.advance(task, n)
        try:
            for chunk in _batches(items, batch_size):
                report = database.ingest(collection, [item for _, item in chunk],
                                         replace_documents=replace_documents)
                tally.add(len(chunk), report)
                progress.update(task, completed=tally.items)
            if emptied:
                tally.removed_all(database.delete(collection, doc_ids=list(emptied)))
        except (recallql.IngestError, recallql.StoreError, recallql.DatabaseLocked,
                OSError) as exc:
            progress.stop()
            note = f" ({tally.items} items in {tally.batches} earlier batches were committed)"
            text = locked_message(database.store.path, exc) if isinstance(
                exc, recallql.DatabaseLocked) else str(exc)
            raise fail(f"{text}{note if tally.batches else ''}") from None
        except KeyboardInterrupt:
            progress.stop()
            err.print(f"interrupted: {count(tally.items, 'item')} committed in "
                      f"{count(tally.batches, 'batch')}; the current batch was discarded",
                      markup=False)
            raise typer.Exit(130) from None


def _nothing(collection: str, paths: Sequence[Path]) -> None:
    """Nothing to ingest: say where it looked, create nothing, exit 1.

    Raises:
        typer.Exit: (code 1) always.
    """
    from recallql.importers.files import TEXT_SUFFIXES

    suffixes = " ".join(sorted(TEXT_SUFFIXES))
    named = ", ".join(str(p) for p in paths)
    err.print(f"error: nothing to ingest into {collection} in {named}", markup=False,
              soft_wrap=True)
    err.print("hint: " + NOTHING_FOUND.format(suffixes=suffixes), markup=False, soft_wrap=True)
    raise typer.Exit(1)


def _summary(collection: str, tally: Tally, seconds: float, paths: Sequence[Path]) -> None:
    if not tally.items and not tally.removed:
        _nothing(collection, paths)
    if tally.unchanged == tally.items and not tally.removed:
        out.print(f"nothing to write into {collection}: {count(tally.items, 'item')} "
                  f"unchanged (identical to the stored ones), {seconds:.1f} s", soft_wrap=True)
        return
    removed = f", {count(tally.removed, 'stale chunk')} removed" if tally.removed else ""
    rate = tally.items / max(seconds, 1e-9)
    out.print(f"ingested {count(tally.items, 'item')} into {collection} ({tally.added} new, "
              f"{tally.replaced} replaced, {tally.unchanged} unchanged{removed}, "
              f"{tally.embedded} embedded) in {count(tally.batches, 'batch')}, "
              f"{seconds:.1f} s ({rate:,.{1 if rate < 10 else 0}f} items/s)", soft_wrap=True)


def count(n: int, noun: str) -> str:
    """``1 item``, ``2 items``, ``1 batch``, ``0 batches``."""
    return f"{n} {noun if n == 1 else noun + ('es' if noun.endswith('ch') else 's')}"
