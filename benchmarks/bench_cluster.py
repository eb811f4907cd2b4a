"""The cluster's cost over one database (issue 16): added p50 per statement at 1, 2 and 4 shards
(scatter-gather over a shared collection, and tenant-routed), and throughput with concurrent
clients, with CPU (coordinator + shard processes), wall time and the load average; and where a
scatter-gather statement's wall time goes (until the first shard starts its legs, the shards,
after the last shard: `Shard.legs_span`).

Ray's servers listen on every interface, so this runs only inside a private network namespace:

    unshare -n sh -c 'ip link set lo up && exec "$@"' sh \
        .venv/bin/python -m benchmarks.bench_cluster

CACM (3,204 docs) with all-MiniLM-L6-v2 vectors from `benchmarks.vectors_cache`, statements
``SEARCH cacm MATCHING :q NEAR :v LIMIT 10`` (hybrid) and ``... USING LEXICAL LIMIT 10`` for the
64 CACM queries. "One database" is `recallql.connect` in the same process, measured in the same
run, interleaved with the cluster, query by query.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import recallql
from benchmarks.corpus import ir_root
from benchmarks.stats import percentile
from benchmarks.vectors_cache import embed_cached
from recallql import cluster
from recallql.cluster.runtime import UNSHARE, network_interfaces
from recallql.datasets import corpora

FIELDS = {"source": "str", "authors": "list[str]", "tags": "list[str]"}
STATEMENTS = {"hybrid": "SEARCH cacm MATCHING :q NEAR :v LIMIT 10",
              "lexical": "SEARCH cacm MATCHING :q USING LEXICAL LIMIT 10"}
TENANTS = 8


def corpus(root: Path) -> tuple[list[dict], list[tuple[str, np.ndarray]]]:
    docs = list(corpora.load_cacm(root))
    texts = ["\n".join(v for v in (d.get("title"), d.get("body")) if v) for d in docs]
    vectors = embed_cached(texts, "CACM docs")
    for doc, vec in zip(docs, vectors, strict=True):
        doc["vector"] = vec
    queries = list(corpora.load_cacm_queries(root).values())
    qvecs = embed_cached(queries, "CACM queries")
    return docs, list(zip(queries, qvecs, strict=True))


def single(path: Path, docs: list[dict], fields: dict[str, str] = FIELDS
           ) -> recallql.Database:
    db = recallql.connect(path, embedder=None)
    db.create_collection("cacm", text_fields=("title", "body"), fields=fields, dim=384,
                         embedder=None)
    db.ingest("cacm", docs)
    return db


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def latency(one, many, queries, rounds: int, route: dict
            ) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]]]:
    """p50 ms of each statement on `one` (a database) and `many` (the cluster), interleaved,
    after one untimed pass over the queries on each; and the cluster's CPU ms per statement
    in that sequential loop: (coordinator process, all shard processes)."""
    out, cpu = {}, {}
    for kind, text in STATEMENTS.items():
        a, b = [], []
        for q, v in queries:  # warm: query vectors, tantivy, the shards' term frequencies
            params = {"q": q, "v": v} if ":v" in text else {"q": q}
            one.execute(text, **params)
            many.execute(text, **params, **route)
        coord, shards0 = 0.0, shard_cpu(many)
        for _ in range(rounds):
            for q, v in queries:
                params = {"q": q, "v": v} if ":v" in text else {"q": q}
                a.append(timed(lambda t=text, p=params: one.execute(t, **p)))
                start = time.process_time()
                b.append(timed(lambda t=text, p=params: many.execute(t, **p, **route)))
                coord += time.process_time() - start
        n = rounds * len(queries)
        out[kind] = (percentile(a, 50), percentile(b, 50))
        cpu[kind] = (coord * 1000.0 / n, (shard_cpu(many) - shards0) * 1000.0 / n)
    return out, cpu


def ray_floor(c, calls: int) -> tuple[float, float]:
    """p50 ms and CPU ms of one no-op call on every shard (what Ray costs a round trip)."""
    times, cpu = [], cpu_now(c)
    for _ in range(calls):
        times.append(timed(lambda: c.scatter("pid", range(c.shards), [()] * c.shards)))
    return percentile(times, 50), (cpu_now(c) - cpu) * 1000.0 / calls


def phases(c, queries) -> tuple[float, float, float]:
    """Medians over one pass of hybrid statements, in ms: from `execute` until the first shard
    starts its legs, until the last shard ends them, and from then until the answer (the
    coordinator's serial part after the shards, the last reply's transit included). Shards'
    times are `time.perf_counter` in their own processes: one clock on a Linux machine."""
    before, during, after = [], [], []
    for q, v in queries:
        start = time.perf_counter()
        c.execute(STATEMENTS["hybrid"], q=q, v=v)
        end = time.perf_counter()
        spans = c.scatter("legs_span", range(c.shards), [()] * c.shards)
        first, last = min(a for a, _ in spans), max(b for _, b in spans)
        before.append(first - start)
        during.append(last - first)
        after.append(end - last)
    def ms(xs: list[float]) -> float:
        return percentile([x * 1000.0 for x in xs], 50)

    return ms(before), ms(during), ms(after)


def shard_cpu(c) -> float:
    """CPU seconds used so far by every shard process."""
    return float(sum(c.scatter("cpu_seconds", range(c.shards), [()] * c.shards)))


def cpu_now(c) -> float:
    return time.process_time() + shard_cpu(c)


def throughput(c, queries, clients: int, per_client: int, route: dict) -> tuple[float, float]:
    """(statements/s, CPU ms per statement) with `clients` threads issuing hybrid statements."""
    text = STATEMENTS["hybrid"]
    errors: list[BaseException] = []

    def client(k: int) -> None:
        try:
            for i in range(per_client):
                q, v = queries[(k * 7 + i) % len(queries)]
                c.execute(text, q=q, v=v, **route)
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            errors.append(exc)

    cpu, start = cpu_now(c), time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    n = clients * per_client
    return n / wall, (cpu_now(c) - cpu) * 1000.0 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="passes over the 64 queries")
    parser.add_argument("--clients", type=int, default=4, help="threads for throughput")
    parser.add_argument("--per-client", type=int, default=64, help="statements per thread")
    parser.add_argument("--shards", default="1,2,4", help="shard counts to run")
    args = parser.parse_args()
    if network_interfaces():
        sys.exit(f"run inside a private network namespace: {UNSHARE} "
                 f"{sys.executable} -m benchmarks.bench_cluster")
    ir = ir_root()
    if ir is None:
        sys.exit("the shared IR data (../shared/data/ir/cacm) is not beside the repository")
    load0, wall0 = os.getloadavg(), time.perf_counter()
    docs, queries = corpus(ir / "cacm")
    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    one = single(tmp / "single", docs)
    print(f"CACM {len(docs)} docs, {len(queries)} queries x {args.rounds} rounds; "
          f"{os.cpu_count()} cores shared with other work; load at start "
          f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    rows, floors, splits = [], [], []
    for n in [int(x) for x in args.shards.split(",")]:
        c = cluster.connect(shards=n, path=tmp / f"c{n}", embedder=None, num_cpus=2)
        c.create_collection("cacm", text_fields=("title", "body"), fields=FIELDS, dim=384,
                            embedder=None, shared=True)
        c.ingest("cacm", docs)
        p50, seq = latency(one, c, queries, args.rounds, {})
        rate, cpu = throughput(c, queries, args.clients, args.per_client, {})
        rows.append((f"scatter-gather, {n} shard{'s' if n > 1 else ''}", p50, rate, cpu, seq))
        floors.append((n, *ray_floor(c, args.rounds * len(queries))))
        splits.append((n, *phases(c, queries)))
        c.close()
        report(rows[-1:], header=len(rows) == 1)
    rows.append(tenant_rows(tmp, docs, queries, args))
    report(rows[-1:], header=False)
    base = rows[0][1]
    print(f"one database (same run):     hybrid p50 {base['hybrid'][0]:.2f} ms, lexical p50 "
          f"{base['lexical'][0]:.2f} ms")
    for n, wall, cpu in floors:
        print(f"Ray's floor, {n} shard{'s' if n > 1 else ''}: a no-op call on every shard "
              f"p50 {wall:.2f} ms, CPU {cpu:.2f} ms (coordinator + shards)")
    for n, before, during, after in splits:
        print(f"hybrid, {n} shard{'s' if n > 1 else ''}: {before:.2f} ms until the first shard "
              f"starts, {during:.2f} ms of shards, {after:.2f} ms after the last one ends "
              "(medians, one pass)")
    load1 = os.getloadavg()
    print(f"wall {time.perf_counter() - wall0:.0f} s; load at end {load1[0]:.2f} {load1[1]:.2f} "
          f"{load1[2]:.2f}; throughput: {args.clients} client threads x {args.per_client} "
          "hybrid statements; CPU = coordinator process + every shard process (Ray's own "
          "raylet and GCS not counted); sequential: one statement at a time, in the p50 loop")
    one.close()


def report(rows, header: bool) -> None:
    if header:
        print(f"{'':28} {'hybrid p50 (added)':>24} {'lexical p50 (added)':>24} "
              f"{'throughput':>14} {'CPU/stmt':>10} {'hybrid CPU/stmt, sequential':>38} "
              f"{'load':>5}")
    for name, p50, rate, cpu, seq in rows:
        cells = [f"{p50[k][1]:6.2f} ms ({p50[k][1] - p50[k][0]:+.2f} ms)" for k in STATEMENTS]
        coord, shards = seq["hybrid"]
        split = f"{coord + shards:5.2f} ms ({coord:.2f} coord + {shards:.2f} shards)"
        print(f"{name:28} {cells[0]:>24} {cells[1]:>24} {rate:8.1f} st/s {cpu:7.2f} ms "
              f"{split:>38} {os.getloadavg()[0]:5.1f}", flush=True)


def tenant_rows(tmp: Path, docs, queries, args):
    """Tenant-routed at 4 shards: each statement runs whole on the tenant's shard, against the
    tenant's own database in this process."""
    c = cluster.connect(shards=4, path=tmp / "tenants", embedder=None, num_cpus=2)
    c.create_collection("cacm", text_fields=("title", "body"),
                        fields={**FIELDS, "agent_id": "str"}, dim=384, embedder=None)
    mine = [{**d, "agent_id": f"agent-{i % TENANTS}"} for i, d in enumerate(docs)]
    c.ingest("cacm", mine)
    own = single(tmp / "tenant-0", [d for d in mine if d["agent_id"] == "agent-0"],
                 {**FIELDS, "agent_id": "str"})
    p50, seq = latency(own, c, queries, args.rounds, {"tenant": "agent-0"})
    rate, cpu = throughput(c, queries, args.clients, args.per_client, {"tenant": "agent-0"})
    c.close()
    own.close()
    return ("tenant-routed, 4 shards", p50, rate, cpu, seq)


if __name__ == "__main__":
    main()
