"""Builders for the conversation tests (no tests here): sessions and ranked messages on a real DB.

Ranking is made exact by construction: every message is six tokens long and holds the query term
``alpha`` `tf` times (the rest are unique padding words), so with ``USING LEXICAL WITHOUT
RECENCY`` a higher `tf` ranks strictly higher and equal `tf` ties break by item id.
"""

from __future__ import annotations

import itertools

from session_rows import needs_raw_row, write_session_row

import recallql
from recallql.index.embedders import HashEmbedder

T0 = 1_760_000_000.0
#: The conversation tests are about grouping and lineage: they pin RRF without context credit,
#: so the expected scores are the RRF shares of one lexical leg (messages of a session are
#: neighbours, and context credit would mix them).
QUERY = ("SEARCH messages MATCHING 'alpha' USING LEXICAL {session}WITHOUT RECENCY "
         "FUSE RRF (weights = (context = 0)) {group}LIMIT {n}")
_PAD = itertools.count()


def connect() -> recallql.Database:
    """An in-memory database with a fast 16-d hash embedder and a pinned clock."""
    return recallql.connect(embedder=HashEmbedder(16), clock=lambda: T0 + 86_400)


def text(tf: int, word: str = "alpha") -> str:
    """Six tokens: `word` `tf` times, then unique padding."""
    return " ".join([word] * tf + [f"pad{next(_PAD)}" for _ in range(6 - tf)])


def session(db: recallql.Database, sid: str, parent: str | None = None, *, end: str | None = None,
            source: str = "cli", branched: str | None = None, delegate: str | None = None,
            msgs: tuple = ()) -> dict[str, int]:
    """Create `sid`, append `msgs` and close it with `end` (when given).

    `msgs` holds `tf` ints (a live message) or `(tf, active, compacted)` tuples. Returns
    `{label: message_id}` with labels `sid#i` (i from 0).
    """
    if needs_raw_row(db, sid, parent):  # dangling or cyclic lineage: as an import writes it
        write_session_row(db, sid, parent=parent, source=source, branched_from=branched,
                          delegate_from=delegate, started_at=T0)
    else:
        db.sessions.create(sid, "agent-1", parent=parent, source=source,
                           branched_from=branched, delegate_from=delegate, started_at=T0)
    ids = {}
    for i, spec in enumerate(msgs):
        tf, active, compacted = (spec, True, False) if isinstance(spec, int) else spec
        ids[f"{sid}#{i}"] = db.messages.append(sid, "user", text(tf), at=T0 + 1 + i,
                                               active=active, compacted=compacted)
    if end is not None:
        db.sessions.close(sid, end_reason=end, at=T0 + 100)
    return ids


def query(n: int = 10, *, current: str | None = None, group: bool = True,
          budget: int | None = None, offset: int | None = None, explain: str = "") -> str:
    """The standard test statement (bind `:cur` when `current` is given)."""
    grouping = ""
    if group:
        grouping = "GROUP BY CONVERSATION " + (f"(budget = {budget}) " if budget else "")
    text_ = QUERY.format(session="FOR SESSION :cur " if current else "", group=grouping, n=n)
    if offset is not None:
        text_ += f" OFFSET {offset}"
    return (explain + " " + text_).strip()


def run(db: recallql.Database, n: int = 10, *, current: str | None = None, **kw):
    """Execute `query(...)`; returns the `Result` (or `Explain` when `explain=` is given)."""
    params = {"cur": current} if current else {}
    return db.execute(query(n, current=current, **kw), **params)


def rows(result) -> list[tuple[str, str]]:
    """`(session_id, conversation_root)` per row."""
    return [(r.session_id, r.conversation_root) for r in result.rows]
