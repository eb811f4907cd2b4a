"""The user docs cannot drift from the language: every statement in a fenced block of README.md,
docs/language.md, docs/scoring.md and docs/cluster.md parses, runs against a small real database
(the hash embedder: no model), and every error a block shows is the error the statement gets,
character for character; the EXPLAIN arithmetic the docs print adds up. The closed vocabularies
are documented both ways (reason codes and their details in scoring.md; clauses, options and
keywords in language.md), and so are the error messages and the EXPLAIN note the docs quote.

Statements are taken from ```sql blocks (whole scripts), from `recallql query "..."` and
`recallql explain "..."` lines of ```sh blocks (with their `-p` values), from the string given to
`.execute(...)` / `.explain(...)` in ```python blocks (with their arguments), and from the
`recallql>` prompt lines of shown shell sessions.
"""

from __future__ import annotations

import ast
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import recallql
from recallql.cli.params import bind_with_fallback, parse_params
from recallql.grammar import Explain, parse, parse_script
from recallql.grammar.errors import QueryError
from recallql.index.embedders import HashEmbedder

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/language.md", "docs/scoring.md", "docs/cluster.md")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
ERROR_HEAD = re.compile(r"^(QuerySyntaxError|QuerySemanticError|ParameterError): ")


@dataclass
class Example:
    """One statement a doc shows: where, its text, the values it is run with, and the error
    the doc shows for it (None: the doc shows it working)."""

    where: str
    text: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    cli_params: list[str] = field(default_factory=list)
    error: str | None = None


def _blocks(doc: str) -> list[tuple[str, str, str]]:
    """(language, body, "doc:line") of every fenced block of `doc`, in order."""
    text = (REPO / doc).read_text()
    return [(m.group(1), m.group(2), f"{doc}:{text[:m.start()].count(chr(10)) + 1}")
            for m in FENCE.finditer(text)]


def _sh(body: str, where: str) -> list[Example]:
    found = []
    heredoc = re.search(r"<<'PY'\n(.*?)^PY$", body, re.S | re.M)  # python - <<'PY' ... PY
    if heredoc:
        found += _python(heredoc.group(1), where)
        body = body.replace(heredoc.group(0), "")
    for line in body.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if not argv or not argv[0].endswith("recallql") or argv[1:2] not in (["query"],
                                                                              ["explain"]):
            continue
        params = [argv[i + 1] for i, a in enumerate(argv) if a in ("-p", "--param")]
        statement = argv[2] if argv[1] == "query" else "EXPLAIN " + argv[2]
        found.append(Example(where, statement, cli_params=params))
    return found


def _python(body: str, where: str) -> list[Example]:
    found = []
    for node in ast.walk(ast.parse(body)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("execute", "explain") and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            continue
        text = node.args[0].value
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords
                  if k.arg not in (None, "analyze")}
        args = tuple(ast.literal_eval(a) for a in node.args[1:])
        if node.func.attr == "explain":
            text = "EXPLAIN " + text
        found.append(Example(where, text, args, kwargs))
    return found


def _shown(body: str, where: str) -> list[Example]:
    """A shown shell session (`recallql> STATEMENT;` and what it printed) or a shown error:
    the statement, with the error text the block shows after it."""
    lines = body.splitlines()
    prompts = [i for i, line in enumerate(lines) if line.startswith("recallql> ")
               and line != "recallql> "]
    heads = [i for i, line in enumerate(lines) if ERROR_HEAD.match(line)]
    found = []
    for i in prompts:
        statement = lines[i].removeprefix("recallql> ").rstrip(";")
        after = [h for h in heads if h > i]
        error = None
        if after and after[0] == i + 1:
            end = next((j for j in range(i + 1, len(lines))
                        if lines[j].startswith("recallql>")), len(lines))
            error = "\n".join(lines[i + 1:end])
        found.append(Example(where, statement, error=error))
    if not prompts and heads:  # an error alone: its excerpt line is the statement
        error = "\n".join(lines)
        found.append(Example(where, lines[2].strip(), error=error))
    return found


