"""The recallql MCP server: an agent's memory as Model Context Protocol tools and resources.

Built on the official ``mcp`` SDK (`mcp.server.mcpserver.MCPServer`). Every tool goes through
the public API (`recallql.api.Database`), on the one thread of a `DatabaseWorker` that also
group-commits writes. Tool names are a contract:

| tool | what it does |
|---|---|
| ``search_memory`` | SEARCH a collection (BM25 + vectors), optional session, filters, grouping |
| ``retrieve_context`` | RETRIEVE what a session should see now (its boosts, optional text) |
| ``explain`` | EXPLAIN a SEARCH / RETRIEVE: the plan and every row's score arithmetic (text) |
| ``run_statement`` | any recallql statement, values as parameters |
| ``remember`` | store text items in a collection (one batch) |
| ``append_messages`` | append messages to an open session (the ``messages`` collection) |
| ``record_signal`` | a reward (or another allowed signal) on a session, optionally on an entity |
| ``annotate_session`` | annotation text whose words become the session's keywords |
| ``start_session`` / ``end_session`` | a session's lifecycle |

Results are compact JSON text (`recallql.mcp.shapes`); EXPLAIN is its text format. A mistake
(a query error with its caret under the statement the agent wrote, an invalid item, a rejected
signal, a missing session) comes back as a tool error (``isError``) holding the error's
message, never a traceback; an argument a tool builds a statement from (``collection``,
``filters``, ``reason``) is named as the argument (``ArgumentError: ...`` and
``filters.tag: unknown field 'tag' ...``), never shown as statement text.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from recallql.api import BUILTIN_FIELDS, USER_ERRORS
from recallql.grammar.timestamps import format_timestamp
from recallql.mcp import shapes
from recallql.mcp.worker import DatabaseWorker

INSTRUCTIONS = """\
recallql is this agent's long-term memory: documents, past conversations and sessions, searched
by BM25 + vector similarity with recency, session and signal boosts.
Typical loop: start_session -> (remember / append_messages) -> search_memory or
retrieve_context -> record_signal on what helped -> end_session. Every result row has a `why`
(the ranks and boosts behind its score); `explain` shows the full score arithmetic."""

FilterValue = str | int | float | bool | list[str] | list[int] | list[float]
SessionArg = Annotated[str, Field(description="Session id (1-128 letters, digits, `_ . : -`).",
                                  min_length=1, max_length=128)]
CollectionArg = Annotated[str, Field(description="Collection name: `docs` (documents, notes), "
                                     "`messages` (conversation messages) or one you created.")]
#: Numbers and flags are strict, as the tool schema types them: ``true`` is not an integer and
#: ``"5"`` is not a number (pydantic's lax mode would take both).
Limit = Annotated[int, Strict(), Field(description="Rows to return.", ge=1, le=100)]
Params = Annotated[dict[str, Any] | None, Field(
    description="Values for the statement's `:name` parameters (never put values into the "
                "statement text), e.g. {\"q\": \"disk full\", \"n\": 5}.")]


class Memory(BaseModel):
    """One text to remember."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key is refused, not dropped

    text: str = Field(description="The text (BM25-indexed and embedded).", min_length=1)
    id: str | None = Field(None, description="A stable id: remembering an id again replaces "
                           "it. Default: derived from the text (the same text is stored once).",
                           min_length=1)
    title: str | None = Field(None, description="A short title (searched too).")
    tags: list[str] | None = Field(None, description="Tags, filterable with "
                                   "search_memory(filters={\"tags\": \"ops\"}).")
    source: str | None = Field(None, description="Where it comes from, e.g. `user`, a URL.")
    entity: str | None = Field(None, description="What it is about (record_signal's entity "
                               "boosts it). Default: its id.")
    created_at: str | None = Field(None, description="ISO-8601 time (default: now); recency "
                                   "boosts newer items.")
    fields: dict[str, Any] | None = Field(None, description="Other declared fields of the "
                                          "collection (not its text fields, nor the keys "
                                          "above, which are set by their own arguments).")


