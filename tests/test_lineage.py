"""Conversation lineage (SPEC §6): edge verdicts, resolution, budget, memo, chain()."""

from __future__ import annotations

import sys
import traceback

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lineage_helpers import Store, row

from recallql.sessions.lineage import (
    FRESH_RESET_REASONS,
    EdgeVerdict,
    LineageResolver,
    ResolutionStatus,
    SessionRow,
    UnresolvedReason,
    edge_verdict,
)

V = EdgeVerdict
RESOLVED = ResolutionStatus.RESOLVED
UNRESOLVED = ResolutionStatus.UNRESOLVED
EXHAUSTED = ResolutionStatus.BUDGET_EXHAUSTED
CYCLE = UnresolvedReason.CYCLE
MISSING_PARENT = UnresolvedReason.MISSING_PARENT
MISSING_SESSION = UnresolvedReason.MISSING_SESSION




def linear_chain(n: int, prefix: str = "s", root_parent: str | None = None) -> list[SessionRow]:
    """``s0 ← s1 ← … ← s{n-1}``: every session but the last ended by compression."""
    rows = [row(f"{prefix}0", root_parent, "compression")]
    rows += [row(f"{prefix}{i}", f"{prefix}{i - 1}", "compression") for i in range(1, n - 1)]
    rows.append(row(f"{prefix}{n - 1}", f"{prefix}{n - 2}"))
    return rows


# --- edge_verdict -------------------------------------------------------------------------------

P_COMP = row("p", reason="compression")

EDGE_CASES = [
    ("root", row("c"), None, V.ROOT),
    ("missing-parent", row("c", "p"), None, V.MISSING),
    ("continuation", row("c", "p"), P_COMP, V.CONTINUATION),
    ("self-loop", row("p", "p", "compression"), row("p", "p", "compression"), V.CYCLE),
    ("tool-under-compression", row("c", "p", source="tool"), P_COMP, V.TOOL),
    ("branch-marker", row("c", "p", branched="p"), P_COMP, V.BRANCH),
    ("parent-ended-branched", row("c", "p"), row("p", reason="branched"), V.BRANCH),
    ("delegate-marker", row("c", "p", source="subagent", delegate="p"), P_COMP, V.DELEGATE),
    ("subagent-open-parent", row("c", "p", source="subagent"), row("p"), V.DELEGATE),
    ("subagent-no-marker-compressed-parent", row("c", "p", source="subagent"), P_COMP,
     V.CONTINUATION),
    ("reset", row("c", "p"), row("p", reason="new_session"), V.RESET),
    ("parent-open", row("c", "p"), row("p"), V.NOT_COMPRESSION),
    ("parent-user-exit", row("c", "p"), row("p", reason="user_exit"), V.NOT_COMPRESSION),
    ("branch-marker-elsewhere", row("c", "p", branched="x"), P_COMP, V.CONTINUATION),
    ("delegate-marker-orphaned", row("c", "p", delegate="__orphaned__"), P_COMP, V.CONTINUATION),
    ("tool-beats-branch", row("c", "p", source="tool", branched="p"), P_COMP, V.TOOL),
    ("branch-beats-delegate", row("c", "p", branched="p", delegate="p"), P_COMP, V.BRANCH),
    ("missing-beats-tool", row("c", "p", source="tool"), None, V.MISSING),
]


@pytest.mark.parametrize(("child", "parent", "expected"), [c[1:] for c in EDGE_CASES],
                         ids=[c[0] for c in EDGE_CASES])
def test_edge_verdict(child, parent, expected):
    assert edge_verdict(child, parent) is expected


@pytest.mark.parametrize("reason", sorted(FRESH_RESET_REASONS))
def test_every_fresh_reset_reason_is_a_reset_edge(reason):
    assert edge_verdict(row("c", "p"), row("p", reason=reason)) is V.RESET


def test_edge_verdict_rejects_a_row_that_is_not_the_parent():
    with pytest.raises(ValueError, match="not the parent"):
        edge_verdict(row("c", "p"), row("q", reason="compression"))


# --- identity -----------------------------------------------------------------------------------

SHAPES = [
    row("root", reason="compression"), row("mid", "root", "compression"), row("tip", "mid"),
    row("bp", reason="branched"), row("bc", "bp", branched="bp"),
    row("dp"), row("ds", "dp", source="subagent", delegate="dp"),
    row("tp", reason="compression"), row("tc", "tp", source="tool"),
    row("old", reason="new_session"), row("new"), row("linked-new", "old"),
    row("ep", reason="compression"), row("ec", "ep", delegate="__orphaned__", branched="zz"),
]

