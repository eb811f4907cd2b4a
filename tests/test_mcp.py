"""The MCP server, driven as a real process with the SDK's own client (stdio and streamable
HTTP on loopback): tools and their schemas, writes, search, EXPLAIN, errors, resources, two
clients at once, group commit."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

mcp = pytest.importorskip("mcp", reason="the MCP SDK (the `mcp` extra) is not installed")
from mcp import Client, StdioServerParameters  # noqa: E402

RECALLQL = str(Path(sys.executable).with_name("recallql"))
TOOLS = {"search_memory", "retrieve_context", "explain", "run_statement", "remember",
         "append_messages", "record_signal", "annotate_session", "start_session",
         "end_session"}
NOTES = [{"text": "Daily backups are kept for 30 days, monthly ones for a year.",
          "title": "Backup policy", "tags": ["ops", "backup"], "id": "backups"},
         {"text": "Upgrade PostgreSQL with pg_upgrade --link, then run ANALYZE.",
          "title": "PostgreSQL upgrades", "tags": ["postgres"], "id": "pg-upgrade"},
         {"text": "Disk-full alerts on the database hosts are urgent.", "title": "On-call",
          "id": "oncall"}]


def server(db: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=RECALLQL,
                                 args=["mcp", "--db", str(db), "--embedder", "hash", *extra],
                                 env={**os.environ, "COLUMNS": "100"})


def text(result) -> str:
    return result.content[0].text


def data(result):
    assert not result.is_error, text(result)
    return json.loads(text(result))


def run(fn, *args):
    return anyio.run(fn, *args)


def test_tools_are_the_contract_with_documented_arguments(tmp_path):
    async def go():
        async with Client(server(tmp_path / "db")) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    search = tools["search_memory"].input_schema
    assert search["required"] == ["text"]
    assert set(search["properties"]) == {"text", "collection", "session", "filters",
                                         "group_by", "limit"}
    assert search["properties"]["limit"]["maximum"] == 100
    assert tools["search_memory"].annotations.read_only_hint is True
    assert tools["remember"].annotations.read_only_hint is False


def test_write_search_explain_and_sessions(tmp_path):
    async def go():
        async with Client(server(tmp_path / "db")) as client:
            stored = data(await client.call_tool("remember", {"items": NOTES}))
            found = data(await client.call_tool("search_memory", {
                "text": "how long do we keep backups", "limit": 3}))
            ops = data(await client.call_tool("search_memory", {
                "text": "database", "filters": {"tags": "postgres"}}))
            plan = text(await client.call_tool("explain", {
                "statement": "SEARCH docs MATCHING :q LIMIT 2", "parameters": {"q": "backups"}}))
            session = data(await client.call_tool("start_session", {
                "agent_id": "ops-bot", "session": "s-1"}))
            await client.call_tool("annotate_session", {"session": "s-1", "text": "postgres"})
            await client.call_tool("record_signal", {"session": "s-1", "value": 1.0,
                                                     "entity": "oncall"})
            msgs = data(await client.call_tool("append_messages", {"session": "s-1", "messages": [
                {"role": "user", "content": "the disk is full again"},
                {"role": "assistant", "content": "rotating the logs"}]}))
            context = data(await client.call_tool("retrieve_context", {"session": "s-1",
                                                                       "limit": 3}))
            said = data(await client.call_tool("search_memory", {
                "text": "disk full", "collection": "messages"}))
            ended = data(await client.call_tool("end_session", {"session": "s-1"}))
            return stored, found, ops, plan, session, msgs, context, said, ended

    stored, found, ops, plan, session, msgs, context, said, ended = run(go)
    assert stored["ids"] == ["backups", "pg-upgrade", "oncall"] and stored["batch"] >= 1
    top = found["rows"][0]
    assert top["id"] == "backups" and set(top) >= {"id", "score", "text", "why", "created_at"}
    assert top["text"].startswith("Backup policy — Daily backups") and "lex#1" in top["why"]
    assert [r["id"] for r in ops["rows"]] == ["pg-upgrade"]
    assert plan.startswith("TopK: k=2") and "LEXICAL_MATCH(rank=1" in plan and "#1 backups" in plan
    assert session["session"] == "s-1" and session["status"] == "open"
    assert msgs["message_ids"] == [1, 2]
    rows = {r["id"]: r for r in context["rows"]}
    assert context["rows"][0]["id"] == "pg-upgrade"  # the annotation's keyword is its tag
    assert "entity +" in rows["oncall"]["why"]        # the rewarded entity
    assert said["rows"][0]["session_id"] == "s-1" and said["rows"][0]["role"] == "user"
    assert ended["status"] == "closed" and ended["end_reason"] == "agent_close"


def test_errors_are_tool_errors_with_the_caret_never_a_traceback(tmp_path):
    async def go():
        async with Client(server(tmp_path / "db")) as client:
            return [await client.call_tool(name, args) for name, args in [
                ("run_statement", {"statement": "SEARCH docs MATCHING 'x' LIMIT ten"}),
                ("search_memory", {"text": "x", "collection": "nope"}),
                ("search_memory", {"text": "x", "filters": {"colour": "red"}}),
                ("record_signal", {"session": "missing", "value": 1.0}),
                ("append_messages", {"session": "missing",
                                     "messages": [{"role": "user", "content": "hi"}]}),
                ("remember", {"items": [{"text": "x", "created_at": "not a time"}]}),
                ("search_memory", {"text": "x", "limit": 0}),
            ]]

    syntax, collection, field, signal, append, item, limit = run(go)
    assert syntax.is_error and text(syntax) == (
        "QuerySyntaxError: expected a whole number or a parameter after LIMIT, found 'ten' "
        "(line 1, column 32)\n\n  SEARCH docs MATCHING 'x' LIMIT ten\n"
        "                                 ^^^\n"
        "  hint: LIMIT takes a positive whole number, e.g. LIMIT 10")
    assert collection.is_error and "nope" in text(collection)
    # a filter is an argument, not statement text: named so, no caret under a built WHERE
    assert field.is_error and "filters.colour: unknown field 'colour'" in text(field)
    assert "^" not in text(field) and "WHERE" not in text(field)
    assert signal.is_error and text(signal).startswith("SignalRejected: ")
    assert append.is_error and "missing" in text(append)
    assert item.is_error and text(item).startswith("IngestError: ")
    assert limit.is_error and "limit" in text(limit)
    for result in (syntax, collection, field, signal, append, item, limit):
        assert "Traceback" not in text(result)


def test_argument_errors_name_each_argument_without_pydantic_text(tmp_path):
    async def go():
        async with Client(server(tmp_path / "db")) as client:
            return [await client.call_tool(name, args) for name, args in [
                ("search_memory", {"text": "x", "limit": "many"}),
                ("search_memory", {"text": "x", "limit": 500}),
                ("search_memory", {}),
                ("search_memory", {"text": "x", "limt": 5}),
                ("record_signal", {"session": "s", "value": 1.0, "colour": "red",
                                   "bogus": 1}),
                ("search_memory", {"text": "x", "limit": True}),
                ("retrieve_context", {"session": "s", "limit": "5"}),
                ("record_signal", {"session": "s", "value": "1.0"}),
                ("explain", {"statement": "SEARCH docs MATCHING 'x'", "analyze": 1}),
            ]]

    typed, bound, missing, misspelt, two, *strict = run(go)
    assert typed.is_error and text(typed) == (
        "ArgumentError: search_memory was called with invalid arguments:\n"
        "  limit: should be a valid integer (got 'many')")
    # strict, as the schema types them: a bool is not an integer, a string not a number
    assert [text(r).splitlines()[1] for r in strict] == [
        "  limit: should be a valid integer (got True)",
        "  limit: should be a valid integer (got '5')",
        "  value: should be a valid number (got '1.0')",
        "  analyze: should be a valid boolean (got 1)"]
    assert text(bound) == ("ArgumentError: search_memory was called with invalid arguments:\n"
                           "  limit: should be less than or equal to 100 (got 500)")
    assert text(missing) == ("ArgumentError: search_memory was called with invalid arguments:"
                             "\n  text: required, but not given")
    assert misspelt.is_error and text(misspelt) == (
        "ArgumentError: search_memory takes no argument 'limt'\n"
        "  did you mean 'limit'?\n"
        "  its arguments: text, collection, session, filters, group_by, limit")
    assert two.is_error and text(two).startswith(
        "ArgumentError: record_signal takes no argument 'bogus', 'colour'")
    for result in (typed, bound, missing, misspelt, two, *strict):
        assert "pydantic" not in text(result) and "type=" not in text(result)


def test_resources_list_the_collections_and_their_schemas(tmp_path):
    async def go():
        async with Client(server(tmp_path / "db")) as client:
            await client.call_tool("remember", {"items": NOTES[:1]})
            listed = (await client.list_resources()).resources
            collections = json.loads((await client.read_resource("recallql://collections")
                                      ).contents[0].text)
            docs = json.loads((await client.read_resource("recallql://collections/docs")
                               ).contents[0].text)
            return listed, collections, docs

    listed, collections, docs = run(go)
    assert {str(r.uri) for r in listed} >= {"recallql://collections", "recallql://server"}
    by_name = {c["name"]: c for c in collections}
    assert by_name["docs"]["items"] == 1 and by_name["docs"]["text_fields"] == ["title", "body"]
    assert by_name["docs"]["fields"] == {"source": "str", "tags": "list[str]"}
    assert by_name["messages"]["fields"]["session_id"] == "str"
    assert docs["name"] == "docs" and {"field": "tags", "type": "list[str]"}.items() <= \
        next(r for r in docs["describe"] if r["field"] == "tags").items()


def test_two_stdio_clients_at_once_both_write(tmp_path):
    """Each stdio client launches its own server; both write the one database, taking turns at
    the writer lock, and each sees the other's commits."""
    db = tmp_path / "db"

    async def go():
        async with Client(server(db)) as first:
            await first.call_tool("remember", {"items": NOTES[:1]})
            async with Client(server(db)) as second:
                seen = data(await second.call_tool("search_memory", {"text": "backups"}))
                wrote = await second.call_tool("remember", {"items": NOTES[1:2]})
                later = data(await first.call_tool("search_memory", {"text": "pg_upgrade"}))
                status = json.loads((await second.read_resource("recallql://server")
                                     ).contents[0].text)
                return seen, wrote, later, status

    seen, wrote, later, status = run(go)
    assert [r["id"] for r in seen["rows"]] == ["backups"]
    assert not wrote.is_error
    assert later["rows"][0]["id"] == "pg-upgrade"
    assert status["writable"] is True


