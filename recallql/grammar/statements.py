"""AST nodes for clauses and statements (names, values and predicates: ``nodes.py``).

Option lists (``WITH RECENCY (weight = 0.01, half_life = 30 DAYS)``) are kept as written, in
order, as :class:`Option` nodes; each clause has a property per option that returns the value
node or None when the option was not written (the engine applies the defaults). Canonical text
reproduces only what was written.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from recallql.grammar.errors import ParameterError
from recallql.grammar.nodes import (
    AnyPredicate,
    BooleanLiteral,
    Duration,
    FloatLiteral,
    Identifier,
    IntegerLiteral,
    Node,
    NullLiteral,
    Parameter,
    Span,
    StringLiteral,
    TimestampLiteral,
    Value,
    VectorLiteral,
)

__all__ = [
    "Option", "OptionValue", "NamedValue", "OptionList", "Using", "RecencyBoost", "NoRecency",
    "SessionBoost", "SignalBoost",
    "NoSignalBoost", "Boost", "WithContext", "Fuse", "GroupBy", "Search", "Retrieve", "Explain",
    "ShowCollections", "ShowSessions", "ShowSession", "ShowLineage", "Describe", "Statement",
    "QueryStatement", "StatementBase",
]  # fmt: skip

class NamedValue(Node):
    """``name = value`` inside an option's list, e.g. ``lexical = 1.0`` in
    ``weights = (lexical = 1.0, semantic = 0.5)``."""

    kind: Literal["named_value"] = Field(default="named_value", repr=False)

    name: Identifier
    value: Value


class OptionList(Node):
    """``(name = value, ...)`` as an option's value (``FUSE RRF (weights = (...))``)."""

    kind: Literal["option_list"] = Field(default="option_list", repr=False)

    items: tuple[NamedValue, ...] = ()


OptionValue: TypeAlias = Annotated[
    StringLiteral | IntegerLiteral | FloatLiteral | BooleanLiteral | NullLiteral | TimestampLiteral
    | Parameter | Duration | Identifier | OptionList,
    Field(discriminator="kind"),
]


class Option(Node):
    """``name = value`` inside a clause's parentheses."""

    kind: Literal["option"] = Field(default="option", repr=False)

    name: Identifier
    value: OptionValue


class _WithOptions(Node):
    options: tuple[Option, ...] = ()

    def option(self, name: str) -> OptionValue | None:
        """The value node of option ``name`` (case-insensitive), or None when not written."""
        name = name.lower()
        for option in self.options:
            if option.name.name.lower() == name:
                return option.value
        return None


class Using(Node):
    """``USING HYBRID | LEXICAL | SEMANTIC [(exact | ann [, ef = N])]``: which retrieval legs
    run, and optionally how the semantic leg searches (`method`; None: chosen per statement
    from the eligible row count) and, for ``ann``, the HNSW search breadth `ef` (the peers'
    knob: Qdrant ``hnsw_ef``, LanceDB ``.ef()``, Elasticsearch ``num_candidates``; None: the
    graph's default), with `ef_span`, where its number is in the source (for errors found
    after parsing: an ef below the leg's window)."""

    kind: Literal["using"] = Field(default="using", repr=False)

    mode: Literal["hybrid", "lexical", "semantic"]
    method: Literal["exact", "ann"] | None = None
    ef: int | None = None
    ef_span: Span | None = Field(default=None, repr=False)


class RecencyBoost(_WithOptions):
    """``WITH RECENCY [(weight = n, half_life = <duration>, field = name, shape = EXP)]``."""

    kind: Literal["recency"] = Field(default="recency", repr=False)

    @property
    def weight(self) -> OptionValue | None:
        """Number >= 0 (IntegerLiteral/FloatLiteral) or None."""
        return self.option("weight")

    @property
    def half_life(self) -> OptionValue | None:
        """Duration > 0 or None."""
        return self.option("half_life")

    @property
    def field(self) -> OptionValue | None:
        """Identifier naming the timestamp field, or None."""
        return self.option("field")

    @property
    def shape(self) -> OptionValue | None:
        """Identifier ``EXP``, ``GAUSS`` or ``LINEAR`` (normalised upper-case), or None."""
        return self.option("shape")


class NoRecency(Node):
    """``WITHOUT RECENCY``."""

    kind: Literal["no_recency"] = Field(default="no_recency", repr=False)


