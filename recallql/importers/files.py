"""File loaders that yield item dicts for `Database.ingest` (what ``recallql ingest`` reads).

The corpus formats (``cacm``, ``cranfield``, ``debian``) come from `recallql.datasets.corpora`.

- JSONL: one item per line.
- Plain text / Markdown: files chunked by paragraphs.

Items carry ``id``, ``title``, ``body``, ``created_at`` where known, ``doc_id``/``position`` for
chunks, ``source`` (the format; for a text file's chunks the file's absolute path) and
format-specific extras (``authors``, ``tags``, ``citation``) that a collection may or may not
declare (`EXTRA_KEYS`, see `project`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recallql.datasets.corpora import load_cacm, load_cranfield, load_debian
from recallql.index.errors import IngestError


def load_jsonl(path: str | Path) -> Iterator[dict]:
    """One item per non-blank line of a JSONL file (UTF-8; a byte-order mark is allowed).

    Raises:
        IngestError: a line that is not UTF-8, not JSON (also ``NaN``, ``Infinity``, an integer
            of more than 4300 digits, nesting too deep) or not a JSON object, or that holds a
            string with a lone surrogate escape such as ``"\\ud800"`` (names the file and line).
            Values JSON allows but items do not (``1e400`` parses as infinity) are reported by
            `Database.ingest`, naming the item and field.
    """
    return (item for _, item in jsonl_numbered(path))


def jsonl_numbered(path: str | Path) -> Iterator[tuple[int, dict]]:
    """`load_jsonl`'s items with their 1-based line numbers (same errors)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            line = _decode_line(raw, number, where)
            if not line.strip():
                continue
            # without its line break: JSON that ends early is then reported at the end of the
            # line (1:12), not at column 1 of the line after it
            item = _parse_line(line.rstrip("\r\n"), where)
            if not isinstance(item, dict):
                raise IngestError(f"{where}: expected a JSON object per line")
            if _SURROGATE_ESCAPE.search(line):
                _check_surrogates(item, where)
            yield number, item


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def load_json(path: str | Path) -> Iterator[dict]:
    """The items of a JSON file: an array of objects, a single object, or an object whose
    ``items`` is an array of objects (UTF-8; a byte-order mark is allowed).

    Raises:
        IngestError: not UTF-8, not JSON, or not of those shapes (names the file, and the
            array position of an element that is not an object).
    """
    raw = Path(path).read_bytes()
    text = _decode_line(raw, 1, str(path))
    data = _parse_line(text, str(path), whole_file=True)
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise IngestError(f"{path}: expected a JSON array of objects, an object, or "
                          "{\"items\": [...]}")
    for number, item in enumerate(items):
        if not isinstance(item, dict):
            raise IngestError(f"{path}: element #{number} is not a JSON object")
        if _SURROGATE_ESCAPE.search(text):
            _check_surrogates(item, f"{path}: element #{number}")
        yield item


