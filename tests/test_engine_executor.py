"""The executor and the leg runner: timing, row counts, typed metrics, and failures wrapped with
the operator's name."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.engine.executor import ExecutionError, run
from recallql.engine.legs import competition_ranks, run_legs
from recallql.engine.merging import _gathered
from recallql.engine.metrics import FusionMetrics, LegMetrics
from recallql.engine.operators.base import ExecutionContext
from recallql.engine.plan import FusionSpec, LegKind, LegSpec, QueryPlan, RecencyPlan
from recallql.engine.planner import build_tree, plan


class BrokenSnapshot:
    live = np.ones(3, bool)
    size = 3
    seq = 1

    def lexical_search(self, terms, n, allowed, where):
        raise np.linalg.LinAlgError("singular matrix")


class FixedSnapshot(BrokenSnapshot):
    positions = np.zeros(3, np.int64)
    ids = doc_ids = entities = ["id0", "id1", "id2"]

    def lexical_search(self, terms, n, allowed, where):
        return np.array([2, 0, 1]), np.array([3.0, 3.0, 1.0], dtype=np.float32), ""

    def values(self, name, rows):
        return [f"{name}{r}" for r in np.asarray(rows).tolist()]


def lexical_plan() -> QueryPlan:
    leg = LegSpec(name="lexical", kind=LegKind.LEXICAL, operator="LexicalScan", window=10,
                  fields=("t",), terms=("x",))
    return QueryPlan(statement="SEARCH c MATCHING 'x'", kind="search", collection="c", now=0.0,
                     window=10, limit=10, budget=2000, legs=(leg,), fusion=FusionSpec(k=60))


def test_leg_failure_names_the_operator():
    with pytest.raises(ExecutionError) as err:
        run_legs(lexical_plan(), BrokenSnapshot())
    assert err.value.operator == "LexicalScan"
    assert "LexicalScan failed: LinAlgError: singular matrix" in str(err.value)


def test_merge_operator_failure_names_the_operator():
    """A plan whose recency boost has no dates among the features (a hand-edited plan)."""
    qp = lexical_plan()
    batches = run_legs(qp, FixedSnapshot())
    broken = qp.model_copy(update={"recency": RecencyPlan(weight=0.1, half_life_days=7.0)})
    tree = build_tree(broken)
    with pytest.raises(ExecutionError) as err:
        run(tree, ExecutionContext(now_ts=0.0), _gathered(tree, batches))
    assert err.value.operator == "RecencyBoost"
    assert "carry no 'created_at' dates" in str(err.value)


def test_metrics_count_rows_in_and_out():
    qp = lexical_plan()
    batches = run_legs(qp, FixedSnapshot())
    (batch,) = batches.legs
    assert batch.ranks.tolist() == [1, 1, 3]  # equal BM25 share a rank
    assert batch.ids.tolist() == ["id2", "id0", "id1"]
    tree = build_tree(qp)
    ex = run(tree, ExecutionContext(now_ts=0.0), _gathered(tree, batches))
    root = ex.metrics
    fusion = root.children[0]
    assert (root.operator, fusion.operator) == ("TopK", "RrfFusion")
    assert (fusion.rows_in, fusion.rows_out) == (3, 3)
    assert fusion.metrics == FusionMetrics((LegMetrics("lexical", 3, 10),))
    assert fusion.children[0].metrics == LegMetrics("lexical", 3, 10)
    assert root.stats()["legs"] == {"lexical": {"rows": 3, "window": 10}}
    assert root.time_ns >= 0 and not root.underfilled
    out = ex.value
    assert out.leg("lexical").rank[np.argsort(out.rowid)].tolist() == [1, 3, 1]
    with pytest.raises(KeyError):
        out.leg("semantic")


def test_competition_ranks_share_ties():
    assert competition_ranks(np.array([5.0, 5.0, 4.0, 4.0, 4.0, 1.0])).tolist() == \
        [1, 1, 3, 3, 3, 6]
    assert competition_ranks(np.array([], dtype=np.float64)).tolist() == []


def test_planning_is_pure_and_repeatable():
    from engine_helpers import make_db

    from recallql.engine.analyzer import analyze
    from recallql.grammar import parse

    db = make_db([])
    catalog = {c.name: c for c in db.collections()}
    spec = analyze(parse("SEARCH kb MATCHING 'alpha beta' WITH RECENCY (weight = 0.1) "
                         "GROUP BY DOCUMENT LIMIT 5 OFFSET 5"), catalog)
    calls = []

    def analyzer(text):
        calls.append(text)
        return text.split()

    first = plan(spec, analyzer, can_embed=False)
    second = plan(spec, analyzer, can_embed=False)
    names = []
    node = build_tree(first)
    while node.children:
        names.append(node.name)
        node = node.children[0]
    names.append(node.name)
    assert names == ["TopK", "GroupByDocument", "RecencyBoost", "ConvexFusion", "LexicalScan"]
    assert first.window == second.window == 100
    assert first.lexical_terms() == ("alpha", "beta") and calls == ["alpha beta", "alpha beta"]
    assert first.model_dump_json() == second.model_dump_json()