class SessionBoost(_WithOptions):
    """``WITH SESSION BOOST [(keywords = n, velocity = n, entities = n)]`` (weights >= 0)."""

    kind: Literal["session_boost"] = Field(default="session_boost", repr=False)

    @property
    def keywords(self) -> OptionValue | None:
        """Weight of the keyword hint, or None."""
        return self.option("keywords")

    @property
    def velocity(self) -> OptionValue | None:
        """Weight of the reward velocity, or None."""
        return self.option("velocity")

    @property
    def entities(self) -> OptionValue | None:
        """Weight of the entity signal sum, or None."""
        return self.option("entities")


class SignalBoost(_WithOptions):
    """``WITH SIGNAL BOOST [(<signal name> = n, ...)]``: one weight per signal name."""

    kind: Literal["signal_boost"] = Field(default="signal_boost", repr=False)

    @property
    def weights(self) -> tuple[tuple[str, OptionValue], ...]:
        """``(signal name, value node)`` pairs in the order written."""
        return tuple((option.name.name, option.value) for option in self.options)


class NoSignalBoost(Node):
    """``WITHOUT SIGNAL BOOST``."""

    kind: Literal["no_signal_boost"] = Field(default="no_signal_boost", repr=False)


Boost: TypeAlias = Annotated[
    RecencyBoost | NoRecency | SessionBoost | SignalBoost | NoSignalBoost,
    Field(discriminator="kind"),
]


class WithContext(_WithOptions):
    """``WITH CONTEXT [(before = n, after = m)]``: return each hit with the items around it in
    its document (messages: its session; chunks: its document)."""

    kind: Literal["context"] = Field(default="context", repr=False)

    @property
    def before(self) -> OptionValue | None:
        """Items before each hit (whole number >= 0), or None."""
        return self.option("before")

    @property
    def after(self) -> OptionValue | None:
        """Items after each hit (whole number >= 0), or None."""
        return self.option("after")


class Fuse(_WithOptions):
    """``FUSE RRF | CONVEX [(...)]``: how the legs are fused — reciprocal rank fusion (`k`) or
    the convex combination of normalised scores (`alpha`, `normalization`); both take `window`
    and per-leg `weights = (leg = w, ...)`."""

    kind: Literal["fuse"] = Field(default="fuse", repr=False)

    method: Literal["rrf", "convex"] = "rrf"

    @property
    def alpha(self) -> OptionValue | None:
        """CONVEX: the semantic leg's weight α in [0, 1] (lexical 1 − α), or None."""
        return self.option("alpha")

    @property
    def normalization(self) -> OptionValue | None:
        """CONVEX: `minmax` or `tmm` (an identifier), or None."""
        return self.option("normalization")

    @property
    def k(self) -> OptionValue | None:
        """The RRF constant (number > 0), or None."""
        return self.option("k")

    @property
    def window(self) -> OptionValue | None:
        """The candidate window N of each leg (whole number > 0), or None."""
        return self.option("window")

    @property
    def weights(self) -> OptionValue | None:
        """The per-leg weights (an `OptionList` of ``leg = number >= 0``), or None."""
        return self.option("weights")


class GroupBy(_WithOptions):
    """``GROUP BY DOCUMENT | CONVERSATION [(budget = n)]``."""

    kind: Literal["document", "conversation"] = Field(repr=False)

    @property
    def budget(self) -> OptionValue | None:
        """Lineage fetch budget (whole number > 0, CONVERSATION only), or None."""
        return self.option("budget")


class StatementBase(Node):
    """Fields every statement has.

    Attributes:
        source: the text the statement was parsed from (spans are offsets into it; for a script,
            the whole script). Empty for hand-built statements.
        parameters: the statement's parameters in source order; empty once bound.
    """

    source: str = Field(default="", repr=False)
    parameters: tuple[Parameter, ...] = ()


def _literal_value(node: Node | None, what: str) -> object:
    if isinstance(node, Parameter):
        raise ParameterError(f"{what} is the unbound parameter {node.label}; call bind() first")
    return None if node is None else node.value  # type: ignore[attr-defined]


