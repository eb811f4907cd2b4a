"""An EXPLAIN walk-through: where every score comes from.

Run: python examples/explain_walkthrough.py

1. A plain hybrid SEARCH: two legs (BM25 and cosine), fused by RRF; relevance is normalised so a
   document ranked first by both legs scores exactly 1.
2. The same with a recency boost and AS OF (so the ages, and the output, are reproducible).
3. FOR SESSION: a session's annotation (keywords) and reward signal (entity) add a session boost.
4. EXPLAIN ANALYZE adds rows in/out and time per operator; FORMAT JSON gives the same content.
The contributions of each row add up to its score, and EXPLAIN ranks exactly like the statement.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import recallql

NOW = datetime(2025, 1, 31, tzinfo=UTC)
DOCS = [
    {"id": "policy", "title": "Backup retention policy", "created_at": "2019-06-01",
     "body": "Daily backups are kept for 30 days, monthly backups for a year.", "tags": ["ops"]},
    {"id": "restore", "title": "Restore a backup", "created_at": "2024-12-20",
     "body": "Restore the newest snapshot, then replay the write-ahead log.", "tags": ["ops"]},
    {"id": "s3", "title": "Object storage lifecycle", "created_at": "2024-06-01",
     "body": "Expire old backup objects after 90 days with a lifecycle rule.",
     "tags": ["storage"]},
]


def step(title: str) -> None:
    print(f"\n=== {title}")


def main() -> None:
    db = recallql.connect(clock=NOW.timestamp)  # a pinned clock: session times are stable
    db.ingest("docs", DOCS)
    query = "how long are backups kept"

    step("1. hybrid search: LEXICAL_MATCH and SEMANTIC_MATCH shares of the convex fusion")
    plain = db.explain("SEARCH docs MATCHING :q AS OF :now LIMIT 3", q=query, now=NOW)
    print(plain.to_text())

    step("2. WITH RECENCY: weight * 0.5^(age / half_life), age in days at AS OF")
    text = ("SEARCH docs MATCHING :q WITH RECENCY (weight = 0.1, half_life = 180 DAYS) "
            "AS OF :now LIMIT 3")
    recent = db.explain(text, q=query, now=NOW)
    print(recent.to_text())
    for row in recent.rows:  # the reasons add up to the score
        assert abs(sum(r.contribution for r in row.reasons) - row.score) < 1e-12
    same = db.execute(text, q=query, now=NOW)
    assert same.ids() == [row.id for row in recent.rows]  # EXPLAIN ranks like the statement

    step("3. FOR SESSION: keywords from annotations, entities from reward signals")
    db.sessions.create("s-1", "ops-agent")
    db.sessions.annotate("s-1", "storage")
    db.sessions.signal("s-1", "reward", 1.0, entity="s3")
    boosted = db.explain("SEARCH docs MATCHING :q FOR SESSION :s AS OF :now LIMIT 3",
                         q=query, s="s-1", now=NOW)
    print(boosted.to_text())
    missing = db.execute("SEARCH docs MATCHING :q FOR SESSION :s LIMIT 1", q=query, s="nope")
    print("an unknown session degrades, not errors:",
          [f"{w.code.value}: {w.message}" for w in missing.warnings])

    step("4. EXPLAIN ANALYZE (rows and time per operator) and FORMAT JSON")
    analyzed = db.explain("SEARCH docs MATCHING :q LIMIT 2", q=query, analyze=True)
    print(analyzed.to_text().split("\n#1")[0])
    as_json = json.loads(db.explain("SEARCH docs MATCHING :q LIMIT 1", q=query).to_json())
    print("JSON plan root:", as_json["plan"]["operator"], "| first row reasons:",
          [r["code"] for r in as_json["result"]["rows"][0]["reasons"]])


if __name__ == "__main__":
    main()
