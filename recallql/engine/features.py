"""Per-candidate features: what the operators above the legs read of a row.

`run_legs` gathers them from the snapshot for the union of the legs' rows (or for every eligible
row when a plan has no legs); fusion, the boosts, grouping and the total order read only these,
never the snapshot. So candidates gathered from several shards merge exactly like one
database's, and merge needs no index.

Strings stay cheap at 100k candidates: a `Strings` column is a gather function plus an index
(nothing is decoded until an operator asks, and `take` only composes indexes), and the string
metadata behind session keyword hints is dictionary-encoded (`Coded`, `CodedLists`: codes into
a vocabulary). `features_to_wire` / `features_from_wire` give the JSON-ready form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

StrGather = Callable[[np.ndarray], list[str]]


class Vocab(Protocol):
    """A vocabulary of distinct strings (`recallql.index.columns.StrPool`, or `Vocabulary`)."""

    vocab: list[str]


class Vocabulary:
    """A vocabulary decoded from the wire (weak-referenceable: keyword tables cache by it)."""

    __slots__ = ("vocab", "__weakref__")

    def __init__(self, vocab: list[str]) -> None:
        self.vocab = vocab


def _list_gather(values: Sequence[str]) -> StrGather:
    def gather(index: np.ndarray) -> list[str]:
        return [values[i] for i in index.tolist()]

    return gather


@dataclass(frozen=True, slots=True, eq=False)
class Strings:
    """A column of m strings, gathered on demand: the values are `gather(index)`.

    Attributes:
        gather: int64[n] positions -> their strings (a snapshot column's bulk `take`).
        index: int64[m] positions of this column's rows in what `gather` reads.
    """

    gather: StrGather
    index: np.ndarray

    @classmethod
    def of(cls, values: Sequence[str]) -> Strings:
        """A column holding `values` themselves."""
        return cls(_list_gather(list(values)), np.arange(len(values), dtype=np.int64))

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def take(self, index: np.ndarray) -> Strings:
        """The rows at `index` (int64 positions), without reading any string."""
        return Strings(self.gather, self.index[index])

    def tolist(self) -> list[str]:
        """The strings, in row order."""
        return self.gather(self.index) if len(self) else []


@dataclass(frozen=True, slots=True, eq=False)
class Coded:
    """A dictionary-encoded `str` field: `pool.vocab[codes[i]]`, code -1 when missing."""

    pool: Vocab
    codes: np.ndarray

    def take(self, index: np.ndarray) -> Coded:
        return Coded(self.pool, self.codes[index])


@dataclass(frozen=True, slots=True, eq=False)
class CodedLists:
    """A dictionary-encoded `list[str]` field: row i holds `counts[i]` codes, row by row."""

    pool: Vocab
    counts: np.ndarray
    codes: np.ndarray

    def take(self, index: np.ndarray) -> CodedLists:
        starts = np.cumsum(self.counts) - self.counts
        counts = self.counts[index]
        first = np.cumsum(counts) - counts
        flat = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(starts[index] - first,
                                                                         counts)
        return CodedLists(self.pool, counts, self.codes[flat])


StringField = Coded | CodedLists


@dataclass(frozen=True, slots=True, eq=False)
class Features:
    """The features of m candidate rows, aligned with `rowid` (ascending, unique).

    Attributes:
        rowid: int64[m]; a coordinator merging shards re-keys them to be unique across shards.
        ids, doc_ids: item ids and doc ids (the total order, GROUP BY DOCUMENT).
        positions: int64[m] chunk positions.
        entities: each row's entity (session entity and signal boosts), or None.
        recency: float64[m] epoch seconds UTC of the plan's recency field, NaN when missing.
        strings: declared `str` / `list[str]` fields, dictionary-encoded (session keywords).
        session_ids, compacted: messages only (lineage walks): the row's session ("" when
            missing) and its `compacted` flag (bool[m]).
    """

    rowid: np.ndarray
    ids: Strings
    doc_ids: Strings
    positions: np.ndarray
    entities: Strings | None = None
    recency: np.ndarray | None = None
    strings: Mapping[str, StringField] = field(default_factory=dict)
    session_ids: Strings | None = None
    compacted: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.rowid.shape[0])

    def take(self, index: np.ndarray) -> Features:
        """The rows at `index` (int64 positions), in that order."""
        def opt(col: Any) -> Any:
            return None if col is None else (col[index] if isinstance(col, np.ndarray)
                                             else col.take(index))

        return Features(
            rowid=self.rowid[index], ids=self.ids.take(index), doc_ids=self.doc_ids.take(index),
            positions=self.positions[index], entities=opt(self.entities),
            recency=opt(self.recency),
            strings={name: col.take(index) for name, col in self.strings.items()},
            session_ids=opt(self.session_ids), compacted=opt(self.compacted))


def empty_features() -> Features:
    """Features of no rows (every optional column present and empty)."""
    none = np.zeros(0, np.int64)
    return Features(rowid=none, ids=Strings.of([]), doc_ids=Strings.of([]), positions=none,
                    entities=Strings.of([]), recency=np.zeros(0), session_ids=Strings.of([]),
                    compacted=np.zeros(0, bool))


def concat_features(parts: Sequence[Features]) -> Features:
    """The rows of several feature tables in one, ascending rowid (a coordinator gathering
    shards: it re-keys each shard's rowids to be unique first, e.g. `shard << 40 | rowid`).
    Strings are materialised; coded fields get one merged vocabulary.

    Raises:
        ValueError: a rowid occurs twice, or the tables do not carry the same columns.
    """
    if not parts:
        return empty_features()
    rowid = np.concatenate([p.rowid for p in parts])
    order = np.argsort(rowid, kind="stable")
    if rowid.shape[0] > 1 and (np.diff(rowid[order]) == 0).any():
        raise ValueError("a rowid occurs in two feature tables (re-key shard rowids first)")
    names = set(parts[0].strings)
    if any(set(p.strings) != names for p in parts):
        raise ValueError("the feature tables carry different string fields")

    def col(name: str) -> Any:
        return _concat_column([getattr(p, name) for p in parts], order)

    return Features(
        rowid=rowid[order], ids=col("ids"), doc_ids=col("doc_ids"), positions=col("positions"),
        entities=col("entities"), recency=col("recency"),
        strings={name: _concat_coded([p.strings[name] for p in parts], order)
                 for name in sorted(names)},
        session_ids=col("session_ids"), compacted=col("compacted"))


def _concat_column(cols: list[Any], order: np.ndarray) -> Any:
    """One column of several tables (`Strings` or arrays; None when absent from all), rows in
    `order`."""
    if all(c is None for c in cols):
        return None
    if any(c is None for c in cols):
        raise ValueError("the feature tables carry different columns")
    if isinstance(cols[0], Strings):
        return Strings.of([v for c in cols for v in c.tolist()]).take(order)
    return np.concatenate(cols)[order]


def _concat_coded(cols: list[StringField], order: np.ndarray) -> StringField:
    """Coded fields of several tables with one merged vocabulary, rows in `order`."""
    merged: dict[str, int] = {}
    codes, counts = [], []
    for col in cols:
        vocab = col.pool.vocab
        used = np.unique(col.codes[col.codes >= 0])
        remap = np.full(len(vocab) + 1, -1, np.int64)  # code -1 (missing) picks the last: -1
        remap[used] = [merged.setdefault(vocab[c], len(merged)) for c in used.tolist()]
        codes.append(remap[col.codes])
        if isinstance(col, CodedLists):
            counts.append(col.counts)
    pool = Vocabulary(list(merged))
    flat = np.concatenate(codes)
    if not counts:
        return Coded(pool, flat[order])
    return CodedLists(pool, np.concatenate(counts), flat).take(order)


# -- wire form -----------------------------------------------------------------------------------


def _coded_wire(col: StringField) -> dict[str, Any]:
    """Codes renumbered into the used part of the vocabulary."""
    used, codes = np.unique(col.codes, return_inverse=True)
    keep = used >= 0
    vocab = col.pool.vocab
    renumber = np.where(keep[codes], codes - int((~keep).sum()), -1) if codes.shape[0] else codes
    out: dict[str, Any] = {"vocab": [vocab[c] for c in used[keep].tolist()],
                           "codes": renumber.astype(np.int64).tolist()}
    if isinstance(col, CodedLists):
        out["counts"] = col.counts.tolist()
    return out


def _coded_from_wire(data: Mapping[str, Any]) -> StringField:
    pool = Vocabulary(list(data["vocab"]))
    codes = np.asarray(data["codes"], dtype=np.int64)
    if data.get("counts") is not None:
        return CodedLists(pool, np.asarray(data["counts"], dtype=np.int64), codes)
    return Coded(pool, codes)


def features_to_wire(feat: Features) -> dict[str, Any]:
    """JSON-ready features (NaN dates as None)."""
    def strs(col: Strings | None) -> list[str] | None:
        return None if col is None else col.tolist()

    recency = None if feat.recency is None else [
        None if np.isnan(x) else x for x in feat.recency.tolist()]
    return {
        "rowid": feat.rowid.tolist(), "ids": feat.ids.tolist(), "doc_ids": feat.doc_ids.tolist(),
        "positions": feat.positions.tolist(), "entities": strs(feat.entities),
        "recency": recency,
        "strings": {name: _coded_wire(col) for name, col in feat.strings.items()},
        "session_ids": strs(feat.session_ids),
        "compacted": None if feat.compacted is None else feat.compacted.tolist(),
    }


def features_from_wire(data: Mapping[str, Any]) -> Features:
    """The inverse of `features_to_wire`."""
    def strs(values: list[str] | None) -> Strings | None:
        return None if values is None else Strings.of(values)

    recency = data.get("recency")
    return Features(
        rowid=np.asarray(data["rowid"], dtype=np.int64), ids=Strings.of(data["ids"]),
        doc_ids=Strings.of(data["doc_ids"]),
        positions=np.asarray(data["positions"], dtype=np.int64),
        entities=strs(data.get("entities")),
        recency=None if recency is None else np.array(
            [np.nan if x is None else x for x in recency], dtype=np.float64),
        strings={name: _coded_from_wire(col) for name, col in data.get("strings", {}).items()},
        session_ids=strs(data.get("session_ids")),
        compacted=None if data.get("compacted") is None else np.asarray(data["compacted"], bool),
    )
