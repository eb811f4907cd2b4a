"""Live context under FOR SESSION current on messages (SPEC §6)."""

from __future__ import annotations

import pytest
from lineage_helpers import Store, row

from recallql.sessions.lineage import (
    FRESH_RESET_REASONS,
    LineageResolver,
    ResolutionStatus,
    UnresolvedReason,
)
from recallql.sessions.live_context import LiveContext, is_searchable

ROWS = [
    row("root", reason="compression"), row("mid", "root", "compression"), row("tip", "mid"),
    row("tip2", "mid"),  # a second continuation of mid (same conversation as tip)
    row("bp", reason="branched"), row("bc", "bp", branched="bp"),
    row("dp"), row("ds", "dp", source="subagent", delegate="dp"),
    row("old", reason="new_session"), row("new"), row("linked-new", "old"),
    row("other", reason="user_exit"),
    row("orphan", "gone"), row("ca", "cb", "compression"), row("cb", "ca", "compression"),
    row("tail", "ca"),
]


def context(current: str, rows=ROWS) -> tuple[LiveContext, LineageResolver, Store]:
    store = Store(rows)
    resolver = LineageResolver(store)
    return LiveContext.build(current, resolver), resolver, store


def shown(ctx: LiveContext, resolver: LineageResolver, sid: str, active=1, compacted=0) -> bool:
    session = resolver.chain(sid)[0][0]
    return ctx.shows(session, resolver.resolve(sid).root, active=active, compacted=compacted)


# (current, hit session, active, compacted, shown?)
CASES = [
    ("tip", "tip", 1, 0, False),             # the agent still holds it
    ("tip", "tip", 0, 1, True),              # compacted: summarised away, findable
    ("tip", "tip", 0, 0, False),             # rewound: never searchable
    ("tip", "mid", 1, 0, True),              # rotated out by compression
    ("tip", "root", 1, 0, True),
    ("tip", "tip2", 1, 0, False),            # same conversation, still open
    ("tip", "other", 1, 0, True),            # unrelated
    ("tip", "other", 0, 0, False),           # rewound anywhere: never
    ("bc", "bp", 1, 0, False),               # branch parent: history copied into the branch
    ("bc", "bc", 1, 0, False),
    ("bp", "bc", 1, 0, True),                # a child is not an ancestor
    ("ds", "dp", 1, 0, False),               # delegate parent is a generic ancestor
    ("dp", "ds", 1, 0, True),
    ("new", "old", 1, 0, True),              # /new in 0.19.0: no link at all
    ("linked-new", "old", 1, 0, True),       # linked reset: live but ended new_session
    ("tail", "tail", 1, 0, False),           # unresolved current hides its own id
    ("orphan", "orphan", 0, 1, True),
]


@pytest.mark.parametrize(("current", "hit", "active", "compacted", "expected"), CASES,
                         ids=[f"{c[0]}:{c[1]}:a{c[2]}c{c[3]}" for c in CASES])
def test_live_context_visibility(current, hit, active, compacted, expected):
    ctx, resolver, _ = context(current)
    assert shown(ctx, resolver, hit, active, compacted) is expected


def test_tip_context_is_precomputed():
    ctx, _, store = context("tip")
    assert (ctx.current_root, ctx.ancestors) == ("root", frozenset({"mid", "root"}))
    calls = len(store.calls)
    assert [ctx.is_live(s, r) for s, r in [("tip", "root"), ("mid", "root"), ("tip2", "root"),
                                           ("other", "other"), ("x", None)]] == [
        True, True, True, False, False]
    assert len(store.calls) == calls  # per-hit checks do no I/O


def test_compressed_ancestors_are_live_but_not_hidden():
    ctx, _, _ = context("tip")
    mid = row("mid", "root", "compression")
    assert ctx.is_live("mid", "root") and not ctx.is_hidden(mid, "root", compacted=0)


@pytest.mark.parametrize(("parent_reason", "hidden"), [
    ("branched", True), (None, True), ("user_exit", True), ("compression", False),
    *[(reason, False) for reason in sorted(FRESH_RESET_REASONS)],
])
def test_branch_parent_hidden_unless_compressed_or_reset(parent_reason, hidden):
    rows = [row("p", reason=parent_reason), row("b", "p", branched="p")]
    ctx, _, _ = context("b", rows)
    assert ctx.ancestors == {"p"}
    assert ctx.is_hidden(rows[0], "p", compacted=0) is hidden
    assert ctx.is_hidden(rows[0], "p", compacted=1) is False


@pytest.mark.parametrize(("current", "reason"), [
    ("tail", UnresolvedReason.CYCLE), ("ca", UnresolvedReason.CYCLE),
    ("orphan", UnresolvedReason.MISSING_PARENT), ("nobody", UnresolvedReason.MISSING_SESSION),
])
def test_unresolved_current_hides_only_its_own_id(current, reason):
    ctx, _, _ = context(current)
    assert (ctx.resolution.status, ctx.resolution.reason) == (ResolutionStatus.UNRESOLVED, reason)
    assert (ctx.current_root, ctx.ancestors) == (None, frozenset())
    assert ctx.is_live(current, None)
    assert not any(ctx.is_live(s, s) for s in ("ca", "cb", "gone", "root") if s != current)
    assert ctx.is_hidden(row(current), None, compacted=0)


def test_current_lineage_costs_no_budget_within_the_step_bound():
    rows = [row("root", reason="compression"), row("mid", "root", "compression"),
            row("tip", "mid")]
    resolver = LineageResolver(Store(rows), budget=0)
    ctx = LiveContext.build("tip", resolver)
    assert (ctx.current_root, ctx.exhausted) == ("root", False)
    assert (resolver.stats.fetches, resolver.stats.chain_fetches) == (0, 3)


def test_current_lineage_beyond_the_step_bound_is_exhausted():
    rows = [row("root", reason="compression"), row("mid", "root", "compression"),
            row("tip", "mid")]
    resolver = LineageResolver(Store(rows), budget=0)
    ctx = LiveContext.build("tip", resolver, max_steps=0)
    assert ctx.resolution.status is ResolutionStatus.BUDGET_EXHAUSTED and ctx.exhausted
    assert ctx.is_live("tip", None) and not ctx.is_live("mid", "root")


def test_ancestor_walk_is_cycle_safe_and_bounded():
    rows = [row("b", "p", branched="p"), row("p", "q", "branched"), row("q", "p", "branched")]
    ctx, _, _ = context("b", rows)
    assert ctx.ancestors == {"p", "q"}
    deep = [row(f"d{i}", f"d{i + 1}", "branched", branched=f"d{i + 1}") for i in range(50)]
    ctx = LiveContext.build("d0", LineageResolver(Store(deep)), max_steps=10)
    assert ctx.ancestors == {f"d{i}" for i in range(1, 11)}


@pytest.mark.parametrize(("active", "compacted", "expected"), [
    (1, 0, True), (0, 1, True), (1, 1, True), (0, 0, False), (None, None, False),
    (True, False, True), (False, False, False),
], ids=["live", "compacted", "both", "rewound", "null", "bool-live", "bool-rewound"])
def test_is_searchable(active, compacted, expected):
    assert is_searchable(active, compacted) is expected
