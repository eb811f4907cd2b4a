"""Sessions, signals, messages and conversation lineage: the agent-memory state beside the
collections (SPEC §2, §4.3, §4.4, §6).

This package may import `recallql.index` (storage), never `recallql.engine`: the engine reads
sessions through `Sessions.state` / `Sessions.entity_sums` and lineage through
`Sessions.resolver` (a `StoredRoots`, or a `LineageResolver` on an older store) and
`LiveContext`.

| module | role |
|---|---|
| `lifecycle` | `Sessions` (`db.sessions`): create, annotate, signal, close, archive, sweep |
| `input`, `state`, `sweep` | argument checks; snapshots and decayed sums; the sweep rule |
| `signals` | the signal policy and decay |
| `messages` | `Messages` (`db.messages`): message items of the built-in `messages` collection |
| `edges` | the edge rule (SPEC §6): `SessionRow`, `EdgeVerdict`, `Resolution` |
| `lineage` | the query-time walk that defines roots (budget, memo), `verify` |
| `roots` | write-time roots: the stored columns, `refresh` after each write, `heal` |
| `stored` | a statement's roots read from the stored columns (`StoredRoots`) |
| `lineage_access` | `db.sessions`' lineage methods: prepare, resolver, verify_lineage |
| `live_context` | live-context hiding under FOR SESSION |
| `models` | `SessionSnapshot`, `SessionState` |
"""

from recallql.sessions.input import SessionError, SessionNotFound
from recallql.sessions.lifecycle import Sessions
from recallql.sessions.messages import Messages
from recallql.sessions.models import SessionSnapshot, SessionState
from recallql.sessions.signals import SignalPolicy

__all__ = ["Messages", "SessionError", "SessionNotFound", "SessionSnapshot", "SessionState",
           "Sessions", "SignalPolicy"]