def doc_examples(docs: tuple[str, ...] = DOCS) -> list[Example]:
    """Every statement of the docs' fenced blocks (see the module docstring)."""
    found: list[Example] = []
    for doc in docs:
        for lang, body, where in _blocks(doc):
            if lang == "sql":
                found += [Example(where, s.source[s.span.start:s.span.end])
                          for s in parse_script(body)]
            elif lang == "sh":
                found += _sh(body, where)
            elif lang == "python":
                found += _python(body, where)
            elif lang == "":
                found += _shown(body, where)
    return found


EXAMPLES = doc_examples()


def _id(example: Example) -> str:
    return f"{example.where} {' '.join(example.text.split())[:60]}"


def test_the_docs_show_statements_of_every_kind_and_their_errors():
    """The extraction finds what the docs hold (a guard against it silently finding nothing)."""
    wheres = {e.where.split(":")[0] for e in EXAMPLES}
    assert wheres == set(DOCS) - {"docs/scoring.md"}  # scoring.md shows formulas and output
    assert sum(e.error is not None for e in EXAMPLES) >= 2  # README's shell, language.md
    assert sum(bool(e.cli_params) for e in EXAMPLES) >= 1
    assert sum(bool(e.kwargs) for e in EXAMPLES) >= 3


def test_the_language_reference_shows_every_statement_and_clause():
    """docs/language.md, "Statements by example": "Every statement and clause"."""
    text = (REPO / "docs" / "language.md").read_text()
    block = text.split("## Statements by example", 1)[1].split("```sql\n", 1)[1]
    statements = parse_script(block.split("```", 1)[0])
    kinds = {type(s).__name__ for s in statements}
    assert kinds == {"Search", "Retrieve", "Explain", "ShowCollections", "ShowSessions",
                     "ShowSession", "ShowLineage", "Describe"}
    script = "\n".join(s.to_text() for s in statements)
    for clause in ("USING", "NEAR", "WHERE", "FOR SESSION", "WITH RECENCY", "WITHOUT RECENCY",
                   "WITH SESSION BOOST", "WITH SIGNAL BOOST", "WITHOUT SIGNAL BOOST", "FUSE RRF",
                   "GROUP BY DOCUMENT", "GROUP BY CONVERSATION", "AS OF", "LIMIT", "OFFSET",
                   "BETWEEN", " IN (", "NOT IN :", "LIKE", "CONTAINS", "IS NOT NULL", "NOT (",
                   "EXPLAIN ANALYZE", "VERBOSE", "FORMAT JSON", "FUSE CONVEX", "WITH CONTEXT",
                   "USING HYBRID (ann, ef =", "USING SEMANTIC", "USING LEXICAL"):
        assert clause in script, clause


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.error is not None], ids=_id)
def test_every_error_the_docs_show_is_the_error_raised(example):
    with pytest.raises(QueryError) as info:
        parse(example.text)
    assert str(info.value) == example.error


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """The collections, fields and sessions the docs' statements name: `docs` and `messages`
    (built in), `notes` and `kb` (docs/cluster.md), session s-42 and a compression chain
    s-1 <- s-2."""
    path = tmp_path_factory.mktemp("docs") / "db"
    with recallql.connect(path, embedder=HashEmbedder()) as db:
        db.create_collection("notes", fields={"agent_id": str})
        db.create_collection("kb", fields={"source": str})
        db.ingest("docs", [
            {"id": "a", "title": "Backup", "body": "keep 30 days", "tags": ["ops"],
             "source": "wiki", "created_at": "2024-05-01"},
            {"id": "b", "title": "Restore", "body": "restore postgres backups", "tags": ["ops"],
             "source": "runbook", "created_at": "2025-03-01"}])
        db.ingest("notes", [{"id": "n1", "agent_id": "bob", "body": "backups run nightly"}])
        db.sessions.create("s-42", "ops-bot")
        db.sessions.create("s-1", "ops-agent")
        db.messages.append("s-1", "user", "Our postgres backups take too long")
        db.sessions.close("s-1", end_reason="compression")
        db.sessions.create("s-2", "ops-agent", parent="s-1")
        db.messages.append("s-2", "user", "How do we restore postgres backups quickly?")
        yield db


