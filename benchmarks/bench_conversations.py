"""Per-statement overhead of GROUP BY CONVERSATION and the live-context filter (SPEC §6, §9).

    python -m benchmarks.bench_conversations [--messages 20000] [--deep 10000] [--repeats 40]

Corpus: real text (CACM, Cranfield from the shared data folder; Debian changelog entries from
/usr/share/doc) shaped as agent messages: `--messages` messages (one per text, repeated with
distinct ids if needed) spread over sessions that form conversations of every shape: compression
chains of depth 0–7 (some with a second, still open continuation), branches, delegated subagents,
tool children and fresh resets, plus one `--deep`-deep compression chain that holds every tenth
message (issue 14: under the query-time walk its hits ran out of the lineage budget; statements
now read stored roots). The chain is built with `db.sessions.create` / `close`, so its build time
is the root maintenance cost per session write (printed). Vectors come from the 384-d hash
embedder (the semantic leg's cost is real; its relevance does not matter here).

Each statement is timed `--repeats` times (p50 and p90, after a warm-up), with and without
grouping, on the same text with `FUSE RRF (k = 60, window = 1000)`, so both legs return 1000
candidates (about 1,500 after fusion), at several LIMITs: a small LIMIT stops the walk early, a
large one walks most candidates. Every statement builds a fresh lineage resolver, so each timing
includes resolving its hits' sessions from SQLite. Two figures per case: end-to-end p50 of the
statement with and without grouping (run alternately; the target's ratio is of the two p50s, and
the median of the ratios of adjacent runs is printed beside it, less sensitive to the machine's
changing load), and the p50 of the conversation
operators' own time from EXPLAIN ANALYZE (the same
execution; GroupByConversation, or LiveContextFilter in the ungrouped FOR SESSION plan), which is
the overhead proper. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import recallql
from benchmarks.bench_ingest import real_texts
from recallql.index.embedders import HashEmbedder
from recallql.sessions.messages import message_item

T0 = 1_700_000_000.0
QUERY = "algorithm program data system"
BASE = ("SEARCH messages MATCHING :q {session}FUSE RRF (k = 60, window = 1000) {group}"
        "AS OF TIMESTAMP '2024-01-01T00:00:00Z' LIMIT {limit}")


def build(messages: int, deep: int) -> tuple[recallql.Database, str]:
    """An in-memory database holding the corpus; returns it and a current session id."""
    db = recallql.connect(embedder=HashEmbedder(384), clock=lambda: T0 + 10 * 86_400)
    texts = [(d.get("title", "") + "\n" + d.get("body", "")).strip() for d in real_texts()]
    sessions = make_sessions(db, max(messages // 20, 10))
    chain = deep_chain(db, deep) if deep else []
    items = []
    for i, (sid, content) in enumerate(zip(itertools.cycle(sessions), itertools.cycle(texts),
                                           strict=False)):
        if i == messages:
            break
        if chain and i % 10 == 0:
            sid = chain[(i * 7919) % len(chain)]
        seq = i // len(sessions) + 1
        items.append(message_item(sid, i + 1, seq, "user" if i % 2 else "assistant", content,
                                  T0 + i, True, i % 11 == 0))
    # Written through the store, as an import of another store is: the synthetic corpus puts
    # messages into sessions already closed (and, in the deep chain, before a session's start
    # and at a seq another message of it holds), which `db.ingest("messages")` refuses as
    # `db.messages.extend` does. The statements timed read the same rows either way.
    for start in range(0, len(items), 10_000):
        db.store.ingest("messages", items[start:start + 10_000], db.embedder("messages"))
    current = next(s for s in sessions if s.endswith("-tip"))
    return db, current


def deep_chain(db: recallql.Database, depth: int) -> list[str]:
    """`deep0 ← … ← deep{depth}` by compression, written session by session; prints the root
    maintenance cost per write (every create and close stores roots)."""
    started = time.perf_counter()
    ids = []
    for i in range(depth + 1):
        sid = f"deep{i}"
        db.sessions.create(sid, "bench", parent=ids[-1] if ids else None, started_at=T0 + i)
        if i < depth:
            db.sessions.close(sid, end_reason="compression", at=T0 + i + 1)
        ids.append(sid)
    spent = (time.perf_counter() - started) * 1e6 / (2 * depth + 1)
    print(f"deep chain: {depth:,} links written with create + close, {spent:.0f} µs per "
          "session write (both store roots)")
    return ids


def make_sessions(db: recallql.Database, count: int) -> list[str]:
    """`count` sessions in conversations of every shape; returns their ids."""
    ids: list[str] = []
    for c in itertools.count():
        if len(ids) >= count:
            return ids
        shape = c % 6
        depth = c % 8 if shape < 3 else 0
        parent = None
        for d in range(depth + 1):
            sid = f"c{c}-{d}" if d < depth else f"c{c}-tip"
            db.sessions.create(sid, "bench", parent=parent, started_at=T0 + c)
            if d < depth:
                db.sessions.close(sid, end_reason="compression", at=T0 + c + 1)
            ids.append(sid)
            parent = sid
        ids += child_shapes(db, c, shape, parent)


def child_shapes(db: recallql.Database, c: int, shape: int, parent: str) -> list[str]:
    """A second continuation, branch, subagent, tool child or reset under `parent`."""
    sid = f"c{c}-x"
    if shape == 1:
        db.sessions.create(sid, "bench", parent=parent, started_at=T0 + c)
    elif shape == 3:
        db.sessions.create(sid, "bench", parent=parent, branched_from=parent, started_at=T0 + c)
    elif shape == 4:
        db.sessions.create(sid, "bench", parent=parent, source="subagent",
                           delegate_from=parent, started_at=T0 + c)
    elif shape == 5:
        db.sessions.create(sid, "bench", parent=parent, source="tool", started_at=T0 + c)
    else:
        return []
    return [sid]


def compare(db: recallql.Database, plain: str, grouped: str, repeats: int, **params
            ) -> tuple[list[float], list[float], dict]:
    """Run the two statements alternately `repeats` times each (after a warm-up), so load from
    other processes hits both alike; returns both timings in ms and the grouped run's stats."""
    result = db.execute(grouped, **params)
    db.execute(plain, **params)
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for which, text in enumerate((plain, grouped)):
            started = time.perf_counter()
            result = db.execute(text, **params)
            times[which].append((time.perf_counter() - started) * 1000)
    return times[0], times[1], {**result.stats, "truncated": result.truncated}


