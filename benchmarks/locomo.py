"""LoCoMo turn retrieval: does the search bring back the turns that answer a question?

LoCoMo (Maharana et al., ACL 2024) — five shared conversations (19–32 sessions, 419–689 turns
each); every turn is an item, every question of categories 1–4 (786) a query whose relevant items
are its annotated evidence turns (binary gains). Metrics, means over questions: R@5 and R@10
(share of a question's evidence turns in the top 5 / 10), nDCG@10, session-hit@5 (a top-5 turn
comes from a session that holds evidence). All systems run in the same process on the same texts
and vectors (`benchmarks.locomo_systems`); each question is searched in its own conversation.
recallql runs its defaults (no per-dataset option); "now" is the conversation's last session.
Paired per-question tests (`benchmarks.stats`) compare recallql's default with every other row;
leave-one-conversation-out rows show how much the figures move when any one conversation is
left out (the five held-back conversations are run on this same benchmark).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from statistics import fmean

from benchmarks import stats, targets
from benchmarks.locomo_systems import (
    Corpus,
    MessagesSystem,
    PeerSystems,
    PlainSystem,
    Ranked,
    load_corpus,
    locomo_root,
)
from recallql.datasets.evaluation import ndcg_at_k, recall_at_k
from recallql.datasets.locomo import CATEGORY_NAMES, SCORED_CATEGORIES, Question

DEFAULT = "recallql messages, default (hybrid)"
#: The recallql rows: name -> (system, statement).
STATEMENTS: dict[str, tuple[str, str]] = {
    DEFAULT: ("messages", "SEARCH messages MATCHING :q LIMIT 10"),
    "recallql messages, FUSE RRF (k = 60), no context credit (the old default)": (
        "messages", "SEARCH messages MATCHING :q FUSE RRF (weights = (context = 0)) LIMIT 10"),
    "recallql messages, FUSE CONVEX, no context credit": (
        "messages", "SEARCH messages MATCHING :q FUSE CONVEX (weights = (context = 0)) LIMIT 10"),
    "recallql messages, FUSE CONVEX (normalization = tmm)": (
        "messages", "SEARCH messages MATCHING :q FUSE CONVEX (normalization = tmm) LIMIT 10"),
    "recallql messages, USING LEXICAL": (
        "messages", "SEARCH messages MATCHING :q USING LEXICAL LIMIT 10"),
    "recallql messages, USING SEMANTIC": (
        "messages", "SEARCH messages MATCHING :q USING SEMANTIC LIMIT 10"),
    "recallql messages without the speaker in the content, default": (
        "bare", "SEARCH messages MATCHING :q LIMIT 10"),
    "recallql plain collection, default (WHERE conv = :c)": (
        "plain", "SEARCH turns MATCHING :q NEAR :v WHERE conv = :c LIMIT 10"),
    "recallql plain collection, USING LEXICAL": (
        "plain", "SEARCH turns MATCHING :q USING LEXICAL WHERE conv = :c LIMIT 10"),
}
PEER_HYBRID, PEER_FTS = "LanceDB hybrid, limit 10", "LanceDB FTS"
TARGETS = {"R@10": 0.70, "nDCG@10": 0.52}
METRICS = ("R@5", "R@10", "nDCG@10", "session-hit@5")
#: (conversation id, question index) -> metric -> value, per system.
Scores = dict[str, dict[tuple[str, int], dict[str, float]]]


def _session(turn: str) -> str:
    """``'conv-26:D3:7'`` → ``'conv-26:D3'``."""
    return turn.rsplit(":", 1)[0]


def question_metrics(ranked: Ranked, evidence: set[str]) -> dict[str, float]:
    """R@5, R@10, nDCG@10 and session-hit@5 of one ranking."""
    sessions = {_session(e) for e in evidence}
    return {"R@5": recall_at_k(ranked, evidence, 5), "R@10": recall_at_k(ranked, evidence, 10),
            "nDCG@10": ndcg_at_k(ranked, evidence, 10),
            "session-hit@5": float(any(_session(t) in sessions for t in ranked[:5]))}


def _scored(data: Corpus) -> list[tuple[str, Question]]:
    return [(c, q) for c, q in data.questions if q.category in SCORED_CATEGORIES]


def run_systems(data: Corpus, tmp: Path,
                statements: dict[str, tuple[str, str]] | None = None
                ) -> dict[str, dict[tuple[str, int], Ranked]]:
    """Every system's top 10 for every scored question: the recallql rows of `statements`
    (default `STATEMENTS`; only the systems they name are built) and the peers."""
    statements = STATEMENTS if statements is None else statements
    build: dict[str, Callable[[], object]] = {
        "messages": lambda: MessagesSystem(tmp / "messages", data),
        "bare": lambda: MessagesSystem(tmp / "bare", data, content=lambda t: t.text),
        "plain": lambda: PlainSystem(tmp / "plain", data),
    }
    systems = {name: build[name]() for name in dict.fromkeys(s for s, _ in statements.values())}
    out: dict[str, dict[tuple[str, int], Ranked]] = {name: {} for name in statements}
    try:
        peer = PeerSystems(tmp / "lance", data)
        for conv, q in _scored(data):
            key = (conv, q.index)
            for name, (system, statement) in statements.items():
                out[name][key] = systems[system].search(statement, conv, q)  # type: ignore[attr-defined]
            for name, ranked in peer.runs(conv, q).items():
                out.setdefault(name, {})[key] = ranked[:10]
    finally:
        for system in systems.values():
            system.close()  # type: ignore[attr-defined]
    return out


def score(data: Corpus, runs: dict[str, dict[tuple[str, int], Ranked]]) -> Scores:
    """Per-question metrics of every system."""
    evidence = {(c, q.index): {f"{c}:{e}" for e in q.evidence} for c, q in _scored(data)}
    return {name: {key: question_metrics(run[key], evidence[key]) for key in evidence}
            for name, run in runs.items()}


def _mean(per: dict[tuple[str, int], dict[str, float]], metric: str,
          keep: Callable[[tuple[str, int]], bool] = lambda _k: True) -> float:
    values = [m[metric] for k, m in per.items() if keep(k)]
    return fmean(values) if values else float("nan")


def overall_table(scores: Scores) -> str:
    """One row per system: the four metrics and R@10 as a ratio to recallql's default."""
    base = _mean(scores[DEFAULT], "R@10")
    rows = [[name, *(f"{_mean(per, m):.3f}" for m in METRICS),
             f"{_mean(per, 'R@10') / base:.3f}"] for name, per in scores.items()]
    return stats.table(["system", *METRICS, "R@10 / default"], rows)


