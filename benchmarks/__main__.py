"""One entry point for every benchmark (issue 8; SPEC §9).

    python -m benchmarks [quality|locomo|latency|sessions|lineage|ingest|parse|writes|cluster|
                          scale|all] [--write-results]

Sections:

- ``quality``: nDCG@10, MAP, R@100 on CACM and Cranfield: recallql lexical / semantic / hybrid
  against bm25s and LanceDB, with paired per-query tests (`benchmarks.quality`).
- ``locomo``: R@5, R@10, nDCG@10, session-hit@5 on the LoCoMo conversations: recallql stored as
  sessions and messages and as a plain collection, against LanceDB, bm25s, an exact cosine
  scan and plain RRF, per category, with paired tests and leave-one-conversation-out rows
  (`benchmarks.locomo`).
- ``latency``: p50/p95 of hybrid SEARCH on 100k real chunks against LanceDB hybrid, bm25s, raw
  tantivy and raw numpy; engine overhead; cached parse+plan; RSS (`benchmarks.latency`).
- ``sessions``: `benchmarks.bench_sessions` (session-boost overhead over 1k candidates).
- ``lineage``: `benchmarks.bench_lineage` (10k-deep chain) and `benchmarks.bench_conversations`
  (GROUP BY CONVERSATION overhead).
- ``ingest``: `benchmarks.bench_ingest` (chunks/s without and with the default embedder, RSS).
- ``parse``: `benchmarks.bench_parse` (cold/cached parse, bind, over-limit rejections) and the
  cached parse+plan path.
- ``writes``: `benchmarks.bench_writes` (durable small writes/s, 1 and 3 processes, one item per
  call and bulk calls).
- ``scale`` (not in ``all``: an hour and more): `benchmarks.bench_scale`, recallql against
  LanceDB as its users run it at 10k, 100k and 1M chunks; `benchmarks.bench_ann` compares the
  HNSW libraries, `benchmarks.bench_quantized` the int8 pre-scan (run them directly).
- ``cluster``: `benchmarks.bench_cluster` (the Ray cluster's added p50 and throughput at 1, 2, 4
  shards), in a subprocess inside a private network namespace (``unshare -n``).

Nothing is installed at run time: the peers are the ``bench`` extra (``pip install -e
.[dev,bench]``). Vectors come from the cache of `benchmarks.vectors_cache` (computed on the
first run: tens of minutes of CPU for the 100k chunks; warm it with
``nice -n 10 python -m benchmarks.vectors_cache``). ``--write-results`` rewrites
``benchmarks/RESULTS.md`` with the machine description and every section run (a single section
replaces its own block and keeps the others).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import machine, targets

RESULTS = Path(__file__).with_name("RESULTS.md")
FINDINGS = Path(__file__).with_name("FINDINGS.md")
ORDER = ("parse", "ingest", "writes", "lineage", "sessions", "quality", "locomo", "latency",
         "cluster")


def _script(module: str, argv: tuple[str, ...] = ()) -> str | None:
    """Run ``benchmarks.<module>.main()`` with `argv`, capturing what it prints; None when the
    module does not exist (yet)."""
    name = f"benchmarks.{module}"
    if importlib.util.find_spec(name) is None:
        return None
    mod = importlib.import_module(name)
    out = io.StringIO()
    saved = sys.argv
    sys.argv = [name, *argv]
    try:
        with contextlib.redirect_stdout(out):
            mod.main()
    finally:
        sys.argv = saved
    return out.getvalue().rstrip()


def _scripts(title: str, modules: list[tuple[str, str, tuple[str, ...]]]) -> str:
    """A section made of the printed output of other benchmark scripts."""
    parts = [f"## {title}\n"]
    for module, what, argv in modules:
        text = _script(module, argv)
        targets.from_script_output(module, text)
        if text is None:
            parts.append(f"- {what}: **pending** (`benchmarks/{module}.py` is not there yet)\n")
        else:
            parts.append(f"{what} (`python -m benchmarks.{module} {' '.join(argv)}`):\n\n"
                         f"```\n{text}\n```\n")
    return "\n".join(parts)


def parse_section(args: argparse.Namespace) -> str:
    """Parser timings and the cached parse+plan path on an in-memory database."""
    import recallql
    from benchmarks import parseplan

    text = _scripts("Parse", [("bench_parse", "Parse and bind", ())])
    with recallql.connect(embedder=None) as db:
        return text + "\n" + parseplan.run(db)


def ingest_section(args: argparse.Namespace) -> str:
    """bench_ingest with the default sizes (100k chunks; 2,000 embedded CACM docs)."""
    argv = ("--items", str(args.chunks), "--embed", "2000")
    return _scripts("Ingest", [("bench_ingest", "Ingest (target ≥ 20k chunks/s without "
                                "embedding; RSS ≤ 1.3×)", argv)])


def writes_section(args: argparse.Namespace) -> str:
    """bench_writes: small durable writes from 1 and 3 processes."""
    return _scripts("Small writes", [("bench_writes", "Small writes/s (target ≥ 200/s from 3 "
                                      "processes with bulk calls)", ())])


def lineage_section(args: argparse.Namespace) -> str:
    """Lineage depth and conversation grouping scripts."""
    return _scripts("Lineage and conversations", [
        ("bench_lineage", "10k-deep lineage (target ≤ 50 ms) and root maintenance (chain "
         "update ≤ 100 ms)", ()),
        ("bench_conversations", "GROUP BY CONVERSATION overhead (target ≤ 1.1× at LIMIT 10 and "
         "100)", ()),
    ])


def sessions_section(args: argparse.Namespace) -> str:
    """The sessions engineer's script."""
    text = _scripts("Sessions", [("bench_sessions", "Session-boost overhead over 1k candidates "
                                  "(target ≤ 1 ms)", ())])
    if "**pending**" in text:
        targets.record("session-boost overhead over 1k candidates ≤ 1 ms", "pending", None)
    return text


