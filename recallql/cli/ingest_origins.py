"""Which file each text document came from, so one ``recallql ingest`` never silently replaces
a document that an earlier run stored from another file.

A text file's ``doc_id`` is its path relative to the directory named (README's promise), so
``recallql ingest a/`` and then ``recallql ingest b/`` both make ``README.md`` of
``a/README.md`` and ``b/README.md``. Each chunk records the file it was read from (its
absolute path, in the ``source`` field); before anything is written, a document whose stored
chunks came from another file is refused, unless ``--replace-other-files`` says the new file
replaces it (a moved or renamed directory). Re-ingesting the same directory replaces its
documents as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

#: The field a text chunk records its file in (`docs`' field for an item's origin).
ORIGIN_FIELD = "source"


def conflicts(database: Any, collection: str, documents: Mapping[str, Path]
              ) -> list[tuple[str, str, Path]]:
    """The documents of this run whose live chunks were stored from another file.

    Args:
        database: an open `recallql.Database`.
        collection: the target collection.
        documents: ``{doc_id: file}`` of the text files this run reads.

    Returns:
        ``[(doc_id, stored origin, new file)]`` sorted by doc_id; chunks whose ``source`` is
        not an absolute path (stored before origins were recorded: ``text``; JSON items)
        never conflict.
    """
    from recallql.importers.files import file_origin
    from recallql.index.changes import live_doc_rows

    snap = database.snapshot(collection)
    if not documents or ORIGIN_FIELD not in snap.info.fields:
        return []
    rows = live_doc_rows(snap.state, set(documents))
    found: dict[str, str] = {}
    for doc, origin in zip(snap.doc_ids.take(rows), snap.values(ORIGIN_FIELD, rows),
                           strict=True):
        file = documents.get(doc)
        if file is not None and _is_path(origin) and origin != file_origin(file):
            found.setdefault(doc, origin)
    return sorted((doc, origin, documents[doc]) for doc, origin in found.items())


def _is_path(origin: object) -> bool:
    """Whether a stored ``source`` is a file's origin (an absolute path, POSIX or Windows), not
    a format name such as ``text`` (what chunks stored before origins were recorded hold)."""
    return isinstance(origin, str) and (PurePosixPath(origin).is_absolute()
                                        or PureWindowsPath(origin).is_absolute())


def refusal(found: list[tuple[str, str, Path]]) -> str:
    """The error for `conflicts` (nothing written): the first few documents, both files, and
    the ways out."""
    shown = "; ".join(f"{doc!r} is stored from {origin}, {file} would replace it"
                      for doc, origin, file in found[:3])
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    what = "a document" if len(found) == 1 else f"{len(found)} documents"
    return (f"{what} would be replaced by another file: {shown}{more}; "
            "nothing was written. A text file's doc_id is its path relative to the directory "
            "named: ingest the common parent directory instead (doc_ids a/README.md, "
            f"b/README.md; recallql delete --doc-id {found[0][0]!r} removes the stored one), "
            "use another --collection, or pass --replace-other-files if the new files replace "
            "the stored ones (a moved directory)")
