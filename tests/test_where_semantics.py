"""One WHERE semantics: `SHOW SESSIONS WHERE` and `SEARCH/RETRIEVE ... WHERE` give the same rows.

Both translate the predicate with `engine.analyzer.where_filter` and evaluate it with
`index.filters` (three-valued logic: NULL compares unknown and rows fail closed). Here the
session table and a collection holding the same rows (the session fields as declared fields,
times as timestamps) answer a table of predicates of every form; the two must agree, and a few
answers are pinned by hand.
"""

from __future__ import annotations

import pytest

import recallql

T0 = 1_750_000_000.0  # 2025-06-15T15:06:40Z
DAY = 86400.0
FIELDS = {name: "str" for name in ("agent_id", "status", "source", "parent_session_id",
                                   "end_reason", "branched_from", "delegate_from", "title")}
FIELDS |= {"started_at": "timestamp", "ended_at": "timestamp"}


@pytest.fixture(scope="module")
def db():
    clock = [T0 + 10 * DAY]
    database = recallql.connect(embedder=None, clock=lambda: clock[0])
    s = database.sessions
    s.create("s-a", "agent-1", started_at=T0, title="first steps")
    s.create("s-b", "agent-2", parent="s-a", source="tool", started_at=T0 + DAY)
    s.close("s-b", end_reason="compression", at=T0 + 2 * DAY)
    s.create("s-c", "agent-1", parent="s-b", started_at=T0 + 3 * DAY, title="Deploy 100%")
    s.create("s-d", "agent-3", parent="s-a", branched_from="s-a", started_at=T0 + 4 * DAY)
    s.close("s-d", end_reason="user_exit", at=T0 + 5 * DAY)
    s.create("s-e", "agent-2", delegate_from="s-c", source="api", started_at=T0 + 6 * DAY,
             title="it's 50_50")
    database.create_collection("sess", text_fields=("body",), fields=FIELDS, dim=2,
                               embedder=None)
    database.ingest("sess", [{**{k: v for k, v in row.items() if k in FIELDS and v is not None},
                              "id": row["id"], "body": "", "vector": [1.0, 0.0]}
                             for row in s.rows()])
    yield database
    database.close()


PREDICATES = [
    ("status = 'open'", ["s-a", "s-c", "s-e"]),
    ("status != 'open'", ["s-b", "s-d"]),
    ("agent_id < 'agent-2'", ["s-a", "s-c"]),
    ("agent_id <= 'agent-2'", ["s-a", "s-b", "s-c", "s-e"]),
    ("agent_id > 'agent-2'", ["s-d"]),
    ("agent_id >= 'agent-2'", ["s-b", "s-d", "s-e"]),
    ("parent_session_id = 's-a'", ["s-b", "s-d"]),
    ("parent_session_id != 's-a'", ["s-c"]),            # NULL parents: unknown, not true
    ("NOT parent_session_id = 's-a'", ["s-c"]),
    ("id IN ('s-a', 's-e', 'zz')", ["s-a", "s-e"]),
    ("id NOT IN ('s-a', 's-e')", ["s-b", "s-c", "s-d"]),
    ("id IN ('s-a', NULL)", ["s-a"]),
    ("id NOT IN ('s-a', NULL)", []),                     # never true (SQL)
    ("end_reason IN ('compression', 'user_exit')", ["s-b", "s-d"]),
    ("title LIKE 'first%'", ["s-a"]),
    ("title LIKE '%100\\%'", ["s-c"]),
    ("title LIKE '%50\\_50'", ["s-e"]),
    ("title NOT LIKE 'first%'", ["s-c", "s-e"]),
    ("title LIKE 'FIRST%'", []),                         # case-sensitive
    ("title CONTAINS 'ep'", ["s-a", "s-c"]),
    ("title IS NULL", ["s-b", "s-d"]),
    ("ended_at IS NOT NULL", ["s-b", "s-d"]),
    ("branched_from IS NOT NULL AND delegate_from IS NULL", ["s-d"]),
    ("started_at >= TIMESTAMP '2025-06-18T15:06:40Z'", ["s-c", "s-d", "s-e"]),
    ("started_at < '2025-06-16T15:06:40Z'", ["s-a"]),                        # ISO text
    ("started_at > 1750000000", ["s-b", "s-c", "s-d", "s-e"]),               # epoch seconds
    ("started_at BETWEEN TIMESTAMP '2025-06-16' AND TIMESTAMP '2025-06-18'", ["s-b"]),
    ("started_at NOT BETWEEN TIMESTAMP '2025-06-16' AND TIMESTAMP '2025-06-18'",
     ["s-a", "s-c", "s-d", "s-e"]),
    ("ended_at < TIMESTAMP '2025-06-19T00:00:00+02:00'", ["s-b"]),          # an offset
    ("NOT ended_at < TIMESTAMP '2030-01-01'", []),       # open sessions: NULL, unknown
    ("status = 'open' OR source = 'tool'", ["s-a", "s-b", "s-c", "s-e"]),
    ("(status = 'open' OR source = 'tool') AND NOT agent_id = 'agent-1'", ["s-b", "s-e"]),
    ("NOT (title IS NULL OR title LIKE 'it%')", ["s-a", "s-c"]),
    ("parent_session_id = 's-a' OR parent_session_id != 's-a'", ["s-b", "s-c", "s-d"]),
    ("agent_id = :agent AND started_at > :after", ["s-c"]),
]


@pytest.mark.parametrize(("where", "expected"), PREDICATES, ids=[w for w, _ in PREDICATES])
def test_show_sessions_and_collection_where_agree(db, where, expected):
    params = {"agent": "agent-1", "after": T0} if ":agent" in where else {}
    sessions = [r["id"] for r in db.execute(f"SHOW SESSIONS WHERE {where}", **params).records]
    items = db.execute(f"RETRIEVE 100 FROM sess WHERE {where}", **params).ids()
    assert sessions == expected  # SHOW SESSIONS keeps its order: by start time, then id
    assert sorted(items) == expected


@pytest.mark.parametrize("where", ["agent = 'x'", "status = 1", "started_at LIKE '2025%'",
                                   "status = NULL", "started_at > 'yesterday'"])
def test_both_reject_the_same_mistakes_with_the_same_message(db, where):
    messages = []
    for text in (f"SHOW SESSIONS WHERE {where}", f"RETRIEVE 100 FROM sess WHERE {where}"):
        with pytest.raises(recallql.QuerySemanticError) as err:
            db.execute(text)
        messages.append((err.value.message, err.value.hint))
    assert messages[0] == messages[1]