def quality_section(args: argparse.Namespace) -> str:
    """CACM and Cranfield quality tables."""
    from benchmarks import quality

    return quality.run()


def locomo_section(args: argparse.Namespace) -> str:
    """LoCoMo turn retrieval."""
    from benchmarks import locomo

    return locomo.run()


def latency_section(args: argparse.Namespace) -> str:
    """The 100k-chunk latency tables."""
    from benchmarks import latency

    return latency.run(rounds=args.rounds, n=args.chunks)


def scale_section(args: argparse.Namespace) -> str:
    """recallql against LanceDB from 10k to 1M chunks (long: not part of ``all``)."""
    return _scripts("Scale", [("bench_scale", "Scaling, recallql vs LanceDB (exact / IVF_PQ / "
                               "IVF_HNSW_SQ)", ("--sizes", "10000,100000,1000000"))])


def cluster_section(args: argparse.Namespace) -> str:
    """bench_cluster in a subprocess inside a private network namespace (Ray's servers listen on
    every interface); not run where `unshare -n` is refused."""
    import subprocess

    title = "## Cluster\n\n"
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        targets.record("cluster: added p50 per statement ≤ 5 ms at 4 shards (scatter-gather, "
                       "hybrid)", "not run", None, "unshare -n is not permitted here")
        return title + "- **not run**: `unshare -n` is not permitted here (Ray needs a private "
        "network namespace).\n"
    argv = ["--rounds", str(args.rounds)]
    out = subprocess.run(["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
                          sys.executable, "-m", "benchmarks.bench_cluster", *argv],
                         capture_output=True, text=True, cwd=Path(__file__).parents[1])
    text = out.stdout.rstrip() or out.stderr[-2000:]
    targets.from_script_output("bench_cluster", text)
    return (title + "Scatter-gather over a shared collection and tenant-routed statements against "
            "one database in the same process (`unshare -n ... python -m benchmarks."
            f"bench_cluster {' '.join(argv)}`):\n\n```\n{text}\n```\n")


