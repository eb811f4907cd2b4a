"""Builds the ANN graphs of large vector segments (`recallql.index.graphs`) off the write path.

An HNSW insertion costs about 150–200 µs of CPU a row (usearch, int8, 384-d), ten times what a
bulk ingest spends on a row (31k chunks/s): building the graph inside the batch would cut
ingest to about 5k rows/s. So a batch (or merge) commits its segment without a graph, and a
writer's `GraphBuilder` builds the missing graphs on one background thread, as Qdrant's
optimizer and Lucene's merge threads do. A segment is scanned exactly until its graph is
published, so answers never depend on it; only the cost does.

Publication keeps the stores agreeing whatever is killed when: the graph is built from the
immutable segment file, saved and fsynced outside the vector directory, and renamed into it
under the writer mutex only if the manifest still names the segment (a merge may have replaced
it meanwhile). A graph holds exactly its segment's rowids; tombstones come from SQLite's live
mask at query time. Killed before the rename: a temporary file in ``building/``, removed by the
next builder. `build_all` does the same work synchronously (`Store.build_graphs`,
benchmarks).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from recallql.index import checkpoint, graphs
from recallql.index.errors import StoreError

#: The builder starts once no write committed for this long (seconds), so a bulk ingest is
#: not slowed by graph building on a machine with few cores; queries scan exactly meanwhile.
QUIET_SECONDS = 0.25
#: ... but waits no longer than this (seconds) for a quiet moment: a writer that never pauses
#: still gets its graphs.
MAX_WAIT_SECONDS = 2.0

if TYPE_CHECKING:
    from recallql.index.snapshot import CollectionState
    from recallql.index.vectors import Segment


def missing(state: CollectionState) -> list[Segment]:
    """The segments of `state` that should have a graph and do not (largest first)."""
    todo = [s for s in state.segments if s.graph is None and graphs.wants_graph(len(s.vecs))]
    return sorted(todo, key=lambda s: -len(s.vecs))


def checkpoint_due(state: CollectionState) -> bool:
    """Whether enough rows were committed since the newest column checkpoint."""
    return (state.files.directory is not None
            and state.size - checkpoint.newest(state) >= checkpoint.CHECKPOINT_ROWS)


def clear_building(collection_dir: Path | None) -> None:
    """Remove what a builder of a process no longer running left half-written: temporary
    graph files in ``building/`` (names end ``.<pid>-<random>.tmp``) and temporary column
    checkpoint directories ``columns-<rows>.<pid>-<random>.tmp/`` (`recallql.index.checkpoint`;
    a writer killed while saving one left it for good, tens of MB at 1M rows)."""
    if collection_dir is None or not collection_dir.is_dir():
        return
    folder = collection_dir / "building"
    if folder.is_dir():
        for leftover in folder.iterdir():
            found = _TMP_PID.search(leftover.name)
            if found is None or not _alive(int(found.group(1))):
                leftover.unlink(missing_ok=True)
    for leftover in collection_dir.iterdir():
        found = _TMP_PID.search(leftover.name)
        if leftover.name.startswith(checkpoint.PREFIX) and found is not None and \
                not _alive(int(found.group(1))):
            shutil.rmtree(leftover, ignore_errors=True)


#: The writer's pid in a temporary graph file's name (``b12.hnsw.<pid>-<tag>.tmp``, also while
#: `AnnGraph.save` writes it as ``... .tmp.tmp``).
_TMP_PID = re.compile(r"\.(\d+)-[0-9a-f]+\.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: Builders whose thread was started; stopped when the interpreter exits (`_stop_builders`).
_STARTED: weakref.WeakSet[GraphBuilder] = weakref.WeakSet()


@atexit.register
def _stop_builders() -> None:
    """Stop every builder's thread before the interpreter finalises: a daemon thread still
    inside usearch then is torn down mid-insertion and the process aborts ("terminate called
    without an active exception", exit status 134) when a program exits without closing its
    database while a graph is being built."""
    for builder in list(_STARTED):
        builder.close()


class GraphBuilder:
    """The background graph builder of one writing `Store`.

    Args:
        mutex: the store's writer mutex (publication and state access run under it).
        states: returns the collection states to index (the store's open ones).
    """

    def __init__(self, mutex: threading.RLock, states: Callable[[], list[CollectionState]]):
        self._mutex = mutex
        self._states = states
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._busy: set[tuple[int, str]] = set()  # (collection id, segment) being built

    def kick(self) -> None:
        """Make the thread look for segments without a graph (starting it if needed)."""
        with self._mutex:
            if self._stop:
                return
            self._wake.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="recallql-ann-builder",
                                                daemon=True)
                self._thread.start()
                _STARTED.add(self)

    def _run(self) -> None:
        with self._mutex:
            for state in self._states():
                clear_building(None if state.files.directory is None
                               else state.files.directory.parent)
        while self._wake.wait(timeout=1.0) and not self._stop:
            self._wake.clear()
            deadline = time.monotonic() + MAX_WAIT_SECONDS
            while (time.monotonic() < deadline and self._wake.wait(timeout=QUIET_SECONDS)
                   and not self._stop):
                self._wake.clear()  # writes keep coming: let them have the CPU first
            try:
                self.build_all(background=True)
            except (OSError, StoreError) as exc:  # e.g. disk full: queries scan exactly
                warnings.warn(f"building an ANN index failed: {exc}", RuntimeWarning,
                              stacklevel=1)

    def build_all(self, background: bool = False) -> int:
        """Build and publish every missing graph of the open collections, then write the
        column checkpoints that are due (`recallql.index.checkpoint`); returns how many graphs
        were published."""
        done = self._graphs()
        if not background:  # wait for the thread's graph in progress, then finish the rest
            while not self._stop:
                with self._mutex:
                    if not self._busy:
                        break
                time.sleep(0.01)
            done += self._graphs()
        with self._mutex:
            due = [(s, *checkpoint.capture(s)) for s in self._states() if checkpoint_due(s)]
        for state, rows, parts in due:
            if not self._stop:
                checkpoint.write(state, rows, parts)
        return done

    def _graphs(self) -> int:
        done, tried = 0, set[tuple[int, str]]()
        while not self._stop:
            work = self._next(tried)
            if work is None:
                return done
            state, seg = work
            key = (state.id, seg.file)
            tried.add(key)
            try:
                graph = graphs.build(seg.rowids, seg.vecs, stop=lambda: self._stop)
                if graph is None:
                    return done
                publish = functools.partial(self._publish, state, seg)
                if state.files.write_graph(seg.file, graph, publish, seg.vecs):
                    done += 1
                    with self._mutex:
                        state.attach_graph(seg.file)
            finally:
                with self._mutex:
                    self._busy.discard(key)
        return done

    def _next(self, tried: set[tuple[int, str]]) -> tuple[CollectionState, Segment] | None:
        """The next segment to build (not tried by this call, not being built by another
        thread), marked busy."""
        with self._mutex:
            for state in self._states():
                todo = [s for s in missing(state)
                        if (state.id, s.file) not in tried | self._busy]
                if todo:
                    self._busy.add((state.id, todo[0].file))
                    return state, todo[0]
        return None

    @contextlib.contextmanager
    def _publish(self, state: CollectionState, seg: Segment) -> Iterator[bool]:
        """Whether to publish the graph of `seg` (the manifest still names it), held while
        the caller renames its files in. The mutex keeps this process's merges out; another
        process's merge (it holds the LOCK, not this mutex) may still remove the segment
        between the look and the renames, and its own removal of the files may come first:
        so the manifest is read again after the renames, and the files of a segment it no
        longer names are removed here (they would stay as orphans until the next recovery)."""
        with self._mutex:
            wanted = seg.file in self._listed(state) and not self._stop
            yield wanted
            if wanted and seg.file not in self._listed(state):
                state.files.remove_extras(seg.file)

    @staticmethod
    def _listed(state: CollectionState) -> set[str]:
        return {s.file for s in state.meta.segments(state.id, state.meta.write)}

    def close(self) -> None:
        """Stop the thread (waiting for the graph being built: seconds at most for a segment
        of tier 5)."""
        with self._mutex:
            self._stop = True
            self._wake.set()
            thread = self._thread
        if thread is not None:
            thread.join()
