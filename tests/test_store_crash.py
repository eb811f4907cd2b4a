"""Crash safety: a writer process is SIGKILLed at random moments (and at chosen points of the
commit protocol); afterwards the database opens, shows only whole batches in SQLite, tantivy
results and vectors, and the next writer can ingest again.

The writer's logical steps: ingest batch ``k`` (fresh items, the re-ingested 'shared' item and the
unchanged 'constant' item), and after every batch ``k`` divisible by `DELETE_EVERY` one delete
batch that removes most of batch ``k-1`` (by id and by doc_id), then `db.messages.extend` of
batch ``k``'s messages (one batch of `MESSAGES` messages). A delete and an extend are
all-or-nothing too. A second trial kills writers while another process keeps writing messages,
waiting for the lock each time (`lock_timeout`): it must never fail, and must recover what the
killed writer left.

Run as a script, this module is the writer: ``python test_store_crash.py DB START SEED [POINT N]``
(or ``python test_store_crash.py waiter DB N`` for the process that waits for the lock).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve()
SEED = 20240601


DELETE_EVERY = 3
MESSAGES = 3
#: Segments of at least this many rows get an ANN graph in these trials (built in the
#: background by the writer, killed with it).
GRAPH_MIN_ROWS = 8
SESSION = "crash"
CONSTANT = {"id": "constant", "title": "constant item never changes"}


def batch_items(seed: int, k: int) -> list[dict]:
    """Logical batch k: 1–12 fresh items with supplied vectors (chunk j of document
    ``d<k>-odd`` when j % 4 == 1, else its own document), the shared item 'shared' (re-ingested
    by every batch, embedded by the collection's embedder) and the unchanged item 'constant'."""
    rng = np.random.default_rng([seed, k])
    size = int(rng.integers(1, 13))
    vecs = rng.standard_normal((size, 16)).astype(np.float32)
    items = [{"id": f"b{k}-{j}", "title": f"batchtok{k} item {j}", "body": "crash test body",
              "source": f"batch-{k}", "vector": vecs[j]} for j in range(size)]
    for j in range(1, size, 4):
        items[j]["doc_id"] = f"d{k}-odd"
    items.append({"id": "shared", "title": f"shared batchtok{k}", "source": f"batch-{k}"})
    items.append(dict(CONSTANT))
    return items


def message_batch(k: int) -> list[dict]:
    """The messages written after logical batch k (one `extend` batch)."""
    return [{"session_id": SESSION, "role": "user", "content": f"msgtok{k} message {j}"}
            for j in range(MESSAGES)]


def fresh(seed: int, k: int) -> list[dict]:
    return batch_items(seed, k)[:-2]


def delete_batch(db, seed: int, k: int):
    """The delete after batch k + 1: the even items of batch k by id, its odd document by
    doc_id (only the items j % 4 == 3 survive)."""
    evens = [it["id"] for j, it in enumerate(fresh(seed, k)) if j % 2 == 0]
    return db.delete("docs", evens, doc_ids=[f"d{k}-odd"])


def survivors(seed: int, k: int, deleted: bool) -> set[str]:
    """Ids of batch k's fresh items that are live (after its delete batch when `deleted`)."""
    return {it["id"] for j, it in enumerate(fresh(seed, k)) if not deleted or j % 4 == 3}


def _install_crash(point: str, after: int) -> None:
    """Make this process SIGKILL itself at the `after`-th time it passes `point`."""
    from recallql.index import ann, batch, store, text, vectors

    seen = {"n": 0}

    def hit():
        seen["n"] += 1
        if seen["n"] >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(owner, name, before=False, when=lambda *a, **k: True):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if before and when(*args, **kwargs):
                hit()
            result = original(*args, **kwargs)
            if not before and when(*args, **kwargs):
                hit()
            return result

        setattr(owner, name, wrapper)

    if point == "segment-written":
        wrap(vectors.SegmentFiles, "write", when=lambda self, name, parts: name[0] == "b")
    elif point == "text-committed":
        wrap(text.TextIndex, "commit")
    elif point == "sqlite-committed":
        wrap(store.batches, "commit")
    elif point == "merge-written":
        wrap(vectors.SegmentFiles, "write", when=lambda self, name, parts: name[0] == "m")
    elif point == "merge-committed":
        wrap(vectors.SegmentFiles, "remove", before=True)
    elif point == "graph-saved":  # saved outside the vector directory, not published
        wrap(ann.AnnGraph, "save")
    elif point == "graph-published":
        wrap(vectors.SegmentFiles, "write_graph")
    elif point == "delete-text-committed":
        wrap(text.TextIndex, "commit", when=lambda *a: _deleting["now"])
    elif point == "delete-sqlite-committed":
        wrap(store.batches, "commit", when=lambda *a: _deleting["now"])
    else:
        raise ValueError(point)
    if point.startswith("delete-"):
        _track_deletes(store.Store)
    assert batch  # imported for its side effects on `store.batches`


_deleting = {"now": False}


def _track_deletes(store_class) -> None:
    """Set ``_deleting["now"]`` while `Store.delete` runs."""
    original = store_class.delete

    def delete(*args, **kwargs):
        _deleting["now"] = True
        try:
            return original(*args, **kwargs)
        finally:
            _deleting["now"] = False

    store_class.delete = delete


def _writer(path: str, start: int, seed: int, point: str | None, after: int) -> None:
    import recallql
    from recallql.index import graphs
    from recallql.index.embedders import HashEmbedder

    graphs.GRAPH_MIN_ROWS = GRAPH_MIN_ROWS  # segments this small get an ANN graph
    db = recallql.connect(path, embedder=HashEmbedder(16), lock_timeout=60)
    if db.sessions.get(SESSION) is None:
        db.sessions.create(SESSION, "crash-test", started_at=0.0)
    if point:
        _install_crash(point, after)
    print("ready", flush=True)
    k = start
    while True:
        db.ingest("docs", batch_items(seed, k))
        if k % DELETE_EVERY == 0:
            delete_batch(db, seed, k - 1)
        db.messages.extend(message_batch(k))
        k += 1


def _spawn(path: Path, start: int, point: str | None = None, after: int = 0):
    args = [sys.executable, str(HERE), str(path), str(start), str(SEED)]
    if point:
        args += [point, str(after)]
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True)
    line = proc.stdout.readline()
    assert line == "ready\n", proc.stderr.read()
    return proc


