"""Live context under ``FOR SESSION current`` on ``messages`` (SPEC §6).

What the agent still holds in its context window should not come back as a search result; what
was rotated out by compression, or left behind by a fresh reset, should. The rules, in SPEC §6
wording:

- A hit is *live* when its session is the current one, belongs to the current conversation (same
  root), or is a generic ancestor of the current session (e.g. a branch's parent, whose history
  the branch copied). Generic ancestors follow parent links of any kind upward (cycle-safe),
  not only compression continuations.
- A live hit is *hidden* unless its session ended by compression or by a fresh reset
  (``new_session``, ``session_reset``, ``session_switch``, ``idle``, ``daily``, ``suspended``,
  ``resume_pending_expired``), or the message is compacted.
- An unresolved current session hides only its own id.
- Rewound messages (``active=0, compacted=0``) are never searchable (:func:`is_searchable`).

The current session's root and generic ancestors come from the statement's resolver: with stored
roots (`recallql.sessions.stored.StoredRoots`, every database a writer has opened) that is one
lookup and one recursive query, with no budget and no step limit. With the query-time walk
(`LineageResolver`: a database an older version wrote, opened read-only) the ancestors are read
with :meth:`LineageResolver.chain` (parent links of any kind, bounded by ``max_steps`` links,
outside the budget B) and the resolution then runs on the cached rows; when it still runs out of
budget (a chain longer than the step bound), the conversation is unknown: the scan operators fail
closed (no rows, ``truncated``), see :attr:`LiveContext.exhausted`.

How a hidden hit lets a later hit of the same session serve is the grouping operator's business;
this module only answers per hit, in O(1) after :meth:`LiveContext.build`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from recallql.sessions.edges import (
    COMPRESSION,
    DEFAULT_MAX_STEPS,
    FRESH_RESET_REASONS,
    Resolution,
    ResolutionStatus,
    SessionRow,
    UnresolvedReason,
)

if TYPE_CHECKING:
    from recallql.sessions.stored import RootResolver

#: End reasons whose live hits stay findable: the context was rotated out or reset.
SHOWN_END_REASONS: Final = frozenset({COMPRESSION}) | FRESH_RESET_REASONS


def is_searchable(active: bool | int | None, compacted: bool | int | None) -> bool:
    """Whether a message may ever be a hit.

    Live (``active=1``) and compacted (``active=0, compacted=1``) messages are searchable; a
    rewound message (``active=0, compacted=0``) never is. ``None`` counts as 0.
    """
    return bool(active) or bool(compacted)


@dataclass(frozen=True, slots=True)
class LiveContext:
    """The current session's live context, built once per statement.

    Attributes:
        current_id: The ``FOR SESSION`` session id.
        resolution: The current session's resolution.
        current_root: Root of the current conversation; None when the current session is not
            resolved (then only ``current_id`` is live).
        ancestors: Generic ancestors of the current session (parent links of any kind); empty
            when the current session is not resolved.
    """

    current_id: str
    resolution: Resolution
    current_root: str | None
    ancestors: frozenset[str]

    @classmethod
    def build(
        cls, current_id: str, resolver: RootResolver, max_steps: int = DEFAULT_MAX_STEPS
    ) -> LiveContext:
        """Resolve the current session and collect its generic ancestors.

        Uses the statement's resolver, so rows read here are cached for the hits' resolutions.
        The ancestors are read first (a walk resolver reads them outside the budget, so the
        current session's resolution then reads cached rows and costs budget only beyond
        ``max_steps`` links).

        Args:
            current_id: The ``FOR SESSION`` session id.
            resolver: The statement's resolver (`StoredRoots` or `LineageResolver`).
            max_steps: Bound on a walk resolver's ancestor walk (parent links followed).
        """
        ancestors = resolver.ancestors(current_id, max_steps)
        resolution = resolver.resolve(current_id)
        if not resolution.resolved:
            return cls(current_id, resolution, None, frozenset())
        return cls(current_id, resolution, resolution.root, ancestors)

    @classmethod
    def absent(cls, current_id: str) -> LiveContext:
        """The live context of a session that does not exist (at the statement's time): only
        its own id, as for an unresolved current session."""
        missing = Resolution(None, ResolutionStatus.UNRESOLVED, UnresolvedReason.MISSING_SESSION)
        return cls(current_id, missing, None, frozenset())

    @property
    def exhausted(self) -> bool:
        """True when the current session's resolution ran out of budget (conversation unknown:
        no hit can be proven outside the live context, so scans return nothing)."""
        return self.resolution.status is ResolutionStatus.BUDGET_EXHAUSTED

    def is_live(self, session_id: str, root: str | None) -> bool:
        """Whether a hit of ``session_id`` is in the live context.

        Args:
            session_id: The hit's session id.
            root: The hit session's conversation root (from the statement's resolver), or None
                when it is not resolved.
        """
        if session_id == self.current_id:
            return True
        if self.current_root is None:
            return False
        return session_id in self.ancestors or (root is not None and root == self.current_root)

    def is_hidden(self, session: SessionRow, root: str | None, *, compacted: bool | int) -> bool:
        """Whether a searchable hit is hidden because the agent still holds it.

        Args:
            session: The hit's session row (its ``end_reason`` decides).
            root: The hit session's conversation root, or None when not resolved.
            compacted: The message's ``compacted`` flag; a compacted message is never hidden.
        """
        if compacted or session.end_reason in SHOWN_END_REASONS:
            return False
        return self.is_live(session.id, root)

    def shows(
        self, session: SessionRow, root: str | None, *, active: bool | int, compacted: bool | int
    ) -> bool:
        """Whether a hit may be displayed: searchable and not hidden."""
        return is_searchable(active, compacted) and not self.is_hidden(
            session, root, compacted=compacted
        )
