"""Result models returned by `Database.execute` / `Database.explain` (SPEC §8). All pydantic.

Rendering (EXPLAIN trees and text) lives in `recallql.engine.explain` and `explain_text`; a
reason's `detail` text is rendered here from its typed fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from recallql.engine.reasons import Reason
from recallql.engine.result_api import ResultConversions
from recallql.grammar.construct import trusted as trusted  # re-exported (its home until session 5)
from recallql.sessions.models import SessionSnapshot


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReasonEntry(_Model):
    """One line of a row's score arithmetic: `CODE(detail) +contribution`.

    The typed fields hold the numbers behind the line at full precision (None when they do not
    apply to the code); `detail` renders them with the fixed precision of EXPLAIN's text
    (`rank=2, bm25=1.990`). Dumps (`model_dump`, JSON) carry the fields that apply and
    `detail`; validating a dump ignores `detail` (it is recomputed) and any key it does not
    know.

    Attributes:
        code: the reason code.
        contribution: what the entry adds to the score (the same float the executor summed).
        leg: the leg (`*_MATCH`, `LEG_ABSENT`). rank: its 1-based rank.
        bm25, cosine: the leg's raw score (lexical-kind, semantic-kind legs).
        norm: the normalised score φ the convex combination weighed (`FUSE CONVEX`).
        neighbour, side, distance, relevance, weight: `CONTEXT_MATCH`: the crediting item's
            id, where it is (`before` / `after` the row), how many eligible items away (1: the
            next one), its fused relevance and the context leg's weight (the contribution is
            `weight^distance · relevance`).
        matched, total: session keywords matched of total (`SESSION_KEYWORDS`).
        velocity: the session's reward velocity v (`SESSION_VELOCITY`).
        entity: the row's entity (`SESSION_ENTITY`, `SIGNAL_BOOST`).
        entity_sum: the session's decayed signal sum e on the entity (`SESSION_ENTITY`).
        sums: decayed signal sums s by signal name (`SIGNAL_BOOST`).
        age_days: the row's age in days (`RECENCY`, `RECENCY_FUTURE_CLAMPED`: 0).
        root, anchor: the conversation root and the hit's session (`LINEAGE`).
    """

    # a dump's `detail` is ignored on validation (it is recomputed from the fields)
    model_config = ConfigDict(frozen=True, extra="ignore")

    code: Reason
    contribution: float
    leg: str | None = None
    rank: int | None = None
    bm25: float | None = None
    cosine: float | None = None
    norm: float | None = None
    neighbour: str | None = None
    side: str | None = None
    distance: int | None = None
    relevance: float | None = None
    weight: float | None = None
    matched: int | None = None
    total: int | None = None
    velocity: float | None = None
    entity: str | None = None
    entity_sum: float | None = None
    sums: dict[str, float] | None = None
    age_days: float | None = None
    root: str | None = None
    anchor: str | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = {k: v for k, v in handler(self).items() if v is not None}
        out["detail"] = self.detail
        return out

    @property
    def detail(self) -> str:
        """The fields rendered as EXPLAIN's text prints them (`rank=1, bm25=7.210`)."""
        return render_detail(self)

    def render(self, precision: int = 5) -> str:
        """The line as EXPLAIN prints it: ``LEXICAL_MATCH(rank=1, bm25=0.716, norm=1.00000)
        +0.50000`` (`precision`: the contribution's decimals); also ``str(entry)``."""
        head = f"{self.code.value}({self.detail})" if self.detail else self.code.value
        return f"{head} {self.contribution:+.{precision}f}"

    def __str__(self) -> str:
        return self.render()

    def __repr_args__(self) -> Any:
        """The fields that apply to the code, as dumps carry them (a repr listed every one of
        the 21 fields, None for most)."""
        return [(k, v) for k, v in super().__repr_args__() if v is not None]