class Message(BaseModel):
    """One message of a session."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(description="`user`, `assistant`, `tool`, `system`, ...", min_length=1)
    content: str = Field(description="The message text.")
    at: str | None = Field(None, description="ISO-8601 time (default: now).")


def tool_error(exc: BaseException) -> CallToolResult:
    """A user or data error as an MCP tool error: ``Type: message`` (a query error's text
    already starts with its type and shows the statement with a caret under the offending
    token)."""
    from recallql.grammar.errors import QueryError

    text = str(exc) if isinstance(exc, QueryError) else f"{type(exc).__name__}: {exc}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def invalid_arguments(tool: str, lines: list[str]) -> CallToolResult:
    """The tool error for arguments that cannot be used: ``ArgumentError: <tool> was called
    with invalid arguments:`` and one indented ``argument: what is wrong`` line each."""
    text = "\n".join([f"ArgumentError: {tool} was called with invalid arguments:",
                      *(f"  {line}" for line in lines)])
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def argument_error(tool: str, exc: ValidationError) -> CallToolResult:
    """The SDK's argument validation failure as a tool error an agent can act on: one line per
    argument, ``name: what it must be (got value)``, without pydantic's type codes and links."""
    lines: list[str] = []
    filters_done: set[str] = set()
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        if len(loc) >= 3 and loc[0] == "filters":  # one line per filter, not one per union type
            if loc[1] not in filters_done:
                filters_done.add(str(loc[1]))
                lines.append(f"filters.{loc[1]}: {_FILTER_VALUE} (got {_shown(err)})"
                             + _range_hint(str(loc[1]), err.get("input")))
            continue
        where = ".".join(str(part) for part in loc) or "arguments"
        message = str(err["msg"]).removeprefix("Input ").removeprefix("Value error, ")
        if err["type"] == "missing":
            lines.append(f"{where}: required, but not given")
            continue
        if err["type"] == "extra_forbidden":
            lines.append(f"{where}: {_unknown_key(err['loc'])}")
            continue
        lines.append(f"{where}: {message} (got {_shown(err)})")
    return invalid_arguments(tool, lines)


#: What a `filters` value may be (`FilterValue`), for its argument error.
_FILTER_VALUE = ("should be a string, a number, true or false, or a list of strings or of "
                 "numbers")
#: Keys of a filter object that ask for a range (``{"gte": ...}``, ``{"$lt": ...}``).
_RANGE_KEYS = frozenset({"gt", "gte", "ge", "lt", "lte", "le", ">", ">=", "<", "<=", "from",
                         "to", "since", "until", "before", "after", "min", "max", "between"})


def _range_hint(name: str, value: Any) -> str:
    """For a filter given as a range object: filters test equality only, and run_statement
    takes a range."""
    if not isinstance(value, dict) or not any(
            str(key).casefold().lstrip("$") in _RANGE_KEYS for key in value):
        return ""
    return (f"; filters only test equality: for a range use run_statement, e.g. \"SEARCH docs "
            f"MATCHING :q WHERE {name} >= :since\" with {{\"parameters\": {{\"q\": ..., "
            "\"since\": ...}}")


def _shown(err: Any) -> str:
    shown = repr(err.get("input"))
    return shown if len(shown) <= 60 else shown[:59] + "…"


#: The list arguments whose elements are models, and what one is called in a message.
_NESTED: dict[str, tuple[str, type[BaseModel]]] = {"items": ("an item", Memory),
                                                   "messages": ("a message", Message)}


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    from recallql.grammar.suggest import did_you_mean

    what, model = _NESTED.get(str(loc[0]), ("an argument", Memory))
    keys = list(model.model_fields)
    hint = did_you_mean(str(loc[-1]), keys, listing=False)
    return f"not a key of {what}; {hint} (keys: {', '.join(keys)})" if hint else (
        f"not a key of {what} (keys: {', '.join(keys)})")


