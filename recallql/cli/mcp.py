"""``recallql mcp``: serve the database to agents over the Model Context Protocol."""

from __future__ import annotations

from typing import Annotated

import typer

from recallql.cli.common import DEFAULT_DB, DbOption, EmbedderOption, err, fail, handled

MISSING_SDK = ("`recallql mcp` needs the MCP SDK, an optional extra: pip install "
               "'recallql[mcp]'")


def mcp(
    db: DbOption = DEFAULT_DB,
    http: Annotated[str | None, typer.Option(
        "--http", metavar="HOST:PORT",
        help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (e.g. "
             "127.0.0.1:8765). Loopback only unless --allow-remote.")] = None,
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="Open the database read-only and offer only the read tools.")
    ] = False,
    embedder: EmbedderOption = "auto",
    commit_window: Annotated[float, typer.Option(
        "--commit-window-ms", min=0, max=1000, metavar="MS",
        help="How long a write waits for others to share its commit (group commit).")] = 10.0,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow --http on a non-loopback address. The server has no "
                               "authentication: anyone who reaches it can read and write.")
    ] = False,
) -> None:
    """Serve the database as an MCP server (tools for agents: search_memory,
    retrieve_context, explain, run_statement, remember, append_messages, record_signal,
    annotate_session, start_session, end_session; resources: the collections).

    Over stdio by default, which is what MCP clients launch (each client its own server).
    Several servers and CLI commands may write one database, taking turns at the writer lock:
    a write waits up to 2 s for another process's write, then fails with a tool error naming
    the holder. Writes arriving at one server together are committed as one batch, so for
    many agents writing a lot run one server with --http and point every client at it.
    Creates the database when missing. Needs the extra `recallql[mcp]`.

    \b
    Examples:
      recallql mcp --db ~/agent-memory.db
      recallql mcp --db ~/agent-memory.db --http 127.0.0.1:8765
      recallql mcp --db notes.db --read-only
    """
    import importlib.util

    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec(
            "mcp.server.mcpserver") is None:
        raise fail(MISSING_SDK)
    from recallql.cli.common import State, embedder_for
    from recallql.mcp import LOCK_WAIT, LOOPBACK_HINT, is_loopback, parse_http, serve

    address = None
    if http is not None:
        try:
            address = parse_http(http)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--http") from None
        if not is_loopback(address[0]):
            if not allow_remote:
                raise typer.BadParameter(
                    f"{address[0]} is not a loopback address; {LOOPBACK_HINT}. Use "
                    "127.0.0.1, or pass --allow-remote to serve it anyway",
                    param_hint="--http")
            err.print(f"WARNING: serving on {address[0]}, not loopback: {LOOPBACK_HINT}",
                      style="bold red", markup=False)
    with handled():
        serve(db, http=address, read_only=read_only, embedder=embedder_for(embedder, db),
              window=commit_window / 1000,
              lock_wait=State.wait if State.wait_given else LOCK_WAIT)