def test_a_write_waits_for_another_writer_as_long_as_told(tmp_path):
    """`recallql --wait SECONDS mcp` is how long each of the server's writes waits for another
    process's write (2 s without it); the tool error then names the wait."""
    from recallql.index.lock import acquire_lock

    db = tmp_path / "db"

    async def remember(*extra: str):
        async with Client(StdioServerParameters(
                command=RECALLQL, args=[*extra, "mcp", "--db", str(db), "--embedder", "hash"],
                env={**os.environ, "COLUMNS": "100"})) as client:
            return await client.call_tool("remember", {"items": NOTES[1:2]})

    assert not run(remember).is_error  # creates the database
    fd, _ = acquire_lock(db)
    try:
        told = run(remember, "--wait", "0.25")
        default = run(remember)
    finally:
        os.close(fd)
    assert told.is_error and "waited 0.25 s" in text(told), text(told)
    assert default.is_error and "waited 2 s" in text(default), text(default)


def test_read_only_server_offers_only_read_tools(tmp_path):
    db = tmp_path / "db"

    async def go():
        async with Client(server(db)) as writer:
            await writer.call_tool("remember", {"items": NOTES[:1]})
        async with Client(server(db, "--read-only")) as reader:
            return {t.name for t in (await reader.list_tools()).tools}

    assert run(go) == {"search_memory", "retrieve_context", "explain", "run_statement"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server(tmp_path):
    port = _free_port()
    proc = subprocess.Popen([RECALLQL, "mcp", "--db", str(tmp_path / "db"), "--embedder", "hash",
                             "--http", f"127.0.0.1:{port}", "--commit-window-ms", "300"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=30)


def test_two_http_clients_at_once_share_commits(http_server):
    """Many clients, one writer: 2 clients × 8 concurrent remember calls arrive within the
    commit window and share batches; every write is then visible to both."""
    async def client_work(name: str, out: dict):
        async with Client(http_server) as client:
            async with anyio.create_task_group() as group:
                for i in range(8):
                    group.start_soon(client.call_tool, "remember", {"items": [
                        {"text": f"note {i} from {name} about backups", "id": f"{name}-{i}"}]})
            out[name] = data(await client.call_tool("run_statement", {
                "statement": "SEARCH docs MATCHING :q LIMIT 50", "parameters": {"q": "backups"}}))

    async def go():
        out: dict = {}
        async with anyio.create_task_group() as group:
            group.start_soon(client_work, "a", out)
            group.start_soon(client_work, "b", out)
        async with Client(http_server) as client:
            status = json.loads((await client.read_resource("recallql://server")
                                 ).contents[0].text)
        return out, status

    out, status = run(go)
    for name in ("a", "b"):
        assert {f"{name}-{i}" for i in range(8)} <= {r["id"] for r in out[name]["rows"]}
    assert status["writes"] == 16 and status["batches"] < 16 and status["largest_group"] > 1


def test_stdio_server_on_a_terminal_says_so_and_stops_on_ctrl_c(tmp_path):
    """Run by hand (stdin a terminal), the stdio server says what it is waiting for, and
    Ctrl-C stops it at once with status 130 (it used to wait for another line of input: the
    SDK reads stdin in a thread that cancellation cannot interrupt)."""
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(RECALLQL, ["mcp", "--db", str(tmp_path / "db"), "--embedder", "hash"],
                          env={**os.environ, "COLUMNS": "100"}, encoding="utf-8", timeout=60)
    child.expect("over stdio, the way an MCP client launches it")
    child.expect("Ctrl-C stops it")
    child.sendintr()
    child.expect(pexpect.EOF, timeout=20)
    child.close()
    assert child.exitstatus == 130
    import recallql

    with recallql.connect(tmp_path / "db", readonly=True, embedder=None) as db:  # closed cleanly
        assert db.check().ok


def test_http_refuses_a_non_loopback_address(tmp_path):
    out = subprocess.run([RECALLQL, "mcp", "--db", str(tmp_path / "db"), "--http",
                          "0.0.0.0:8765"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not a loopback address" in out.stderr
    assert not (tmp_path / "db").exists()


# -- the worker's group commit, in process ---------------------------------------------------


def _worker(window: float = 0.3):
    import recallql
    from recallql.api import HashEmbedder
    from recallql.mcp.worker import DatabaseWorker

    return DatabaseWorker(recallql.connect(embedder=HashEmbedder()), window=window)


def _concurrently(calls):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.exception() or f.result() for f in futures]


def test_writes_of_one_window_share_one_batch():
    worker = _worker()
    try:
        reports = _concurrently([lambda i=i: worker.ingest("docs", [
            {"id": f"n{i}", "title": "note", "body": f"backup note {i}"}]) for i in range(6)])
        assert len({r.batch for r in reports}) == 1 and reports[0].added == 6
        assert worker.stats.writes == 6 and worker.stats.batches == 1
        assert len(worker.read(lambda db: db.execute("SEARCH docs MATCHING 'backup'"))) == 6
    finally:
        worker.close()


def test_an_invalid_item_fails_only_its_own_request():
    import recallql

    worker = _worker()
    try:
        good = [{"id": f"g{i}", "title": "ok", "body": "fine"} for i in range(3)]
        outcomes = _concurrently([
            lambda: worker.ingest("docs", good[:1]),
            lambda: worker.ingest("docs", [{"id": "bad", "body": "x", "colour": "red"}]),
            lambda: worker.ingest("docs", good[1:]),
        ])
        assert isinstance(outcomes[1], recallql.IngestError) and "colour" in str(outcomes[1])
        assert outcomes[0].added == 1 and outcomes[2].added == 2
        ids = worker.read(lambda db: db.execute("SEARCH docs MATCHING 'fine'").ids())
        assert sorted(ids) == ["g0", "g1", "g2"]
    finally:
        worker.close()


def test_a_read_ends_the_window_and_sees_the_writes_before_it():
    # A window far longer than the test: unless the read ends it, the write (and the read
    # queued behind it) would wait the full 30 s (not a speed bound: a semantic one).
    worker = _worker(window=30.0)
    try:
        started = time.monotonic()
        outcomes = _concurrently([
            lambda: worker.ingest("docs", [{"id": "a", "title": "t", "body": "backup"}]),
            lambda: (time.sleep(0.2), worker.read(
                lambda db: db.execute("SEARCH docs MATCHING 'backup'").ids()))[1],
        ])
        assert outcomes[1] == ["a"] and time.monotonic() - started < 30.0
    finally:
        worker.close()


def _in_process_call(calls):
    """Tool calls through the SDK's client against an in-process server (no subprocess)."""
    from recallql.mcp.server import MemoryTools, build_server

    worker = _worker()
    server = build_server(MemoryTools(worker))

    async def go():
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    try:
        return run(go)
    finally:
        worker.close()


def test_append_messages_takes_the_iso_8601_times_its_schema_documents():
    """`Message.at` is documented as ISO-8601 text; every such string was refused ('at must be
    a datetime or epoch seconds (UTC), got '2026-01-05T10:00:00Z'')."""
    moment = datetime.now(UTC) + timedelta(seconds=60)  # after the start, within the skew
    started, good, bad, found = _in_process_call([
        ("start_session", {"agent_id": "a", "session": "s-1"}),
        ("append_messages", {"session": "s-1", "messages": [
            {"role": "user", "content": "zebra crossing",
             "at": moment.astimezone(timezone(timedelta(hours=2))).isoformat()}]}),
        ("append_messages", {"session": "s-1", "messages": [
            {"role": "user", "content": "fine"}, {"role": "user", "content": "x", "at": "soon"}]}),
        ("run_statement", {"statement": "SEARCH messages MATCHING 'zebra'"}),
    ])
    assert not started.is_error and data(good)["message_ids"] == [1]
    assert bad.is_error and text(bad) == ("IngestError: message #1, field 'at': cannot parse "
                                          "'soon' as an ISO-8601 timestamp")
    (row,) = data(found)["rows"]
    assert row["created_at"] == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_filter_with_an_empty_list_is_a_tool_error_naming_the_filter():
    """`filters={"tags": []}` built `WHERE ()` and came back as a syntax error under a statement
    the agent never wrote."""
    (result,) = _in_process_call([("search_memory", {"text": "x", "filters": {"tags": []}})])
    assert result.is_error and text(result) == (
        "ArgumentError: search_memory was called with invalid arguments:\n"
        "  filters.tags: an empty list; a list means any of its values, so give at least one "
        "(or leave the filter out)")


def test_a_misspelt_key_inside_an_item_or_message_is_refused_by_name():
    """`remember(items=[{"text": ..., "tag": [...]}])` (for `tags`) and a message's unknown key
    were accepted and dropped without a word, as a misspelt top-level argument is not."""
    item, message, found = _in_process_call([
        ("remember", {"items": [{"text": "zebra crossing", "tag": ["roads"]}]}),
        ("append_messages", {"session": "s-1", "messages": [
            {"role": "user", "content": "zebra", "time": "2026-01-05T10:00:00Z"}]}),
        ("run_statement", {"statement": "SEARCH docs MATCHING 'zebra'"}),
    ])
    assert item.is_error and text(item) == (
        "ArgumentError: remember was called with invalid arguments:\n"
        "  items.0.tag: not a key of an item; did you mean 'tags'? (keys: text, id, title, "
        "tags, source, entity, created_at, fields)")
    assert message.is_error and text(message) == (
        "ArgumentError: append_messages was called with invalid arguments:\n"
        "  messages.0.time: not a key of a message (keys: role, content, at)")
    assert data(found)["rows"] == []  # nothing of the refused call was stored


def test_an_unknown_collection_resource_names_the_collection():
    """`recallql://collections/nope` came back as 'Error creating resource from template' (the
    cause hidden) and the server logged a traceback."""
    from recallql.mcp.server import MemoryTools, build_server

    worker = _worker()
    server = build_server(MemoryTools(worker))

    async def go():
        async with Client(server) as client:
            with pytest.raises(mcp.MCPError) as info:
                await client.read_resource("recallql://collections/nope")
            return str(info.value)

    try:
        message = run(go)
    finally:
        worker.close()
    assert message == "no collection 'nope' (collections: docs, messages)"


def test_a_filter_value_of_the_wrong_type_names_the_filter_not_a_built_statement():
    """`filters={"tags": 5}` came back as an error under `WHERE tags CONTAINS :f0_0`, a
    statement the agent never wrote, calling `tags` a str."""
    results = _in_process_call([
        ("search_memory", {"text": "x", "filters": {"tags": 5}}),
        ("search_memory", {"text": "x", "filters": {"source": True}}),
        ("search_memory", {"text": "x", "filters": {"tags": ["ops"], "source": "wiki"}}),
    ])
    assert [text(r).splitlines()[1] for r in results[:2]] == [
        "  filters.tags: field 'tags' is list[str]; give a string or a list of strings, got 5",
        "  filters.source: field 'source' is str; give a string or a list of strings, got true"]
    assert all(r.is_error for r in results[:2]) and data(results[2])["rows"] == []


def test_end_session_refuses_an_unknown_reason_unless_asked():
    """`end_session(reason="compresion")` recorded the typo, silently ending the conversation
    chain, where `recallql sessions close --reason` refuses it. The refusal names the tool's
    own arguments: it said `any_reason=True records another` (a Python keyword and literal,
    not the JSON argument an agent sets)."""
    from recallql.sessions.edges import END_REASONS

    _, typo, empty, still, closed = _in_process_call([
        ("start_session", {"agent_id": "a", "session": "s1"}),
        ("end_session", {"session": "s1", "reason": "compresion"}),
        ("end_session", {"session": "s1", "reason": ""}),
        ("run_statement", {"statement": "SHOW SESSION 's1'"}),
        ("end_session", {"session": "s1", "reason": "handoff", "any_reason": True}),
    ])
    assert typo.is_error and text(typo) == (
        "ArgumentError: end_session was called with invalid arguments:\n"
        "  reason: unknown end reason 'compresion' (did you mean 'compression'?); to record it "
        "as given, set any_reason to true")
    assert empty.is_error and text(empty).splitlines()[1] == (
        "  reason: String should have at least 1 character (got '')")
    assert data(still)["records"][0]["status"] == "open"  # neither refusal closed it
    assert data(closed)["end_reason"] == "handoff" and "compression" in END_REASONS


def test_remember_into_messages_for_a_missing_session_is_refused_naming_it(tmp_path):
    """Newcomer: `remember` into `messages` with a session_id no session has wrote an orphan
    row; it is refused as append_messages refuses it, and nothing is written."""
    async def go():
        async with Client(server(tmp_path / "db")) as client:
            refused = await client.call_tool("remember", {"collection": "messages", "items": [
                {"text": "hi", "fields": {"session_id": "s-404", "role": "user"}}]})
            found = data(await client.call_tool(
                "run_statement", {"statement": "RETRIEVE 5 FROM messages"}))
            return refused, found

    refused, found = run(go)
    assert refused.is_error
    assert text(refused).startswith("IngestError: item 'mem:")
    assert text(refused).endswith("field 'session_id': no session 's-404': a message belongs "
                                  "to an existing session (create it first with "
                                  "db.sessions.create)")
    assert found["rows"] == []


def test_an_empty_id_is_refused_not_replaced_by_a_default():
    """`remember(items=[{"id": ""}])` stored the item under an id derived from its text, and
    `start_session(session="")` started a session with a random id: a caller's empty id (a
    variable left unset) was silently swapped for another, as `db.ingest` refuses it."""
    stored, started, found = _in_process_call([
        ("remember", {"items": [{"text": "zebra crossing", "id": ""}]}),
        ("start_session", {"agent_id": "a", "session": ""}),
        ("run_statement", {"statement": "SHOW SESSIONS"}),
    ])
    assert stored.is_error and text(stored) == (
        "ArgumentError: remember was called with invalid arguments:\n"
        "  items.0.id: String should have at least 1 character (got '')")
    assert started.is_error and text(started) == (
        "ArgumentError: start_session was called with invalid arguments:\n"
        "  session: String should have at least 1 character (got '')")
    assert data(found)["records"] == []


def test_a_filter_value_of_no_accepted_shape_is_one_line_naming_the_filter():
    """Was: seven lines per filter, one per member of the value's union type
    (`filters.tags.str: should be a valid string`, `filters.tags.int: ...`, ...,
    `filters.tags.list[float].0: ...`)."""
    nothing, nested = _in_process_call([
        ("search_memory", {"text": "x", "filters": {"tags": None, "source": "wiki"}}),
        ("search_memory", {"text": "x", "filters": {"tags": [[1]], "source": {"a": 1}}}),
    ])
    assert nothing.is_error and text(nothing) == (
        "ArgumentError: search_memory was called with invalid arguments:\n"
        "  filters.tags: should be a string, a number, true or false, or a list of strings or "
        "of numbers (got None)")
    assert nested.is_error and text(nested) == (
        "ArgumentError: search_memory was called with invalid arguments:\n"
        "  filters.tags: should be a string, a number, true or false, or a list of strings or "
        "of numbers (got [[1]])\n"
        "  filters.source: should be a string, a number, true or false, or a list of strings or "
        "of numbers (got {'a': 1})")


def test_run_statement_binds_as_of_from_iso_text():
    """JSON has no datetime: `AS OF :t` with `{"t": "2025-01-01"}` was refused ('must be a
    datetime'), so no MCP client could bind AS OF; ISO-8601 text binds as a TIMESTAMP."""
    stored, past, now = _in_process_call([
        ("remember", {"items": [{"text": "zebra crossing", "id": "z"}]}),
        ("run_statement", {"statement": "SEARCH docs MATCHING 'zebra' AS OF :t",
                           "parameters": {"t": "2001-01-01T00:00:00Z"}}),
        ("run_statement", {"statement": "SEARCH docs MATCHING 'zebra' AS OF :t",
                           "parameters": {"t": "9999-01-01"}}),
    ])
    assert not stored.is_error
    assert data(past)["rows"] == []
    assert [row["id"] for row in data(now)["rows"]] == ["z"]


def test_fields_cannot_override_what_the_memorys_own_arguments_set():
    """Was: `fields={"id": ...}` replaced the item's id, `{"body": ...}` its text and
    `{"created_at": ...}` its time, silently; now the call is refused naming the key, and
    nothing is stored."""
    by_id, by_text, by_time, found = _in_process_call([
        ("remember", {"items": [{"text": "zebra crossing", "id": "z1",
                                 "fields": {"id": "z2"}}]}),
        ("remember", {"items": [{"text": "zebra crossing", "id": "z1",
                                 "fields": {"body": "other"}}]}),
        ("remember", {"items": [{"text": "zebra crossing", "id": "z1",
                                 "fields": {"created_at": "2020-01-01"}}]}),
        ("run_statement", {"statement": "SEARCH docs MATCHING 'zebra'"}),
    ])
    assert by_id.is_error and text(by_id) == (
        "IngestError: item z1, field 'id': cannot be set through 'fields' (give it as the "
        "memory's own 'id')")
    assert by_text.is_error and text(by_text) == (
        "IngestError: item z1, field 'body': cannot be set through 'fields' (the "
        "collection's text fields are filled from 'text' and 'title')")
    assert by_time.is_error and text(by_time) == (
        "IngestError: item z1, field 'created_at': cannot be set through 'fields' (give it as "
        "the memory's own 'created_at')")
    assert data(found)["rows"] == []


def test_readme_tool_table_gives_each_tools_arguments_and_defaults():
    """README's tool table is the contract it says it is: every tool, each argument's name, in
    order, `x?` for an optional one (default None), `x=value` for its default."""
    import inspect
    import re

    from recallql.mcp.server import READ_TOOLS, WRITE_TOOLS, MemoryTools

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = text.split("the agent now has these tools", 1)[1].split("\n\n", 2)[1]
    shown = dict(re.findall(r"`(\w+)\(([^)]*)\)`", table))
    assert set(shown) == set(READ_TOOLS + WRITE_TOOLS) == TOOLS
    for name, args in shown.items():
        params = list(inspect.signature(getattr(MemoryTools, name)).parameters.values())[1:]
        expected = []
        for p in params:
            if p.default is inspect.Parameter.empty:
                expected.append(p.name)
            elif p.default is None:
                expected.append(f"{p.name}?")
            else:
                default = json.dumps(p.default) if not isinstance(p.default, bool) else (
                    str(p.default).lower())
                expected.append(f"{p.name}={default}")
        assert [a.strip() for a in args.split(",")] == expected, name


def test_a_missing_collection_or_field_names_the_argument_not_a_built_statement():
    """`collection="dcos"` and `filters={"tag": ...}` came back as a QuerySemanticError with a
    caret under `RETRIEVE FROM dcos ...` / `WHERE tag = :f0_0`, statements the agent never
    wrote (search_memory and remember said `StoreError: no collection`, without a hint)."""
    results = _in_process_call([
        ("search_memory", {"text": "x", "collection": "dcos"}),
        ("retrieve_context", {"session": "s", "collection": "dcos"}),
        ("remember", {"collection": "dcos", "items": [{"text": "zebra"}]}),
        ("search_memory", {"text": "x", "filters": {"tag": "ops"}}),
        ("search_memory", {"text": "x", "filters": {"colour": "red"}}),
        ("search_memory", {"text": "x", "filters": {"title": "Backup"}}),
        ("search_memory", {"text": "x", "filters": {"position": "first"}}),
        ("run_statement", {"statement": "SHOW COLLECTIONS"}),
    ])
    *errors, shown = results
    assert all(r.is_error for r in errors)
    assert [text(r) for r in errors[:3]] == [
        f"ArgumentError: {tool} was called with invalid arguments:\n"
        "  collection: no collection 'dcos' (did you mean 'docs'?)"
        for tool in ("search_memory", "retrieve_context", "remember")]
    assert [text(r).splitlines()[1:] for r in errors[3:]] == [
        ["  filters.tag: unknown field 'tag' in collection 'docs' (did you mean 'tags'?)"],
        ["  filters.colour: unknown field 'colour' in collection 'docs' (its filterable "
         "fields: id, doc_id, entity, position, created_at, source, tags)"],
        ["  filters.title: 'title' is a text field of collection 'docs': its words are "
         "searched by the `text` argument, not filtered"],
        ["  filters.position: field 'position' is int; give a whole number or a list of "
         "them, got \"first\""]]
    for result in errors:
        assert "^" not in text(result) and ":f0" not in text(result), text(result)
    assert {r["name"]: r["items"] for r in data(shown)["records"]} == {"docs": 0,
                                                                     "messages": 0}


def test_group_by_and_memory_fields_name_the_argument():
    """`group_by="conversation"` on docs came back with a caret under `GROUP BY CONVERSATION`
    in a built statement, and an unknown key of a memory's `fields` as an IngestError naming
    the generated item id and Python lists (`text fields ['title', 'body']`)."""
    grouped, unknown, misspelt, own, found = _in_process_call([
        ("search_memory", {"text": "x", "group_by": "conversation"}),
        ("remember", {"items": [{"text": "zebra"}, {"text": "x", "fields": {"colour": "red"}}]}),
        ("remember", {"collection": "messages", "items": [
            {"text": "x", "fields": {"session_id": "s", "rol": "user"}}]}),
        ("remember", {"items": [{"text": "zebra", "fields": {"tag": ["ops"]}}]}),
        ("run_statement", {"statement": "SEARCH docs MATCHING 'zebra'"}),
    ])
    assert [text(r).splitlines()[1:] for r in (grouped, unknown, misspelt, own)] == [
        ["  group_by: 'conversation' groups messages: it needs collection 'messages', not "
         "'docs' (for documents: 'document')"],
        ["  items.1.fields.colour: unknown field 'colour' in collection 'docs' ('fields' can "
         "set: position)"],
        ["  items.0.fields.rol: unknown field 'rol' in collection 'messages' (did you mean "
         "'role'?)"],
        ["  items.0.fields.tag: unknown field 'tag' in collection 'docs' (did you mean 'tags'? "
         "give it as the memory's own 'tags')"]]
    assert "^" not in text(grouped)
    assert data(found)["rows"] == []  # nothing of a refused batch was stored

def test_raw_statement_tools_refuse_what_they_cannot_run_in_json_parameter_terms():
    """run_statement / explain take values by name in the JSON `parameters` object: a `?` was
    'missing value for parameter ?1: 1 needed, 0 given' (no way to give one), a second
    statement's hint named `parse_script()` and the shell, a missing value's hint `pass q=...`
    (Python keywords) and an unused key 'unexpected parameter :r'."""
    one = "SEARCH docs MATCHING :q LIMIT 3"
    results = _in_process_call([
        ("run_statement", {"statement": "SEARCH docs MATCHING ? LIMIT 3",
                           "parameters": {"q": "x"}}),
        ("explain", {"statement": "SEARCH docs MATCHING ?"}),
        ("run_statement", {"statement": "SHOW COLLECTIONS; SHOW SESSIONS"}),
        ("explain", {"statement": "SEARCH docs MATCHING 'x'; SEARCH docs MATCHING 'y'"}),
        ("run_statement", {"statement": one}),
        ("explain", {"statement": one, "parameters": {"query": "x"}}),
        ("run_statement", {"statement": one, "parameters": {"q": "x", "lmit": 3}}),
        ("run_statement", {"statement": "SHOW COLLECTIONS", "parameters": {"q": "x"}}),
        ("run_statement", {"statement": one, "parameters": {"q": "x"}}),
    ])
    *errors, ran = results
    assert all(r.is_error for r in errors) and data(ran)["rows"] == []
    positional, explained, *rest = [text(r) for r in errors]
    assert positional == (
        "ParameterError: a ? parameter takes its value by position; run_statement takes "
        "values by name only (line 1, column 22)\n\n"
        "  SEARCH docs MATCHING ? LIMIT 3\n"
        "                       ^\n"
        "  hint: use :name placeholders and pass {\"parameters\": {\"name\": ...}}, e.g. "
        "\"SEARCH docs MATCHING :q\" with {\"parameters\": {\"q\": \"disk full\"}}")
    assert explained.startswith("ParameterError: a ? parameter takes its value by position; "
                                "explain takes values by name only")
    second_run, second_explain, missing, misnamed, unused, none = rest
    assert second_run.startswith("QuerySyntaxError: expected one statement, found a second "
                                 "one (line 1, column 19)")
    assert second_run.endswith("  hint: one statement per call: call run_statement once for "
                               "each")
    assert second_explain.endswith("  hint: one statement per call: call explain once for each")
    assert missing.startswith("ParameterError: missing value for parameter :q (line 1, "
                              "column 22)")
    assert missing.endswith('  hint: pass {"parameters": {"q": ...}}')
    assert misnamed.endswith("  hint: pass {\"parameters\": {\"q\": ...}} ('query' given, but "
                             "not in the statement)")
    assert unused == ("ArgumentError: run_statement was called with invalid arguments:\n"
                      "  parameters.lmit: not a parameter of the statement (its parameters: "
                      ":q)")
    assert none.endswith("  parameters.q: not a parameter of the statement (it has no "
                         "parameters)")
    for message in (positional, explained, *rest):
        assert "parse_script" not in message and "=..." not in message, message


def test_a_timestamp_filter_takes_iso_text_and_finds_the_time_a_row_shows():
    """`filters={"created_at": <a row's created_at>}` found nothing: stored times are finer than
    the microseconds a row shows, so `=` never held for an item remembered without a time. Now
    a timestamp filter matches to the microsecond (ISO-8601 text with Z, an offset or none, a
    date, epoch seconds), and a value that is no timestamp names the filter and the formats
    (was a caret under `created_at = :f0_0`, hinting `TIMESTAMP '...'`)."""
    from recallql.mcp.server import MemoryTools, build_server

    worker = _worker()
    server = build_server(MemoryTools(worker))

    def ids(result):
        return sorted(row["id"] for row in data(result)["rows"])

    async def go():
        async with Client(server) as client:
            await client.call_tool("remember", {"items": [
                {"text": "zebra now", "id": "now"},
                {"text": "zebra day", "id": "day", "created_at": "2026-01-05"},
                {"text": "zebra ten", "id": "ten", "created_at": "2026-01-05T12:00:00+02:00"},
                {"text": "zebra end", "id": "end", "created_at": "9999-12-31T23:59:59.999999Z"}]})
            shown = {row["id"]: row["created_at"] for row in data(await client.call_tool(
                "search_memory", {"text": "zebra"}))["rows"]}

            async def where(value):
                return await client.call_tool("search_memory", {
                    "text": "zebra", "filters": {"created_at": value}})

            values = [shown["now"], "2026-01-05T10:00:00Z", "2026-01-05T10:00:00.000000Z",
                      "2026-01-05T12:00:00+02:00", "2026-01-05 10:00", "2026-01-05",
                      1767607200, ["2026-01-05", shown["now"]], "9999-12-31T23:59:59.999999Z",
                      "2026-01-05T10:00:00.000001Z",
                      "yesterday", True, {"gte": "2026-01-01"}]
            return shown, [await where(v) for v in values]

    try:
        shown, results = run(go)
    finally:
        worker.close()
    *found, wrong_text, wrong_type, range_ = results
    assert shown["ten"] == "2026-01-05T10:00:00.000000Z"
    assert [ids(r) for r in found] == [["now"], ["ten"], ["ten"], ["ten"], ["ten"], ["day"],
                                       ["ten"], ["day", "now"], ["end"], []]
    assert text(wrong_text) == (
        "ArgumentError: search_memory was called with invalid arguments:\n"
        "  filters.created_at: \"yesterday\" is not a timestamp (years 1..9999); give ISO-8601 "
        "text (\"2026-01-05T10:00:00Z\", \"2026-01-05T12:00:00+02:00\", or a date "
        "\"2026-01-05\" for its midnight UTC) or epoch seconds, or a list of them")
    assert text(wrong_type).splitlines()[1].startswith(
        "  filters.created_at: field 'created_at' is timestamp; give ISO-8601 text")
    assert text(wrong_type).endswith(", got true")
    assert range_.is_error and "filters only test equality: for a range use run_statement" \
        in text(range_)
    for result in (wrong_text, wrong_type, range_):
        assert "^" not in text(result) and "TIMESTAMP '" not in text(result)


@settings(max_examples=3000, deadline=None)
@given(st.floats(min_value=-62135596799.0, max_value=253402300798.0))
def test_a_timestamp_filter_takes_exactly_the_stored_times_shown_as_its_microsecond(epoch):
    """The range a timestamp comparison tests (`timestamps.shown_as`) holds every stored time that
    is shown as the given microsecond and no other: `epoch ± 0.5 µs` missed about one stored
    `now` in five (a float near today holds only ~4 values per microsecond) and took the
    boundary value shown as the next microsecond."""
    from recallql.grammar.timestamps import format_timestamp
    from recallql.index.timestamps import shown_as, to_epoch

    shown = format_timestamp(epoch)
    lo, hi = shown_as(to_epoch(shown))
    assert lo <= epoch < hi
    assert format_timestamp(lo) == shown == format_timestamp(math.nextafter(hi, -math.inf))
    assert format_timestamp(math.nextafter(lo, -math.inf)) != shown != format_timestamp(hi)
