"""End to end: a Hermes 0.19.0 store read by the index layer, grouped by the lineage core."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from recallql.importers.hermes_store import read_hermes_store
from recallql.sessions.lineage import (
    EdgeVerdict,
    LineageResolver,
    SessionRow,
    UnresolvedReason,
)
from recallql.sessions.live_context import LiveContext

_BUILDER = Path(__file__).parent / "fixtures" / "hermes" / "build_state_db.py"
_spec = importlib.util.spec_from_file_location("build_state_db", _BUILDER)
builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)


@pytest.fixture(scope="module")
def hermes_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("hermes") / "state.db"
    builder.build_state_db(path)
    return read_hermes_store(path)


@pytest.fixture()
def resolver(hermes_store):
    rows = {s["id"]: SessionRow.from_mapping(s) for s in hermes_store.sessions}
    return LineageResolver(rows.get)


ROOTS = {
    "conv-root": "conv-root", "conv-mid": "conv-root", "conv-tip": "conv-root",
    "branch-parent": "branch-parent", "branch-child": "branch-child",
    "deleg-parent": "deleg-parent", "deleg-sub": "deleg-sub",
    "tool-parent": "tool-parent", "tool-child": "tool-child",
    "reset-old": "reset-old", "reset-new": "reset-new",
    "else-parent": "else-parent", "else-child": "else-parent", "bad-config": "bad-config",
    "orphan": UnresolvedReason.MISSING_PARENT, "cycle-a": UnresolvedReason.CYCLE,
    "cycle-b": UnresolvedReason.CYCLE,
}


@pytest.mark.parametrize(("sid", "expected"), ROOTS.items(), ids=ROOTS.keys())
def test_conversation_roots(resolver, sid, expected):
    res = resolver.resolve(sid)
    assert (res.root if res.resolved else res.reason) == expected


def test_status_derived_from_hermes_fields(resolver):
    statuses = {sid: resolver.chain(sid)[0][0].status for sid in ("conv-tip", "conv-mid",
                                                                   "reset-old")}
    assert statuses == {"conv-tip": "open", "conv-mid": "closed", "reset-old": "archived"}


@pytest.mark.parametrize(("sid", "verdicts"), [
    ("conv-tip", [EdgeVerdict.CONTINUATION, EdgeVerdict.CONTINUATION, EdgeVerdict.ROOT]),
    ("branch-child", [EdgeVerdict.BRANCH, EdgeVerdict.ROOT]),
    ("deleg-sub", [EdgeVerdict.DELEGATE, EdgeVerdict.ROOT]),
    ("tool-child", [EdgeVerdict.TOOL, EdgeVerdict.ROOT]),
    ("orphan", [EdgeVerdict.MISSING]),
    ("cycle-a", [EdgeVerdict.CONTINUATION, EdgeVerdict.CYCLE]),
])
def test_show_lineage_verdicts(resolver, sid, verdicts):
    assert [v for _, v in resolver.chain(sid)] == verdicts


def test_for_session_conv_tip_shows_what_was_rotated_out(hermes_store, resolver):
    ctx = LiveContext.build("conv-tip", resolver)
    rows = {sid: resolver.chain(sid)[0][0] for sid in ROOTS}
    visible = []
    for m in hermes_store.messages:
        res = resolver.resolve(m["session_id"])
        if res.resolved and ctx.shows(rows[m["session_id"]], res.root, active=m["active"],
                                      compacted=m["compacted"]):
            visible.append(m["content"])
    in_conversation = [c for c in visible if "helm" in c or "kube" in c or "staging" in c]
    assert in_conversation == [
        "plan the kubernetes migration", "start with the staging cluster",
        "staging is migrated, what about ingress", "compacted question about helm charts",
        "compacted answer about helm values",
    ]
    assert "live answer: all pods are running" not in visible
    assert "rewound message the user took back" not in visible
    assert "old topic before /new" in visible and "my parent was deleted" not in visible