IDENTITY = [
    ("root", "root", 0), ("mid", "root", 1), ("tip", "root", 2),
    ("bc", "bc", 0), ("bp", "bp", 0), ("ds", "ds", 0), ("tc", "tc", 0),
    ("new", "new", 0), ("linked-new", "linked-new", 0), ("old", "old", 0),
    ("ec", "ep", 1),
]


@pytest.mark.parametrize(("sid", "root", "depth"), IDENTITY, ids=[c[0] for c in IDENTITY])
def test_identity(sid, root, depth):
    res = LineageResolver(Store(SHAPES)).resolve(sid)
    assert (res.status, res.root, res.reason, res.depth) == (RESOLVED, root, None, depth)


# --- fail closed --------------------------------------------------------------------------------

BROKEN = {
    "two-cycle": ([row("a", "b", "compression"), row("b", "a", "compression")],
                  {"a": CYCLE, "b": CYCLE}),
    "three-cycle": ([row("a", "c", "compression"), row("b", "a", "compression"),
                     row("c", "b", "compression")], {"a": CYCLE, "b": CYCLE, "c": CYCLE}),
    "tail-into-cycle": ([row("t", "a"), row("a", "b", "compression"),
                         row("b", "a", "compression")], {"t": CYCLE, "a": CYCLE, "b": CYCLE}),
    "self-loop": ([row("a", "a", "compression")], {"a": CYCLE}),
    "self-loop-open": ([row("a", "a")], {"a": CYCLE}),
    "dangling": ([row("t", "m"), row("m", "gone", "compression")],
                 {"t": MISSING_PARENT, "m": MISSING_PARENT}),
    "missing-session": ([], {"nobody": MISSING_SESSION}),
}


@pytest.mark.parametrize(("rows", "expected"), BROKEN.values(), ids=BROKEN.keys())
def test_broken_lineage_fails_closed(rows, expected):
    resolver = LineageResolver(Store(rows))
    for sid, reason in expected.items():
        res = resolver.resolve(sid)
        assert (res.status, res.root, res.reason) == (UNRESOLVED, None, reason)
    counts: dict = {}
    for reason in expected.values():
        counts[reason] = counts.get(reason, 0) + 1
    assert resolver.stats.unresolved == counts
    assert resolver.stats.resolved == 0


def test_unresolved_path_is_memoised_for_every_session_on_it():
    store = Store([row("t", "a"), row("a", "b", "compression"), row("b", "a", "compression")])
    resolver = LineageResolver(store)
    assert resolver.resolve("t").reason is CYCLE
    calls = len(store.calls)
    assert [resolver.resolve(s).reason for s in ("a", "b", "t")] == [CYCLE] * 3
    assert len(store.calls) == calls
    assert resolver.stats.memo_hits == 3


def test_a_parent_cycle_without_continuation_edges_is_not_a_lineage_cycle():
    # b → a is a reset edge (a ended new_session), so b is a root; a continues b.
    resolver = LineageResolver(Store([row("a", "b", "new_session"),
                                      row("b", "a", "compression")]))
    assert resolver.resolve("b").root == "b"
    assert resolver.resolve("a").root == "b"


# --- scale, budget, memo ------------------------------------------------------------------------

def test_ten_thousand_deep_chain_resolves_without_recursion():
    store = Store(linear_chain(10_000))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(traceback.extract_stack()) + 50)
    try:
        res = LineageResolver(store, budget=10_000).resolve("s9999")
    finally:
        sys.setrecursionlimit(old)
    assert (res.status, res.root, res.depth) == (RESOLVED, "s0", 9999)
    assert len(store.calls) == 10_000


# (shape, cost of resolving the tip from scratch)
BUDGET_SHAPES = {
    "depth9-parentless-root": (linear_chain(10), 10),
    "depth9-root-with-branch-parent": (
        [row("bp", reason="branched")] + linear_chain(10, root_parent="bp"), 11),
}


@pytest.mark.parametrize(("rows", "cost"), BUDGET_SHAPES.values(), ids=BUDGET_SHAPES.keys())
@pytest.mark.parametrize(("offset", "status"), [(-1, EXHAUSTED), (0, RESOLVED), (1, RESOLVED)],
                         ids=["B-1", "B", "B+1"])