class QueryStatement(StatementBase):
    """Clauses shared by SEARCH and RETRIEVE, in canonical order."""

    collection: Identifier
    matching: StringLiteral | Parameter | None = None
    using: Using | None = None
    near: Parameter | VectorLiteral | None = None
    where: AnyPredicate | None = None
    session: StringLiteral | Parameter | None = None
    boosts: tuple[Boost, ...] = ()
    context: WithContext | None = None
    fuse: Fuse | None = None
    group_by: GroupBy | None = None
    as_of: TimestampLiteral | Parameter | None = None
    limit: IntegerLiteral | Parameter | None = None
    offset: IntegerLiteral | Parameter | None = None

    def _boost(self, *types: type) -> Node | None:
        return next((boost for boost in self.boosts if isinstance(boost, types)), None)

    @property
    def recency(self) -> RecencyBoost | NoRecency | None:
        """The WITH/WITHOUT RECENCY clause, or None when not written."""
        return self._boost(RecencyBoost, NoRecency)  # type: ignore[return-value]

    @property
    def session_boost(self) -> SessionBoost | None:
        """The WITH SESSION BOOST clause, or None when not written."""
        return self._boost(SessionBoost)  # type: ignore[return-value]

    @property
    def signal_boost(self) -> SignalBoost | NoSignalBoost | None:
        """The WITH/WITHOUT SIGNAL BOOST clause, or None when not written."""
        return self._boost(SignalBoost, NoSignalBoost)  # type: ignore[return-value]

    @property
    def matching_text(self) -> str | None:
        """The MATCHING text of a bound statement, or None without MATCHING."""
        return _literal_value(self.matching, "MATCHING")  # type: ignore[return-value]

    @property
    def session_id(self) -> str | None:
        """The FOR SESSION id of a bound statement, or None without FOR SESSION."""
        return _literal_value(self.session, "FOR SESSION")  # type: ignore[return-value]

    @property
    def limit_value(self) -> int | None:
        """The LIMIT of a bound statement (RETRIEVE: its count), or None when not written."""
        return _literal_value(self.limit, "LIMIT")  # type: ignore[return-value]

    @property
    def offset_value(self) -> int:
        """The OFFSET of a bound statement, 0 when not written."""
        return _literal_value(self.offset, "OFFSET") or 0  # type: ignore[return-value]


class Search(QueryStatement):
    """``SEARCH <collection> MATCHING <text> ...``: query-driven hybrid retrieval."""

    kind: Literal["search"] = Field(default="search", repr=False)


class Retrieve(QueryStatement):
    """``RETRIEVE [<n>] FROM <collection> ...``: context-driven recall; ``count`` is the limit."""

    kind: Literal["retrieve"] = Field(default="retrieve", repr=False)
    count: IntegerLiteral | Parameter | None = None

    @property
    def limit_value(self) -> int | None:
        """The count (``RETRIEVE n``) or LIMIT of a bound statement, or None when not written."""
        if self.count is not None:
            return _literal_value(self.count, "RETRIEVE count")  # type: ignore[return-value]
        return _literal_value(self.limit, "LIMIT")  # type: ignore[return-value]


class Explain(StatementBase):
    """``EXPLAIN [ANALYZE] [VERBOSE] [FORMAT TEXT | JSON] <SEARCH | RETRIEVE>``.

    ``format`` is None when not written (the engine's default is text).
    """

    kind: Literal["explain"] = Field(default="explain", repr=False)
    analyze: bool = False
    verbose: bool = False
    format: Literal["text", "json"] | None = None
    statement: Search | Retrieve


class ShowCollections(StatementBase):
    """``SHOW COLLECTIONS``."""

    kind: Literal["show_collections"] = Field(default="show_collections", repr=False)


class ShowSessions(StatementBase):
    """``SHOW SESSIONS [WHERE ...] [LIMIT n] [OFFSET m]``."""

    kind: Literal["show_sessions"] = Field(default="show_sessions", repr=False)
    where: AnyPredicate | None = None
    limit: IntegerLiteral | Parameter | None = None
    offset: IntegerLiteral | Parameter | None = None


class ShowSession(StatementBase):
    """``SHOW SESSION <id>``."""

    kind: Literal["show_session"] = Field(default="show_session", repr=False)
    session: StringLiteral | Parameter


class ShowLineage(StatementBase):
    """``SHOW LINEAGE <id>``: the session's chain of parents."""

    kind: Literal["show_lineage"] = Field(default="show_lineage", repr=False)
    session: StringLiteral | Parameter


class Describe(StatementBase):
    """``DESCRIBE <collection>``: the collection's schema."""

    kind: Literal["describe"] = Field(default="describe", repr=False)
    collection: Identifier


Statement = Annotated[
    Search
    | Retrieve
    | Explain
    | ShowCollections
    | ShowSessions
    | ShowSession
    | ShowLineage
    | Describe,
    Field(discriminator="kind"),
]
"""Any statement; pydantic discriminates on ``kind``."""