SECTIONS: dict[str, Callable[[argparse.Namespace], str]] = {
    "parse": parse_section, "ingest": ingest_section, "writes": writes_section,
    "lineage": lineage_section, "sessions": sessions_section, "quality": quality_section,
    "locomo": locomo_section, "latency": latency_section, "cluster": cluster_section,
    "scale": scale_section,
}


def merge_results(block: str) -> None:
    """Replace one section's block of RESULTS.md (its ``## Title`` up to the next section),
    or append it; the targets table gets this run's rows for that section."""
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.is_file() else ""
    title = block.splitlines()[0]
    start = text.find(f"\n{title}\n")
    if start < 0:
        text = text.rstrip() + "\n\n" + block
    else:
        end = text.find("\n## ", start + len(title) + 2)
        text = text[:start + 1] + block.rstrip() + "\n" + (text[end:] if end >= 0 else "")
    RESULTS.write_text(_merge_targets(text).rstrip() + "\n", encoding="utf-8")


def _merge_targets(text: str) -> str:
    """`text` with this run's target rows replacing the rows of the same targets."""
    marker = "## Targets in this run\n\n"
    at = text.find(marker)
    if at < 0:
        return text
    start = at + len(marker)
    end = text.find("\n\n", start)
    lines = text[start:end].splitlines()
    head, body = lines[:1], lines[1:]
    new = targets.summary().splitlines()[2:]

    def name(row: str) -> str:
        return row.split("|")[1].strip()

    fresh = {name(r): r for r in new}
    kept = [r if r.startswith("|---") else fresh.pop(name(r), r) for r in body]
    rows = [*head, *kept, *fresh.values()]  # a re-measured row stays where it was
    return text[:start] + "\n".join(rows) + text[end:]


def write_results(blocks: list[str], machine_text: str) -> None:
    """Rewrite RESULTS.md: machine (as at the start of the run), the targets of this run, the
    hand-kept findings (``benchmarks/FINDINGS.md``: causes of missed targets, fixes), then
    every section run."""
    head = ("# recallql benchmark results\n\nRegenerated by `python -m benchmarks all "
            "--write-results` (see `benchmarks/__main__.py`). Figures are medians unless "
            "stated; ratios compare systems measured in the same process run.\n\n"
            f"{machine_text}\n\n## Targets in this run\n\n{targets.summary()}\n")
    findings = FINDINGS.read_text(encoding="utf-8") if FINDINGS.is_file() else ""
    RESULTS.write_text("\n".join([head, findings, *blocks]).rstrip() + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the sections, print (and optionally record) their tables."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("section", nargs="?", default="all", choices=(*ORDER, "scale", "all"))
    parser.add_argument("--write-results", action="store_true",
                        help="rewrite benchmarks/RESULTS.md with this run")
    parser.add_argument("--rounds", type=int, default=3, help="latency: passes over the queries")
    parser.add_argument("--chunks", type=int, default=100_000,
                        help="latency and ingest: corpus size in chunks")
    args = parser.parse_args(argv)
    names = ORDER if args.section == "all" else (args.section,)
    machine_text = machine.describe()
    print(machine_text, flush=True)
    blocks = []
    for name in names:
        started = time.perf_counter()
        block = SECTIONS[name](args)
        block += f"\n_({name}: {time.perf_counter() - started:.0f} s)_\n"
        print("\n" + block, flush=True)
        blocks.append(block)
    print("\n## Targets in this run\n\n" + targets.summary())
    if args.write_results and len(names) == 1:
        merge_results(blocks[0])
        print(f"updated the {names[0]} section of {RESULTS}")
    elif args.write_results:
        write_results(blocks, machine_text)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
