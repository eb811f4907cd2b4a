"""``recallql delete``: remove items by id or whole documents by doc id, in one batch."""

from __future__ import annotations

from typing import Annotated

import typer

from recallql.cli.common import (
    DEFAULT_DB,
    DbOption,
    fail,
    handled,
    is_database,
    no_database,
    open_db,
    out,
)


def delete(
    ids: Annotated[list[str] | None, typer.Option(
        "--id", metavar="ID", help="An item id to delete (repeat for several).")] = None,
    doc_ids: Annotated[list[str] | None, typer.Option(
        "--doc-id", metavar="DOC", help="A document whose chunks all go (repeat for several).")
    ] = None,
    db: DbOption = DEFAULT_DB,
    collection: Annotated[str, typer.Option(metavar="NAME", help="The collection.")] = "docs",
) -> None:
    """Delete items, or every chunk of whole documents, as one all-or-nothing batch.

    A text file's doc_id is its path relative to the directory ingested (after `recallql ingest
    notes/`, notes/old.md is old.md) and its chunks' ids are DOC#0, DOC#1, ...; SEARCH shows
    them. Ids that are not there are counted, not an error. The rows disappear from every
    search at once; readers see the deletion when the batch commits.

    \b
    Examples (after recallql ingest notes/ --db mem.db):
      recallql delete --doc-id old.md --db mem.db
      recallql delete --id big.md#3 --id big.md#4 --db mem.db
    """
    if not ids and not doc_ids:
        raise typer.BadParameter("give at least one --id or --doc-id", param_hint="--id")
    if not is_database(db):
        raise fail(no_database(db))
    with handled(), open_db(db, write=True) as database:
        report = database.delete(collection, ids or None, doc_ids=doc_ids or None)
    missing = f", {report.missing} not found" if report.missing else ""
    noun = "item" if report.deleted == 1 else "items"
    out.print(f"deleted {report.deleted} {noun} from {collection}{missing}", markup=False)