def _check(path: Path, started_from: int) -> int:
    """Open as the next writer, verify whole batches everywhere, finish the logical step the
    writer was in (a delete not yet committed) and ingest the next batch; returns the next
    logical batch number."""
    from recallql.index import graphs

    saved, graphs.GRAPH_MIN_ROWS = graphs.GRAPH_MIN_ROWS, GRAPH_MIN_ROWS
    try:
        return _check_as_writer(path, started_from)
    finally:
        graphs.GRAPH_MIN_ROWS = saved


def _check_as_writer(path: Path, started_from: int) -> int:
    import recallql
    from recallql.index import graphs
    from recallql.index.embedders import HashEmbedder

    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        report = db.check()  # leftovers of the killed batch are warnings, never errors
        assert report.ok, report.to_text()
        if db.sessions.get(SESSION) is None:  # killed before it was created
            db.sessions.create(SESSION, "crash-test", started_at=0.0)
        db.store.build_graphs()  # the graphs the killed writer had not published
        assert db.check().ok
        snap = db.snapshot("docs")
        rows = snap.fetch(np.flatnonzero(snap.live))
        last, expected = _check_rows(rows, started_from)
        _check_text(snap, last, expected)
        _check_vectors(snap, last, expected)
        assert int((snap.live & snap.has_vector).sum()) == len(rows)
        db.store.recover()  # what every write does first for its collection
        for name in ("docs", "messages"):
            _check_files(db, name, graphs)
        assert not [p for p in db.check().problems if p.kind in ("uncommitted", "orphan")]
        if last and last % DELETE_EVERY == 0 and expected[last - 1] == survivors(
                SEED, last - 1, False):
            delete_batch(db, SEED, last - 1)  # the writer died before this delete committed
        if last and _check_messages(db, last) < last:
            db.messages.extend(message_batch(last))  # ... or before this extend committed
        assert db.ingest("docs", batch_items(SEED, last + 1)).unchanged == (1 if last else 0)
        if (last + 1) % DELETE_EVERY == 0:
            delete_batch(db, SEED, last)
        db.messages.extend(message_batch(last + 1))
        assert _check_messages(db, last + 1) == last + 1
        return last + 2


