"""Session-context overhead over 1k candidates (SPEC §9 target: ≤ 1 ms). Prints figures; asserts
nothing.

    python -m benchmarks.bench_sessions [--repeats 300] [--window 1000]

Data: the CACM collection (3,204 real abstracts; `source` str, `authors` and `tags` list[str]
metadata; entity = first author), embedded with the deterministic 64-d hash embedder. One session
with 6 annotation keywords and 40 reward signals on entities.

Measured, per statement, median of `--repeats` interleaved runs:

- ``search``: ``SEARCH ... USING SEMANTIC FUSE RRF (window = 1000)`` (exactly 1,000 candidates)
  with and without ``FOR SESSION``, in wall time and in this process's CPU time;
- ``retrieve``: ``RETRIEVE 10 FROM cacm WHERE source = 'cacm'`` (every row, 3,204 candidates)
  with and without ``FOR SESSION``;
- the `SessionBoost` operator alone (EXPLAIN ANALYZE's operator time) and the session-state read
  (`Sessions.state`: SQLite reads + snapshot model).

The overhead is ``median(with) − median(without)``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA_CANDIDATES = (REPO / ".." / "shared" / "data", REPO / ".." / ".." / "shared" / "data")
AS_OF = "2024-01-01T00:00:00Z"
NOW_TS = 1_704_067_200.0  # AS_OF in epoch seconds UTC
KEYWORDS = "parsing Compiler algorithm syntax sorting matrix"


def cacm_items() -> list[dict]:
    """The CACM documents as items: entity = first author (several documents share one)."""
    from recallql.datasets import corpora

    root = next((p / "ir" / "cacm" for p in DATA_CANDIDATES if (p / "ir" / "cacm").is_dir()),
                None)
    if root is None:
        sys.exit("CACM not found beside the repository (../shared/data/ir/cacm)")
    items = []
    for doc in corpora.load_cacm(root):
        item = {k: doc[k] for k in ("id", "title", "body", "source", "authors", "tags",
                                    "created_at") if k in doc}
        if doc["authors"]:
            item["entity"] = "author:" + doc["authors"][0]
        items.append(item)
    return items


def build(items: list[dict]):
    """An in-memory database holding CACM and one signalled, annotated session."""
    import recallql
    from recallql.index.embedders import HashEmbedder

    db = recallql.connect(embedder=None, clock=lambda: NOW_TS)
    db.create_collection("cacm", ("title", "body"),
                         {"source": str, "authors": list[str], "tags": list[str]},
                         embedder=HashEmbedder(64))
    db.ingest("cacm", items)
    db.sessions.create("bench", "agent-bench", started_at=NOW_TS - 5 * 86400)
    db.sessions.annotate("bench", KEYWORDS, at=NOW_TS - 4 * 86400)
    entities = sorted({i["entity"] for i in items if "entity" in i})[:40]
    for n, entity in enumerate(entities):
        db.sessions.signal("bench", "reward", 1.0 if n % 3 else -0.5, entity=entity,
                           at=NOW_TS - n * 3600)
    return db


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """The median wall time of `fn` in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e6


def interleaved(with_fn: Callable[[], object], without_fn: Callable[[], object],
                repeats: int, clock: Callable[[], int] = time.perf_counter_ns
                ) -> tuple[float, float]:
    """Medians (ms) of two statements run alternately (so drift hits both equally), timed
    with `clock` (wall time by default; `time.process_time_ns` for this process's CPU time,
    which other processes on a shared machine disturb less)."""
    a, b = [], []
    for _ in range(repeats):
        for fn, out in ((with_fn, a), (without_fn, b)):
            start = clock()
            fn()
            out.append(clock() - start)
    return statistics.median(a) / 1e6, statistics.median(b) / 1e6


def operator_ms(db, text: str, name: str, repeats: int, **params) -> float:
    """Median time (ms) of the operator `name` as EXPLAIN ANALYZE reports it."""
    def find(node):
        if node.operator == name:
            return node
        return next((f for c in node.children if (f := find(c)) is not None), None)

    times = [find(db.explain(text, analyze=True, **params).plan).time_ms for _ in range(repeats)]
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--window", type=int, default=1000)
    args = parser.parse_args(argv)
    db = build(cacm_items())
    query = {"q": "parsing algorithms for context free grammars"}
    search = ("SEARCH cacm MATCHING :q USING SEMANTIC {session} WITHOUT RECENCY "
              f"FUSE RRF (window = {args.window}) AS OF TIMESTAMP '{AS_OF}' LIMIT 10")
    retrieve = ("RETRIEVE 10 FROM cacm WHERE source = 'cacm' {session} "
                f"AS OF TIMESTAMP '{AS_OF}'")
    with_s = "FOR SESSION 'bench'"
    cands = db.explain(search.format(session=with_s), analyze=True, **query)
    print(f"CACM: {db.snapshot('cacm').size} items; SEARCH candidates = "
          f"{cands.plan.children[0].rows_in}; repeats = {args.repeats}")
    for label, text, params in (("search", search, query), ("retrieve", retrieve, {})):
        with_fn = lambda t=text, p=params: db.execute(t.format(session=with_s), **p)  # noqa: E731
        without_fn = lambda t=text, p=params: db.execute(t.format(session=""), **p)  # noqa: E731
        for clock_name, clock in (("wall", time.perf_counter_ns), ("cpu", time.process_time_ns)):
            on, off = interleaved(with_fn, without_fn, args.repeats, clock)
            print(f"{label:9s} {clock_name:4s} with_session {on:8.3f} ms  without_session "
                  f"{off:8.3f} ms  overhead {on - off:+7.3f} ms")
        op = operator_ms(db, text.format(session=with_s), "SessionBoost", args.repeats // 3 or 1,
                         **params)
        print(f"{label:9s} SessionBoost operator alone (EXPLAIN ANALYZE): {op:.3f} ms")
    state = median_ms(lambda: db.sessions.state("bench", NOW_TS), args.repeats)
    print(f"session state read (Sessions.state): {state:.3f} ms")
    print("target: overhead <= 1 ms over 1k candidates (SPEC §9)")


if __name__ == "__main__":
    main()
