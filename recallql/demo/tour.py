"""The demo's tour: statements run on the demo database, each printed with what it returns.

Every value travels as a parameter (``:q``, ``:s``), never inside the statement text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from recallql.demo.sources import DocSource
from recallql.grammar.timestamps import format_timestamp
from recallql.ui.render import Catalog, print_outcome, shorten

CHAT_QUERY = "robots taking over the world"
LONG_CHATS = "chat%"
OPS_SESSION = "ops-agent-1"


@dataclass
class Built:
    """What the tour needs to know about the database it runs on."""

    source: DocSource
    current: str
    current_query: str
    branch: str | None
    conversation_of: dict[str, str]


class Tour:
    """Prints numbered sections; each statement with its parameters and its outcome."""

    def __init__(self, db: Any, console: Console, built: Built) -> None:
        self.db = db
        self.console = console
        self.built = built
        self.sections = 0

    def section(self, title: str, blurb: str) -> None:
        self.sections += 1
        self.console.print()
        self.console.rule(Text(f"{self.sections}. {title}", style="bold"), align="left")
        self.console.print(Text(blurb, style="dim"))

    def say(self, text: str) -> None:
        self.console.print(Text(text), soft_wrap=True)

    def run(self, text: str, show: bool = True, **params: Any) -> Any:
        """Print the statement and its parameters, run it, print the outcome (if `show`)."""
        from recallql.repl.lexer import RecallQLLexer

        self.console.print(Syntax(text, RecallQLLexer(), theme="ansi_dark",
                                  background_color="default", word_wrap=True))
        if params:
            shown = ", ".join(f"{k} = {_show(v)}" for k, v in params.items())
            self.console.print(Text(f"  parameters: {shown}", style="dim"), soft_wrap=True)
        outcome = self.db.execute(text, **params)
        if show:
            print_outcome(self.console, outcome, Catalog.of(self.db))
        return outcome


def _show(value: Any) -> str:
    if isinstance(value, datetime):
        return f"TIMESTAMP '{format_timestamp(value)}'"
    return repr(value)


def hybrid(t: Tour) -> None:
    t.section("Hybrid search", f"{t.built.source.name}: BM25 (tantivy) and MiniLM vectors, "
              "fused by the convex combination of their min-max normalised scores (FUSE RRF "
              "for reciprocal rank fusion). The 'why' column shows each leg's rank.")
    t.run("SEARCH docs MATCHING :q LIMIT 5", q=t.built.source.query)


def filtered(t: Tour) -> None:
    t.section("Filters, parameters and recency", "WHERE applies to both legs before fusion; "
              "WITH RECENCY adds weight * 0.5^(age / half_life).")
    t.run("SEARCH docs MATCHING :q WHERE created_at >= :since\n"
          "  WITH RECENCY (weight = 0.1, half_life = 365 DAYS) LIMIT 5",
          q=t.built.source.recency_query, since=datetime(2015, 1, 1, tzinfo=UTC))


def explain(t: Tour) -> None:
    t.section("EXPLAIN: the arithmetic behind every score", "The plan, root first, then each "
              "row's reasons; the contributions add up to the score exactly.")
    t.run("EXPLAIN ANALYZE SEARCH docs MATCHING :q\n"
          "  WITH RECENCY (weight = 0.1, half_life = 365 DAYS) LIMIT 3",
          q=t.built.source.recency_query)


def _promoted(before: Any) -> Any:
    """A row ranked 4th or lower whose entity the top 3 do not share (None if there is none)."""
    top = {row.fields.get("entity") for row in before.rows[:3]}
    return next((row for row in before.rows[3:] if row.fields.get("entity") not in top), None)


def _comparison(before: Any, after: Any, width: int) -> Table:
    """Before and after side by side, with how far each row moved."""
    ranks = {row.id: i for i, row in enumerate(before.rows, start=1)}
    id_width = max(12, min(44, (width - 20) // 2))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for head in ("#", "before (no session)", "after (FOR SESSION)", "move"):
        table.add_column(head, no_wrap=True)
    for i, (old, new) in enumerate(zip(before.rows, after.rows, strict=False), start=1):
        was = ranks.get(new.id)
        move = "new" if was is None else "=" if was == i else \
            (f"↑{was - i}" if was > i else f"↓{i - was}")
        table.add_row(str(i), Text(shorten(old.id, id_width)), Text(shorten(new.id, id_width)),
                      move)
    return table


def for_session(t: Tour) -> None:
    t.section("FOR SESSION: the agent's context changes the ranking",
              "Session boost = keywords*hint + velocity*v/(v+1) + entities*e/(e+1), from the "
              "session's annotations and reward signals.")
    query = t.built.source.query
    before = t.run("SEARCH docs MATCHING :q LIMIT 8", show=False, q=query)
    row = _promoted(before)
    if row is None:
        t.say("(too few results to show a change)")
        return
    tags = row.fields.get("tags") or [row.id]
    keyword, entity = str(tags[0]), row.fields.get("entity", row.id)
    t.db.sessions.create(OPS_SESSION, "ops-agent", source="cli")
    t.db.sessions.annotate(OPS_SESSION, keyword)
    t.db.sessions.signal(OPS_SESSION, "reward", 1.0, entity=entity)
    t.say(f"session {OPS_SESSION}: annotate({keyword!r}); signal('reward', 1.0, "
          f"entity={entity!r})")
    after = t.run("SEARCH docs MATCHING :q FOR SESSION :s LIMIT 8", show=False, q=query,
                  s=OPS_SESSION)
    t.console.print(_comparison(before, after, t.console.width))
    t.run("EXPLAIN SEARCH docs MATCHING :q FOR SESSION :s LIMIT 2", q=query, s=OPS_SESSION)


def retrieve(t: Tour) -> None:
    t.section("RETRIEVE FOR SESSION: what should this agent see now",
              "No query text: items ranked by the session's keywords and entities, the "
              "cross-session reward signals and recency.")
    t.run("RETRIEVE 5 FROM docs FOR SESSION :s", s=OPS_SESSION)


def _shared(t: Tour, result: Any) -> str:
    """Which rows of an ungrouped message result belong to the same (planned) conversation."""
    chains: dict[str, list[str]] = {}
    for row in result.rows:
        name = t.built.conversation_of.get(row.session_id or "", "")
        chains.setdefault(name, [])
        if row.session_id not in chains[name]:
            chains[name].append(row.session_id)
    many = [sessions for sessions in chains.values() if len(sessions) > 1]
    if not many:
        return "Here every hit comes from a different conversation."
    return "; ".join(f"{', '.join(s)} are one conversation" for s in many) + \
        " (sessions of one chain, rotated by compression); the grouped result keeps one row " \
        "for each."


def conversations(t: Tour) -> None:
    t.section("Conversations: one row per conversation", "Real chats (chitchat-dataset); the "
              "long ones (sessions 'chat...') are rotated into a chain of sessions every 20 "
              "messages. Without grouping one conversation fills the page; GROUP BY "
              "CONVERSATION keeps its best hit, and a branch or a reset is a conversation of "
              "its own.")
    flat = t.run("SEARCH messages MATCHING :q WHERE session_id LIKE :long LIMIT 8",
                 q=CHAT_QUERY, long=LONG_CHATS)
    t.say(_shared(t, flat))
    t.run("SEARCH messages MATCHING :q WHERE session_id LIKE :long\n"
          "  GROUP BY CONVERSATION LIMIT 5", q=CHAT_QUERY, long=LONG_CHATS)


def _live_note(before: Any, after: Any, current: str) -> str:
    kept = {row.id for row in after.rows}
    hidden = [row for row in before.rows if row.session_id == current and row.id not in kept]
    if not hidden:
        return "No hit came from the current session this time."
    note = (f"{hidden[0].id} (in {current}, already in the agent's context) is hidden.")
    root = hidden[0].conversation_root
    stand_in = next((row for row in after.rows if row.conversation_root == root), None)
    if stand_in is not None:
        note += (f" The conversation is still found through {stand_in.id} in "
                 f"{stand_in.session_id}, a session compressed away.")
    return note


def live_context(t: Tour) -> None:
    t.section("FOR SESSION on messages: skip what the agent already sees",
              f"The agent in {t.built.current} (the open tip of chat0) searches its memory "
              "with the user's latest long message. Without FOR SESSION the best hit is that "
              "very message.")
    query, current = t.built.current_query, t.built.current
    before = t.run("SEARCH messages MATCHING :q GROUP BY CONVERSATION LIMIT 4", q=query)
    after = t.run("SEARCH messages MATCHING :q FOR SESSION :s GROUP BY CONVERSATION LIMIT 4",
                  q=query, s=current)
    t.say(_live_note(before, after, current))


def lineage(t: Tour) -> None:
    t.section("Lineage: compression chains, branches and resets",
              "Only a parent that ended by compression continues a conversation; a branch or "
              "a reset starts a new one.")
    t.run("SHOW LINEAGE :s", s=t.built.current)
    if t.built.branch:
        t.run("SHOW LINEAGE :s", s=t.built.branch)


SECTIONS: tuple[Callable[[Tour], None], ...] = (
    hybrid, filtered, explain, for_session, retrieve, conversations, live_context, lineage)
