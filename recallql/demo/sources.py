"""Real material on this machine for the demo.

- Documents: Debian changelog entries (``/usr/share/doc/*/changelog.Debian.gz``, real dates),
  else the items of Python's ``NEWS.gz``, else CACM from a ``shared/data`` folder beside the
  checkout. Each source comes with the queries the tour runs on it.
- Conversations: chats of the ``chitchat-dataset`` package (MIT; 7,168 real conversations with
  timestamps), chosen deterministically: the long chats about computers, and short ones.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from recallql.api import parse_timestamp
from recallql.datasets import corpora
from recallql.importers import files as loaders


class DemoError(RuntimeError):
    """The demo cannot run (no material, a path it must not touch); the message says why."""


@dataclass(frozen=True)
class DocSource:
    """Documents for the `docs` collection and the queries the tour runs on them."""

    name: str
    origin: str
    items: list[dict]
    query: str
    recency_query: str


@dataclass(frozen=True)
class Turn:
    """One chat message: who (``user`` or ``assistant``), what, when (epoch seconds)."""

    role: str
    content: str
    at: float


@dataclass(frozen=True)
class Chat:
    """One chitchat conversation."""

    id: str
    prompt: str
    turns: list[Turn] = field(default_factory=list)


# -- documents -----------------------------------------------------------------------------


def debian_docs(limit: int | None, doc_root: Path = Path("/usr/share/doc")) -> list[dict]:
    """Debian changelog entries, breadth first: every package's newest entry, then every
    package's second newest, ... up to `limit` (None: all). Tags hold the package name."""
    items = list(corpora.load_debian(doc_root=doc_root))
    items.sort(key=lambda item: (item["position"], item["doc_id"]))
    out = []
    for item in items[:limit]:
        package = item["doc_id"].split(":", 1)[1]
        kept = {k: v for k, v in item.items() if k not in loaders.EXTRA_KEYS}
        out.append({**kept, "tags": [package]})
    return out


_NEWS_RELEASE = re.compile(r"^What's New in Python (\S+)(?: (\S+))?\?", re.MULTILINE)
_NEWS_DATE = re.compile(r"\*Release date: (\d{4}-\d{2}-\d{2})\*")


def parse_python_news(text: str) -> Iterator[dict]:
    """Items (``- ...`` paragraphs) of a CPython ``NEWS`` file with their release date, version
    and section (as a tag)."""
    releases = list(_NEWS_RELEASE.finditer(text))
    for i, release in enumerate(releases):
        block = text[release.end(): releases[i + 1].start() if i + 1 < len(releases) else None]
        date = _NEWS_DATE.search(block)
        version = release.group(1)
        section, position = "", 0
        for para in re.split(r"\n\s*\n", block):
            lines = para.strip().splitlines()
            if len(lines) == 2 and set(lines[1]) == {"-"}:
                section = lines[0].strip()
            elif para.lstrip("\n").startswith("- "):
                item = {"id": f"python-news:{version}:{position}",
                        "doc_id": f"python:{version}", "position": position,
                        "title": f"Python {version}: {section}",
                        "body": " ".join(para.strip()[2:].split()), "source": "python-news",
                        "tags": [section.lower()] if section else []}
                if date:
                    item["created_at"] = parse_timestamp(date.group(1))
                position += 1
                yield item


def python_news_docs(limit: int | None, path: Path | None = None) -> list[dict]:
    """Items of Python's NEWS.gz (the newest Python under /usr/share/doc when `path` is None)."""
    files = [path] if path else sorted(Path("/usr/share/doc").glob("python3*/NEWS.gz"))
    for file in reversed(files):
        if file and file.is_file():
            with gzip.open(file, "rt", encoding="utf-8", errors="replace") as handle:
                return list(parse_python_news(handle.read()))[:limit]
    return []


def cacm_docs(limit: int | None) -> list[dict]:
    """CACM abstracts from a ``shared/data/ir/cacm`` folder beside the checkout or the current
    directory (empty when there is none)."""
    here = Path(__file__).resolve().parents[2]
    for base in (here / "..", here / ".." / "..", Path.cwd() / "..", Path.cwd()):
        root = base / "shared" / "data" / "ir" / "cacm"
        if (root / "cacm.all").is_file():
            items = [{k: v for k, v in item.items() if k not in loaders.EXTRA_KEYS}
                     for item in corpora.load_cacm(root)]
            return items[:limit]
    return []


def find_documents(limit: int | None, doc_root: Path = Path("/usr/share/doc"),
                   news: Path | None = None) -> tuple[DocSource, str | None]:
    """The first available document source, and a note when it is not the Debian one.

    Raises:
        DemoError: no source found.
    """
    items = debian_docs(limit, doc_root)
    if items:
        return DocSource("Debian changelogs", f"{doc_root}/*/changelog.Debian.gz", items,
                         "fix a crash when the file is missing",
                         "security update for a buffer overflow"), None
    note = f"no Debian changelogs under {doc_root}; "
    items = python_news_docs(limit, news)
    if items:
        return DocSource("Python NEWS", "Python's NEWS.gz", items,
                         "fix a crash when the file is missing",
                         "security fix for a buffer overflow"), note + "using Python's NEWS"
    items = cacm_docs(limit)
    if items:
        return DocSource("CACM abstracts", "shared/data/ir/cacm", items,
                         "parallel sorting algorithms", "compiler optimization"), \
            note + "using CACM abstracts"
    raise DemoError(note + "no Python NEWS.gz and no CACM folder either: the demo needs real "
                    "documents on this machine (try `recallql ingest` with your own files)")


# -- conversations -------------------------------------------------------------------------


def chitchat_path() -> Path:
    """The ``dataset.json`` of the installed chitchat-dataset package.

    Raises:
        DemoError: the package is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("chitchat_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise DemoError("the demo's conversations come from the chitchat-dataset package, "
                        "which is not installed: pip install 'recallql[demo]' (or run "
                        "`make demo` in a clone, which installs it)")
    return Path(list(spec.submodule_search_locations)[0]) / "dataset.json"


def _chat(key: str, raw: dict) -> Chat:
    first = raw["messages"][0][0]["sender"]
    turns = []
    for message in raw["messages"]:
        text = " ".join(u["text"] for u in message).strip()
        if not text:
            continue
        at = parse_timestamp(message[0]["timestamp"]).timestamp()
        turns.append(Turn("user" if message[0]["sender"] == first else "assistant", text, at))
    return Chat(key, raw.get("prompt", ""), turns)


def load_chats(long_chats: int, turns: int, short_chats: int, topic: str = "computer"
               ) -> tuple[list[Chat], list[Chat]]:
    """(long, short) chats about `topic`: the `long_chats` longest (cut to `turns` turns) and
    `short_chats` of 6–12 turns, in a fixed order."""
    with open(chitchat_path(), encoding="utf-8") as handle:
        data = json.load(handle)
    about = {k: v for k, v in data.items() if topic in v.get("prompt", "").lower()}
    ranked = sorted(about, key=lambda k: (-len(about[k]["messages"]), k))
    long = [_chat(k, about[k]) for k in ranked[:long_chats]]
    long = [Chat(c.id, c.prompt, c.turns[:turns]) for c in long]
    short_keys = sorted(k for k in ranked[long_chats:] if 6 <= len(about[k]["messages"]) <= 12)
    return long, [_chat(k, about[k]) for k in short_keys[:short_chats]]
