"""``recallql mcp``: the database as a Model Context Protocol server (extra ``recallql[mcp]``).

    recallql mcp --db mem.db                       # stdio (what MCP clients launch)
    recallql mcp --db mem.db --http 127.0.0.1:8765 # streamable HTTP at /mcp, loopback only

Any number of clients may call one server at once (over HTTP; over stdio each client launches
its own server) and their writes arriving together are committed in one batch
(`recallql.mcp.worker`). Several servers may write one database: each write takes the writer
lock, waiting up to `LOCK_WAIT` seconds (``recallql --wait SECONDS mcp``: that many) for
another process's write. Tools and resources:
`recallql.mcp.server`.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["LOOPBACK_HINT", "is_loopback", "open_database", "parse_http", "serve"]

LOOPBACK_HINT = ("the server has no authentication: anyone who can reach the address can read "
                 "and write the memory")
#: Seconds each write waits for another process's write (`connect(..., lock_timeout=...)`);
#: opening (creating or migrating) that cannot get the lock serves read-only instead.
LOCK_WAIT = 2.0


def parse_http(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``, or ``[::1]:PORT``) as (host, port).

    Raises:
        ValueError: not a host and a port in 1..65535.
    """
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT with a port in 1..65535, got {value!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether `host` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _connect(path: Path, embedder: Any, readonly: bool, lock_wait: float) -> Any:
    import recallql

    kwargs: dict[str, Any] = {"embedder": embedder, "readonly": readonly}
    if not readonly:
        kwargs["lock_timeout"] = lock_wait
    return recallql.connect(path, **kwargs)


def open_database(path: Path, embedder: Any = "auto", read_only: bool = False,
                  lock_wait: float = LOCK_WAIT) -> tuple[Any, str]:
    """Open the database for serving: as its writer (created when missing), or read-only when
    asked or when another process holds the writer lock. Each write then waits up to
    `lock_wait` seconds for another process's write before `DatabaseLocked`.

    Returns:
        (the `Database`, why it is read-only: "" when it is the writer or read-only on purpose).

    Raises:
        StoreError: not a recallql database, or an embedder that does not match.
    """
    import recallql
    from recallql.api import is_database, stored_embedder

    if embedder == "auto":
        embedder = stored_embedder(path, "docs") if is_database(path) else "default"
    if read_only:
        return _connect(path, embedder, readonly=True, lock_wait=lock_wait), ""
    try:
        return _connect(path, embedder, readonly=False, lock_wait=lock_wait), ""
    except recallql.DatabaseLocked as exc:
        why = (f"another process writes {path} ({exc}); reads work, writes do not. To let "
               "several clients write, run one `recallql mcp --db ... --http 127.0.0.1:PORT` "
               "and point every client at it")
        return _connect(path, embedder, readonly=True, lock_wait=lock_wait), why


def serve(path: Path, *, http: tuple[str, int] | None = None, read_only: bool = False,
          embedder: Any = "auto", window: float | None = None,
          lock_wait: float = LOCK_WAIT) -> None:
    """Serve the database at `path` until the client (stdio) or a signal (HTTP) ends it; each
    write waits up to `lock_wait` seconds for another process's write."""
    from recallql.mcp.server import MemoryTools, build_server
    from recallql.mcp.worker import DEFAULT_WINDOW, DatabaseWorker

    db, why = open_database(path, embedder, read_only, lock_wait)
    if why:
        print(f"recallql mcp: serving read-only: {why}", file=sys.stderr, flush=True)
    worker = DatabaseWorker(db, DEFAULT_WINDOW if window is None else window)
    server = build_server(MemoryTools(worker, writable=not db.store.readonly,
                                      why_read_only=why))
    try:
        if http is None:
            _stop_on_interrupt(worker)
            if sys.stdin.isatty():
                print(f"recallql mcp: serving {path} over stdio, the way an MCP client "
                      "launches it (it reads JSON-RPC on stdin; typing here does nothing "
                      "useful). Ctrl-C stops it.", file=sys.stderr, flush=True)
            server.run("stdio")
        else:
            host, port = http
            print(f"recallql mcp: serving {path} at http://{_url_host(host)}:{port}/mcp "
                  f"(pid {os.getpid()})", file=sys.stderr, flush=True)
            server.run("streamable-http", host=host, port=port)
    finally:
        worker.close()


def _stop_on_interrupt(worker: Any) -> None:
    """Make Ctrl-C (SIGINT) end a stdio server at once, exit status 130.

    The SDK reads stdin in a thread that cancellation cannot interrupt, so Python's
    KeyboardInterrupt would leave the server running until the next line of input arrived.
    Instead the handler wakes a thread (through a pipe: a signal handler takes no locks) that
    finishes the queued requests, closes the database and exits."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set a signal handler (serve() run from a thread)
    read_end, write_end = os.pipe()

    def stop() -> None:
        os.read(read_end, 1)
        try:
            worker.close()
        finally:
            os._exit(130)

    threading.Thread(target=stop, name="recallql-mcp-interrupt", daemon=True).start()
    signal.signal(signal.SIGINT, lambda *_: os.write(write_end, b"\0"))


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
