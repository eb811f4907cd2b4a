"""The LoCoMo loader (recallql.datasets.locomo) and the benchmark's per-question metrics."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from benchmarks.locomo import question_metrics
from benchmarks.locomo_systems import plain_rrf
from recallql.datasets.locomo import load_conversation, load_locomo, parse_session_time

UTC = dt.UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1:56 pm on 8 May, 2023", dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
     ("12:09 am on 13 September, 2023", dt.datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
     ("12:30 pm on 1 January 2024", dt.datetime(2024, 1, 1, 12, 30, tzinfo=UTC))],
    ids=["pm", "midnight-hour", "noon-no-comma"])
def test_session_time(text, expected):
    assert parse_session_time(text) == expected


def test_session_time_rejects_other_text():
    with pytest.raises(ValueError, match="not a LoCoMo session time: 'yesterday'"):
        parse_session_time("yesterday")


def _conversation(tmp_path, qa):
    raw = {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:00 pm on 2 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "hi"},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "look", "blip_caption": "a dog"}],
        "session_2_date_time": "9:00 am on 3 May, 2023",
        "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "bye"}],
        "session_3_date_time": "9:00 am on 9 May, 2023",  # a date without turns: no session
        "qa": qa,
    }
    path = tmp_path / "conv-1.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return load_conversation(path)


def test_sessions_turns_and_times(tmp_path):
    conv = _conversation(tmp_path, [])
    assert conv.id == "conv-1" and conv.speakers == ("Ann", "Bo")
    assert [s.number for s in conv.sessions] == [1, 2]
    assert conv.sessions[1].at == dt.datetime(2023, 5, 3, 9, 0, tzinfo=UTC)
    turns = [(s.number, t.dia_id, t.speaker, t.seq, t.caption) for s, t in conv.turns()]
    assert turns == [(1, "D1:1", "Ann", 1, ""), (1, "D1:2", "Bo", 2, "a dog"),
                     (2, "D2:1", "Bo", 1, "")]


def test_evidence_lists_are_split_and_unknown_ids_dropped(tmp_path):
    conv = _conversation(tmp_path, [
        {"question": "a?", "answer": 2022, "evidence": ["D1:1; D2:1"], "category": 2},
        {"question": "b?", "answer": "x", "evidence": ["D1:2 D1:1", "D9:9", "D:1:1"],
         "category": 4},
        {"question": "c?", "answer": "x", "evidence": ["D7:1"], "category": 1},
        {"question": "d?", "answer": "x", "evidence": [], "category": 3},
    ])
    assert [(q.index, q.evidence, q.answer) for q in conv.questions] == [
        (0, ("D1:1", "D2:1"), "2022"), (1, ("D1:2", "D1:1"), "x")]
    assert [q.index for q in conv.scored([4])] == [1]


def test_real_locomo_conversations(index_shared_data):
    root = index_shared_data / "locomo"
    if not root.is_dir():
        pytest.skip("../shared/data/locomo (the LoCoMo conversations) is not there")
    convs = load_locomo(root)
    assert [c.id for c in convs] == ["conv-26", "conv-41", "conv-43", "conv-47", "conv-49"]
    assert sum(1 for c in convs for _ in c.turns()) == 2960
    assert sum(len(c.scored()) for c in convs) == 786  # categories 1–4, with evidence


def test_question_metrics():
    evidence = {"c:D1:1", "c:D2:5"}
    ranked = ["c:D2:1", "c:D1:1", "c:D3:1", "c:D3:2", "c:D3:3", "c:D2:5"]
    m = question_metrics(ranked, evidence)
    assert m["R@5"] == 0.5 and m["R@10"] == 1.0
    assert m["session-hit@5"] == 1.0  # c:D2:1 is in session D2, which holds evidence
    ideal = 1 + 1 / 1.584962500721156
    assert m["nDCG@10"] == pytest.approx((1 / 1.584962500721156 + 1 / 2.807354922057604) / ideal)
    assert question_metrics(["c:D4:1"], evidence)["session-hit@5"] == 0.0


def test_plain_rrf_sums_reciprocal_ranks():
    assert plain_rrf([["a", "b"], ["b", "c"]], k=1) == ["b", "a", "c"]  # b: 1/3+1/2, a: 1/2