def category_table(data: Corpus, scores: Scores) -> str:
    """R@10 and nDCG@10 per question category."""
    cat = {(c, q.index): q.category for c, q in _scored(data)}
    heads = [f"{CATEGORY_NAMES[c]} ({sum(v == c for v in cat.values())})"
             for c in SCORED_CATEGORIES]
    rows = [[name, *(f"{_mean(per, 'R@10', lambda k, c=c: cat[k] == c):.3f} / "
                     f"{_mean(per, 'nDCG@10', lambda k, c=c: cat[k] == c):.3f}"
                     for c in SCORED_CATEGORIES)] for name, per in scores.items()]
    return stats.table(["system (R@10 / nDCG@10)", *heads], rows)


def paired_rows(scores: Scores, keys: Iterable[tuple[str, int]] | None = None
                ) -> dict[tuple[str, str], stats.Paired]:
    """recallql's default against every other system on R@10 and nDCG@10."""
    qkeys = sorted(keys if keys is not None else scores[DEFAULT])
    out = {}
    for name, per in scores.items():
        if name == DEFAULT:
            continue
        for metric in ("R@10", "nDCG@10"):
            out[(name, metric)] = stats.paired([scores[DEFAULT][k][metric] for k in qkeys],
                                               [per[k][metric] for k in qkeys])
    return out


def paired_table(scores: Scores) -> str:
    """The paired comparisons as a table."""
    rows = [[f"default vs {name}", metric, f"{p.mean_diff:+.4f}", p.wtl(), f"{p.p_sign:.3g}",
             f"{p.p_rand:.3g}"] for (name, metric), p in paired_rows(scores).items()]
    return stats.table(["comparison", "metric", "mean diff", "wins/ties/losses", "p (sign)",
                        "p (randomisation)"], rows)


