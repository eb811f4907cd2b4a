"""Real-text corpora for the benchmarks: the IR test sets and the 100k-chunk latency corpus.

- `ir_set`: CACM or Cranfield documents, judged queries and relevance judgments, the documents
  in the shape `Database.ingest` takes (title, body, created_at) and the exact text recallql
  indexes and embeds (the text fields joined with ``"\\n"``).
- `latency_corpus`: 100,000 chunks of real text (CACM, Cranfield, Python's NEWS, Debian
  changelog entries), cut into half-overlapping word windows of at most 180 characters (a new
  window every ~90 characters), with dates where the source has them. Deterministic: the same
  machine gives the same chunks, so their vectors can be cached by a hash of the texts.
"""

from __future__ import annotations

import datetime as dt
import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from recallql.datasets import corpora

REPO = Path(__file__).resolve().parents[1]
DATA_CANDIDATES = (
    REPO / ".." / "shared" / "data",
    REPO / ".." / ".." / "shared" / "data",
)
PYTHON_NEWS = Path("/usr/share/doc/python3.11/NEWS.gz")
CHUNK_CHARS = 180
STRIDE_CHARS = 90
LATENCY_CHUNKS = 100_000


def ir_root() -> Path | None:
    """The shared ``ir/`` folder (CACM and Cranfield), if present."""
    return next((p / "ir" for p in DATA_CANDIDATES if (p / "ir").is_dir()), None)


@dataclass(frozen=True)
class IRSet:
    """One test collection.

    Attributes:
        name: ``"cacm"`` or ``"cranfield"``.
        docs: items for `Database.ingest` (``id``, ``title``, ``body``, ``created_at``).
        texts: per doc, the text recallql indexes and embeds (non-empty text fields joined by
            ``"\\n"``).
        queries: judged query id -> query text.
        qrels: judged query id -> relevant doc ids.
    """

    name: str
    docs: list[dict]
    texts: list[str]
    queries: dict[str, str]
    qrels: dict[str, set[str]]


def joined_text(doc: dict) -> str:
    """The text recallql indexes for a doc: its non-empty title and body joined by a newline."""
    return "\n".join(v for v in (doc.get("title"), doc.get("body")) if v)


def ir_set(name: str) -> IRSet:
    """Load ``"cacm"`` or ``"cranfield"`` (queries without judgments are dropped).

    Raises:
        FileNotFoundError: the shared data folder is missing.
    """
    root = ir_root()
    if root is None:
        raise FileNotFoundError("shared IR data (ir/cacm, ir/cranfield) not found")
    if name == "cacm":
        raw = corpora.load_cacm(root / "cacm")
        queries = corpora.load_cacm_queries(root / "cacm")
        qrels = corpora.load_cacm_qrels(root / "cacm")
    else:
        raw = corpora.load_cranfield(root / "cranfield")
        queries = corpora.load_cranfield_queries(root / "cranfield")
        qrels = corpora.load_cranfield_qrels(root / "cranfield")
    keep = ("id", "title", "body", "created_at")
    docs = [{k: d[k] for k in keep if k in d} for d in raw]
    judged = {q: set(rel) for q, rel in qrels.items() if rel and q in queries}
    return IRSet(name, docs, [joined_text(d) for d in docs],
                 {q: queries[q] for q in judged}, judged)


def windows(text: str, size: int = CHUNK_CHARS, stride: int = STRIDE_CHARS) -> list[str]:
    """Overlapping word windows of at most `size` characters, starting every ~`stride` chars.

    A word longer than `size` makes a window of its own. Each window after the first starts at
    the first word at least `stride` characters after the previous window's start.
    """
    words = [(m.start(), m.group()) for m in re.finditer(r"\S+", text)]
    out: list[str] = []
    start = 0
    while start < len(words):
        end, length = start, 0
        while end < len(words) and (end == start or length + 1 + len(words[end][1]) <= size):
            length += len(words[end][1]) + (end > start)
            end += 1
        out.append(" ".join(w for _, w in words[start:end]))
        if end >= len(words):
            break
        nxt = start + 1
        while nxt < end and words[nxt][0] - words[start][0] < stride:
            nxt += 1
        start = nxt
    return out


_NEWS_RELEASE = re.compile(r"^\*Release date: (\d{4}-\d{2}-\d{2})\*", re.MULTILINE)


def python_news(path: Path = PYTHON_NEWS) -> Iterator[tuple[str, str, dt.datetime | None]]:
    """(id, text, release date) of each ``- item`` of Python's NEWS file (nothing if absent)."""
    if not path.is_file():
        return
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    date = None
    for n, part in enumerate(re.split(r"\n(?=- |What's New in Python)", text)):
        found = _NEWS_RELEASE.search(part)
        if found:
            date = dt.datetime.fromisoformat(found.group(1)).replace(tzinfo=dt.UTC)
        if part.startswith("- "):
            yield f"pynews:{n}", part[2:], date


def _documents() -> Iterator[tuple[str, str, dt.datetime | None]]:
    """(doc id, text, date) of every source document, in a fixed order."""
    root = ir_root()
    if root is not None:
        for doc in corpora.load_cacm(root / "cacm"):
            yield doc["id"], joined_text(doc), doc.get("created_at")
        for doc in corpora.load_cranfield(root / "cranfield"):
            yield doc["id"], joined_text(doc), None
    yield from python_news()
    for entry in corpora.load_debian():
        yield entry["id"], f"{entry['title']}: {entry['body']}", entry.get("created_at")


def latency_corpus(n: int = LATENCY_CHUNKS) -> list[dict]:
    """The first `n` chunks of real text: items with ``id`` (``<doc>#<k>``), ``doc_id``,
    ``position``, ``body`` and ``created_at`` where the source is dated.

    Raises:
        RuntimeError: fewer than `n` chunks of text are available on this machine.
    """
    items: list[dict] = []
    for doc_id, text, date in _documents():
        for k, chunk in enumerate(windows(text)):
            item = {"id": f"{doc_id}#{k}", "doc_id": doc_id, "position": k, "body": chunk}
            if date is not None:
                item["created_at"] = date
            items.append(item)
            if len(items) == n:
                return items
    raise RuntimeError(f"only {len(items):,} chunks of real text here; {n:,} requested")
