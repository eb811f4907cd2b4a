"""Lineage resolution of a 10,000-deep compression chain (SPEC §9 target: ≤ 50 ms).

Two fetch backends, same resolver:

- ``dict``: a dict lookup building no objects (rows prebuilt);
- ``sqlite``: a ``sessions`` table in a temporary file, one ``SELECT ... WHERE id = ?`` per fetch
  (sqlite3's statement cache keeps the statement prepared), a ``SessionRow`` built per row; each
  SELECT in autocommit mode is its own read transaction (lock + header check per fetch);
- ``sqlite-txn``: the same, with the whole resolution inside one read transaction
  (``BEGIN`` … ``ROLLBACK``), as the engine should run a statement's fetches.

``engine`` is recallql's own walk (``db.sessions.fetcher``: recursive read-ahead up chains),
which statements use only where no root is stored (a pre-roots database opened read-only, or
``AS OF`` before a session's end); ``stored`` is what a statement reads: the root that writes
keep (below), through ``db.sessions.resolver``.

Each figure is the median of several fresh resolvers (a fresh resolver = an empty memo and row
cache, as for a new statement). Also reports a warm re-resolve (memo hit) and a full
``chain()`` walk.

Write-time roots (issue 14; statements read them instead of walking): on a recallql database on
disk holding the chain, the cost of keeping roots — per session create (``db.sessions.create``
continuing the chain, end to end, and the `roots.refresh` share of it) and per chain update
(the top session's end reason toggled, so all ``depth`` roots below it change in one batch;
target ≤ 100 ms). Run: ``python benchmarks/bench_lineage.py [depth]``.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from recallql.sessions.lineage import LineageResolver, SessionRow

REPEATS = 7
_COLUMNS = ("id, parent_session_id, source, end_reason, branched_from, delegate_from, status,"
            " started_at, ended_at")


def chain_rows(depth: int) -> list[SessionRow]:
    """``s0 ← s1 ← … ← s{depth}``: every session but the tip ended by compression."""
    rows = []
    for i in range(depth + 1):
        tip = i == depth
        rows.append(SessionRow(
            id=f"s{i}", parent_session_id=None if i == 0 else f"s{i - 1}",
            end_reason=None if tip else "compression", status="open" if tip else "closed",
            started_at=1_760_000_000.0 + i, ended_at=None if tip else 1_760_000_001.0 + i,
        ))
    return rows


def sqlite_fetch(path: Path, rows: list[SessionRow]) -> tuple[Callable, sqlite3.Connection]:
    """A SQLite-backed ``fetch`` over a fresh table holding ``rows``."""
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, source TEXT,"
        " end_reason TEXT, branched_from TEXT, delegate_from TEXT, status TEXT,"
        " started_at REAL, ended_at REAL)"
    )
    conn.executemany(f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     [(r.id, r.parent_session_id, r.source, r.end_reason, r.branched_from,
                       r.delegate_from, r.status, r.started_at, r.ended_at) for r in rows])
    conn.commit()
    sql = f"SELECT {_COLUMNS} FROM sessions WHERE id = ?"

    def fetch(session_id: str) -> SessionRow | None:
        found = conn.execute(sql, (session_id,)).fetchone()
        return None if found is None else SessionRow(*found)

    return fetch, conn


def timed(fn: Callable[[], object]) -> float:
    """Median wall time of ``fn`` in milliseconds."""
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples)


def bench(name: str, fetch: Callable, depth: int, conn: sqlite3.Connection | None = None) -> None:
    """Print cold/warm resolve and chain() times; ``conn``: run each inside one transaction."""
    tip = f"s{depth}"
    budget = depth + 1

    def in_txn(fn: Callable[[], object]) -> Callable[[], object]:
        if conn is None:
            return fn

        def wrapped() -> object:
            conn.execute("BEGIN")
            try:
                return fn()
            finally:
                conn.rollback()

        return wrapped

    def cold() -> None:
        res = LineageResolver(fetch, budget=budget).resolve(tip)
        assert res.root == "s0" and res.depth == depth, res

    warm_resolver = LineageResolver(fetch, budget=budget)
    warm_resolver.resolve(tip)
    cold_ms = timed(in_txn(cold))
    warm_ms = timed(lambda: warm_resolver.resolve(tip)) * 1000.0
    chain_ms = timed(in_txn(lambda: LineageResolver(fetch).chain(tip, max_steps=depth + 1)))
    print(f"{name:10s} depth={depth}  resolve cold={cold_ms:8.2f} ms  "
          f"({cold_ms * 1000.0 / (depth + 1):5.2f} µs/session)  warm={warm_ms:6.2f} µs  "
          f"chain()={chain_ms:8.2f} ms")


def bench_engine(path: Path, rows: list[SessionRow], depth: int) -> None:
    """The engine's own path: a recallql database on disk, one read transaction per statement,
    `db.sessions.fetcher` (one query per shallow lookup, recursive read-ahead up chains)."""
    import recallql
    from recallql.index.embedders import HashEmbedder

    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        with db.store.transaction() as conn:
            conn.executemany(
                "INSERT INTO sessions (id, agent_id, status, parent_session_id, source, "
                "end_reason, started_at, ended_at) VALUES (?, 'bench', ?, ?, ?, ?, ?, ?)",
                [(r.id, r.status, r.parent_session_id, r.source, r.end_reason, r.started_at,
                  r.ended_at) for r in rows])

        def cold() -> None:
            with db.read_transaction() as conn:
                res = LineageResolver(db.sessions.fetcher(conn), budget=depth + 1).resolve(
                    f"s{depth}")
            assert res.root == "s0" and res.depth == depth, res

        cold_ms = timed(cold)
        print(f"{'engine':10s} depth={depth}  resolve cold={cold_ms:8.2f} ms  "
              f"({cold_ms * 1000.0 / (depth + 1):5.2f} µs/session)  (recallql database, "
              "db.sessions.fetcher, one read transaction: the query-time walk, used only where "
              "no root is stored)")

        # What a statement runs: the roots that writes keep (`roots.refresh`), read through
        # `db.sessions.resolver` in the statement's read transaction; no walk.
        from recallql.sessions import roots
        from recallql.sessions.stored import StoredRoots

        with db.store.transaction() as conn:
            roots.refresh(conn, ["s0"])

        def stored() -> None:
            with db.read_transaction() as conn:
                resolver = db.sessions.resolver(conn, budget=depth + 1)
                assert isinstance(resolver, StoredRoots), resolver
                res = resolver.resolve(f"s{depth}")
            assert res.root == "s0" and res.depth == depth, res

        stored_ms = timed(stored)
        print(f"{'stored':10s} depth={depth}  resolve cold={stored_ms:8.3f} ms  (recallql "
              "database, db.sessions.resolver: the stored root a statement reads, one read "
              "transaction)")


def bench_roots(path: Path, depth: int) -> None:
    """Root maintenance on a recallql database on disk (WAL, synchronous=FULL)."""
    import recallql
    from recallql.index.embedders import HashEmbedder
    from recallql.sessions import roots

    with recallql.connect(path, embedder=HashEmbedder(16)) as db:
        with db.store.transaction() as conn:
            conn.execute("INSERT INTO sessions (id, agent_id, status, end_reason, started_at) "
                         "VALUES ('top', 'bench', 'closed', 'compression', 0)")
            conn.executemany(
                "INSERT INTO sessions (id, agent_id, status, parent_session_id, end_reason, "
                "started_at) VALUES (?, 'bench', 'closed', ?, 'compression', ?)",
                [(f"s{i}", "top" if i == 0 else f"s{i - 1}", i) for i in range(depth)])
            roots.refresh(conn, ["top"])
        create_ms = _creates(db, depth)
        refresh_us = _refresh_one(db, roots, f"s{depth + REPEATS - 1}") * 1000.0
        update_ms, refresh_ms = _updates(db, roots, depth)
        assert db.sessions.verify_lineage().ok
    print(f"{'roots':10s} create (continuing a {depth}-deep chain) {create_ms * 1000:7.0f} µs "
          f"end to end, of which roots.refresh {refresh_us:5.0f} µs")
    print(f"{'roots':10s} root update depth={depth}  {update_ms:8.2f} ms for {depth:,} roots in "
          f"one batch, committed (target ≤ 100 ms); roots.refresh alone {refresh_ms:.2f} ms; "
          f"the query-time walk of the same chain (dict, above) is what it replaces")


def _updates(db, roots, depth: int) -> tuple[float, float]:
    """Median ms of a chain update (the top's end reason toggled; every root below changes):
    the whole committed transaction, and the `roots.refresh` call in it."""
    whole, inner = [], []
    for k in range(REPEATS):
        start = time.perf_counter()
        with db.store.transaction() as conn:
            conn.execute("UPDATE sessions SET end_reason = ? WHERE id = 'top'",
                         ("new_session" if k % 2 == 0 else "compression",))
            begin = time.perf_counter()
            changed = roots.refresh(conn, ["top"]).changed
            inner.append((time.perf_counter() - begin) * 1000.0)
        whole.append((time.perf_counter() - start) * 1000.0)
        assert changed >= depth, changed
    return statistics.median(whole), statistics.median(inner)


def _creates(db, depth: int) -> float:
    """Median ms of `db.sessions.create` of a session continuing the chain (its parent, the
    previous tip, is closed by compression first, outside the timing)."""
    samples = []
    for k in range(REPEATS):
        parent, sid = f"s{depth + k - 1}", f"s{depth + k}"
        if k:
            db.sessions.close(parent, "compression", at=depth + k)
        start = time.perf_counter()
        db.sessions.create(sid, "bench", parent=parent, started_at=depth + k)
        samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples)


def _refresh_one(db, roots, sid: str) -> float:
    """Median ms of the `roots.refresh` call alone (no commit) for one session with no
    children whose parent's root is stored."""
    samples = []
    for _ in range(REPEATS):
        with db.store.transaction() as conn:
            conn.execute("UPDATE sessions SET lineage_status = NULL WHERE id = ?", (sid,))
            start = time.perf_counter()
            roots.refresh(conn, [sid])
            samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples)


def main(depth: int = 10_000) -> None:
    rows = chain_rows(depth)
    by_id = {r.id: r for r in rows}
    print(f"lineage: {depth}-deep compression chain, median of {REPEATS} fresh resolvers "
          f"(target: dict resolve ≤ 50 ms)")
    bench("dict", by_id.get, depth)
    with tempfile.TemporaryDirectory(prefix="recallql-bench-") as tmp:
        fetch, conn = sqlite_fetch(Path(tmp) / "sessions.db", rows)
        try:
            bench("sqlite", fetch, depth)
            bench("sqlite-txn", fetch, depth, conn)
        finally:
            conn.close()
        bench_engine(Path(tmp) / "db", rows, depth)
        bench_roots(Path(tmp) / "roots-db", depth)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