def _num(x: float | None, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def _age(days: float | None) -> str:
    assert days is not None
    return f"{days:.0f}d" if days >= 10 else f"{days:.2f}d"


_LEG_NAMES = {Reason.LEXICAL_MATCH: "lexical", Reason.SEMANTIC_MATCH: "semantic"}


def render_detail(r: ReasonEntry) -> str:
    """A reason's detail text from its fields (fixed precision; the golden files hold it)."""
    code = r.code
    if code in _LEG_NAMES:
        leg = "" if r.leg == _LEG_NAMES[code] else f"leg={r.leg}, "
        score = f"bm25={_num(r.bm25)}" if code is Reason.LEXICAL_MATCH \
            else f"cosine={_num(r.cosine)}"
        norm = "" if r.norm is None else f", norm={_num(r.norm, 5)}"
        return f"{leg}rank={r.rank}, {score}{norm}"
    if code is Reason.CONTEXT_MATCH:
        leg = "" if r.leg == "context" else f"leg={r.leg}, "
        far = f"distance={r.distance}, " if r.distance is not None and r.distance > 1 else ""
        return (f"{leg}neighbour={r.neighbour}, side={r.side}, {far}"
                f"relevance={_num(r.relevance, 5)}, weight={r.weight:g}")
    simple = {
        Reason.LEG_ABSENT: lambda: f"leg={r.leg}",
        Reason.NO_RELEVANCE: lambda: "boosts only",
        Reason.SESSION_KEYWORDS: lambda: f"{r.matched}/{r.total}",
        Reason.SESSION_VELOCITY: lambda: f"uniform, v={_num(r.velocity)}",
        Reason.SESSION_ENTITY: lambda: f"entity={r.entity}, e={_num(r.entity_sum)}",
        Reason.SIGNAL_BOOST: lambda: ", ".join([f"entity={r.entity}", *(
            f"{name}={_num(s)}" for name, s in (r.sums or {}).items())]),
        Reason.RECENCY: lambda: f"age={_age(r.age_days)}",
        Reason.RECENCY_FUTURE_CLAMPED: lambda: "age=0d",
        Reason.LINEAGE: lambda: f"root={r.root}, anchor={r.anchor}",
    }
    render = simple.get(code)
    return render() if render is not None else ""


class Notice(_Model):
    """A statement-level warning, e.g. `SESSION_NOT_FOUND`."""

    code: Reason
    message: str


class ContextItem(_Model):
    """An item around a result row (`WITH CONTEXT`): its place relative to the row (−2, −1
    before it, 1, 2 after it, in its document), its id and stored fields."""

    offset: int
    id: str
    fields: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    message_id: int | None = None


class Row(_Model):
    """One result row.

    `score` equals the left-to-right sum of `reasons[i].contribution`. `context` holds the
    items around it under `WITH CONTEXT` (None without the clause), in document order.

    Attributes:
        id: the item's id (a chunk's, under GROUP BY DOCUMENT the document's best chunk's;
            ``msg:<message_id>`` for a message).
        collection: the collection it comes from.
        score: the row's score, the sum of its `reasons`' contributions.
        reasons: its score arithmetic, one `ReasonEntry` per part, in EXPLAIN's order.
        session_id, message_id: a message's session and message id (None for other items).
        conversation_root: under ``GROUP BY CONVERSATION``, the row's conversation root (the
            first session of its chain of compressed sessions); None otherwise.
        context: the items around it under ``WITH CONTEXT`` (`ContextItem`s), else None.
        fields: the stored fields as stored: ``id``, ``doc_id``, ``entity``, ``position``,
            the text fields and the declared fields as ingested (None when missing), and the
            timestamps — ``created_at`` and the collection's declared timestamp fields — as
            epoch seconds UTC, a float (``2024-01-01`` is ``1704067200.0``; None when the
            item has none). `Result.to_dicts()` (and so ``to_pandas()`` and ``to_arrow()``)
            gives the same timestamps as aware UTC `datetime`s, and the CLI's JSON as
            ISO-8601 text; for one row: ``datetime.fromtimestamp(row.fields["created_at"],
            tz=UTC)``. `ContextItem.fields` are the same.
    """

    id: str
    collection: str
    score: float
    fields: dict[str, Any] = Field(default_factory=dict)
    reasons: list[ReasonEntry] = Field(default_factory=list)
    session_id: str | None = None
    message_id: int | None = None
    conversation_root: str | None = None
    context: list[ContextItem] | None = None

    def __hash__(self) -> int:
        """By collection, id and score (equal rows have equal ones), so rows go in sets and
        dict keys: pydantic's hash of every field failed on `fields` (unhashable dict)."""
        return hash((self.collection, self.id, self.score))


class PlanNode(_Model):
    """One operator of an executed plan: `Explain.plan` is the root (the last operator to
    run, ``TopK``), its inputs are its `children`, down to the legs' scans. EXPLAIN's text
    prints one line per node: ``operator: properties  rows=in→out time=ms``.

    Attributes:
        operator: the operator's name (``TopK``, ``RecencyBoost``, ``SessionBoost``,
            ``ConvexFusion``, ``RrfFusion``, ``LexicalScan``, ``SemanticScan``,
            ``ContextScan``, ...).
        properties: its settings and what it found, as the text prints them after the name;
            the keys depend on the operator (``k`` and ``offset`` of ``TopK``, ``terms`` and
            ``window`` of ``LexicalScan``, ``bounds`` of ``ConvexFusion``, ...), the values
            plain JSON (str, int, float, list, dict).
        rows_in: rows it read from its children (0 for a scan); None without ANALYZE.
        rows_out: rows it produced; None without ANALYZE.
        time_ms: the operator's own time in milliseconds (its children's not included);
            None without ANALYZE.
        children: its inputs, in plan order (a fusion's legs in fusion order).
    """

    operator: str
    properties: dict[str, Any] = Field(default_factory=dict)
    rows_in: int | None = None
    rows_out: int | None = None
    time_ms: float | None = None
    children: list[PlanNode] = Field(default_factory=list)


class Result(ResultConversions, _Model):  # type: ignore[misc]  # iterates entries, not fields
    """The result of a statement: ranked rows plus what the agent needs alongside them.

    A sequence of its entries — the `Row`s of SEARCH / RETRIEVE, the record dicts of SHOW /
    DESCRIBE: `len`, iteration, ``result[i]``, ``result[i:j]``, `to_dicts()`, `to_pandas()`,
    `to_arrow()` (see `recallql.engine.result_api`).

    Attributes:
        statement: the statement's canonical text, its parameters' values written in.
        collection: the collection searched (None for SHOW and DESCRIBE).
        rows: the ranked `Row`s of SEARCH / RETRIEVE (empty for SHOW and DESCRIBE); typed
            ``list[Row]``, where iteration and ``result[i]`` are typed ``Any`` (an entry may
            be a record dict).
        records: the record dicts of SHOW / DESCRIBE (their times ISO-8601 UTC text), in the
            order of `columns`; None for SEARCH and RETRIEVE.
        session_snapshot: the FOR SESSION session's state the statement ran with (None
            without FOR SESSION, or when the session does not exist: see `warnings`).
        warnings: statement-level `Notice`s (``code``, ``message``): an unknown FOR SESSION
            session, a leg that could not run, hits hidden as live context, ...
        truncated: the rows are a safe ranked prefix: GROUP BY CONVERSATION's lineage budget
            ran out (with a ``LINEAGE_BUDGET_TRUNCATED`` warning).
        stats: how it ran, as EXPLAIN's ``stats:`` line prints it: ``legs`` (per leg
            ``rows``, ``window``, and e.g. ``filter``, ``method``), ``window``, ``now``
            (ISO-8601 text) and ``embed_ms`` when the MATCHING text was embedded.
    """

    statement: str = ""
    collection: str | None = None
    rows: list[Row] = Field(default_factory=list)
    session_snapshot: SessionSnapshot | None = None
    warnings: list[Notice] = Field(default_factory=list)
    truncated: bool = False
    stats: dict[str, Any] = Field(default_factory=dict)
    columns: list[str] | None = None
    records: list[dict[str, Any]] | None = None
    #: The collection's declared timestamp fields besides ``created_at`` (set by
    #: `Database.execute`; `to_dicts()` turns them into datetimes).
    timestamp_fields: list[str] = Field(default_factory=list)

    def ids(self) -> list[str]:
        """The row ids in result order."""
        return [row.id for row in self.rows]


class Explain(_Model):
    """EXPLAIN [ANALYZE] output: the executed plan and the rows with their reasons.

    A sequence of its result's `Row`s, as a `Result` is: `len`, iteration, ``explain[i]``
    (a `Row`), ``explain[i:j]`` (a `Result`), `to_dicts()`, `to_pandas()` and `to_arrow()`
    all see ``explain.result``'s rows in result order. It reads like a `Result`, too:
    `ids()`, `rows`, `warnings`, `session_snapshot`, `stats`, `truncated`, `collection`,
    `columns`, `records` and `timestamp_fields` are ``explain.result``'s, so code given what
    `Database.execute` returns (typed ``Result | Explain``) reads them without an
    ``isinstance`` check; `plan`, `to_text()` and `to_json()` are EXPLAIN's own (use
    `Database.explain`, typed `Explain`, for them).
    """

    statement: str
    analyze: bool = False
    verbose: bool = False
    format: Literal["text", "json"] = "text"
    plan: PlanNode
    result: Result
    verbose_details: dict[str, str] = Field(default_factory=dict)
    #: Facts about how the plan scored, printed as ``note:`` lines (e.g. BM25 statistics that
    #: still count deleted or replaced rows, `recallql.engine.explain.bm25_note`).
    notes: list[str] = Field(default_factory=list)

    @property
    def rows(self) -> list[Row]:
        """The explained result's rows, in result order."""
        return self.result.rows

    @property
    def warnings(self) -> list[Notice]:
        """The explained result's statement-level warnings (`Result.warnings`)."""
        return self.result.warnings

    @property
    def session_snapshot(self) -> SessionSnapshot | None:
        """The FOR SESSION session's state the statement ran with (`Result.session_snapshot`)."""
        return self.result.session_snapshot

    @property
    def stats(self) -> dict[str, Any]:
        """The explained result's execution statistics (`Result.stats`)."""
        return self.result.stats

    @property
    def truncated(self) -> bool:
        """`Result.truncated` of the explained result."""
        return self.result.truncated

    @property
    def collection(self) -> str | None:
        """The collection searched (`Result.collection`)."""
        return self.result.collection

    @property
    def columns(self) -> list[str] | None:
        """`Result.columns`: None, as for every SEARCH and RETRIEVE."""
        return self.result.columns

    @property
    def records(self) -> list[dict[str, Any]] | None:
        """`Result.records`: None, as for every SEARCH and RETRIEVE."""
        return self.result.records

    @property
    def timestamp_fields(self) -> list[str]:
        """`Result.timestamp_fields` of the explained result."""
        return self.result.timestamp_fields

    def ids(self) -> list[str]:
        """The row ids in result order (`Result.ids`)."""
        return self.result.ids()

    def __len__(self) -> int:
        return len(self.result)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]  # rows, not fields
        """The rows (`Row`s), in result order; typed as `Result`'s iteration is (``Any``: a
        `Result` may hold records), so iterating what `Database.execute` returns type-checks
        for both."""
        return iter(self.result)

    def __getitem__(self, index: int | slice) -> Any:
        """As `Result.__getitem__` (IndexError out of range, TypeError for other keys)."""
        return self.result[index]

    def to_dicts(self) -> list[dict[str, Any]]:
        """`Result.to_dicts()` of the explained result."""
        return self.result.to_dicts()

    def to_pandas(self) -> Any:
        """`Result.to_pandas()` of the explained result (extra ``recallql[pandas]``)."""
        return self.result.to_pandas()

    def to_arrow(self) -> Any:
        """`Result.to_arrow()` of the explained result (extra ``recallql[arrow]``)."""
        return self.result.to_arrow()

    def to_text(self) -> str:
        """The plan, root first, and each row's score arithmetic, as ``recallql explain``
        prints them."""
        from recallql.engine.explain_text import render_text

        return render_text(self)

    def to_json(self, indent: int | None = 2) -> str:
        """The whole EXPLAIN as JSON (``EXPLAIN FORMAT JSON``): ``plan`` (nested `PlanNode`s),
        ``result`` (its rows with their reasons) and the rest; `Explain.model_validate_json`
        reads it back."""
        return self.model_dump_json(indent=indent)

    def render(self) -> str:
        """The statement's own choice: `to_json()` for `EXPLAIN FORMAT JSON`, else `to_text()`."""
        return self.to_json() if self.format == "json" else self.to_text()

    def __repr__(self) -> str:
        """One line, as a `Result`'s: ``<Explain ANALYZE SEARCH docs MATCHING 'x' …: plan
        TopK, 2 rows ['a' 1.00066, 'b' 0.50012]>`` (``print(explain)`` shows the plan)."""
        result = self.result
        modifiers = [w for w, on in (("ANALYZE", self.analyze), ("VERBOSE", self.verbose)) if on]
        return (f"<Explain {' '.join([*modifiers, result._words()])}: plan "
                f"{self.plan.operator}, {result._count()}{result._preview()}>")

    def __str__(self) -> str:
        """`render()`: the plan and each row's score arithmetic, as ``recallql explain``
        prints them (JSON for ``EXPLAIN FORMAT JSON``)."""
        return self.render()
