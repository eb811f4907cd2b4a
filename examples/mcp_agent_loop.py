"""An agent loop over MCP, scripted (no LLM): the fixed sequence of tool calls an agent would
make, against a real `recallql mcp` server launched over stdio by the official MCP client.

    python examples/mcp_agent_loop.py [DB_DIR]     # default: a temporary directory

1. start a session, annotate it with what it is about;
2. remember three notes, log the conversation so far;
3. recall: search memory, pick the best hit, reward it;
4. retrieve what the session should see now, and EXPLAIN why the top row ranks first;
5. end the session.

Needs the extra ``recallql[mcp]``. The server embeds with all-MiniLM-L6-v2 (local).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

NOTES = [
    {"id": "backups", "title": "Backup policy", "tags": ["ops", "backup"],
     "text": "Daily backups are kept for 30 days, monthly ones for a year."},
    {"id": "pg-upgrade", "title": "PostgreSQL upgrades", "tags": ["postgres"],
     "text": "Upgrade with pg_upgrade --link, then run ANALYZE on every database."},
    {"id": "restore", "title": "Restore a backup", "tags": ["postgres", "backup"],
     "text": "Restore the latest base backup, then replay the WAL up to the target time."},
]


def recallql_command() -> str:
    """The `recallql` script beside this interpreter (a venv), else the one on PATH."""
    beside = Path(sys.executable).with_name("recallql")
    return str(beside) if beside.exists() else "recallql"


async def call(client: Client, tool: str, **arguments: object) -> str:
    """Call a tool, print the call and what came back; stop on a tool error."""
    result = await client.call_tool(tool, arguments)
    reply = result.content[0].text
    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    print(f"> {tool}({shown if len(shown) <= 90 else shown[:89] + '…'})")
    if result.is_error:
        raise SystemExit(f"tool error: {reply}")
    return reply


async def agent_loop(db: Path) -> None:
    server = StdioServerParameters(command=recallql_command(), args=["mcp", "--db", str(db)])
    async with Client(server) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        print(f"tools: {', '.join(tools)}")
        await call(client, "start_session", agent_id="ops-agent", session="s-42")
        await call(client, "annotate_session", session="s-42", text="postgres")
        stored = json.loads(await call(client, "remember", items=NOTES))
        print(f"  remembered {len(stored['ids'])} notes in batch {stored['batch']}")
        await call(client, "append_messages", session="s-42", messages=[
            {"role": "user", "content": "The nightly restore test failed on db-3."},
            {"role": "assistant", "content": "Looking up how we restore backups."}])

        found = json.loads(await call(client, "search_memory",
                                      text="how do I restore last night's backup", limit=3))
        for row in found["rows"]:
            print(f"  {row['id']:<11} {row['score']:.5f}  {row['why']}")
        best = found["rows"][0]["id"]
        await call(client, "record_signal", session="s-42", value=1.0, entity=best)

        context = json.loads(await call(client, "retrieve_context", session="s-42", limit=3))
        for row in context["rows"]:
            print(f"  {row['id']:<11} {row['score']:.5f}  {row['why']}")
        plan = await call(client, "explain", statement=(
            "RETRIEVE 2 FROM docs MATCHING :q FOR SESSION :s"), parameters={
                "q": "restore a backup", "s": "s-42"})
        print("\n".join("  " + line for line in plan.splitlines()))
        await call(client, "end_session", session="s-42", reason="agent_close")
    print(f"recalled {best!r}, rewarded it, explained the ranking")


def main() -> None:
    if len(sys.argv) > 1:
        anyio.run(agent_loop, Path(sys.argv[1]))
        return
    scratch = Path(tempfile.mkdtemp(prefix="recallql-mcp-"))
    try:
        anyio.run(agent_loop, scratch / "memory.db")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