def test_budget_boundary(rows, cost, offset, status):
    store = Store(rows)
    resolver = LineageResolver(store, budget=cost + offset)
    res = resolver.resolve("s9")
    assert res.status is status
    assert resolver.stats.fetches == min(cost, cost + offset) == len(store.calls)
    assert resolver.stats.budget_exhausted is (status is EXHAUSTED)
    if status is RESOLVED:
        assert (res.root, res.depth) == ("s0", 9)
    else:
        assert (res.root, res.reason) == (None, None)


@pytest.mark.parametrize(("budget", "status", "reason"),
                         [(2, EXHAUSTED, None), (3, UNRESOLVED, CYCLE), (4, UNRESOLVED, CYCLE)],
                         ids=["B-1", "B", "B+1"])
def test_cycle_proven_at_the_bound_is_a_cycle(budget, status, reason):
    store = Store([row("a", "c", "compression"), row("b", "a", "compression"),
                   row("c", "b", "compression")])
    resolver = LineageResolver(store, budget=budget)
    res = resolver.resolve("a")
    assert (res.status, res.reason) == (status, reason)
    assert len(store.calls) == min(3, budget)


@pytest.mark.parametrize(("budget", "status", "reason"),
                         [(2, EXHAUSTED, None), (3, EXHAUSTED, None),
                          (4, UNRESOLVED, MISSING_PARENT)], ids=["B-1", "B", "B+1"])
def test_missing_parent_probe_needs_budget_left(budget, status, reason):
    # Absent rows cost nothing, but once B rows were fetched no further fetch is made at all.
    store = Store(linear_chain(3, root_parent="gone"))
    res = LineageResolver(store, budget=budget).resolve("s2")
    assert (res.status, res.reason) == (status, reason)


def test_absent_rows_do_not_spend_the_budget():
    store = Store(linear_chain(3))
    resolver = LineageResolver(store, budget=3)
    assert [resolver.resolve(s).reason for s in ("x", "y", "z")] == [MISSING_SESSION] * 3
    assert resolver.resolve("s2").root == "s0"
    assert (resolver.stats.fetches, resolver.stats.absent) == (3, 3)


def test_exhausted_path_is_not_memoised_and_a_fresh_resolver_resolves_fully():
    store = Store(linear_chain(10))
    first = LineageResolver(store, budget=5)
    assert first.resolve("s9").status is EXHAUSTED
    assert first.resolve("s9").status is EXHAUSTED  # cached rows, still out of budget
    assert len(store.calls) == 5
    assert first.stats.exhausted == 2
    store.calls.clear()
    second = LineageResolver(store)
    res = second.resolve("s9")
    assert (res.status, res.root, res.depth) == (RESOLVED, "s0", 9)
    assert len(store.calls) == 10


def test_path_compression_tip_then_mid_costs_nothing():
    store = Store([row("root", reason="compression"), row("mid", "root", "compression"),
                   row("tip", "mid"), row("tip2", "mid")])
    resolver = LineageResolver(store)
    assert resolver.resolve("tip").root == "root"
    assert store.calls == ["tip", "mid", "root"]
    assert (resolver.resolve("mid").root, resolver.resolve("root").root) == ("root", "root")
    assert len(store.calls) == 3
    assert resolver.resolve("tip2") == (resolver.resolve("tip").root, RESOLVED, None, 2)
    assert store.calls == ["tip", "mid", "root", "tip2"]
    stats = resolver.stats.describe()
    assert stats == {"budget": 2000, "fetches": 4, "absent": 0, "chain_fetches": 0,
                     "memo_hits": 4, "resolved": 5, "unresolved": {},
                     "budget_exhausted": False, "max_depth": 2, "stored": 0}


def test_every_session_of_a_deep_chain_is_memoised():
    store = Store(linear_chain(2_000))
    resolver = LineageResolver(store)
    assert resolver.resolve("s1999").depth == 1999
    assert [resolver.resolve(f"s{i}").depth for i in range(2_000)] == list(range(2_000))
    assert len(store.calls) == 2_000


def test_negative_budget_is_rejected():
    with pytest.raises(ValueError, match="budget"):
        LineageResolver(Store([]), budget=-1)


def test_fetch_returning_another_row_is_an_error():
    with pytest.raises(ValueError, match="returned the row of"):
        LineageResolver(lambda sid: row("other")).resolve("asked")


# --- chain() ------------------------------------------------------------------------------------

CHAIN_ROWS = SHAPES + [row("orphan", "gone"), row("ca", "cb", "compression"),
                       row("cb", "ca", "compression"), row("loop", "loop")]
