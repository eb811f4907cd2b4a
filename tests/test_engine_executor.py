"""The executor: timing, row counts, and failures wrapped with the operator's name."""

from __future__ import annotations

import numpy as np
import pytest

from recallql.engine.executor import ExecutionError, run
from recallql.engine.operators.base import ExecutionContext
from recallql.engine.operators.fusion import RrfFusion, competition_ranks
from recallql.engine.operators.scan import LexicalScan
from recallql.engine.planner import plan


class BrokenSnapshot:
    live = np.ones(3, bool)
    size = 3

    def lexical_topn(self, terms, n, allowed):
        raise np.linalg.LinAlgError("singular matrix")


class FixedSnapshot:
    live = np.ones(3, bool)
    size = 3

    def lexical_topn(self, terms, n, allowed):
        return np.array([2, 0, 1]), np.array([3.0, 3.0, 1.0], dtype=np.float32)


def test_operator_failure_names_the_operator():
    op = RrfFusion(k=60, children=(LexicalScan(fields=("t",), terms=("x",), window=10),))
    with pytest.raises(ExecutionError) as err:
        run(op, ExecutionContext(snapshot=BrokenSnapshot(), now_ts=0.0))
    assert err.value.operator == "LexicalScan"
    assert "LexicalScan failed: LinAlgError: singular matrix" in str(err.value)


def test_stats_count_rows_in_and_out():
    op = RrfFusion(k=60, children=(LexicalScan(fields=("t",), terms=("x",), window=10),))
    out, stats = run(op, ExecutionContext(snapshot=FixedSnapshot(), now_ts=0.0))
    assert (stats.rows_in, stats.rows_out) == (3, 3)
    assert stats.children[0].rows_out == 3
    assert stats.time_ns >= 0
    assert list(out.lex_rank[np.argsort(out.rowid)]) == [1, 3, 1]


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
    node = first.root
    while node.children:
        names.append(node.name)
        node = node.children[0]
    names.append(node.name)
    assert names == ["TopK", "GroupByDocument", "RecencyBoost", "RrfFusion", "LexicalScan"]
    assert first.window == second.window == 100
    assert first.terms == ("alpha", "beta") and calls == ["alpha beta", "alpha beta"]
