"""The LoCoMo corpus as the systems of `benchmarks.locomo` store it, and the systems themselves.

Every system indexes the same text per turn, ``"<speaker>: <text>"`` (the speaker's name is how
questions name who did something: "When did Caroline go to ..."), and uses the same cached
all-MiniLM-L6-v2 vectors of those texts and of the questions (`benchmarks.vectors_cache`).

- `MessagesSystem`: recallql the way an agent stores a conversation: one database per LoCoMo
  conversation, one recallql session per LoCoMo session (started at the session's time, closed
  after its last turn), each turn a message with ``role`` = speaker and ``at`` = the session's
  time, written with one `db.messages.extend` batch per session. The database clock reads the
  last session's time, so "now" (recency) is when the
  conversation ended. The attached embedder returns the cached vectors.
- `PlainSystem`: recallql with one plain collection ``turns`` holding all conversations (fields
  ``conv``, ``session``, ``speaker``; ``created_at`` = the session's time, ``doc_id`` = the
  session, ``position`` = the turn's place in it), queried ``WHERE conv = :c`` with "now" at that
  conversation's last session.
- Peers, one index per conversation: bm25s, LanceDB (FTS, hybrid limit 10 and 100), an exact
  numpy cosine scan, and plain RRF (k = 60) of bm25s's and the cosine scan's top 100.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import corpus, peers
from benchmarks.vectors_cache import embed_cached
from recallql.datasets.locomo import Conversation, Question, Session, Turn, load_locomo
from recallql.index.embedders import Embedder

DEPTH = 100
#: Ranked turn ids of one question, best first.
Ranked = list[str]


def turn_text(turn: Turn) -> str:
    """The text every system indexes and embeds for a turn."""
    return f"{turn.speaker}: {turn.text}"


def turn_id(conv: Conversation, turn: Turn) -> str:
    """A turn's id across conversations: ``'conv-26:D1:3'``."""
    return f"{conv.id}:{turn.dia_id}"


@dataclass
class Corpus:
    """The five conversations with their texts and vectors.

    Attributes:
        conversations: in file order.
        questions: every question with existing evidence, with its conversation id.
        vectors: turn id -> float32[dim] (the vector of `turn_text`; 384-d for MiniLM).
        qvectors: (conversation id, question index) -> float32[dim].
        embedder: the model of the vectors (None: the default, all-MiniLM-L6-v2), which also
            embeds the other texts some systems store (`MessagesSystem`'s bare contents).
    """

    conversations: list[Conversation]
    questions: list[tuple[str, Question]]
    vectors: dict[str, np.ndarray]
    qvectors: dict[tuple[str, int], np.ndarray]
    embedder: Embedder | None = None

    @property
    def dim(self) -> int:
        """The dimension of the vectors."""
        return len(next(iter(self.vectors.values())))

    def texts(self, conv: Conversation) -> tuple[list[str], list[str], np.ndarray]:
        """(turn ids, texts, float32[n, dim] vectors) of one conversation, in order."""
        ids = [turn_id(conv, t) for _, t in conv.turns()]
        texts = [turn_text(t) for _, t in conv.turns()]
        return ids, texts, np.stack([self.vectors[i] for i in ids])


def locomo_root() -> Path | None:
    """The shared ``locomo/`` folder, if present."""
    return next((p / "locomo" for p in corpus.DATA_CANDIDATES if (p / "locomo").is_dir()),
                None)


def load_corpus(root: Path, embedder: Embedder | None = None) -> Corpus:
    """Load the conversations and their (cached) vectors of `embedder` (None: MiniLM)."""
    convs = load_locomo(root)
    turns = [(c, t) for c in convs for _, t in c.turns()]
    tvecs = embed_cached([turn_text(t) for _, t in turns], "LoCoMo turns", embedder=embedder)
    questions = [(c.id, q) for c in convs for q in c.questions]
    qvecs = embed_cached([q.question for _, q in questions], "LoCoMo questions",
                         embedder=embedder)
    return Corpus(convs, questions,
                  {turn_id(c, t): tvecs[i] for i, (c, t) in enumerate(turns)},
                  {(cid, q.index): qvecs[i] for i, (cid, q) in enumerate(questions)}, embedder)


class LookupEmbedder:
    """An embedder that returns precomputed vectors of known texts (the cache's vectors).

    Args:
        texts: the known texts.
        vectors: float32[len(texts), dim], their vectors; `dim` is taken from them.
        name: the embedder's name (default: the cached MiniLM's).

    Raises:
        KeyError: a text it was not given (a benchmark bug, never silently embedded).
    """

    name = "all-MiniLM-L6-v2-onnx-int8-cached"
    dim = 384

    def __init__(self, texts: Sequence[str], vectors: np.ndarray, name: str | None = None):
        self._vectors = dict(zip(texts, vectors, strict=True))
        self.dim = int(vectors.shape[1])
        if name is not None:
            self.name = name

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)


def _epoch(when: dt.datetime) -> float:
    return when.timestamp()


def _embedder(data: Corpus, conv: Conversation, content: Callable[[Turn], str]
              ) -> LookupEmbedder:
    """The lookup embedder of one conversation: its message contents and its questions."""
    ids, _, vecs = data.texts(conv)
    contents = [content(t) for _, t in conv.turns()]
    if content is not turn_text:
        vecs = embed_cached(contents, f"LoCoMo {conv.id} contents", verbose=False,
                            embedder=data.embedder)
    questions = [q for cid, q in data.questions if cid == conv.id]
    qvecs = np.stack([data.qvectors[(conv.id, q.index)] for q in questions])
    return LookupEmbedder([*contents, *(q.question for q in questions)],
                          np.concatenate([vecs, qvecs]),
                          None if data.embedder is None else f"{data.embedder.name}-cached")