def unknown_arguments(tool: str, unknown: list[str], known: list[str]) -> CallToolResult:
    """A call naming arguments the tool does not take (refused: a misspelt optional argument
    would otherwise be dropped without a word)."""
    from recallql.grammar.suggest import did_you_mean

    lines = [f"ArgumentError: {tool} takes no argument {', '.join(map(repr, unknown))}"]
    hint = did_you_mean(unknown[0], known, listing=False)
    if hint:
        lines.append(f"  {hint}")
    lines.append(f"  its arguments: {', '.join(known)}")
    return CallToolResult(content=[TextContent(type="text", text="\n".join(lines))],
                          is_error=True)


class MemoryServer(MCPServer):
    """`MCPServer` whose argument errors read as recallql's own: unknown argument names are
    refused by name, and the SDK's pydantic validation text becomes one line per argument."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        schema = next((t.input_schema for t in await self.list_tools() if t.name == name), None)
        if schema is not None:
            known = list(schema.get("properties", {}))
            unknown = sorted(set(arguments) - set(known))
            if unknown:
                return unknown_arguments(name, unknown, known)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return argument_error(name, exc.__cause__)
            raise


def _errors_as_results(fn: Callable[..., str]) -> Callable[..., str | CallToolResult]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str | CallToolResult:
        try:
            return fn(*args, **kwargs)
        except shapes.ArgumentError as exc:  # named as the agent wrote it, not as a statement
            return invalid_arguments(fn.__name__, [str(exc)])
        except USER_ERRORS as exc:
            return tool_error(exc)
    return wrapper


#: How to give a statement's values, for the raw-statement tools' errors.
_NAMED_HINT = ('use :name placeholders and pass {"parameters": {"name": ...}}, e.g. '
               '"SEARCH docs MATCHING :q" with {"parameters": {"q": "disk full"}}')


def check_statement(tool: str, statement: str, parameters: dict[str, Any] | None) -> None:
    """Refuse, before it runs, what a raw-statement tool (run_statement, explain) cannot do,
    in the tool's terms: a second statement, a ``?`` parameter (values come by name, in the
    JSON `parameters` object), a ``:name`` without a value in `parameters`.

    Raises:
        QuerySyntaxError: a second statement (the caret under it).
        ParameterError: a ``?``, or a ``:name`` missing from `parameters` (the caret under it).
        ArgumentError: a `parameters` key the statement does not use.
    """
    from recallql.grammar import parse_script
    from recallql.grammar.errors import ParameterError, QuerySyntaxError

    statements = parse_script(statement)
    if len(statements) > 1:
        second = statements[1].span
        raise QuerySyntaxError("expected one statement, found a second one", text=statement,
                               span=(second.start, second.end),
                               hint=f"one statement per call: call {tool} once for each")
    used = list(getattr(statements[0], "parameters", ())) if statements else []
    given = parameters or {}
    positional = next((p for p in used if p.name is None), None)
    if positional is not None:
        raise ParameterError(f"a ? parameter takes its value by position; {tool} takes values "
                             "by name only", text=statement, span=positional.span,
                             hint=_NAMED_HINT)
    names = list(dict.fromkeys(p.name for p in used))
    unused = [name for name in given if name not in names]
    missing = next((p for p in used if p.name not in given), None)
    if missing is not None:
        absent = [name for name in names if name not in given]
        shown = ", ".join(f'"{name}": ...' for name in absent)
        also = (f" ({', '.join(map(repr, unused))} given, but not in the statement)"
                if unused else "")
        raise ParameterError(f"missing value for parameter :{missing.name}", text=statement,
                             span=missing.span,
                             hint=f'pass {{"parameters": {{{shown}}}}}{also}')
    if unused:
        has = (f"its parameters: {', '.join(':' + n for n in names)}" if names
               else "it has no parameters")
        raise shapes.ArgumentError(f"parameters.{unused[0]}", f"not a parameter of the "
                                   f"statement ({has})")


class MemoryTools:
    """The tool functions over one `DatabaseWorker` (read-only when `writable` is False)."""

    def __init__(self, worker: DatabaseWorker, writable: bool = True,
                 why_read_only: str = "") -> None:
        self.worker = worker
        self.writable = writable
        self.why_read_only = why_read_only

    # -- helpers ---------------------------------------------------------------------------------

    def _text_fields(self, db: Any, collection: str | None) -> tuple[str, ...]:
        names = {c.name: tuple(c.text_fields) for c in db.collections()}
        return names.get(collection or "", ())

    def _result(self, statement: str, /, **params: Any) -> str:
        def run(db: Any) -> str:
            outcome = db.execute(statement, **params)
            if hasattr(outcome, "plan"):
                return outcome.render()
            return shapes.dumps(shapes.result_json(outcome,
                                                   self._text_fields(db, outcome.collection)))
        return self.worker.read(run)

    def _check_writable(self) -> None:
        if not self.writable:
            from recallql.api import StoreError

            raise StoreError(f"this recallql MCP server is read-only: {self.why_read_only}")

    # -- reads -----------------------------------------------------------------------------------

    def search_memory(
        self,
        text: Annotated[str, Field(description="What to look for, in natural language.",
                                   min_length=1)],
        collection: CollectionArg = "docs",
        session: Annotated[str | None, Field(description="Rank for this session: its "
                                             "keywords, rewards and entities boost rows; on "
                                             "`messages` it also hides what is still in the "
                                             "session's live context.")] = None,
        filters: Annotated[dict[str, FilterValue] | None, Field(
            description="field -> value, all must hold: `=` for a value, IN for a list, "
                        "CONTAINS on list fields such as `tags`. E.g. {\"tags\": \"ops\", "
                        "\"source\": [\"wiki\", \"runbook\"]}. A timestamp field "
                        "(`created_at`) takes ISO-8601 text (\"2026-01-05T10:00:00Z\", an "
                        "offset, or a date for its midnight UTC) or epoch seconds, and matches "
                        "to the microsecond, so a row's `created_at` finds it. Ranges: use "
                        "run_statement (WHERE created_at >= :since).")
        ] = None,
        group_by: Annotated[Literal["document", "conversation"] | None, Field(
            description="`document`: a document's best chunk only; `conversation`: one row "
                        "per conversation (a chain of sessions rotated by compression; collection "
                        "`messages` only).")
        ] = None,
        limit: Limit = 10,
    ) -> str:
        """Search memory: hybrid BM25 + vector search fused by the convex combination of
        min-max normalised scores, with
        recency (and, with `session`, session and signal) boosts. Returns JSON
        {"collection", "rows": [{"id", "score", "text", "why", "created_at", ...}]}; `why`
        lists each leg's rank (lex#1 = first by BM25, sem#2 = second by vectors) and the boosts
        that added to the score."""
        def statement(db: Any) -> tuple[str, dict[str, Any]]:
            info = _collection(db, collection)
            if group_by == "conversation" and collection != "messages":
                raise shapes.ArgumentError("group_by", f"'conversation' groups messages: it "
                                           f"needs collection 'messages', not "
                                           f"'{collection}' (for documents: 'document')")
            types = {n: str(t) for n, t in {**BUILTIN_FIELDS, **info.fields}.items()}
            return shapes.search_statement(collection, session=session, filters=filters or {},
                                           field_types=types, group_by=group_by,
                                           text_fields=tuple(info.text_fields))
        query, params = self.worker.read(statement)
        return self._result(query, text=text, limit=limit, **params)

    def retrieve_context(
        self,
        session: SessionArg,
        limit: Limit = 10,
        collection: CollectionArg = "docs",
        text: Annotated[str | None, Field(description="Optional text to match as well; "
                                          "without it rows are ranked by the session's boosts "
                                          "alone.")] = None,
    ) -> str:
        """What should this session see now? RETRIEVE ranks a collection for the session: its
        annotations' keywords, its rewarded entities and signal boosts (plus BM25 + vectors
        when `text` is given). Returns the same JSON as search_memory."""
        self.worker.read(lambda db: _collection(db, collection))
        query = f"RETRIEVE FROM {shapes.quote_identifier(collection)}"
        params: dict[str, Any] = {"session": session, "limit": limit}
        if text is not None:
            query += " MATCHING :text"
            params["text"] = text
        return self._result(query + " FOR SESSION :session LIMIT :limit", **params)

    def explain(
        self,
        statement: Annotated[str, Field(description="A SEARCH or RETRIEVE statement, e.g. "
                                        "\"SEARCH docs MATCHING :q LIMIT 3\".")],
        parameters: Params = None,
        analyze: Annotated[bool, Strict(), Field(description="Add rows and time per operator.")
                           ] = False,
    ) -> str:
        """EXPLAIN a statement: the plan (root first) and each row's score arithmetic, the
        contributions that add up to its score, as text."""
        check_statement("explain", statement, parameters)
        return self.worker.read(lambda db: db.explain(statement, analyze=analyze,
                                                      **(parameters or {})).render())

    def run_statement(
        self,
        statement: Annotated[str, Field(description="One recallql statement: SEARCH, RETRIEVE, "
                                        "EXPLAIN, SHOW COLLECTIONS, DESCRIBE <collection>, SHOW "
                                        "SESSIONS, SHOW SESSION <id>, SHOW LINEAGE <id>.")],
        parameters: Params = None,
    ) -> str:
        """Run any recallql statement (the language: docs/language.md). SEARCH and RETRIEVE
        give rows as search_memory does, SHOW and DESCRIBE {"columns", "records"}, EXPLAIN its
        text."""
        check_statement("run_statement", statement, parameters)
        return self._result(statement, **(parameters or {}))

    # -- writes ----------------------------------------------------------------------------------

    def remember(
        self,
        items: Annotated[list[Memory], Field(description="The texts to store.", min_length=1,
                                             max_length=1000)],
        collection: CollectionArg = "docs",
    ) -> str:
        """Store texts in a collection, all in one all-or-nothing batch (shared with other
        clients' writes of the same moment). Returns JSON {"collection", "ids", "batch"}."""
        self._check_writable()
        info = self.worker.read(lambda db: _collection(db, collection))
        fields = list(info.text_fields)
        known = [*BUILTIN_FIELDS, *info.fields]
        for number, memory in enumerate(items):
            shapes.check_fields(collection, number, memory.fields or {}, known, fields)
        now = time.time()
        rows = [shapes.memory_item(collection, fields, m.model_dump(), now) for m in items]
        report = self.worker.ingest(collection, rows)
        return shapes.dumps({"collection": collection, "ids": [r["id"] for r in rows],
                             "batch": report.batch})

    def append_messages(
        self,
        session: SessionArg,
        messages: Annotated[list[Message], Field(description="Messages in order.",
                                                 min_length=1, max_length=1000)],
    ) -> str:
        """Append messages to an open session (searchable in the `messages` collection, one
        conversation per chain of sessions). Returns JSON {"session", "message_ids"}."""
        self._check_writable()
        rows = message_rows(messages)
        ids = self.worker.write(lambda db: append_all(db, session, rows))
        return shapes.dumps({"session": session, "message_ids": ids})

    def record_signal(
        self,
        session: SessionArg,
        value: Annotated[float, Strict(),
                         Field(description="The signal's value; `reward` takes -1..1.")],
        name: Annotated[str, Field(description="The signal name the policy allows "
                                   "(default policy: `reward`).")] = "reward",
        entity: Annotated[str | None, Field(description="The entity (an item's `entity`, by "
                                            "default its id or doc_id) the signal is about; "
                                            "boosts that entity in later searches.")] = None,
    ) -> str:
        """Record a signal, e.g. reward 1.0 on the memory that helped, on an open session.
        Returns JSON {"session", "name", "value", "entity"}."""
        self._check_writable()
        self.worker.write(lambda db: db.sessions.signal(session, name, value, entity=entity))
        return shapes.dumps({"session": session, "name": name, "value": value,
                             "entity": entity})

    def annotate_session(
        self,
        session: SessionArg,
        text: Annotated[str, Field(description="Words describing what the session is about; "
                                   "they become its keywords (matched against rows' metadata "
                                   "such as tags and source).", min_length=1)],
    ) -> str:
        """Annotate an open session. Returns JSON {"session", "keywords"}."""
        self._check_writable()
        snapshot = self.worker.write(lambda db: (db.sessions.annotate(session, text),
                                                 db.sessions.snapshot(session))[1])
        return shapes.dumps({"session": session, "keywords": snapshot.keywords})

    def start_session(
        self,
        agent_id: Annotated[str, Field(description="Who runs the session, e.g. `ops-agent`.",
                                       min_length=1, max_length=128)],
        session: Annotated[str | None, Field(description="The new session's id (default: "
                                             "a new random id).", min_length=1,
                                             max_length=128)] = None,
        parent: Annotated[str | None, Field(description="The session this one continues "
                                            "(after context compression): they form one "
                                            "conversation.")] = None,
        title: Annotated[str | None, Field(description="A display title.")] = None,
    ) -> str:
        """Start an open session. Returns JSON {"session", "agent_id", "status", "started_at",
        "parent"}."""
        self._check_writable()
        import uuid

        sid = session or f"s-{uuid.uuid4().hex[:12]}"
        snap = self.worker.write(lambda db: db.sessions.create(sid, agent_id, parent=parent,
                                                               source="mcp", title=title))
        return shapes.dumps({"session": snap.id, "agent_id": snap.agent_id,
                             "status": snap.status, "started_at": format_timestamp(snap.started_at),
                             "parent": snap.parent_session_id})

    def end_session(
        self,
        session: SessionArg,
        reason: Annotated[str, Field(description="Why it ends: `agent_close` (done), "
                                     "`compression` (context rotated: start a child with "
                                     "parent=this), `user_exit`, `idle`, ...",
                                     min_length=1)] = "agent_close",
        any_reason: Annotated[bool, Strict(), Field(
            description="Record a reason that is not a known one (refused otherwise: a typo "
                        "such as `compresion` would end the conversation).")] = False,
    ) -> str:
        """Close an open session (its signals stay frozen at the end). Returns JSON
        {"session", "status", "end_reason", "ended_at"}."""
        self._check_writable()
        check_reason(reason, any_reason)
        snap = self.worker.write(lambda db: db.sessions.close(session, end_reason=reason,
                                                              any_reason=any_reason))
        ended = format_timestamp(snap.ended_at) if snap.ended_at else None
        return shapes.dumps({"session": snap.id, "status": snap.status,
                             "end_reason": snap.end_reason, "ended_at": ended})


def _collection(db: Any, name: str) -> Any:
    """The `collection` argument's `CollectionInfo`.

    Raises:
        ArgumentError: no such collection (with a did-you-mean).
    """
    infos = {info.name: info for info in db.collections()}
    shapes.check_collection(name, list(infos))
    return infos[name]


def check_reason(reason: str, any_reason: bool) -> None:
    """Refuse an end reason that is not a known one unless `any_reason`, saying which argument
    records it anyway.

    Raises:
        ArgumentError: ``reason: unknown end reason 'compresion' (did you mean
            'compression'?); to record it as given, set any_reason to true``.
    """
    from recallql.grammar.suggest import did_you_mean
    from recallql.sessions.edges import END_REASONS

    if any_reason or reason in END_REASONS:
        return
    raise shapes.ArgumentError("reason", f"unknown end reason {reason!r} "
                               f"({did_you_mean(reason, END_REASONS)}); to record it as given, "
                               "set any_reason to true")


def message_rows(messages: list[Message]) -> list[dict[str, Any]]:
    """The tool's messages as `db.messages.extend` takes them: ``at``, ISO-8601 text here,
    as an aware datetime.

    Raises:
        IngestError: an ``at`` that is not ISO-8601, naming the message.
    """
    from recallql.api import IngestError
    from recallql.index.timestamps import parse_timestamp

    rows = []
    for number, message in enumerate(messages):
        row = message.model_dump()
        if row["at"] is not None:
            try:
                row["at"] = parse_timestamp(row["at"])
            except ValueError as exc:
                raise IngestError(f"message #{number}, field 'at': {exc}") from None
        rows.append(row)
    return rows


def append_all(db: Any, session: str, messages: list[dict[str, Any]]) -> list[int]:
    """Append `messages` to `session` as one batch (``db.messages.extend``)."""
    return db.messages.extend({"session_id": session, **m} for m in messages)


READ_TOOLS = ("search_memory", "retrieve_context", "explain", "run_statement")
WRITE_TOOLS = ("remember", "append_messages", "record_signal", "annotate_session",
               "start_session", "end_session")


def build_server(tools: MemoryTools) -> MCPServer:
    """An `MCPServer` with the memory tools and the collection resources. A server opened
    read-only on purpose lists only the read tools (as mcp-server-qdrant's read-only mode);
    one that fell back to read-only (another writer) lists them all and its write tools
    explain why they cannot write."""
    import recallql

    server: MCPServer = MemoryServer("recallql", instructions=INSTRUCTIONS,
                                  version=recallql.__version__, log_level="WARNING")
    shown = READ_TOOLS + (WRITE_TOOLS if tools.writable or tools.why_read_only else ())
    for name in shown:
        write = name in WRITE_TOOLS
        hints = ToolAnnotations(read_only_hint=not write, destructive_hint=False,
                                idempotent_hint=not write or name == "remember",
                                open_world_hint=False)
        server.add_tool(_errors_as_results(getattr(tools, name)), name=name,
                        annotations=hints, structured_output=False)
    _add_resources(server, tools)
    return server


def _collection_json(info: Any, items: int | None = None) -> dict[str, Any]:
    return {"name": info.name, "text_fields": list(info.text_fields),
            "fields": {n: str(t) for n, t in info.fields.items()}, "dim": info.dim,
            "embedder": info.embedder_name, **({"items": items} if items is not None else {})}


def _add_resources(server: MCPServer, tools: MemoryTools) -> None:
    worker = tools.worker

    @server.resource("recallql://collections", name="collections", mime_type="application/json",
                     description="Every collection with its schema: text fields (BM25 and "
                                 "embedded), declared filterable fields and types, vector dim.")
    def collections() -> str:
        def read(db: Any) -> str:
            counts = {r["name"]: r["items"] for r in db.execute("SHOW COLLECTIONS").records}
            return shapes.dumps([_collection_json(c, counts.get(c.name))
                                 for c in db.collections()])
        return worker.read(read)

    @server.resource("recallql://collections/{name}", name="collection",
                     mime_type="application/json",
                     description="One collection's schema and its DESCRIBE records "
                                 "(built-in and declared fields with types and roles).")
    def collection(name: str) -> str:
        def read(db: Any) -> str:
            names = [c.name for c in db.collections()]
            if name not in names:  # not a traceback under "Error creating resource"
                raise ResourceNotFoundError(f"no collection {name!r} (collections: "
                                            f"{', '.join(names)})")
            described = db.execute(f"DESCRIBE {shapes.quote_identifier(name)}")
            return shapes.dumps({**_collection_json(db.store.collection(name)),
                                 "describe": described.records})
        return worker.read(read)

    @server.resource("recallql://server", name="server", mime_type="application/json",
                     description="This server: database path, writer or read-only, and its "
                                 "group commit (write requests, batches committed).")
    def status() -> str:
        stats = worker.stats
        return shapes.dumps({"database": worker.db.path, "writable": tools.writable,
                             "read_only_reason": tools.why_read_only or None,
                             "commit_window_ms": worker.window * 1000, "reads": stats.reads,
                             "writes": stats.writes, "batches": stats.batches,
                             "largest_group": stats.largest_group})


__all__ = ["READ_TOOLS", "WRITE_TOOLS", "MemoryTools", "build_server", "tool_error"]
