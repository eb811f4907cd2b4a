"""Building the demo database: documents, conversations rotated into session chains, progress.

Conversations: each long chat is cut into a chain of sessions every `ROTATE_EVERY` messages, the
way an agent's context compressor rotates a session (the rotation is simulated; the messages,
speakers and timestamps are real). Every session but the tip ends with ``compression``. Then:

- chat 0 keeps its tip open: the "current" session of the live-context example;
- chat 1's tip ends ``branched`` and a branch session continues it (``branched_from`` the tip,
  with a verbatim copy of the tip's messages, as Hermes' ``/branch`` does);
- chat 2's tip ends ``session_reset`` and a fresh session (parent: the tip) takes the last turns.
Short chats are one session each.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from recallql.demo.sources import Chat, Turn

ROTATE_EVERY = 20
RESERVED_TURNS = 6
AGENT = "chat-agent"


@dataclass(frozen=True)
class Size:
    """How much material the demo uses (`docs` None: every entry)."""

    docs: int | None
    long_chats: int
    turns: int
    short_chats: int


SIZES = {
    "small": Size(docs=200, long_chats=3, turns=60, short_chats=20),
    "default": Size(docs=1500, long_chats=6, turns=160, short_chats=100),
    "all": Size(docs=None, long_chats=6, turns=160, short_chats=100),
}


@dataclass
class SessionPlan:
    """One session to create: its messages, links and how it ends (None: stays open)."""

    id: str
    turns: list[Turn]
    parent: str | None = None
    branched_from: str | None = None
    end_reason: str | None = "user_exit"
    copied: list[Turn] = field(default_factory=list)

    @property
    def started(self) -> float:
        first = (self.copied or self.turns)[0]
        return min(first.at, self.turns[0].at) if self.turns else first.at

    @property
    def ended(self) -> float:
        return max(t.at for t in (*self.copied, *self.turns)) + 1.0


def _chain(name: str, turns: list[Turn], end_reason: str | None) -> list[SessionPlan]:
    parts = [turns[i:i + ROTATE_EVERY] for i in range(0, len(turns), ROTATE_EVERY)]
    plans = [SessionPlan(f"{name}-{n}", part, end_reason="compression")
             for n, part in enumerate(parts, start=1)]
    for parent, child in itertools.pairwise(plans):
        child.parent = parent.id
    plans[-1].end_reason = end_reason
    return plans


def plan_conversations(long: list[Chat], short: list[Chat]) -> dict[str, list[SessionPlan]]:
    """Session plans per conversation name (``chat0`` ... for long chats, ``talk0`` ... for
    short ones), parents before children."""
    out: dict[str, list[SessionPlan]] = {}
    for i, chat in enumerate(long):
        name = f"chat{i}"
        if i == 0:
            out[name] = _chain(name, chat.turns, None)
        elif i in (1, 2):
            head, tail = chat.turns[:-RESERVED_TURNS], chat.turns[-RESERVED_TURNS:]
            plans = _chain(name, head, "branched" if i == 1 else "session_reset")
            tip = plans[-1]
            if i == 1:
                plans.append(SessionPlan(f"{name}-branch", tail, parent=tip.id,
                                         branched_from=tip.id, end_reason=None,
                                         copied=list(tip.turns)))
            else:
                plans.append(SessionPlan(f"{name}-reset", tail, parent=tip.id))
            out[name] = plans
        else:
            out[name] = _chain(name, chat.turns, "user_exit")
    for i, chat in enumerate(short):
        out[f"talk{i}"] = [SessionPlan(f"talk{i}", chat.turns)]
    return out


def conversation_roots(plans: Iterable[SessionPlan]) -> dict[str, str]:
    """Each planned session's conversation (its root session), by the lineage rule: a session
    continues its parent's conversation only when the parent ended by compression and the
    session is not a branch of it. `plans` must list parents first."""
    ended: dict[str, str | None] = {}
    roots: dict[str, str] = {}
    for plan in plans:
        continues = plan.parent is not None and ended.get(plan.parent) == "compression" \
            and plan.branched_from != plan.parent
        roots[plan.id] = roots[plan.parent] if continues else plan.id  # type: ignore[index]
        ended[plan.id] = plan.end_reason
    return roots


def message_items(plans: Iterable[SessionPlan], first_id: int) -> Iterator[dict]:
    """The `messages` items of every plan (copied history first), ids from `first_id`."""
    from recallql.sessions.messages import message_item

    next_id = first_id
    for plan in plans:
        for seq, turn in enumerate((*plan.copied, *plan.turns), start=1):
            yield message_item(plan.id, next_id, seq, turn.role, turn.content, turn.at,
                               True, False)
            next_id += 1


def write_conversations(db: Any, plans: list[SessionPlan], batch: int = 512) -> int:
    """Create the sessions, ingest their messages in all-or-nothing batches, close the sessions
    that end. Returns the number of messages."""
    for plan in plans:
        db.sessions.create(plan.id, AGENT, parent=plan.parent, branched_from=plan.branched_from,
                           source="cli", started_at=plan.started)
    items = list(message_items(plans, db.messages.next_ids(plans[0].id)[0]))
    for start in range(0, len(items), batch):
        db.ingest("messages", items[start:start + batch])
    for plan in plans:
        if plan.end_reason is not None:
            db.sessions.close(plan.id, end_reason=plan.end_reason, at=plan.ended)
    return len(items)
