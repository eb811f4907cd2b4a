"""The SPEC §9 and quality targets, collected from the sections of one run into a summary table.

Sections measured here call `record`; the output of the other engineers' scripts is read with
`from_script_output` (a figure that cannot be found there is listed as "see the section").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmarks import stats


@dataclass(frozen=True)
class Verdict:
    """One target of one run."""

    target: str
    figure: str
    met: bool | None  # None: not measured in this run
    note: str = ""


_VERDICTS: list[Verdict] = []


def record(target: str, figure: str, met: bool | None, note: str = "") -> None:
    """Add a verdict to this run's summary (replacing an earlier one for the same target)."""
    _VERDICTS[:] = [v for v in _VERDICTS if v.target != target]
    _VERDICTS.append(Verdict(target, figure, met, note))


def clear() -> None:
    """Forget the verdicts recorded so far."""
    _VERDICTS.clear()


def _number(pattern: str, text: str) -> float | None:
    found = re.search(pattern, text)
    return None if found is None else float(found.group(1).replace(",", ""))


def from_script_output(module: str, text: str | None) -> None:
    """Record the targets printed by `bench_ingest`, `bench_sessions`, `bench_parse`,
    `bench_writes`, `bench_lineage`, `bench_cluster`, `bench_scale` and `bench_conversations`
    (others: ignored)."""
    if module == "bench_ingest":
        rate = _number(r"vectors supplied: .*= ([\d,]+) chunks/s", text or "")
        _record_figure("ingest without embedding ≥ 20,000 chunks/s", rate, 20_000, True,
                       "{:,.0f} chunks/s")
        ratio = _number(r"ratio ([\d.]+)x", text or "")
        _record_figure("reader RSS ≤ 1.3× (raw vectors + text index)", ratio, 1.3, False,
                       "{:.2f}×")
    elif module == "bench_sessions":
        for kind in ("search", "retrieve"):
            extra = _number(rf"{kind}\s+wall .*overhead\s+\+?(-?[\d.]+) ms", text or "")
            _record_figure(f"session-boost overhead over 1k candidates ≤ 1 ms ({kind.upper()})",
                           extra, 1.0, False, "{:.2f} ms")
    elif module == "bench_parse":
        times = [float(t) for t in re.findall(r":\s+([\d.]+) ms\s+(?:ok|MISSED)", text or "")]
        _record_figure("over-limit statements rejected < 1 s (slowest kind)",
                       max(times) / 1000 if times else None, 1.0, False, "{:.3f} s")
    elif module == "bench_writes":
        rate = _number(r"3 processes with bulk calls \(extend\): ([\d,.]+) writes/s", text or "")
        _record_figure("small writes ≥ 200/s from 3 processes with bulk calls", rate, 200, True,
                       "{:,.0f} writes/s")
    elif module == "bench_lineage":
        cold = _number(r"dict\s+depth=\d+\s+resolve cold=\s*([\d.]+) ms", text or "")
        _record_figure("10k-deep lineage ≤ 50 ms (dict fetch)", cold, 50, False, "{:.1f} ms")
        txn = _number(r"sqlite-txn\s+depth=\d+\s+resolve cold=\s*([\d.]+) ms", text or "")
        _record_figure("10k-deep lineage ≤ 50 ms (SQLite, one read transaction)", txn, 50,
                       False, "{:.1f} ms")
        walk = _number(r"engine\s+depth=\d+\s+resolve cold=\s*([\d.]+) ms", text or "")
        _record_figure("10k-deep lineage ≤ 50 ms (engine walk, where no root is stored)", walk,
                       50, False, "{:.1f} ms")
        stored = _number(r"stored\s+depth=\d+\s+resolve cold=\s*([\d.]+) ms", text or "")
        _record_figure("10k-deep lineage ≤ 50 ms (a statement's path: the stored root)", stored,
                       50, False, "{:.2f} ms")
        update = _number(r"root update depth=\d+\s+([\d.]+) ms", text or "")
        _record_figure("10k-deep chain: stored roots updated in one batch ≤ 100 ms", update, 100,
                       False, "{:.1f} ms")
    elif module == "bench_cluster":
        for kind, label in (("scatter-gather, 4 shards", "scatter-gather"),
                            ("tenant-routed, 4 shards", "tenant-routed")):
            added = _number(rf"{kind}\s+[\d.]+ ms \(\+?(-?[\d.]+) ms\)", text or "")
            _record_figure(f"cluster: added p50 per statement ≤ 5 ms at 4 shards ({label}, "
                           "hybrid)", added, 5.0, False, "+{:.2f} ms", _cluster_note(kind, text))
        rates = re.findall(r"scatter-gather, (\d) shards?\s.*?([\d.]+) st/s", text or "")
        record("cluster: throughput with 1, 2, 4 shards recorded",
               " / ".join(f"{r} st/s ({n})" for n, r in rates) or "see the section",
               bool(rates) or None)
    elif module == "bench_scale":
        _scale(text or "")
    elif module == "bench_conversations":
        for limit in (10, 100):
            ratio = _number(rf"(?m)^\s+LIMIT {limit}: .*?\(([\d.]+)x", text or "")
            _record_figure(f"GROUP BY CONVERSATION p50 ≤ 1.1× ungrouped (LIMIT {limit}, 10k-deep "
                           "chain)", ratio, 1.1, False, "{:.2f}×")


def _scale(text: str) -> None:
    """The 1M acceptance targets of issue 16 from `bench_scale.target_lines`."""
    hybrid = re.search(r"target 1000000 hybrid CPU: ([\d.]+) ms vs LanceDB ivf_pq ([\d.]+) ms = "
                       r"([\d.]+)x, semantic recall@10 ([\d.]+)", text)
    name = "1M hybrid CPU ≤ 0.5× LanceDB IVF_PQ hybrid, recall@10 ≥ 0.95"
    if hybrid:
        ours, lance, ratio, rec = (float(g) for g in hybrid.groups())
        record(name, f"{ratio:.2f}× ({ours:.2f} vs {lance:.2f} ms), recall {rec:.4f}",
               ratio <= 0.5 and rec >= 0.95)
    opened = re.search(r"target 1000000 open \+ first query: ([\d.]+) s CPU, ([\d.]+) s wall",
                       text)
    if opened:
        cpu, wall = float(opened.group(1)), float(opened.group(2))
        record("1M open + first query ≤ 1 s warm", f"{cpu:.2f} s CPU, {wall:.2f} s wall",
               cpu <= 1.0 and wall <= 1.0)


def _cluster_note(kind: str, text: str | None) -> str:
    """CPU per statement (sequential, all processes) and the load of a `bench_cluster` row."""
    found = re.search(rf"{kind}\s.*?st/s\s+[\d.]+ ms\s+([\d.]+) ms \(.*?\)\s+([\d.]+)\s*$",
                      text or "", re.MULTILINE)
    return "" if found is None else f"CPU {found.group(1)} ms/statement, load {found.group(2)}"


def _record_figure(target: str, value: float | None, bound: float, at_least: bool,
                   fmt: str, note: str = "") -> None:
    if value is None:
        record(target, "see the section", None)
        return
    record(target, fmt.format(value), value >= bound if at_least else value <= bound, note)


def summary() -> str:
    """A Markdown table of this run's verdicts."""
    word = {True: "met", False: "**missed**", None: "pending"}
    rows = [[v.target, v.figure, word[v.met], v.note] for v in _VERDICTS]
    return stats.table(["target", "this run", "verdict", "note"], rows)
