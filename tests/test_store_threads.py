"""Every public call is safe from any number of threads on one `Database` (SPEC §7, issue 13).

Found by trials: 8 threads appending messages kept 54 of 80 (the next id and seq were read
outside the writer's lock, so two appends got the same id and one replaced the other); threads
calling `db.execute` raised raw `sqlite3.OperationalError` ("cannot start a transaction within a
transaction") because every thread shared one read connection.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

import recallql
from recallql.index.embedders import HashEmbedder


def run_threads(n: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run `work(i)` on `n` threads started together; the exceptions they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def body(i: int) -> None:
        start.wait()
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return errors


def check_messages(db: recallql.Database, sessions: int, per_session: int) -> None:
    """Every append is stored once, ids distinct, seqs 1..n in each session."""
    snap = db.snapshot("messages")
    rows = snap.fetch(np.flatnonzero(snap.live))
    assert len(rows) == sessions * per_session
    assert len({r["message_id"] for r in rows}) == len(rows)
    by_session: dict[str, list[int]] = {}
    for r in rows:
        by_session.setdefault(r["session_id"], []).append(r["seq"])
    assert len(by_session) == sessions
    for seqs in by_session.values():
        assert sorted(seqs) == list(range(1, per_session + 1))


@pytest.mark.parametrize("on_disk", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["memory", "disk"])
def test_8_threads_x_200_appends_keep_1600_distinct_messages(tmp_path, on_disk):
    db = recallql.connect(tmp_path / "db" if on_disk else None, embedder=HashEmbedder(16))
    for i in range(4):
        db.sessions.create(f"s{i}", "agent")
    returned: list[int] = []

    def work(i: int) -> None:
        for k in range(200):
            returned.append(db.messages.append(f"s{i % 4}", "user", f"thread {i} message {k}"))

    assert run_threads(8, work) == []
    assert len(returned) == len(set(returned)) == 1600
    check_messages(db, 4, 400)
    db.close()


def test_threads_extending_and_appending_to_one_session_interleave_whole_batches():
    db = recallql.connect(embedder=HashEmbedder(16))
    db.sessions.create("s", "agent")

    def work(i: int) -> None:
        for k in range(20):
            if i % 2:
                db.messages.extend([{"session_id": "s", "role": "user", "content": f"{i}.{k}.{j}"}
                                    for j in range(5)])
            else:
                db.messages.append("s", "user", f"{i}.{k}")

    assert run_threads(6, work) == []
    check_messages(db, 1, 3 * 20 * 5 + 3 * 20)
    snap = db.snapshot("messages")
    rows = sorted(snap.fetch(np.flatnonzero(snap.live)), key=lambda r: r["seq"])
    # an extend's five messages got consecutive seqs
    runs = Counter(r["content"].rsplit(".", 1)[0] for r in rows if r["content"].count(".") == 2)
    assert set(runs.values()) == {5}
    for prefix in runs:
        seqs = [r["seq"] for r in rows if r["content"].startswith(prefix + ".")]
        assert seqs == list(range(seqs[0], seqs[0] + 5))
    db.close()


def _reads(db: recallql.Database) -> list[Callable[[], object]]:
    v = HashEmbedder(16)(["token"])[0]
    return [
        lambda: db.execute("SEARCH docs MATCHING 'token alpha' LIMIT 5"),
        lambda: db.execute("SEARCH docs NEAR :v LIMIT 3", v=v),
        lambda: db.execute("RETRIEVE 5 FROM docs FOR SESSION 's0'"),
        lambda: db.execute("SEARCH messages MATCHING 'message' FOR SESSION 's1' "
                           "GROUP BY CONVERSATION LIMIT 3"),
        lambda: db.execute("SHOW SESSIONS"),
        lambda: db.execute("SHOW SESSION 's0'"),
        lambda: db.execute("SHOW LINEAGE 's1'"),
        lambda: db.execute("DESCRIBE docs"),
        lambda: db.explain("SEARCH docs MATCHING 'token' LIMIT 2", analyze=True),
        lambda: db.sessions.snapshot("s0"),
        lambda: db.sessions.list(),
        lambda: db.snapshot("docs").fetch([0, 1]),
        lambda: db.collections(),
    ]


@pytest.mark.slow
def test_32_threads_x_800_mixed_reads_raise_nothing(tmp_path):
    """On a writer handle and a read-only handle, while a writer thread keeps appending."""
    path = tmp_path / "db"
    db = recallql.connect(path, embedder=HashEmbedder(16))
    db.ingest("docs", [{"id": f"d{i}", "title": f"token alpha {i}", "body": "text"}
                       for i in range(50)])
    for i in range(3):
        db.sessions.create(f"s{i}", "agent")
        db.messages.append(f"s{i}", "user", "first message")
    reader = recallql.connect(path, embedder=HashEmbedder(16), readonly=True)
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        while not stop.is_set():
            written.append(db.messages.append("s1", "assistant", "another message"))

    background = threading.Thread(target=writer)
    background.start()
    handles = (_reads(db), _reads(reader))

    def work(i: int) -> None:
        reads = handles[i % 2]
        for k in range(800):
            reads[(i + k) % len(reads)]()

    try:
        errors = run_threads(32, work)
    finally:
        stop.set()
        background.join(timeout=600)
    assert errors == [], f"{len(errors)} errors, first: {errors[0]!r}"
    assert written and len(set(written)) == len(written)
    reader.close()
    db.close()


class _HookedClock:
    """A clock that advances one second a call and tells when the close reads it."""

    def __init__(self) -> None:
        self.now = 1_760_000_000.0
        self.closing = threading.Event()
        self.watch_close = False

    def __call__(self) -> float:
        self.now += 1.0
        if self.watch_close and threading.current_thread().name == "closer":
            self.closing.set()
        return self.now


def test_close_takes_its_time_when_it_writes_not_before_waiting_for_the_writer():
    """A close waiting for the writer while another thread's write records a signal (or
    appends a message) must end the session after that write: found by trials, close read
    "now" before waiting, so it failed with "its last signal or annotation is at ..." (and a
    message appended meanwhile was dated after the session's end)."""
    clock = _HookedClock()
    db = recallql.connect(embedder=HashEmbedder(16), clock=clock)
    db.sessions.create("s", "agent")
    errors: list[BaseException] = []

    def close() -> None:
        try:
            db.sessions.close("s")
        except BaseException as exc:  # noqa: BLE001 - asserted on below
            errors.append(exc)

    closer = threading.Thread(target=close, name="closer")
    with db.store.writing():  # another thread's write holds the writer
        clock.watch_close = True
        closer.start()
        clock.closing.wait(timeout=1.0)  # the close read the clock (before the fix: waiting)
        db.sessions.signal("s", "reward", 1.0)
        message = db.messages.append("s", "user", "written while the close waits")
    closer.join(timeout=60)
    assert errors == []
    ended = db.sessions.get("s").ended_at
    snap = db.snapshot("messages")
    (row,) = snap.fetch(np.flatnonzero(snap.live))
    assert row["message_id"] == message and row["created_at"] <= ended
    db.close()


def test_two_databases_of_one_directory_in_one_process_take_turns_writing(tmp_path):
    """Two `connect` calls on one path in one process are two writers: the lock must keep
    them apart as it keeps two processes apart (``flock`` is held per open file, so a second
    handle of the same process waits; a per-process ``lockf`` would let both write at once).
    Each appends to one shared session and ingests into one shared collection from its own
    threads: every id is given once, every seq of the session once, and both see all rows on
    both legs."""
    first = recallql.connect(tmp_path / "db", embedder=None)
    first.create_collection("notes", text_fields=("body",), dim=3, embedder=None)
    first.sessions.create("shared", "agent")
    second = recallql.connect(tmp_path / "db", embedder=None, lock_timeout=60)
    dbs = [first, second]
    returned: list[int] = []

    def work(i: int) -> None:
        db = dbs[i % 2]
        for k in range(25):
            returned.append(db.messages.append("shared", "user", f"thread {i} message {k}"))
            db.ingest("notes", [{"id": f"n{i}-{k}", "body": f"common t{i} k{k}",
                                 "vector": [1.0, i + 1.0, k + 1.0]}])

    assert run_threads(4, work) == []
    assert len(returned) == len(set(returned)) == 100
    for db in dbs:
        check_messages(db, 1, 100)
        lexical = db.execute("SEARCH notes MATCHING 'common' USING LEXICAL LIMIT 500")
        semantic = db.execute("SEARCH notes NEAR :v LIMIT 500", v=[1.0, 1.0, 1.0])
        assert sorted(r.id for r in lexical) == sorted(r.id for r in semantic) \
            == sorted(f"n{i}-{k}" for i in range(4) for k in range(25))
    assert first.check().ok
    second.close()
    first.close()