#: Values for the parameters a statement leaves to the reader (`:q`, `:v`, ...).
DEFAULTS = {"q": "backup", "v": [0.125] * 64, "s": "s-42", "t": "ops", "n": 5,
            "sources": ["wiki", "runbook"]}


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.error is None], ids=_id)
def test_every_statement_in_the_docs_runs(example, db):
    stmt = parse(example.text)
    names = {p.name for p in stmt.parameters if p.name is not None}
    if example.cli_params:  # as `recallql query -p ...` binds them
        params = parse_params(example.cli_params)
        result = bind_with_fallback(lambda values: db.execute(example.text, **values), params)
    else:
        kwargs = {**{k: v for k, v in DEFAULTS.items() if k in names}, **example.kwargs}
        result = db.execute(example.text, *example.args, **kwargs)
    ran = stmt.statement if isinstance(stmt, Explain) else stmt  # the result names it bound
    assert type(parse(result.statement)) is type(ran)
    assert result.statement.split(" MATCHING ")[0] == ran.to_text().split(" MATCHING ")[0]


# -- EXPLAIN arithmetic ---------------------------------------------------------------------

ROW = re.compile(r"^#\d+ (\S+)\s+score=(-?\d+\.\d+)$")
PART = re.compile(r"([A-Z_]+)(?:\(([^()]*)\))? ([+-]\d+\.\d+)")
BOUNDS = re.compile(r"(\w+)=\[(-?[\d.]+), (-?[\d.]+)\]")


def _explain_rows(body: str) -> list[tuple[str, float, list[tuple[str, str, float]]]]:
    """The `#n id  score=x` rows of an EXPLAIN text and their (code, detail, contribution)."""
    rows: list[tuple[str, float, list[tuple[str, str, float]]]] = []
    for line in body.splitlines():
        head = ROW.match(line)
        if head:
            rows.append((head.group(1), float(head.group(2)), []))
        elif rows and line.startswith("   "):
            rows[-1][2].extend((c, d or "", float(x)) for c, d, x in PART.findall(line))
    return rows


EXPLAINS = [(where, body) for doc in DOCS for lang, body, where in _blocks(doc)
            if lang == "" and _explain_rows(body)]


def test_the_docs_show_explain_output():
    assert len(EXPLAINS) >= 3  # README's two, scoring.md's worked example


@pytest.mark.parametrize(("where", "body"), EXPLAINS, ids=[w for w, _ in EXPLAINS])
def test_explain_arithmetic_in_the_docs_adds_up(where, body):
    """Each row's contributions sum to its score, a convex leg's share is w/W·norm (two equal
    legs: 0.5·norm), its norm is (raw − lo)/(hi − lo) from the fusion's bounds, a default
    recency part is 0.005·0.5^(age/365) and the default session parts are 0.3·matched/total,
    0.2·v/(v+1) and 0.2·e/(e+1) — to the precision printed."""
    bounds = {leg: (float(lo), float(hi)) for leg, lo, hi in BOUNDS.findall(body)}
    default_recency = "weight=0.005 half_life=365d shape=EXP" in body
    default_session = "keywords=0.3 velocity=0.2 entities=0.2" in body
    for row_id, score, parts in _explain_rows(body):
        assert parts, row_id
        assert math.isclose(sum(x for _, _, x in parts), score, abs_tol=6e-6 * len(parts)), (
            row_id, score, parts)
        for code, detail, x in parts:
            info = dict(kv.split("=", 1) for kv in detail.split(", ") if "=" in kv)
            if code in ("LEXICAL_MATCH", "SEMANTIC_MATCH") and "norm" in info:
                norm = float(info["norm"])
                assert math.isclose(x, 0.5 * norm, abs_tol=1e-5), (row_id, code, x, norm)
                leg = "lexical" if code == "LEXICAL_MATCH" else "semantic"
                raw = float(info["bm25" if leg == "lexical" else "cosine"])
                lo, hi = bounds[leg]
                assert math.isclose(norm, (raw - lo) / (hi - lo), abs_tol=6e-4 / (hi - lo)), (
                    row_id, code, norm, raw, lo, hi)
            if code == "RECENCY" and default_recency:
                age = float(info["age"].removesuffix("d"))
                assert math.isclose(x, 0.005 * 0.5 ** (age / 365), abs_tol=1e-5), (row_id, x)
            if default_session and code.startswith("SESSION_"):
                if code == "SESSION_KEYWORDS":
                    matched, total = (int(k) for k in detail.split("/"))
                    expected = 0.3 * matched / total if total else 0.0
                else:
                    s = float(info["v" if code == "SESSION_VELOCITY" else "e"])
                    expected = 0.2 * s / (s + 1)
                assert math.isclose(x, expected, abs_tol=1e-3 + 1e-5), (row_id, code, x)


