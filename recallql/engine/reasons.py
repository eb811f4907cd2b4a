"""The closed vocabulary of reason codes (SPEC §5).

Every result row carries a list of `(code, contribution, detail)` entries; the contributions of a
row sum, left to right, to exactly its score. Statement-level codes travel as warnings/notices on
the result. Each entry carries typed fields at full precision (`ReasonEntry`: `leg`, `rank`,
`bm25`, `cosine`, `matched`/`total`, `age_days`, ...); its `detail` is their rendering, and the
text form is `CODE(detail) +contribution`, e.g. `LEXICAL_MATCH(rank=1, bm25=7.210) +0.50000`.

Row-level codes:

| code | contribution | detail |
|---|---|---|
| `LEXICAL_MATCH` | a lexical-kind leg's share | [`leg=`,] `rank=`, `bm25=`[, `norm=`] |
| `SEMANTIC_MATCH` | a semantic-kind leg's share | [`leg=`,] `rank=`, `cosine=`[, `norm=`] |
| `CONTEXT_MATCH` | `w^d · rel` | `neighbour=`, `side=`[, `distance=`], `relevance=`, `weight=` |
| `LEG_ABSENT` | 0 | `leg=`: not in that leg's candidate window |
| `NO_RELEVANCE` | 0 | `boosts only`: RETRIEVE without MATCHING, ranked by boosts alone |
| `SESSION_KEYWORDS` | `keywords · matched/total` | `matched/total` |
| `SESSION_VELOCITY` | `velocity · v/(v+1)` | `uniform, v=`: same for every row; never reorders |
| `SESSION_ENTITY` | `entities · e/(e+1)` | `entity=`, `e=` |
| `SIGNAL_BOOST` | `Σ w · s/(s+1)` | `entity=`, then `<name>=s` per signal name |
| `RECENCY` | `weight · f(age)` | `age=` in days |
| `RECENCY_FUTURE_CLAMPED` | the zero-age boost | `age=0d`: the date is after `now` |
| `RECENCY_MISSING_DATE` | 0 | the row has no date in the recency field |
| `LINEAGE` | 0 | `root=`, `anchor=`: the row's conversation |

A leg's share is its RRF share or, under `FUSE CONVEX`, `w/W · norm`. `CONTEXT_MATCH` credits a
row with `weight^d ·` the fused relevance of the direct candidate `d` eligible items away in its
document that gives most (`side=before` / `after` the row; `distance=` shown when d > 1).
`leg=` comes first only for a leg not named after its kind (`lexical`, `semantic`, `context`);
`norm=` is the min-max normalised score φ under `FUSE CONVEX` (the share is `w/W · φ`). A row
gets `CONTEXT_MATCH` only when it, or an item next to it, is a candidate of a direct leg and
another candidate shares its document.

Statement-level codes (warnings): `SESSION_NOT_FOUND`, `LEXICAL_LEG_EMPTY`,
`SEMANTIC_LEG_UNAVAILABLE`, `LINEAGE_UNRESOLVED_DROPPED`, `LINEAGE_BUDGET_TRUNCATED`,
`WINDOW_EXHAUSTED`, `LIVE_CONTEXT_HIDDEN`, `LINEAGE_ROOT_MISMATCH` (SHOW LINEAGE: a stored
conversation root disagrees with the walk), `AS_OF_BEYOND_RETENTION` (rows deleted after the
`AS OF` time were already purged and are not shown), `AS_OF_IN_FUTURE` (the `AS OF` time is
after now: the rows committed so far, aged to that time), `VECTORS_NOT_FINITE` (stored vectors of a
damaged segment were skipped by the semantic leg).
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """A reason code. The set is closed: every code the engine emits is listed here."""

    # row level
    LEXICAL_MATCH = "LEXICAL_MATCH"
    SEMANTIC_MATCH = "SEMANTIC_MATCH"
    CONTEXT_MATCH = "CONTEXT_MATCH"
    LEG_ABSENT = "LEG_ABSENT"
    NO_RELEVANCE = "NO_RELEVANCE"
    SESSION_KEYWORDS = "SESSION_KEYWORDS"
    SESSION_VELOCITY = "SESSION_VELOCITY"
    SESSION_ENTITY = "SESSION_ENTITY"
    SIGNAL_BOOST = "SIGNAL_BOOST"
    RECENCY = "RECENCY"
    RECENCY_FUTURE_CLAMPED = "RECENCY_FUTURE_CLAMPED"
    RECENCY_MISSING_DATE = "RECENCY_MISSING_DATE"
    LINEAGE = "LINEAGE"
    # statement level
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    LEXICAL_LEG_EMPTY = "LEXICAL_LEG_EMPTY"
    SEMANTIC_LEG_UNAVAILABLE = "SEMANTIC_LEG_UNAVAILABLE"
    LINEAGE_UNRESOLVED_DROPPED = "LINEAGE_UNRESOLVED_DROPPED"
    LINEAGE_BUDGET_TRUNCATED = "LINEAGE_BUDGET_TRUNCATED"
    WINDOW_EXHAUSTED = "WINDOW_EXHAUSTED"
    LIVE_CONTEXT_HIDDEN = "LIVE_CONTEXT_HIDDEN"
    LINEAGE_ROOT_MISMATCH = "LINEAGE_ROOT_MISMATCH"
    AS_OF_BEYOND_RETENTION = "AS_OF_BEYOND_RETENTION"
    AS_OF_IN_FUTURE = "AS_OF_IN_FUTURE"
    VECTORS_NOT_FINITE = "VECTORS_NOT_FINITE"


ROW_CODES = frozenset(
    {
        Reason.LEXICAL_MATCH,
        Reason.SEMANTIC_MATCH,
        Reason.CONTEXT_MATCH,
        Reason.LEG_ABSENT,
        Reason.NO_RELEVANCE,
        Reason.SESSION_KEYWORDS,
        Reason.SESSION_VELOCITY,
        Reason.SESSION_ENTITY,
        Reason.SIGNAL_BOOST,
        Reason.RECENCY,
        Reason.RECENCY_FUTURE_CLAMPED,
        Reason.RECENCY_MISSING_DATE,
        Reason.LINEAGE,
    }
)
STATEMENT_CODES = frozenset(set(Reason) - ROW_CODES)
#: Codes of the relevance part of a row (one per leg, or NO_RELEVANCE): EXPLAIN prints them on
#: the row's first reason line.
LEG_CODES = frozenset({Reason.LEXICAL_MATCH, Reason.SEMANTIC_MATCH, Reason.CONTEXT_MATCH,
                       Reason.LEG_ABSENT, Reason.NO_RELEVANCE})