def operator_ms(db: recallql.Database, text: str, repeats: int, **params) -> float:
    """p50 of the conversation operator's own time (ms) over `repeats` EXPLAIN ANALYZE runs; 0
    when the plan has none."""
    times = []
    for _ in range(repeats):
        node = db.explain(text, analyze=True, **params).plan
        while node.operator not in ("GroupByConversation", "LiveContextFilter"):
            if not node.children:
                return 0.0
            node = node.children[0]
        times.append(node.time_ms or 0.0)
    return p50(times)


def p50(values: list[float]) -> float:
    return statistics.median(values)


def statement(limit: int, group: bool, session: bool, budget: int | None = None) -> str:
    grouping = ""
    if group:
        grouping = "GROUP BY CONVERSATION " + (f"(budget = {budget}) " if budget else "")
    return BASE.format(session="FOR SESSION :cur " if session else "", group=grouping,
                       limit=limit)


def report(db: recallql.Database, current: str, repeats: int, limits: list[int]) -> None:
    for session in (False, True):
        params = {"q": QUERY, "cur": current} if session else {"q": QUERY}
        for limit in limits:
            texts = statement(limit, False, session), statement(limit, True, session)
            plain, grouped, stats = compare(db, *texts, repeats, **params)
            ops = [operator_ms(db, t, repeats, **params) for t in texts]
            conv, lineage = stats["conversation"], stats["conversation"]["lineage"]
            label = f"FOR SESSION, LIMIT {limit}" if session else f"LIMIT {limit}"
            ratio = p50(grouped) / p50(plain)  # the target's figure: the ratio of the p50s
            paired = p50([g / p for g, p in zip(grouped, plain, strict=True)])
            print(f"{label:>21}: e2e p50 plain {p50(plain):6.2f} ms, grouped {p50(grouped):6.2f}"
                  f" ms ({ratio:.2f}x of p50s, target <= 1.1x; paired runs {paired:.2f}x), "
                  f"truncated {stats.get('truncated')} | "
                  f"operator p50 {ops[1]:5.2f} ms (ungrouped live filter {ops[0]:5.2f} ms)"
                  f" | walked {conv['scanned']}/{conv['candidates']}, sessions "
                  f"{conv['sessions']}, conversations {conv['kept']}, fetches "
                  f"{lineage['fetches']} (+{lineage['chain_fetches']} current), stored roots "
                  f"{lineage['stored']}, memo hits {lineage['memo_hits']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--deep", type=int, default=10_000,
                        help="depth of the deep compression chain (0: none)")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--limits", default="10,100,400",
                        help="LIMITs to time (comma-separated); a LIMIT above the number of "
                             "conversations among the candidates re-plans with deeper windows")
    args = parser.parse_args()
    started = time.perf_counter()
    db, current = build(args.messages, args.deep)
    size = int(db.snapshot("messages").live.sum())
    sessions = sum(1 for _ in db.sessions.rows())
    print(f"corpus: {size:,} messages in {sessions:,} sessions, built in "
          f"{time.perf_counter() - started:.1f} s; query {QUERY!r}, window 1000, current "
          f"session {current!r}")
    report(db, current, args.repeats, [int(x) for x in args.limits.split(",")])
    db.close()


if __name__ == "__main__":
    main()