def _decode_line(raw: bytes, number: int, where: str) -> str:
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(f"{where}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte "
                          f"{exc.start + 1} of the line)") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _parse_line(line: str, where: str, whole_file: bool = False) -> object:
    """The JSON value of `line` (a JSONL line at `where` = ``FILE:LINE``, or a whole JSON file
    at `where` = ``FILE``).

    Raises:
        IngestError: not JSON, at ``FILE:LINE:COLUMN`` (1-based; the column counts
            characters) with the parser's message, e.g. ``items.jsonl:4:2: invalid JSON:
            Expecting property name enclosed in double quotes``.
    """
    try:
        return json.loads(line, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        at = f"{exc.lineno}:{exc.colno}" if whole_file else f"{exc.colno}"
        raise IngestError(f"{where}:{at}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:  # NaN / Infinity, or Python's limit on int digits
        message = str(exc)
        if "integer string conversion" in message:
            message = f"an integer of more than {sys.get_int_max_str_digits()} digits"
        raise IngestError(f"{where}: invalid JSON: {message}") from None
    except RecursionError:
        raise IngestError(f"{where}: invalid JSON: nested too deeply") from None


def _check_surrogates(item: dict, where: str) -> None:
    """Raise `IngestError` naming the key when a key or string of `item` (at any depth) holds a
    lone surrogate (valid JSON escape, but not storable as UTF-8)."""
    for key, value in item.items():
        stack = [key, value]
        while stack:
            node = stack.pop()
            if isinstance(node, str):
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise IngestError(f"{where}: key {key!r}: text is not valid Unicode: lone "
                                      f"surrogate {node[exc.start]!r}") from None
            elif isinstance(node, dict):
                stack.extend(node)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)


def split_long(paragraph: str, max_chars: int) -> list[str]:
    """A paragraph longer than `max_chars` cut into pieces of at most `max_chars`: after a
    sentence end (``. ! ?`` then a space) where one falls in the piece's second half, else at
    the last space, else (one very long word) at `max_chars`."""
    pieces, rest = [], paragraph
    while len(rest) > max_chars:
        window = rest[:max_chars + 1]
        ends = [m.end() for m in re.finditer(r"[.!?][)\"']?\s", window)]
        cut = ends[-1] if ends and ends[-1] > max_chars // 2 else window.rfind(" ") + 1
        cut = cut if cut > 0 else max_chars
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return [*pieces, rest] if rest else pieces


def chunk_paragraphs(text: str, max_chars: int = 1200) -> list[str]:
    """Paragraphs (blank-line separated), merged greedily while a chunk stays ≤ `max_chars`; a
    paragraph longer than that is split first (`split_long`), so no chunk exceeds it."""
    paragraphs = [piece for p in re.split(r"\n\s*\n", text) if p.strip()
                  for piece in split_long(p.strip(), max_chars)]
    chunks: list[str] = []
    for para in paragraphs:
        if chunks and len(chunks[-1]) + 2 + len(para) <= max_chars:
            chunks[-1] += "\n\n" + para
        else:
            chunks.append(para)
    return chunks


def text_doc_id(path: str | Path) -> str:
    """A file's key in one loading run (`Seen.files`), the same however the file was named: its
    path relative to the current directory when it is inside it, else its absolute path
    (normalised, ``..`` resolved lexically, POSIX separators)."""
    absolute = Path(os.path.abspath(path))
    cwd = Path(os.getcwd())
    if absolute.is_relative_to(cwd):
        return absolute.relative_to(cwd).as_posix()
    return absolute.as_posix()


#: Bytes of a file looked at to tell binary from text (a NUL byte among them: binary).
SNIFF_BYTES = 8192


def read_text_file(file: Path) -> tuple[str | None, str]:
    """The text of a UTF-8 file (a byte-order mark is allowed), or (None, why it was skipped):
    a binary file (a NUL byte in its first `SNIFF_BYTES`), or text that is not UTF-8 (with the
    offset of the first bad byte). Never replaces characters silently."""
    data = file.read_bytes()
    if b"\0" in data[:SNIFF_BYTES]:
        return None, f"skipped {file}: a binary file (name a text file, or convert it first)"
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        return None, (f"skipped {file}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                      f"{exc.start}); convert it, e.g. iconv -f latin1 -t utf-8")


def doc_id_under(file: Path, root: Path) -> str:
    """A text file's ``doc_id``: its path relative to `root` (the directory named on the
    command line, or the file's own directory when the file was named), POSIX separators —
    the same from any current directory."""
    absolute, base = Path(os.path.abspath(file)), Path(os.path.abspath(root))
    return absolute.relative_to(base).as_posix()


def file_origin(file: Path) -> str:
    """What a text file's chunks record as their ``source``: the file's absolute path, POSIX
    separators, symbolic links resolved (so two names of one file are one origin).
    ``recallql ingest`` refuses to replace a document stored from another file."""
    return Path(file).resolve().as_posix()


def load_text(path: str | Path, root: str | Path | None = None,
              max_chars: int = 1200, seen: Seen | None = None) -> Iterator[dict]:
    """Chunks of a text or Markdown file: doc_id = the path relative to `root` (default: the
    file's directory, so its name; see `doc_id_under`); position = chunk number, id =
    ``<doc_id>#<position>``, created_at = the file's mtime (UTC), source = the file's absolute
    path (`file_origin`), title = the first Markdown heading or the file name. A heading that
    opens the file becomes the title only (it is not repeated in the first chunk's body), so
    its words are not counted twice by BM25 nor embedded twice. A binary or non-UTF-8 file
    yields nothing and is noted in `seen.skipped`; so is a file without text, whose doc_id goes
    in `seen.empty`."""
    file = Path(path)
    doc_id = doc_id_under(file, Path(root) if root is not None else file.parent)
    text, why = read_text_file(file)
    if text is None:
        if seen is not None:
            seen.skipped.append(why)
        return
    heading = re.search(r"^#{1,6}\s+(.+)$", text, re.MULTILINE)
    title = heading.group(1).strip() if heading else file.stem
    if heading is not None and not text[:heading.start()].strip():
        text = text[heading.end():]
    mtime, origin = dt.datetime.fromtimestamp(file.stat().st_mtime, dt.UTC), file_origin(file)
    chunks = chunk_paragraphs(text, max_chars)
    if not chunks and seen is not None:
        seen.skipped.append(f"skipped {file}: it holds no text (empty, blank or a heading "
                            "alone)")
        seen.empty.append(doc_id)
    for position, chunk in enumerate(chunks):
        yield {"id": f"{doc_id}#{position}", "doc_id": doc_id, "position": position,
               "title": title, "body": chunk, "created_at": mtime, "source": origin}


TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".rst", ".text"}
FORMATS = ("auto", "jsonl", "json", "text", "cacm", "cranfield", "debian")