def _check_files(db, name: str, graphs) -> None:
    """The collection's files are what its manifest names (and their graphs and int8 copies),
    read under the writer lock so that a waiting process's write cannot land in between."""
    from recallql.index.quantized import copy_name

    with db.store.writing():
        state = db.store._state(name)
        assert state.text.batches_after(db.store.committed_batch()) == 0
        manifest = {s.file for s in db.store.meta.segments(state.id)}
        folder = state.files.directory
        manifest |= {extra for f in manifest for extra in (graphs.graph_name(f), copy_name(f))
                     if (folder / extra).exists()}
        assert ({p.name for p in folder.iterdir()} if folder.exists() else set()) == manifest
        building = folder.parent / "building"
        assert not (building.exists() and list(building.iterdir()))


def _check_messages(db, last: int, waiter: int = 0) -> int:
    """Messages: whole extend batches only, a prefix of the logical batches (the one of `last`
    may be missing), seqs 1..n without a gap, ids distinct, the text index in step; `waiter`
    counts the messages of the waiting process. Returns the last logical batch with messages."""
    snap = db.snapshot("messages")
    rows = snap.fetch(np.flatnonzero(snap.live))
    ours = [r for r in rows if r["session_id"] == SESSION]
    per = {}
    for r in ours:
        per.setdefault(int(r["content"].split()[0].removeprefix("msgtok")), []).append(r)
    assert all(len(v) == MESSAGES for v in per.values()), "a partial extend"
    done = max(per, default=0)
    assert sorted(per) == list(range(1, done + 1)) and done in (last - 1, last), (sorted(per), last)
    assert sorted(r["seq"] for r in ours) == list(range(1, len(ours) + 1))
    assert len({r["message_id"] for r in rows}) == len(rows)
    theirs = [r for r in rows if r["session_id"] != SESSION]
    assert len(theirs) >= waiter
    for seqs in _seqs_by_session(theirs).values():
        assert sorted(seqs) == list(range(1, len(seqs) + 1))
    for k in (done - 1, done):
        if k >= 1:
            got, _ = snap.lexical_topn([f"msgtok{k}"], 10)
            assert len(got) == MESSAGES
    return done