CHAINS = {
    "compression": ("tip", [("tip", V.CONTINUATION), ("mid", V.CONTINUATION),
                            ("root", V.ROOT)]),
    "branch": ("bc", [("bc", V.BRANCH), ("bp", V.ROOT)]),
    "delegate": ("ds", [("ds", V.DELEGATE), ("dp", V.ROOT)]),
    "tool": ("tc", [("tc", V.TOOL), ("tp", V.ROOT)]),
    "reset": ("linked-new", [("linked-new", V.RESET), ("old", V.ROOT)]),
    "marker-elsewhere": ("ec", [("ec", V.CONTINUATION), ("ep", V.ROOT)]),
    "missing-parent": ("orphan", [("orphan", V.MISSING)]),
    "missing-session": ("nobody", [(None, V.MISSING)]),
    "two-cycle": ("ca", [("ca", V.CONTINUATION), ("cb", V.CYCLE)]),
    "self-loop": ("loop", [("loop", V.CYCLE)]),
}


@pytest.mark.parametrize(("start", "expected"), CHAINS.values(), ids=CHAINS.keys())
def test_chain_verdicts(start, expected):
    links = LineageResolver(Store(CHAIN_ROWS)).chain(start)
    assert [(None if r is None else r.id, v) for r, v in links] == expected


def test_chain_is_bounded_and_not_budgeted():
    store = Store(linear_chain(10_000))
    resolver = LineageResolver(store, budget=0)
    links = resolver.chain("s9999", max_steps=10_000)
    assert len(links) == 10_000 and links[-1] == (store.rows["s0"], V.ROOT)
    short = resolver.chain("s9", max_steps=3)
    assert [(r.id, v) for r, v in short] == [("s9", V.CONTINUATION), ("s8", V.CONTINUATION),
                                            ("s7", V.CONTINUATION)]
    assert (resolver.stats.fetches, resolver.stats.chain_fetches) == (0, 10_000)
    assert resolver.resolve("s9").status is RESOLVED  # rows cached by chain() are free


# --- property: equals a simple reference implementation ----------------------------------------

def reference(rows: dict[str, SessionRow], sid: str):
    """Set-based walk straight from the SPEC §6 wording."""
    if sid not in rows:
        return None, MISSING_SESSION, 0
    cur, seen, depth = rows[sid], set(), 0
    while True:
        seen.add(cur.id)
        pid = cur.parent_session_id
        if pid is None:
            return cur.id, None, depth
        parent = rows.get(pid)
        if parent is None:
            return None, MISSING_PARENT, None
        if pid == cur.id:
            return None, CYCLE, None
        if not (parent.end_reason == "compression" and cur.source != "tool"
                and cur.branched_from != pid and cur.delegate_from != pid):
            return cur.id, None, depth
        if pid in seen:
            return None, CYCLE, None
        cur, depth = parent, depth + 1


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 9))
    ids = [f"n{i}" for i in range(n)]
    out = {}
    for sid in ids:
        parent = draw(st.sampled_from([None, "ghost", *ids]))
        marker = st.sampled_from([None, parent, "elsewhere"])
        out[sid] = row(sid, parent,
                       draw(st.sampled_from(["compression"] * 3 + ["branched", "idle", None])),
                       draw(st.sampled_from(["cli", "cli", "tool", "subagent"])),
                       draw(marker), draw(marker))
    order = draw(st.permutations([*ids, "absent"]))
    return out, order


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_resolver_matches_reference(graph):
    rows, order = graph
    store = Store(rows.values())
    resolver = LineageResolver(store)
    for sid in order:
        res = resolver.resolve(sid)
        root, reason, depth = reference(rows, sid)
        assert (res.root, res.reason) == (root, reason)
        assert res.status is (RESOLVED if reason is None else UNRESOLVED)
        if depth is not None:
            assert res.depth == depth
    assert len(store.calls) == len(set(store.calls))  # every id is fetched at most once


@settings(max_examples=200, deadline=None)
@given(graphs(), st.integers(0, 10))
def test_budgeted_resolver_is_reference_or_exhausted(graph, budget):
    rows, order = graph
    store = Store(rows.values())
    resolver = LineageResolver(store, budget=budget)
    for sid in order:
        res = resolver.resolve(sid)
        if res.status is EXHAUSTED:
            assert resolver.stats.fetches == budget
        else:
            assert (res.root, res.reason) == reference(rows, sid)[:2]
    assert sum(1 for s in store.calls if s in rows) == resolver.stats.fetches <= budget