def detect(path: Path) -> str:
    """The format of a file or directory for ``--format auto``."""
    if path.is_dir():
        if (path / "cacm.all").is_file():
            return "cacm"
        if (path / "cran.all.1400").is_file():
            return "cranfield"
        return "tree"
    if path.name == "cacm.all":
        return "cacm"
    if path.name == "cran.all.1400":
        return "cranfield"
    if path.name.endswith("changelog.Debian.gz"):
        return "debian"
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    if path.suffix.lower() == ".json":
        return "json"
    return "text"


def load_paths(paths: Iterable[str | Path], fmt: str = "auto") -> Iterator[dict]:
    """Items from several paths as one run (what ``recallql ingest PATH...`` reads): a Debian
    changelog entry met in several files is yielded once.

    Raises:
        IngestError: as `load_path`.
    """
    seen = Seen()
    for path in paths:
        yield from load_path(path, fmt, seen=seen)


@dataclass
class Seen:
    """What one loading run has yielded, so nothing goes into one batch twice.

    Attributes:
        entries: Debian entry ids (see `load_debian`).
        files: JSONL and text files already read (`text_doc_id` keys): a file named twice, or
            named and also found under a directory argument, is read once.
        skipped: why files were left out (binary, not UTF-8, not a text type, no text), one
            line each.
        empty: the doc_ids of text files read that hold no text (empty, blank, or a heading
            alone): they yield no chunk, so a re-ingest that replaces documents deletes theirs.
        textless: one line per item read with no text and no vector (``FILE:LINE: item 'x'``):
            it is stored, but SEARCH has nothing to match (filled by ``recallql ingest``'s check).
    """

    entries: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    textless: list[str] = field(default_factory=list)

    def first_visit(self, file: Path) -> bool:
        """Whether `file` was not read before in this run (and mark it read)."""
        key = text_doc_id(file)
        if key in self.files:
            return False
        self.files.add(key)
        return True