class MessagesSystem:
    """One recallql database per conversation, loaded through sessions and messages."""

    def __init__(self, root: Path, data: Corpus, content: Callable[[Turn], str] = turn_text):
        import recallql

        self.dbs: dict[str, object] = {}
        self.turn_of: dict[str, str] = {}
        for conv in data.conversations:
            end = _epoch(conv.sessions[-1].at)
            db = recallql.connect(root / conv.id, embedder=_embedder(data, conv, content),
                                  clock=lambda e=end: e)
            for session in conv.sessions:
                self._load_session(db, conv, session, content)
            self.dbs[conv.id] = db

    def _load_session(self, db, conv: Conversation, session: Session,
                      content: Callable[[Turn], str]) -> None:
        sid = f"{conv.id}-s{session.number}"
        db.sessions.create(sid, agent_id="locomo", started_at=session.at, source="locomo")
        ids = db.messages.extend({"session_id": sid, "role": turn.speaker,
                                  "content": content(turn), "at": session.at}
                                 for turn in session.turns)  # one batch per session
        for message_id, turn in zip(ids, session.turns, strict=True):
            self.turn_of[f"{conv.id}/msg:{message_id}"] = turn_id(conv, turn)
        db.sessions.close(sid, end_reason="new_session", at=session.at)

    def search(self, statement: str, conv: str, question: Question) -> Ranked:
        """Turn ids of one statement's rows (``:q`` = the question) in one conversation."""
        rows = self.dbs[conv].execute(statement, q=question.question).rows
        return [self.turn_of[f"{conv}/{row.id}"] for row in rows]

    def close(self) -> None:
        """Close every database."""
        for db in self.dbs.values():
            db.close()


class PlainSystem:
    """One recallql database, one ``turns`` collection with every conversation."""

    def __init__(self, root: Path, data: Corpus):
        import recallql

        self._now = 0.0
        self.db = recallql.connect(root, embedder=None, clock=lambda: self._now)
        self.db.create_collection("turns", text_fields=("text",), fields={
            "conv": str, "session": int, "speaker": str}, dim=data.dim, embedder=None)
        self._ends = {c.id: _epoch(c.sessions[-1].at) for c in data.conversations}
        self._now = max(self._ends.values())
        self.db.ingest("turns", [
            {"id": turn_id(c, t), "text": turn_text(t), "conv": c.id, "session": s.number,
             "speaker": t.speaker, "created_at": s.at, "doc_id": f"{c.id}:S{s.number}",
             "position": t.seq, "vector": data.vectors[turn_id(c, t)]}
            for c in data.conversations for s, t in c.turns()])
        self._qvectors = data.qvectors

    def search(self, statement: str, conv: str, question: Question) -> Ranked:
        """Turn ids of one statement's rows (``:q``, ``:v`` = the question, ``:c`` = conv)."""
        self._now = self._ends[conv]
        params: dict[str, object] = {"q": question.question, "c": conv}
        if ":v" in statement:
            params["v"] = self._qvectors[(conv, question.index)]
        return [row.id for row in self.db.execute(statement, **params).rows]

    def close(self) -> None:
        """Close the database."""
        self.db.close()


class PeerSystems:
    """bm25s, LanceDB and an exact cosine scan, each with one index per conversation."""

    def __init__(self, root: Path, data: Corpus):
        self._data = data
        self._ids: dict[str, list[str]] = {}
        self._vecs: dict[str, np.ndarray] = {}
        self._bm25s: dict[str, peers.Bm25sPeer] = {}
        self._lance: dict[str, peers.LancePeer] = {}
        for conv in data.conversations:
            ids, texts, vecs = data.texts(conv)
            self._ids[conv.id], self._vecs[conv.id] = ids, vecs
            self._bm25s[conv.id] = peers.Bm25sPeer(texts)
            self._lance[conv.id] = peers.LancePeer(root / conv.id, ids, texts, vecs)

    def runs(self, conv: str, question: Question) -> dict[str, Ranked]:
        """Every peer's ranking for one question."""
        ids, vector = self._ids[conv], self._data.qvectors[(conv, question.index)]
        lance, text = self._lance[conv], question.question
        bm25 = [ids[i] for i in self._bm25s[conv].search(text, DEPTH)[0]]
        cosine = self._vecs[conv] @ vector
        exact = [ids[i] for i in np.argsort(-cosine, kind="stable")[:DEPTH]]
        return {
            "bm25s + PyStemmer": bm25,
            "LanceDB FTS": lance.lexical(text, DEPTH),
            "LanceDB hybrid, limit 10": lance.hybrid(text, vector, 10),
            "LanceDB hybrid, limit 100": lance.hybrid(text, vector, DEPTH),
            "MiniLM exact cosine": exact,
            "plain RRF (k = 60) of bm25s + MiniLM top 100": plain_rrf([bm25, exact]),
        }


def plain_rrf(rankings: Sequence[Ranked], k: int = 60) -> Ranked:
    """Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) of ranked lists:
    ``Σ 1/(k + rank)``, ranks 1-based; ties by id."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: (-scores[item], item))[:DEPTH]