def leave_one_out_table(data: Corpus, scores: Scores) -> str:
    """The default's figures on each conversation alone and on the other four, and its margin
    over the LanceDB rows on the other four."""
    rows = []
    for conv in data.conversations:
        alone = lambda k, c=conv.id: k[0] == c  # noqa: E731
        rest = lambda k, c=conv.id: k[0] != c  # noqa: E731
        d = scores[DEFAULT]
        margins = [_mean(d, m, rest) - _mean(scores[p], m, rest)
                   for p in (PEER_HYBRID, PEER_FTS) for m in ("R@10", "nDCG@10")]
        rows.append([conv.id, sum(1 for k in d if alone(k)),
                     f"{_mean(d, 'R@10', alone):.3f} / {_mean(d, 'nDCG@10', alone):.3f}",
                     f"{_mean(d, 'R@10', rest):.3f} / {_mean(d, 'nDCG@10', rest):.3f}",
                     *(f"{x:+.3f}" for x in margins)])
    return stats.table(["left out", "questions", "default on it (R@10 / nDCG@10)",
                        "default on the other four", "Δ R@10 vs LanceDB hybrid 10",
                        "Δ nDCG@10 vs hybrid 10", "Δ R@10 vs LanceDB FTS", "Δ nDCG@10 vs FTS"],
                       rows)


def _spread(data: Corpus, scores: Scores, metric: str) -> tuple[float, float]:
    values = [_mean(scores[DEFAULT], metric, lambda k, c=c.id: k[0] != c)
              for c in data.conversations]
    return min(values), max(values)


def verdicts(data: Corpus, scores: Scores) -> str:
    """Record and list the LoCoMo targets."""
    lines = []
    paired = paired_rows(scores)
    for metric, bound in TARGETS.items():
        value = _mean(scores[DEFAULT], metric)
        lo, hi = _spread(data, scores, metric)
        targets.record(f"LoCoMo default {metric} ≥ {bound}", f"{value:.3f}", value >= bound,
                       f"leave-one-out {lo:.3f}–{hi:.3f}")
        lines.append(f"- default {metric} {value:.3f} (target ≥ {bound}); leave one "
                     f"conversation out: {lo:.3f}–{hi:.3f}")
        for peer in (PEER_HYBRID, PEER_FTS):
            p = paired[(peer, metric)]
            met = p.mean_diff > 0 and p.p_rand < 0.05
            targets.record(f"LoCoMo default {metric} above {peer} (p < 0.05)",
                           f"{p.mean_diff:+.3f} (p = {p.p_rand:.2g})", met)
            lines.append(f"- {metric} vs {peer}: {p.mean_diff:+.4f}, W/T/L {p.wtl()}, "
                         f"p = {p.p_rand:.2g} (randomisation): {'met' if met else 'MISSED'}")
    return "\n".join(lines)


def run() -> str:
    """The LoCoMo section (Markdown)."""
    root = locomo_root()
    if root is None:
        return ("## LoCoMo\n\nskipped: the shared LoCoMo conversations (`../shared/data/locomo/`) "
                "are not beside the repository.\n")
    data = load_corpus(root)
    with tempfile.TemporaryDirectory(prefix="recallql-locomo-") as tmp:
        scores = score(data, run_systems(data, Path(tmp)))
    n = len(_scored(data))
    return "\n".join([
        "## LoCoMo\n", __doc__.split("\n\n", 1)[1].strip() + "\n",
        f"### All {n} questions (categories 1–4)\n", overall_table(scores) + "\n",
        "### Per category\n", category_table(data, scores) + "\n",
        "### Paired per-question comparison (recallql default = A)\n",
        paired_table(scores) + "\n",
        "### Leave one conversation out\n", leave_one_out_table(data, scores) + "\n",
        "Targets:\n", verdicts(data, scores) + "\n"])


def main() -> None:
    """Print the section."""
    print(run())


if __name__ == "__main__":
    main()
