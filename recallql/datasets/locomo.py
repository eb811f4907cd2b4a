"""LoCoMo: long multi-session conversations with questions whose evidence turns are annotated.

Maharana, Lee, Tulyakov, Bansal, Barbieri & Fang, "Evaluating Very Long-Term Conversational
Memory of LLM Agents", ACL 2024 (public release of 10 conversations; research use under the
authors' terms — the data is never copied into this repository).

One file per conversation (``conv-26.json``): ``speaker_a``, ``speaker_b``; ``session_N`` = list of
turns ``{speaker, dia_id ('D3:7'), text, optional img_url / blip_caption / query}``;
``session_N_date_time`` (``'1:56 pm on 8 May, 2023'``; some files list dates of sessions that
have no turns: those are not sessions); ``qa`` = ``{question, answer, evidence: [dia_id, ...],
category}`` with categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
Evidence strings that hold several ids (``'D8:6; D9:17'``, ``'D9:1 D4:4 D4:6'``: lists that
lost their encoding) are split on ``;``, ``,`` and white space. A few ids then still name no turn
(``'D4:36'`` in a 35-turn session, the malformed ``'D:11:26'``): they are dropped, and a question
left without evidence (two have none in the files) is kept out of `Conversation.questions`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: Categories scored by the benchmark (5, adversarial, has no answer in the conversation).
SCORED_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                  5: "adversarial"}
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
    re.IGNORECASE)
_SPLIT = re.compile(r"[;,\s]+")
_MONTHS = {m: i for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"), start=1)}


@dataclass(frozen=True)
class Turn:
    """One turn of a session.

    Attributes:
        dia_id: the turn id, e.g. ``'D3:7'`` (session 3, turn 7).
        speaker: the speaker's name.
        text: what was said.
        caption: the BLIP caption of a shared image (``''`` when no image was shared).
        seq: 1-based position in its session.
    """

    dia_id: str
    speaker: str
    text: str
    caption: str
    seq: int


@dataclass(frozen=True)
class Session:
    """One session: its number (1-based), its time (UTC; the data gives no zone) and turns."""

    number: int
    at: dt.datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    """One judged question.

    Attributes:
        index: position in the file's ``qa`` list (0-based), stable across loads.
        question, answer: the texts (an answer may be a number in the file: kept as text).
        evidence: the dia_ids of the evidence turns that exist in the conversation.
        category: 1–5 (`CATEGORY_NAMES`).
    """

    index: int
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: ``id`` (file stem), the two speakers, sessions in order and the
    questions with at least one existing evidence turn."""

    id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    def turns(self) -> Iterator[tuple[Session, Turn]]:
        """Every turn with its session, in conversation order."""
        for session in self.sessions:
            for turn in session.turns:
                yield session, turn

    def scored(self, categories: Iterable[int] = SCORED_CATEGORIES) -> list[Question]:
        """The questions of the given categories (default 1–4)."""
        wanted = set(categories)
        return [q for q in self.questions if q.category in wanted]


def parse_session_time(text: str) -> dt.datetime:
    """``'1:56 pm on 8 May, 2023'`` → 2023-05-08T13:56:00+00:00.

    Raises:
        ValueError: the text is not in that form (names the text).
    """
    found = _DATE.match(text)
    month = _MONTHS.get(found.group(5).lower()) if found else None
    if found is None or month is None:
        raise ValueError(f"not a LoCoMo session time: {text!r}")
    hour = int(found.group(1)) % 12 + (12 if found.group(3).lower() == "pm" else 0)
    return dt.datetime(int(found.group(6)), month, int(found.group(4)), hour,
                       int(found.group(2)), tzinfo=dt.UTC)


def _sessions(raw: dict) -> tuple[Session, ...]:
    numbers = sorted(int(m.group(1)) for k in raw if (m := _SESSION_KEY.match(k)))
    sessions = []
    for number in numbers:
        turns = tuple(
            Turn(dia_id=str(t["dia_id"]), speaker=str(t["speaker"]), text=str(t.get("text", "")),
                 caption=str(t.get("blip_caption") or ""), seq=i)
            for i, t in enumerate(raw[f"session_{number}"], start=1))
        if turns:
            at = parse_session_time(raw[f"session_{number}_date_time"])
            sessions.append(Session(number=number, at=at, turns=turns))
    return tuple(sessions)


def _questions(raw: dict, known: set[str]) -> tuple[Question, ...]:
    out = []
    for index, qa in enumerate(raw.get("qa", [])):
        ids = (e for raw_id in qa.get("evidence", []) for e in _SPLIT.split(str(raw_id)))
        evidence = tuple(dict.fromkeys(e for e in ids if e in known))
        if evidence:
            out.append(Question(index=index, question=str(qa["question"]),
                                answer=str(qa.get("answer", qa.get("adversarial_answer", ""))),
                                evidence=evidence, category=int(qa["category"])))
    return tuple(out)


def load_conversation(path: str | Path) -> Conversation:
    """One conversation file.

    Raises:
        OSError: the file cannot be read. ValueError: it is not LoCoMo JSON (a session time
            that does not parse, a missing key: the message names it).
    """
    path = Path(path)
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or "speaker_a" not in raw:
        raise ValueError(f"{path}: not a LoCoMo conversation (no 'speaker_a')")
    try:
        sessions = _sessions(raw)
    except KeyError as exc:
        raise ValueError(f"{path}: missing key {exc}") from exc
    known = {turn.dia_id for s in sessions for turn in s.turns}
    return Conversation(id=path.stem, speakers=(raw["speaker_a"], raw["speaker_b"]),
                        sessions=sessions, questions=_questions(raw, known))


def load_locomo(root: str | Path) -> list[Conversation]:
    """Every ``*.json`` conversation in `root`, ordered by file name.

    Raises:
        FileNotFoundError: `root` holds no conversation file.
    """
    files = sorted(Path(root).glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no LoCoMo conversation (*.json) in {root}")
    return [load_conversation(f) for f in files]
