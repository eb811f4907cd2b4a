"""Loaded items with where each came from, so a message about a bad item names its place.

A place is ``FILE:LINE`` for JSONL, ``FILE: element #N`` (0-based) for JSON, ``FILE (chunk N)``
for text, and the path named for the corpus formats (CACM, Cranfield, Debian changelogs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from recallql.importers import files


def located_file(file: Path, kind: str, root: Path, seen: files.Seen
                 ) -> Iterator[tuple[str, dict]]:
    """`files.load_file`'s items of one file (``jsonl``, ``json`` or ``text``) with their
    places (same errors)."""
    if kind == "jsonl":
        yield from ((f"{file}:{number}", item) for number, item in files.jsonl_numbered(file))
    elif kind == "json":
        yield from ((f"{file}: element #{number}", item)
                    for number, item in enumerate(files.load_json(file)))
    else:
        yield from ((f"{file} (chunk {item['position']})", item)
                    for item in files.load_text(file, root, seen=seen))


def located_path(path: Path, kind: str, seen: files.Seen) -> Iterator[tuple[str, dict]]:
    """`files.load_path`'s items of `path` in format `kind` (not ``auto``) with their places
    (same errors)."""
    if path.is_dir() and kind in ("tree", "jsonl", "json", "text"):
        for file, own in files.walked(path, kind, seen):
            yield from located_file(file, own, path, seen)
    elif kind in ("jsonl", "json", "text") and path.is_file():
        if seen.first_visit(path):
            yield from located_file(path, kind, path.parent, seen)
    else:
        yield from ((str(path), item) for item in files.load_path(path, kind, seen=seen))
