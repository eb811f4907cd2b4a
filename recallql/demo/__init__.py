"""``recallql demo``: build a database from real material on this machine, then tour it.

    >>> run_demo(Path("recallql-demo.db"), size="small")     # doctest: +SKIP

Documents come from Debian changelogs (or Python's NEWS, or CACM), conversations from the
``chitchat-dataset`` package; see `recallql.demo.sources` and `recallql.demo.build`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from recallql.demo.build import (
    ROTATE_EVERY,
    SIZES,
    conversation_roots,
    plan_conversations,
    write_conversations,
)
from recallql.demo.sources import DemoError, DocSource, find_documents, load_chats
from recallql.demo.tour import SECTIONS, Built, Tour
from recallql.ui.progress import ProgressEmbedder

__all__ = ["DemoError", "MARKER", "run_demo"]

MARKER = "recallql-demo.json"


def fingerprint(path: Path) -> str:
    """sha256 of the database's SQLite metadata (``meta.sqlite`` and any write-ahead log): every
    committed write changes it (sessions, annotations, signals and every ingest batch), reading
    never does."""
    digest = hashlib.sha256()
    for name in ("meta.sqlite", "meta.sqlite-wal"):
        part = path / name
        if part.is_file():
            digest.update(part.read_bytes())
    return digest.hexdigest()


def prepare(path: Path) -> None:
    """Make `path` ready for a new demo database: remove an earlier demo database there, unless
    something was written to it after the demo finished (its marker records the fingerprint
    the demo left; a marker without one, from an older recallql, is rebuilt as before).

    Raises:
        DemoError: `path` holds something the demo did not build, or a demo database that was
            written to since.
    """
    if not path.exists():
        return
    if (path / MARKER).is_file():
        try:
            recorded = json.loads((path / MARKER).read_text()).get("fingerprint")
        except (ValueError, AttributeError, OSError):
            recorded = None
        if recorded is not None and recorded != fingerprint(path):
            raise DemoError(
                f"{path} was built by the demo and written to since (sessions, messages or "
                "items added), so the demo does not remove it; choose another --db, or remove "
                f"{path} yourself to rebuild it there")
        shutil.rmtree(path)
    elif not path.is_dir() or any(path.iterdir()):
        raise DemoError(f"{path} exists and was not built by the demo; choose another --db")


def _inner_embedder(name: str) -> Any:
    from recallql.api import HashEmbedder, MiniLMEmbedder

    return HashEmbedder() if name == "hash" else MiniLMEmbedder()


@contextmanager
def _progress(console: Console) -> Iterator[Progress]:
    columns = (SpinnerColumn(), TextColumn("{task.description:<34}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        yield progress


def _ingest_docs(db: Any, progress: Progress, embed: ProgressEmbedder, source: DocSource
                 ) -> None:
    task = progress.add_task(f"documents ({source.name})", total=len(source.items))
    embed.on_progress = lambda n: progress.advance(task, n)
    for start in range(0, len(source.items), 1000):
        db.ingest("docs", source.items[start:start + 1000])


def build(db: Any, embed: ProgressEmbedder, console: Console, size: str,
          doc_root: Path) -> tuple[Built, dict[str, float]]:
    """Fill a fresh database; returns what the tour needs and counts for the summary."""
    spec = SIZES[size]
    with _progress(console) as progress:
        reading = progress.add_task("reading real data", total=2)
        source, note = find_documents(spec.docs, doc_root)
        progress.advance(reading)
        long, short = load_chats(spec.long_chats, spec.turns, spec.short_chats)
        progress.advance(reading)
        if note:
            progress.console.print(Text(f"note: {note}", style="yellow"), soft_wrap=True)
        _ingest_docs(db, progress, embed, source)
        chains = plan_conversations(long, short)
        plans = [plan for chain in chains.values() for plan in chain]
        total = sum(len(p.turns) + len(p.copied) for p in plans)
        task = progress.add_task(f"messages ({len(plans)} sessions)", total=total)
        embed.on_progress = lambda n: progress.advance(task, n)
        messages = write_conversations(db, plans)
    branch = next((p.id for p in chains.get("chat1", []) if p.branched_from), None)
    tip = chains["chat0"][-1]
    said = max((turn.content for turn in tip.turns if turn.role == "user"), key=len)
    built = Built(source=source, current=tip.id, current_query=said, branch=branch,
                  conversation_of=conversation_roots(plans))
    return built, {"documents": len(source.items), "messages": messages,
                   "sessions": len(plans), "conversations": len(chains)}


def run_demo(path: Path, size: str = "default", embedder: str = "default",
             console: Console | None = None, doc_root: Path = Path("/usr/share/doc")
             ) -> dict[str, Any]:
    """Build the demo database at `path` (rebuilding an earlier demo there) and run the tour.

    The build shows progress bars; the tour prints each statement, its parameters and what it
    returns (see `recallql.demo.tour`).

    Args:
        path: the database directory.
        size: ``small``, ``default`` or ``all`` (see `recallql.demo.build.SIZES`).
        embedder: ``default`` (all-MiniLM-L6-v2) or ``hash``.
        console: where to print (default stdout).
        doc_root: where Debian changelogs are looked for.

    Returns:
        Counts and timings (``documents``, ``messages``, ``sessions``, ``build_s``, ...).

    Raises:
        DemoError: no material, or `path` holds something else.
    """
    import recallql

    console = console or Console(highlight=False)
    prepare(path)
    started = time.perf_counter()
    embed = ProgressEmbedder(_inner_embedder(embedder))
    console.print(Text(f"Building a demo database at {path} from real data on this machine",
                       style="bold"))
    with recallql.connect(path, embedder=embed) as db:
        built, counts = build(db, embed, console, size, doc_root)
        embed.on_progress = None
        (path / MARKER).write_text(json.dumps({"size": size, "embedder": embedder}))
        counts["build_s"] = round(time.perf_counter() - started, 1)
        console.print(Text(_built_line(counts), style="green"), soft_wrap=True)
        tour = Tour(db, console, built)
        for section in SECTIONS:
            section(tour)
    marker = {"size": size, "embedder": embedder, "fingerprint": fingerprint(path)}
    (path / MARKER).write_text(json.dumps(marker))  # after the tour's own writes, closed
    counts["sections"] = tour.sections
    counts["total_s"] = round(time.perf_counter() - started, 1)
    console.print()
    command = command_name()
    console.print(Text(f"Done in {counts['total_s']} s. Explore the same database:\n"
                       f"  {command} shell --db {path}\n"
                       f"  {command} query \"SEARCH docs MATCHING 'memory leak' LIMIT 5\" "
                       f"--db {path}", style="bold"), soft_wrap=True)
    return counts


def command_name() -> str:
    """How to run this ``recallql`` again from here: ``recallql`` when that is the one on
    ``PATH``, else the script's path (``.venv/bin/recallql`` after ``make demo``), else
    ``python -m recallql.cli``."""
    import os
    import shutil
    import sys

    script = Path(sys.argv[0])
    if script.name != "recallql":
        return f"{sys.executable} -m recallql.cli"
    found = shutil.which("recallql")
    if found and Path(found).resolve() == script.resolve():
        return "recallql"
    relative = os.path.relpath(script)
    return relative if not relative.startswith("..") else str(script.absolute())


def _built_line(counts: dict[str, Any]) -> str:
    return (f"built in {counts['build_s']} s: {counts['documents']} documents, "
            f"{counts['messages']} messages in {counts['sessions']} sessions "
            f"({counts['conversations']} chats; long ones rotated every {ROTATE_EVERY} "
            "messages, a simulated context compressor)")