# -- the closed vocabularies: reason codes, clauses, options -----------------------------------

def _reason_table() -> dict[str, str]:
    """docs/scoring.md's reason-code table: code -> its detail cell."""
    text = (REPO / "docs" / "scoring.md").read_text().split("## Reason codes", 1)[1]
    return {m.group(1): m.group(2) for m in re.finditer(
        r"^\| `([A-Z_]+)` \| [^\n]*? \| ([^|\n]*) \|$", text, re.M)}


def _sample(code: Any) -> Any:
    """A reason entry of `code` with every field its detail can show."""
    from recallql.engine.models import ReasonEntry

    leg = {"LEXICAL_MATCH": "lexical", "SEMANTIC_MATCH": "semantic",
           "CONTEXT_MATCH": "context", "LEG_ABSENT": "semantic"}.get(code.value)
    return ReasonEntry(code=code, contribution=0.0, leg=leg, rank=2, bm25=1.5, cosine=0.5,
                       norm=0.25, neighbour="b", side="before", distance=2, relevance=0.5,
                       weight=0.5, matched=1, total=2, velocity=1.0, entity="e",
                       entity_sum=0.5, sums={"reward": 0.5}, age_days=12.0, root="r",
                       anchor="a")


def test_every_reason_code_is_documented_and_every_documented_one_exists():
    from recallql.engine.reasons import ROW_CODES, STATEMENT_CODES

    table = _reason_table()
    assert set(table) == {c.value for c in ROW_CODES}
    text = (REPO / "docs" / "scoring.md").read_text()
    warnings = text.split("Statement-level warnings", 1)[1].split("The vocabulary is closed")[0]
    assert set(re.findall(r"`([A-Z_]{4,})`", warnings)) == {c.value for c in STATEMENT_CODES}


def test_the_reason_details_scoring_md_documents_are_the_ones_rendered():
    """Each row code's detail shows the keys the table names (`rank=`, `bm25=`, ...): no more,
    and all of them but `leg=` (shown only for a leg not named after its kind)."""
    from recallql.engine.reasons import ROW_CODES

    for code in sorted(ROW_CODES):
        cell, detail = _reason_table()[code.value], _sample(code).detail
        literal = re.match(r"`([^`=]+|age=0d)`:", cell)  # a fixed detail, e.g. `boosts only`
        if literal:
            assert detail == literal.group(1), code
            continue
        if "`matched/total`" in cell:
            assert detail == "1/2", code
            continue
        documented = set(re.findall(r"(\w+)=", " ".join(re.findall(r"`([^`]+)`", cell))))
        if code.value == "SIGNAL_BOOST":  # `name=s` per signal name
            documented = documented - {"name"} | {"reward"}
        shown = set(re.findall(r"(\w+)=", detail))
        assert shown <= documented and documented - {"leg"} <= shown, (code, cell, detail)


def test_every_clause_and_option_the_grammar_takes_is_in_the_language_reference():
    from recallql.grammar.clauses import _CLAUSES, OPTION_NAMES

    text = (REPO / "docs" / "language.md").read_text()
    clauses = text.split("| clause | field on", 1)[1].split("\n\n", 1)[0]
    for clause in _CLAUSES.values():
        assert f"`{clause.title}" in clauses or f"| `{clause.title.split()[0]}" in clauses, (
            clause.title)
    options = text.split("### Options", 1)[1].split("**Fusion.**", 1)[0]
    for names in OPTION_NAMES.values():
        for name in names or ():
            assert f"`{name}`" in options, name
    for leg in ("lexical", "semantic", "context"):  # FUSE weights' leg names
        assert f"{leg} =" in text or f"({leg} = w)" in text, leg


