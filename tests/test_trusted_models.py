"""`models.trusted`: an unvalidated construction that is the same object as the validated one
(what `model_construct` builds), for the reasons and rows the engine builds per statement."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, PrivateAttr

from recallql.engine.models import Notice, ReasonEntry, Result, Row
from recallql.engine.reasons import Reason
from recallql.grammar.construct import trusted

CASES = [
    (ReasonEntry, {"code": Reason.SEMANTIC_MATCH, "contribution": 0.4, "leg": "semantic",
                   "rank": 3, "norm": 0.8, "cosine": 0.71}),
    (ReasonEntry, {"code": Reason.LEG_ABSENT, "contribution": 0.0, "leg": "lexical"}),
    (ReasonEntry, {"code": Reason.CONTEXT_MATCH, "contribution": 0.125, "leg": "context",
                   "neighbour": "c-7", "side": "before", "distance": 2, "relevance": 0.5,
                   "weight": 0.5}),
    (Row, {"id": "c-1", "collection": "chunks", "score": 0.75, "fields": {"tenant": "t1"},
           "reasons": [ReasonEntry(code=Reason.RECENCY, contribution=0.1, age_days=3.5)]}),
    (Row, {"id": "c-2", "collection": "chunks", "score": 0.5}),
    (Result, {"statement": "SEARCH chunks MATCHING 'x' LIMIT 1", "collection": "chunks",
              "rows": [Row(id="c-1", collection="chunks", score=0.5)], "session_snapshot": None,
              "warnings": [Notice(code=Reason.LEXICAL_LEG_EMPTY, message="m")],
              "truncated": False, "stats": {"window": 100}, "timestamp_fields": ["due"]}),
]


@pytest.mark.parametrize(("cls", "values"), CASES)
def test_trusted_is_the_validated_model(cls, values):
    got, want = trusted(cls, dict(values)), cls(**values)
    assert got == want
    assert got.model_dump_json() == want.model_dump_json()
    assert repr(got) == repr(want)
    assert got.model_fields_set == want.model_fields_set
    assert list(got.__dict__) == list(want.__dict__)


def test_factory_defaults_are_fresh_per_instance():
    a = trusted(Row, {"id": "a", "collection": "c", "score": 0.0})
    b = trusted(Row, {"id": "b", "collection": "c", "score": 0.0})
    assert a.fields == {} and a.reasons == [] and a.fields is not b.fields


def test_a_model_that_needs_more_than_its_fields_is_refused():
    class Private(BaseModel):
        x: int = 0
        _cache: dict = PrivateAttr(default_factory=dict)

    with pytest.raises(TypeError, match="needs validation"):
        trusted(Private, {"x": 1})
