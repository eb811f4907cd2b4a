"""Session models shared with the engine: `SessionSnapshot` (public, pydantic) and
`SessionState` (what the session boost reads, computed once per statement)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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


class SessionSnapshot(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    """A session's state at a point in time (SPEC §2, issue 5).

    Times are aware UTC datetimes. `signal_scores` are decayed sums by signal name and
    `entities` decayed sums by entity, both at `as_of` (frozen at `ended_at` for closed and
    archived sessions).
    """

    id: str
    agent_id: str
    status: str
    source: str | None = None
    parent_session_id: str | None = None
    end_reason: str | None = None
    branched_from: str | None = None
    delegate_from: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    as_of: datetime
    keywords: list[str] = Field(default_factory=list)
    signal_scores: dict[str, float] = Field(default_factory=dict)
    velocity: float = 0.0
    entities: dict[str, float] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
