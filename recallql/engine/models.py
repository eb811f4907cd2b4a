"""Result models returned by `Database.execute` / `Database.explain` (SPEC §8). All pydantic.

Rendering (text tables, EXPLAIN trees) lives in `recallql.engine.explain`, not here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recallql.engine.reasons import Reason
from recallql.engine.result_api import ResultConversions
from recallql.sessions.models import SessionSnapshot


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReasonEntry(_Model):
    """One line of a row's score arithmetic: `CODE(detail) +contribution`."""

    code: Reason
    contribution: float
    detail: str = ""

    def render(self, precision: int = 5) -> str:
        head = f"{self.code.value}({self.detail})" if self.detail else self.code.value
        return f"{head} {self.contribution:+.{precision}f}"


class Notice(_Model):
    """A statement-level warning, e.g. `SESSION_NOT_FOUND`."""

    code: Reason
    message: str


class Row(_Model):
    """One result row.

    `score` equals the left-to-right sum of `reasons[i].contribution`.
    """

    id: str
    collection: str
    score: float
    fields: dict[str, Any] = Field(default_factory=dict)
    reasons: list[ReasonEntry] = Field(default_factory=list)
    session_id: str | None = None
    message_id: int | None = None
    conversation_root: str | None = None


class PlanNode(_Model):
    """One operator of an executed plan, root first."""

    operator: str
    properties: dict[str, Any] = Field(default_factory=dict)
    rows_in: int | None = None
    rows_out: int | None = None
    time_ms: float | None = None
    children: list[PlanNode] = Field(default_factory=list)


class Result(ResultConversions, _Model):
    """The result of a statement: ranked rows plus what the agent needs alongside them.

    A sequence of its entries — the `Row`s of SEARCH / RETRIEVE, the record dicts of SHOW /
    DESCRIBE: `len`, iteration, ``result[i]``, ``result[i:j]``, `to_dicts()`, `to_pandas()`,
    `to_arrow()` (see `recallql.engine.result_api`).
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
    """EXPLAIN [ANALYZE] output: the executed plan and the rows with their reasons."""

    statement: str
    analyze: bool = False
    verbose: bool = False
    format: Literal["text", "json"] = "text"
    plan: PlanNode
    result: Result
    verbose_details: dict[str, str] = Field(default_factory=dict)

    @property
    def rows(self) -> list[Row]:
        return self.result.rows

    def to_text(self) -> str:
        from recallql.engine.explain_text import render_text

        return render_text(self)

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)

    def render(self) -> str:
        """The statement's own choice: `to_json()` for `EXPLAIN FORMAT JSON`, else `to_text()`."""
        return self.to_json() if self.format == "json" else self.to_text()
