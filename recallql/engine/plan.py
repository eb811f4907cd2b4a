"""The serialisable query plan: what `db.plan()` returns, `db.run_legs()` runs and
`recallql.merge()` finishes (docs/architecture.md, "Plan → legs → merge").

A `QueryPlan` is plain data (pydantic; `model_dump_json()` / `QueryPlan.model_validate_json()`
round-trip it exactly): the statement's `now`, the candidate window, the retrieval legs with their
terms, query vector and pushed-down filter, and the parameters of the operators above the legs.
The operator tree is built from it by `recallql.engine.planner.build_tree` (pure), so a
coordinator that ships the plan to shards gets the same operators everywhere.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator

from recallql.engine.models import Notice
from recallql.engine.scoring import DecayShape
from recallql.index import filters as f


class LegKind(StrEnum):
    """What a leg's raw score is. The kind fixes the reason code (`LEXICAL_MATCH`,
    `SEMANTIC_MATCH`), the detail label (`bm25=`, `cosine=`) and which total-order key the leg
    feeds (`best_bm25`, `best_cosine`). A `context` leg matches nothing itself: its rows are the
    other legs' candidates of documents of several items and their neighbours (previous / next
    item of the same document), and fusion credits each with `weight^d` of the relevance of a
    candidate d items away (`CONTEXT_MATCH`)."""

    LEXICAL = "lexical"
    SEMANTIC = "semantic"
    CONTEXT = "context"


# -- codecs: filters and vectors as JSON ---------------------------------------------------------

_FILTERS: dict[str, type] = {cls.__name__: cls for cls in (
    f.Cmp, f.In, f.Between, f.Like, f.Contains, f.IsNull, f.And, f.Or, f.Not)}
_FILTER_TYPES = tuple(_FILTERS.values())


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _encode_value(value: Any) -> Any:
    if isinstance(value, datetime):  # the instant, exactly: whole microseconds since the epoch
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return {"epoch_us": (aware - _EPOCH) // _MICROSECOND}
    if isinstance(value, tuple):
        return [_encode_value(v) for v in value]
    return value


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        return _EPOCH + value["epoch_us"] * _MICROSECOND
    if isinstance(value, list):
        return tuple(_decode_value(v) for v in value)
    return value


def encode_filter(expr: Any) -> Any:
    """A `recallql.index.filters` expression as JSON-ready data (`{"type": "Cmp", ...}`;
    datetimes as `{"epoch_us": n}`, the instant in UTC)."""
    if expr is None:
        return None
    out: dict[str, Any] = {"type": type(expr).__name__}
    for fld in dataclass_fields(expr):
        value = getattr(expr, fld.name)
        if fld.name == "items":
            out[fld.name] = [encode_filter(item) for item in value]
        elif fld.name == "item":
            out[fld.name] = encode_filter(value)
        else:
            out[fld.name] = _encode_value(value)
    return out


def decode_filter(data: Any) -> Any:
    """The inverse of `encode_filter` (filter objects pass through unchanged).

    Raises:
        ValueError: not a filter expression.
    """
    if data is None or isinstance(data, _FILTER_TYPES):
        return data
    if not isinstance(data, dict) or data.get("type") not in _FILTERS:
        raise ValueError(f"not a filter expression: {data!r}")
    cls = _FILTERS[data["type"]]
    args: dict[str, Any] = {}
    for fld in dataclass_fields(cls):
        value = data[fld.name]
        if fld.name == "items":
            args[fld.name] = tuple(decode_filter(item) for item in value)
        elif fld.name == "item":
            args[fld.name] = decode_filter(value)
        else:
            args[fld.name] = _decode_value(value)
    return cls(**args)


def query_vector(value: Any) -> np.ndarray:
    """float32[d] (the array itself when it is one); finiteness and dimension are checked
    where the vector is used (the index refuses a zero or non-finite query vector)."""
    if isinstance(value, np.ndarray) and value.dtype == np.float32 and value.ndim == 1:
        return value
    vec = np.asarray(value, dtype=np.float32)
    if vec.ndim != 1:
        raise ValueError("a query vector is a 1-d array of numbers")
    return vec


Filter = Annotated[Any, PlainValidator(decode_filter), PlainSerializer(encode_filter)]
"""A pushed-down filter (`recallql.index.filters` expression or None), JSON as tagged dicts."""
Vector = Annotated[np.ndarray, PlainValidator(query_vector),
                   PlainSerializer(lambda v: v.tolist(), return_type=list[float])]
"""A float32[d] query vector; JSON as a list of numbers (exact: float32 → float64 → float32)."""


# -- the plan ------------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class LegSpec(_Model):
    """One retrieval leg of a plan.

    Attributes:
        name: the leg's name, unique in the plan: the key of its rank/score columns, of its
            contribution and of its FUSE weight (`lexical`, `semantic` for the built-in legs).
        kind: what its raw score is (`LegKind`).
        operator: the registered leg operator that runs it (`LexicalScan`, `SemanticScan`, or one
            added with `recallql.engine.register_leg`).
        window: the candidate window N (rows asked for).
        filter: the pushed-down filter expression, or None.
        fields, terms, term_counts: lexical legs: the text fields searched (for EXPLAIN), the
            distinct analysed terms and how often each occurs in the query (empty: once each).
        text: semantic legs: the MATCHING text (shown by EXPLAIN), or None with `NEAR`.
        vector: semantic legs: float32[d] query vector (from NEAR, or embedded at plan time).
        options: parameters of registered leg operators (JSON scalars); the context leg's
            `weight` (the share of a neighbour's relevance it credits).
    """

    name: str
    kind: LegKind
    operator: str
    window: int
    filter: Filter | None = None
    fields: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    term_counts: tuple[int, ...] = ()
    text: str | None = None
    vector: Vector | None = None
    options: dict[str, str | int | float | bool] = {}


class FusionSpec(_Model):
    """How the direct legs' candidates are fused, with per-leg weights.

    - `rrf`: reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009),
      `Σ w/(k + rank) / (W/(k + 1))`.
    - `convex`: the convex combination of normalised scores (Bruch, Gai & Ingber, TOIS 2023,
      "An Analysis of Fusion Functions for Hybrid Retrieval"), `Σ w·φ(score) / W`, with `φ`
      min-max (`minmax`: the leg's lowest and highest score in its window; 0 as the lowest
      for a lexical leg that returned fewer rows than its window) or theoretical
      min-max (`tmm`: BM25's 0 or cosine's −1, and the highest score).

    Attributes:
        method: `rrf` or `convex`.
        k: the RRF constant, > 0 (RRF only; shown by EXPLAIN).
        window: the candidate window N each leg fused (shown by EXPLAIN).
        normalization: `minmax` or `tmm` (convex only).
        weights: `(leg name, weight ≥ 0)` of the direct legs as written in `FUSE ... (weights
            = (...))` (or from `alpha`); legs not named weigh 1.
    """

    method: Literal["rrf", "convex"] = "rrf"
    k: float = 60.0
    window: int = 0
    normalization: Literal["minmax", "tmm"] = "minmax"
    weights: tuple[tuple[str, float], ...] = ()

    def weight(self, leg: str) -> float:
        """The weight of leg `leg` (1.0 unless written)."""
        for name, w in self.weights:
            if name == leg:
                return w
        return 1.0


class SessionBoostSpec(_Model):
    """`WITH SESSION BOOST` weights (SPEC §4.3)."""

    keywords: float
    velocity: float
    entities: float


class RecencyPlan(_Model):
    """`WITH RECENCY`: `weight · f(age)`, half-life in days, on a timestamp field."""

    weight: float
    half_life_days: float
    field: str = "created_at"
    shape: DecayShape = DecayShape.EXP


class ContextSpec(_Model):
    """`WITH CONTEXT (before = n, after = m)`: each result row comes with up to `before`
    eligible items preceding it in its document and `after` following it."""

    before: int
    after: int


class FeatureSpec(_Model):
    """Which per-candidate features the operators above the legs read (`Features`).

    Item ids, doc ids and positions (the total order) are always gathered.
    """

    entities: bool = False
    recency: str | None = None
    strings: bool = False
    messages: bool = False


class ExplainSpec(_Model):
    """EXPLAIN options: merge returns an `Explain` instead of a `Result`."""

    analyze: bool = False
    verbose: bool = False
    format: Literal["text", "json"] = "text"


class QueryPlan(_Model):
    """A planned SEARCH or RETRIEVE, ready for `run_legs` and `merge`.

    Attributes:
        statement: the statement's canonical text (`Result.statement`).
        collection: the collection searched; `messages`: whether it is the built-in `messages`.
        now: "now" in epoch seconds UTC, read once at plan time (or `AS OF`, kept in `as_of`).
        window: the candidate window N of every leg (`max(offset + limit, window)`).
        legs: the retrieval legs in fusion order; empty for RETRIEVE without MATCHING, which
            scans every eligible row (`filter`).
        fusion: fusion settings (None without legs).
        context: `WITH CONTEXT` (surrounding items per row), or None.
        timestamp_fields: the collection's declared timestamp fields (`Result.to_dicts()`
            turns them into datetimes).
        notices: statement-level warnings known at plan time (`LEXICAL_LEG_EMPTY`, ...).
        embed_ms: time spent embedding the MATCHING text at plan time, or None.
    """

    statement: str
    kind: Literal["search", "retrieve"]
    collection: str
    messages: bool = False
    now: float
    as_of: datetime | None = None
    window: int
    limit: int
    offset: int = 0
    filter: Filter | None = None
    legs: tuple[LegSpec, ...] = ()
    fusion: FusionSpec | None = None
    session_id: str | None = None
    session_boost: SessionBoostSpec | None = None
    signal_weights: tuple[tuple[str, float], ...] | None = None
    recency: RecencyPlan | None = None
    group_by: Literal["document", "conversation"] | None = None
    budget: int
    context: ContextSpec | None = None
    features: FeatureSpec = FeatureSpec()
    timestamp_fields: tuple[str, ...] = ()
    notices: tuple[Notice, ...] = ()
    explain: ExplainSpec | None = None
    embed_ms: float | None = None

    @property
    def need(self) -> int:
        """Rows the page needs: `offset + limit`."""
        return self.offset + self.limit

    @property
    def walks_lineage(self) -> bool:
        """Whether merge resolves conversation lineage (messages, FOR SESSION or GROUP BY
        CONVERSATION)."""
        return self.messages and (self.session_id is not None or self.group_by == "conversation")

    def with_window(self, window: int) -> QueryPlan:
        """The same plan with candidate window `window` for every leg (deeper refills)."""
        legs = tuple(leg.model_copy(update={"window": window}) for leg in self.legs)
        fusion = None if self.fusion is None else self.fusion.model_copy(
            update={"window": window})
        return self.model_copy(update={"window": window, "legs": legs, "fusion": fusion})

    def lexical_terms(self) -> tuple[str, ...]:
        """The distinct terms of the first lexical leg (EXPLAIN VERBOSE), or ()."""
        for leg in self.legs:
            if leg.kind is LegKind.LEXICAL:
                return leg.terms
        return ()
