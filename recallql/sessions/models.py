"""Session models shared with the engine: `SessionSnapshot` (public, pydantic) and
`SessionState` (what the session boost reads, computed once per statement)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from recallql.grammar.timestamps import format_timestamp


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the session boost needs of a session (SPEC §4.3), computed once per statement.

    Attributes:
        session_id: the session.
        keywords: lower-cased, de-duplicated annotation keywords.
        velocity: decayed sum of accepted `reward` signals at `now` (frozen at `ended_at`).
        entities: decayed signal sums by entity.
    """

    session_id: str
    keywords: tuple[str, ...] = ()
    velocity: float = 0.0
    entities: dict[str, float] = field(default_factory=dict)


#: A time: an aware UTC datetime, written to JSON as `format_timestamp` text.
UtcTime = Annotated[datetime, PlainSerializer(format_timestamp, return_type=str, when_used="json")]


class SessionSnapshot(BaseModel):
    """A session's state at a point in time (SPEC §2, issue 5).

    Times are aware UTC datetimes (JSON: ``2025-01-31T08:00:00.000000Z``). `signal_scores` are
    decayed sums by signal name and `entities` decayed sums by entity, both at `as_of` (frozen
    at `ended_at` for closed and archived sessions).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    agent_id: str
    status: str
    source: str | None = None
    parent_session_id: str | None = None
    end_reason: str | None = None
    branched_from: str | None = None
    delegate_from: str | None = None
    started_at: UtcTime
    ended_at: UtcTime | None = None
    as_of: UtcTime
    keywords: list[str] = Field(default_factory=list)
    signal_scores: dict[str, float] = Field(default_factory=dict)
    velocity: float = 0.0
    entities: dict[str, float] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
