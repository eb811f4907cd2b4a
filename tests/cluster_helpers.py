"""Shared by the cluster tests: CACM in one database and in a cluster, the statements compared,
and what "the same answer" means (ids, order, scores, reasons with their contributions, fields,
warnings)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import recallql
from recallql.datasets import corpora
from recallql.index.embedders import HashEmbedder

#: "now" for every shard and the single database (recency boosts need one clock).
NOW = 1.7e9
CLOCK = functools.partial(float, NOW)
FIELDS = {"source": "str", "authors": "list[str]", "tags": "list[str]"}
#: 64-d hash vectors: the semantic leg runs on the shards and at plan time without a model.
EMBEDDER = "hash-blake2b-64"

#: Statement shapes over a collection `cacm` (each run with :q = every CACM query).
STATEMENTS = [
    "SEARCH cacm MATCHING :q LIMIT 10",
    "SEARCH cacm MATCHING :q USING LEXICAL LIMIT 10",
    "SEARCH cacm MATCHING :q USING SEMANTIC LIMIT 10",
    "SEARCH cacm MATCHING :q WITHOUT RECENCY LIMIT 20 OFFSET 5",
    "SEARCH cacm MATCHING :q WHERE created_at >= TIMESTAMP '1975-01-01' LIMIT 10",
    "SEARCH cacm MATCHING :q USING LEXICAL LIMIT 100",
    "SEARCH cacm MATCHING :q FUSE RRF (k = 10) GROUP BY DOCUMENT LIMIT 10",
]
#: Statements without a query text.
FIXED = [
    "RETRIEVE FROM cacm WHERE tags CONTAINS 'simulation' LIMIT 10",
    "RETRIEVE FROM cacm WHERE created_at >= TIMESTAMP '1978-06-01' LIMIT 25",
]


def cacm_root(shared: Path) -> Path:
    return shared / "ir" / "cacm"


def cacm_docs(shared: Path) -> list[dict[str, Any]]:
    return list(corpora.load_cacm(cacm_root(shared)))


def cacm_queries(shared: Path) -> dict[str, str]:
    return corpora.load_cacm_queries(cacm_root(shared))


def single_database(path: Path, docs: list[dict[str, Any]], name: str = "cacm"
                    ) -> recallql.Database:
    """One database holding `docs` in collection `name` (the reference)."""
    db = recallql.connect(path, embedder=None, clock=CLOCK)
    db.create_collection(name, text_fields=("title", "body"), fields=FIELDS,
                         embedder=HashEmbedder(64))
    db.ingest(name, docs)
    return db


def answer(result: Any) -> dict[str, Any]:
    """What must be equal: every row (id, score, fields, reasons with their contributions and
    details) in order, and the warnings."""
    inner = getattr(result, "result", result)
    return {"rows": [row.model_dump() for row in inner.rows],
            "warnings": [w.code for w in inner.warnings]}


def differences(one: Any, other: Any, cases: list[tuple[str, dict[str, Any]]]
                ) -> list[str]:
    """Statements (with parameters) whose answers differ between two systems."""
    bad = []
    for text, params in cases:
        if answer(one.execute(text, **params)) != answer(other.execute(text, **params)):
            bad.append(f"{text} {params}")
    return bad


def cases(queries: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Every statement shape with every query, then the fixed statements."""
    out = [(text, {"q": q}) for text in STATEMENTS for q in queries.values()]
    return out + [(text, {}) for text in FIXED]


TENANTS = 8
TENANT_FIELDS = {**FIELDS, "agent_id": "str"}


def tenant_of(index: int) -> str:
    return f"agent-{index % TENANTS}"


def tenant_docs(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """CACM split over `TENANTS` agents (document i belongs to agent i mod 8)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for i, doc in enumerate(docs):
        out.setdefault(tenant_of(i), []).append({**doc, "agent_id": tenant_of(i)})
    return out


def tenant_database(path: Path, docs: list[dict[str, Any]]) -> recallql.Database:
    """One tenant's reference database (its documents in collection `cacm`)."""
    db = recallql.connect(path, embedder=None, clock=CLOCK)
    db.create_collection("cacm", text_fields=("title", "body"), fields=TENANT_FIELDS,
                         embedder=HashEmbedder(64))
    db.ingest("cacm", docs)
    return db


def setup_tenants(c: Any, docs: list[dict[str, Any]]) -> None:
    """The per-tenant collection `cacm` in cluster `c`, every tenant's documents ingested
    (routed by their `agent_id`)."""
    c.create_collection("cacm", text_fields=("title", "body"), fields=TENANT_FIELDS,
                        embedder=EMBEDDER)
    report = c.ingest("cacm", [d for part in tenant_docs(docs).values() for d in part])
    assert report.count == len(docs) and len(report.parts) == TENANTS


class Routed:
    """A cluster seen as one tenant's database (`execute(text, **params)` with `tenant=`)."""

    def __init__(self, c: Any, tenant: str) -> None:
        self._c, self._tenant = c, tenant

    def execute(self, text: str, **params: Any) -> Any:
        return self._c.execute(text, tenant=self._tenant, **params)


def where_routed(tenant: str, queries: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Statements that name their tenant in the WHERE (routing field `agent_id`)."""
    return [("SEARCH cacm MATCHING :q WHERE agent_id = :a LIMIT 10", {"q": q, "a": tenant})
            for q in queries.values()] + [
        ("RETRIEVE FROM cacm WHERE agent_id = :a AND tags CONTAINS 'simulation' LIMIT 5",
         {"a": tenant})]


def conversation(target: Any, session: str, agent: str) -> None:
    """The same session writes on a cluster or a tenant's database."""
    target.sessions.create(session, agent)
    for role, text in [
            ("user", "how do I back up the compiler's symbol tables?"),
            ("assistant", "dump the hash tables to tape each night"),
            ("user", "and restore them after a crash"),
            ("assistant", "read the tape back before the first compile")]:
        target.messages.append(session, role, text)
    target.sessions.signal(session, "reward", 1.0, entity="cacm:14")