def test_the_bm25_note_scoring_md_shows_is_the_one_explain_prints():
    """docs/scoring.md §1.2 shows the note for 2 replaced rows of 3 (N=5, 3 live)."""
    text = (REPO / "docs" / "scoring.md").read_text()
    shown = next(line for _, body, _ in _blocks("docs/scoring.md")
                 for line in body.splitlines() if line.startswith("note: BM25"))
    assert shown in text
    with recallql.connect() as db:
        db.create_collection("t", text_fields=("body",), dim=4, embedder=None)
        db.ingest("t", [{"id": i, "body": f"backup {i}"} for i in "abc"])
        db.ingest("t", [{"id": i, "body": f"backup {i} again"} for i in "ab"])  # 2 replaced
        assert db.explain("SEARCH t MATCHING 'backup' USING LEXICAL").notes == [
            shown.removeprefix("note: ")]


def test_the_keyword_lists_in_the_language_reference_are_the_grammars():
    from recallql.grammar.keywords import NON_RESERVED, RESERVED

    section = (REPO / "docs" / "language.md").read_text().split(
        "### Reserved and non-reserved words", 1)[1].split("```")
    assert set(section[1].split()) == set(RESERVED)
    assert set(section[3].split()) == set(NON_RESERVED)


#: Error messages docs/language.md quotes in its text: (the quote, the statement, its values).
#: A quote with ``...`` in it names the message's parts on either side.
QUOTED_ERRORS = [
    ("unknown leg 'lexcal' in FUSE weights ... did you mean 'lexical'?",
     "SEARCH docs MATCHING 'x' FUSE RRF (weights = (lexcal = 2))", {}),
    ("field 'tags' is list[str]; expected a string, got 5",
     "SEARCH docs MATCHING 'x' WHERE tags = 5", {}),
    ("value for source (parameter :t) must be a string (source is str), got int 42",
     "SEARCH docs MATCHING 'x' WHERE source = :t", {"t": 42}),
    ("LIMIT (parameter :n) must be at least 1, got 0",
     "SEARCH docs MATCHING 'x' LIMIT :n", {"n": 0}),
]


@pytest.mark.parametrize(("quote", "statement", "values"), QUOTED_ERRORS,
                         ids=[q for q, _, _ in QUOTED_ERRORS])
def test_the_error_messages_the_language_reference_quotes_are_raised(quote, statement, values,
                                                                     db):
    assert f"`{quote}`" in " ".join((REPO / "docs" / "language.md").read_text().split())
    with pytest.raises(QueryError) as info:
        db.execute(statement, **values)
    for part in quote.split(" ... "):
        assert part in str(info.value), (part, str(info.value))


def test_every_make_target_the_readme_names_exists():
    targets = set(re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.M))
    named = {m for _, body, _ in _blocks("README.md") for m in re.findall(r"^make ([\w-]+)",
                                                                            body, re.M)}
    assert named >= {"demo", "test", "lint"} and named <= targets, named - targets


def _clause_examples() -> list[tuple[str, str]]:
    """(field, statement) for each example of language.md's clause table, made a statement."""
    text = (REPO / "docs" / "language.md").read_text()
    table = text.split("| clause | field on", 1)[1].split("\n\n", 1)[0]
    found = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.replace("\\|", "¦").split("|")[1:-1]]
        slot = re.findall(r"`(\w+)`", cells[1])[0]
        for example in re.findall(r"`([^`]+)`", cells[-1]):
            example = example.replace("¦", "|")
            if example.startswith(("MATCHING", "NEAR")):
                found.append((slot, "SEARCH docs " + example))
            elif example.startswith("RETRIEVE"):
                found.append((slot, example))
            else:
                found.append((slot, "SEARCH docs MATCHING 'x' " + example))
    return found


@pytest.mark.parametrize(("slot", "statement"), _clause_examples(), ids=str)
def test_every_clause_example_in_the_language_reference_parses_into_its_field(slot, statement):
    stmt = parse(statement)
    assert getattr(stmt, slot) not in (None, ()), (slot, statement)
    assert parse(stmt.to_text()).to_text() == stmt.to_text()