def load_path(path: str | Path, fmt: str = "auto", *, seen: Seen | None = None
              ) -> Iterator[dict]:
    """Items from one path in the given format (``auto`` detects it; a plain directory is
    walked for ``.jsonl`` and text files).

    Args:
        path: a file or directory.
        fmt: one of `FORMATS`.
        seen: what this run has yielded already (see `load_paths`).

    Raises:
        IngestError: unknown format, missing path, or a bad JSONL line.
    """
    p, seen = Path(path), seen or Seen()
    if not p.exists():
        raise IngestError(f"{p}: no such file or directory")
    kind = detect(p) if fmt == "auto" else fmt
    if kind in ("cacm", "cranfield"):
        root = p if p.is_dir() else p.parent
        yield from (load_cacm(root) if kind == "cacm" else load_cranfield(root))
    elif kind == "debian":
        files = sorted(p.rglob("changelog.Debian.gz")) if p.is_dir() else [p]
        yield from load_debian(files, seen=seen.entries)
    elif kind in ("jsonl", "json", "text") and p.is_file():
        if seen.first_visit(p):
            yield from load_file(p, kind, p.parent, seen)
    elif kind in ("tree", "jsonl", "json", "text"):
        yield from _walk(p, kind, seen)
    else:
        raise IngestError(f"unknown format {fmt!r} (use one of: {', '.join(FORMATS)})")


def load_file(file: Path, kind: str, root: Path, seen: Seen) -> Iterator[dict]:
    """One file's items in format `kind` (``jsonl``, ``json`` or ``text``); a text file's
    doc_id is relative to `root` (see `doc_id_under`)."""
    if kind == "jsonl":
        return load_jsonl(file)
    if kind == "json":
        return load_json(file)
    return load_text(file, root, seen=seen)


def walked_kind(file: Path, kind: str) -> str | None:
    """The format a directory walk reads `file` in (None: not read): ``.jsonl`` and ``.json``
    files as such, text files (`TEXT_SUFFIXES`) as text; `kind` narrows it (``jsonl``,
    ``json`` or ``text`` reads only those)."""
    own = {".jsonl": "jsonl", ".json": "json"}.get(file.suffix.lower())
    if own is None and file.suffix.lower() in TEXT_SUFFIXES:
        own = "text"
    return own if own is not None and kind in ("tree", own) else None


def walk_files(root: Path) -> list[Path]:
    """The files under `root` a walk looks at, sorted: not in hidden directories (``.git``)
    nor inside a recallql database (a directory holding its metadata file)."""
    from recallql.index.store import META_FILE

    found, skip = [], [d for d in root.rglob(META_FILE) if d.is_file()]
    for file in sorted(root.rglob("*")):
        parts = file.relative_to(root).parts
        if not file.is_file() or any(p.startswith(".") for p in parts[:-1]):
            continue
        if not any(file.is_relative_to(db.parent) for db in skip):
            found.append(file)
    return found


def _walk(root: Path, kind: str, seen: Seen) -> Iterator[dict]:
    for file, own in walked(root, kind, seen):
        yield from load_file(file, own, root, seen)


def walked(root: Path, kind: str, seen: Seen) -> Iterator[tuple[Path, str]]:
    """The files a walk of `root` reads, not read before in this run, with the format each is
    read in; the files of other types are noted in `seen.skipped`."""
    others: dict[str, int] = {}
    for file in walk_files(root):
        own = walked_kind(file, kind)
        if own is None:
            if not file.name.startswith("."):
                others[file.suffix.lower() or "(no suffix)"] = \
                    others.get(file.suffix.lower() or "(no suffix)", 0) + 1
            continue
        if seen.first_visit(file):
            yield file, own
    if others:
        kinds = ", ".join(f"{s} ×{n}" if n > 1 else s for s, n in sorted(others.items()))
        count = sum(others.values())
        seen.skipped.append(f"skipped {count} {'file' if count == 1 else 'files'} of other "
                            f"types in {root} ({kinds}); name a file to read it as text")


#: Keys the built-in loaders add beyond the `docs` collection's fields.
EXTRA_KEYS = frozenset({"authors", "citation"})


def project(items: Iterable[Mapping], drop: set[str]) -> Iterator[tuple[dict, set[str]]]:
    """Drop the `drop` keys of each item; yields (item, dropped key names)."""
    for item in items:
        kept = {k: v for k, v in item.items() if k not in drop}
        yield kept, set(item) - set(kept)
