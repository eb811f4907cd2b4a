"""Real test corpora as item dicts for `Database.ingest`.

- SMART-format test collections: CACM (Fox 1983) and Cranfield (Cleverdon 1967) documents,
  queries and relevance judgments (see ``../shared/data/README.md`` for the pitfalls).
- Debian changelogs (``changelog.Debian.gz``): one item per entry.

Items carry ``id``, ``title``, ``body``, ``created_at`` where known, ``doc_id``/``position``,
``source`` (the format) and extras (``authors``, ``citation``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import gzip
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
_CACM_DATE = re.compile(r"([A-Za-z]+)\s*,?\s*(\d{4})")
_SMART_MARK = re.compile(r"^\.([A-Z])(?:\s+(\S+))?\s*$")


def parse_smart(path: Path) -> Iterator[dict[str, str]]:
    """Records of a SMART-format file: ``{"I": id, "T": ..., "W": ..., ...}`` (text per field,
    lines joined with ``"\\n"``)."""
    record: dict[str, list[str]] | None = None
    current = None
    with open(path, encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            line = raw.rstrip("\r\n")
            mark = _SMART_MARK.match(line)
            if mark:
                if mark.group(1) == "I":
                    if record is not None:
                        yield {k: "\n".join(v).strip() for k, v in record.items()}
                    record = {"I": [mark.group(2) or ""]}
                current = mark.group(1)
                if record is not None:
                    record.setdefault(current, [])
            elif record is not None and current is not None:
                record[current].append(line)
    if record is not None:
        yield {k: "\n".join(v).strip() for k, v in record.items()}


def cacm_date(text: str) -> dt.datetime | None:
    """``"CACM December, 1958"`` → 1958-12-01T00:00Z (``None`` when there is no month and year)."""
    for month, year in _CACM_DATE.findall(text):
        number = MONTHS.get(month.lower())
        if number:
            return dt.datetime(int(year), number, 1, tzinfo=dt.UTC)
    return None


def _smart_id(rec: Mapping[str, str]) -> int:
    """The record number; one CACM record has it wrapped over two lines (``.I 28`` / ``56``)."""
    return int("".join(rec["I"].split()))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def load_cacm(root: str | Path) -> Iterator[dict]:
    """CACM documents from ``<root>/cacm.all``: id ``cacm:<n>``, title, body (the abstract, often
    empty), created_at from the ``.B`` line, authors (``.A``), tags (``.K`` keywords)."""
    for rec in parse_smart(Path(root) / "cacm.all"):
        item: dict[str, object] = {"id": f"cacm:{_smart_id(rec)}", "title": rec.get("T", ""),
                "body": rec.get("W", ""), "source": "cacm", "authors": _lines(rec.get("A", "")),
                "tags": [k.strip() for k in rec.get("K", "").replace("\n", " ").split(",")
                         if k.strip()]}
        date = cacm_date(rec.get("B", ""))
        if date is not None:
            item["created_at"] = date
        yield item


def load_cranfield(root: str | Path) -> Iterator[dict]:
    """Cranfield documents from ``<root>/cran.all.1400``: id ``cran:<n>``, title, body, authors,
    citation (``.B``); undated."""
    for rec in parse_smart(Path(root) / "cran.all.1400"):
        yield {"id": f"cran:{_smart_id(rec)}", "title": rec.get("T", ""),
               "body": rec.get("W", ""), "source": "cranfield",
               "authors": _lines(rec.get("A", "")), "citation": rec.get("B", "")}


def load_cacm_queries(root: str | Path) -> dict[str, str]:
    """All 64 CACM queries from ``<root>/query.text``: ``{"1": text, ...}``."""
    return {str(_smart_id(r)): " ".join(r.get("W", "").split())
            for r in parse_smart(Path(root) / "query.text")}


def load_cacm_qrels(root: str | Path) -> dict[str, dict[str, int]]:
    """CACM judgments from ``<root>/qrels.text``: ``{query: {"cacm:<n>": 1}}`` (52 queries)."""
    qrels: dict[str, dict[str, int]] = {}
    for line in (Path(root) / "qrels.text").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            qrels.setdefault(str(int(parts[0])), {})[f"cacm:{int(parts[1])}"] = 1
    return qrels


def load_cranfield_queries(root: str | Path) -> dict[str, str]:
    """The 225 Cranfield queries, keyed by *position* ``"1".."225"``: ``cran.qry`` numbers them
    1…365 with gaps, while ``cranqrel`` numbers them 1…225 in file order."""
    records = parse_smart(Path(root) / "cran.qry")
    return {str(i): " ".join(r.get("W", "").split()) for i, r in enumerate(records, start=1)}


def load_cranfield_qrels(root: str | Path) -> dict[str, dict[str, int]]:
    """Cranfield judgments: ``{query position: {"cran:<n>": 1}}`` for codes 1–4 (relevant);
    code -1 (no interest) is left out."""
    qrels: dict[str, dict[str, int]] = {}
    for line in (Path(root) / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and 1 <= int(parts[2]) <= 4:
            qrels.setdefault(str(int(parts[0])), {})[f"cran:{int(parts[1])}"] = 1
    return qrels


_DEB_HEADER = re.compile(r"^(\S+) \(([^)\s]+)\)(.*)$")
_DEB_TRAILER = re.compile(r"^ -- (.*?)(?: <(.*?)>)?\s\s+(.+?)\s*$")


def parse_debian_changelog(text: str, seen: set[str] | None = None) -> Iterator[dict]:
    """Entries of one Debian changelog: id ``debian:<package>:<version>``, title
    ``"<package> <version>"``, body (the change lines), created_at (the trailer's RFC 2822 date;
    omitted when unparseable), doc_id ``debian:<package>``, position (0 = newest), authors.
    A repeated id (in `seen`, shared across files: binary packages of one source package ship
    the same changelog) keeps its first entry."""
    entry: dict | None = None
    seen = set() if seen is None else seen
    position = 0
    for line in text.splitlines():
        header = _DEB_HEADER.match(line)
        if header and not line.startswith(" "):
            package, version = header.group(1), header.group(2)
            entry = {"id": f"debian:{package}:{version}", "title": f"{package} {version}",
                     "lines": [], "doc_id": f"debian:{package}", "source": "debian"}
            continue
        trailer = _DEB_TRAILER.match(line)
        if entry is not None and trailer:
            if entry["id"] not in seen:
                seen.add(entry["id"])
                yield _debian_item(entry, trailer, position)
                position += 1
            entry = None
        elif entry is not None:
            entry["lines"].append(line)


def _debian_item(entry: dict, trailer: re.Match, position: int) -> dict:
    item = {k: v for k, v in entry.items() if k != "lines"}
    item["body"] = "\n".join(entry["lines"]).strip()
    item["position"] = position
    item["authors"] = [trailer.group(1).strip()]
    with contextlib.suppress(TypeError, ValueError, IndexError):
        item["created_at"] = email.utils.parsedate_to_datetime(trailer.group(3))
    return item


def load_debian(paths: Iterable[str | Path] | None = None,
                doc_root: str | Path = "/usr/share/doc", seen: set[str] | None = None
                ) -> Iterator[dict]:
    """Debian changelog entries from the given ``changelog.Debian.gz`` files (default: every
    one under `doc_root`).

    Args:
        paths: the files (default: ``<doc_root>/*/changelog.Debian.gz``).
        doc_root: where to look when `paths` is None.
        seen: ids already yielded (updated); pass one set to several calls so that an entry
            met again (binary packages of one source package ship the same changelog) is
            yielded once.
    """
    files = sorted(Path(doc_root).glob("*/changelog.Debian.gz")) if paths is None else paths
    seen = set() if seen is None else seen
    for path in files:
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except (OSError, EOFError):
            continue
        yield from parse_debian_changelog(text, seen)