def _seqs_by_session(rows: list[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in rows:
        out.setdefault(r["session_id"], []).append(r["seq"])
    return out


def _check_rows(rows: list[dict], started_from: int) -> tuple[int, dict[int, set[str]]]:
    """SQLite: committed ingests are a prefix, each batch whole, each delete whole.

    Returns:
        The last committed logical batch and, per batch, the ids of its live fresh items.
    """
    by_batch: dict[int, set[str]] = {}
    for r in rows:
        if r["id"] not in ("shared", "constant"):
            by_batch.setdefault(int(r["source"].split("-")[1]), set()).add(r["id"])
    last = max((int(r["source"].split("-")[1]) for r in rows if r["id"] == "shared"), default=0)
    assert last >= started_from - 1, "a committed batch disappeared"
    for k in range(1, last + 1):
        got = by_batch.setdefault(k, set())
        has_delete = (k + 1) % DELETE_EVERY == 0  # the delete of batch k follows ingest k + 1
        if has_delete and k + 1 == last:  # the writer may have died before it committed
            assert got in (survivors(SEED, k, True), survivors(SEED, k, False)), \
                f"batch {k}: partial delete"
        else:
            assert got == survivors(SEED, k, has_delete and k + 2 <= last), f"batch {k}"
    assert set(by_batch) <= set(range(1, last + 1)), "rows of an uncommitted batch"
    assert [r["title"] for r in rows if r["id"] == "constant"] == ([CONSTANT["title"]] if last
                                                                   else [])
    return last, by_batch


def _check_text(snap, last: int, expected: dict[int, set[str]]) -> None:
    """tantivy: whole batches only, deleted items gone; the ``keys`` terms of the declared
    fields are in the same documents as the text (the raw tantivy hits of ``source =
    batch-k`` and of ``batchtok<k>`` are the same documents, committed or not yet purged)."""
    from tantivy import Query

    from recallql.index.filters import Cmp
    from recallql.index.keyterms import KEYS_FIELD, key_term
    from recallql.index.text import SCHEMA, SCHEMA_KEYED

    def raw(query) -> set[int]:
        hits = snap.searcher.search(query, 10_000, count=False).hits
        return set(snap.searcher.fast_field_values("rowid", [a for _, a in hits]))

    for k in range(max(1, last - 3), last + 4):
        got, _ = snap.lexical_topn([f"batchtok{k}"], 100)
        want = set(expected.get(k, set())) | ({"shared"} if k == last else set())
        assert {snap.ids[r] for r in got} == want, k
        where = Cmp("source", "=", f"batch-{k}")
        terms, _, how = snap.lexical_search([f"batchtok{k}"], 100, snap.filter_rows(where),
                                            where)
        assert how == "terms(source)" and sorted(terms.tolist()) == sorted(got.tolist()), k
        assert raw(Query.term_query(SCHEMA_KEYED, KEYS_FIELD, key_term("source", f"batch-{k}"))
                   ) == raw(Query.term_query(SCHEMA, "text", f"batchtok{k}")), k


def _check_vectors(snap, last: int, expected: dict[int, set[str]]) -> None:
    """Vectors: live items found exactly, deleted ones never returned, by the exact scan and
    through the ANN graphs alike (every large segment has one after `build_graphs`)."""
    from recallql.index import graphs

    assert all(seg.graph is not None for seg in snap.state.segments
               if graphs.wants_graph(len(seg.vecs)))
    for k in range(max(1, last - 3), last + 1):
        for item in fresh(SEED, k):
            for method in ("exact", "ann"):
                got, cos, _ = snap.semantic_search(item["vector"], 1, method=method)
                if item["id"] in expected[k]:
                    assert snap.ids[got[0]] == item["id"] and cos[0] == pytest.approx(1.0)
                else:
                    assert snap.ids[got[0]] != item["id"]


@pytest.mark.slow
def test_sigkill_at_random_moments(tmp_path):
    path = tmp_path / "db"
    rng = random.Random(SEED)
    start, trials = 1, 20
    for _ in range(trials):
        proc = _spawn(path, start)
        time.sleep(rng.uniform(0.0, 0.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        start = _check(path, start)
    assert start > trials  # batches were written in between


@pytest.mark.slow
@pytest.mark.parametrize("point", ["segment-written", "text-committed", "sqlite-committed",
                                   "merge-written", "merge-committed", "graph-saved",
                                   "graph-published", "delete-text-committed",
                                   "delete-sqlite-committed"])
def test_sigkill_at_protocol_points(tmp_path, point):
    path = tmp_path / "db"
    start = 1
    for after in (1, 3):
        proc = _spawn(path, start, point, after)
        assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read()
        start = _check(path, start)


def _waiter(path: str, count: int) -> None:
    """Append `count` messages to its own session, one extend each, waiting for the lock as
    long as it takes (up to 60 s a write); prints how many it wrote."""
    import recallql
    from recallql.index.embedders import HashEmbedder

    db = recallql.connect(path, embedder=HashEmbedder(16), lock_timeout=60)
    session = f"waiter-{os.getpid()}"
    db.sessions.create(session, "crash-test", started_at=0.0)
    print("ready", flush=True)
    for i in range(count):
        db.messages.extend([{"session_id": session, "role": "tool", "content": f"wait {i}"}])
    print(count, flush=True)


@pytest.mark.slow
def test_sigkill_while_another_process_waits_for_the_lock(tmp_path):
    """Writers are killed at random moments while a second process keeps writing: every one of
    its writes waits for the lock (held by the killed writer until the kernel releases it),
    recovers the collection the killed writer left half-written, and succeeds."""
    path = tmp_path / "db"
    start = _check(path, 1)  # the database and the crash session exist
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    waiter = subprocess.Popen([sys.executable, str(HERE), "waiter", str(path), "300"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert waiter.stdout.readline() == "ready\n", waiter.stderr.read()
    rng = random.Random(SEED + 1)
    for _ in range(10):
        proc = _spawn(path, start)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        start = _check(path, start)
    out, err = waiter.communicate(timeout=600)
    assert waiter.returncode == 0 and out.strip() == "300", err
    import recallql
    from recallql.index.embedders import HashEmbedder

    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        _check_messages(db, start - 1, waiter=300)
        assert db.check().ok


if __name__ == "__main__" and sys.argv[1] == "waiter":
    _waiter(sys.argv[2], int(sys.argv[3]))
elif __name__ == "__main__":
    db_path, first, seed_arg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    crash_point = sys.argv[4] if len(sys.argv) > 4 else None
    crash_after = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    _writer(db_path, first, seed_arg, crash_point, crash_after)
