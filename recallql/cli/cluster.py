"""``recallql cluster ...``: run a recallql cluster on Ray (the extra ``recallql[cluster]``)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from recallql.cli.common import Command, err, out

app = typer.Typer(no_args_is_help=True, help="Run a recallql cluster on Ray (shard actors "
                  "that each own many tenant databases).",
                  short_help="Run shard actors on Ray, each owning many tenant databases.",
                  epilog="docs/cluster.md explains tenants, shared collections and routing.")

SERVE_EPILOG = """Ray's servers listen on every interface even when told 127.0.0.1, so serve
(and run every client) inside one private network namespace with only loopback:

\b
  unshare -n sh -c 'ip link set lo up && exec "$@"' sh \\
    sh -c 'recallql cluster serve --path mem-cluster/ & python my_agent.py'

A client joins with recallql.cluster.connect(address=<printed address>, path=<the same
directory>). Stop the server with Ctrl-C or SIGTERM: the shards close their databases (every
committed batch is on disk) and Ray stops."""


@app.command(cls=Command, short_help="Start Ray and the shard actors; print the address.",
             epilog=SERVE_EPILOG)
def serve(
    path: Annotated[Path, typer.Option("--path", metavar="DIR",
                                       help="The cluster directory (created when missing).")],
    shards: Annotated[int, typer.Option(min=1, metavar="N", help="Shards of a new cluster "
                                        "(an existing one keeps its own).")] = 4,
    num_cpus: Annotated[int | None, typer.Option(
        "--num-cpus", min=1, metavar="N", help="CPUs Ray may use (default: all).")] = None,
    object_store_mb: Annotated[int, typer.Option(
        "--object-store-mb", min=64, metavar="MB", help="Ray's shared object store, in MB.")] = 200,
    embedder: Annotated[str, typer.Option(
        metavar="NAME", help="What 'default' collections embed with: default (MiniLM), none "
        "(vectors from the caller) or hash.")] = "default",
    isolation: Annotated[bool, typer.Option(
        "--isolation/--no-isolation", help="Refuse to start outside a private network "
        "namespace (Ray listens on every interface).")] = True,
) -> None:
    """Start a local Ray instance and the cluster's shard actors, print the address clients
    join, and serve until interrupted.

    \b
    Examples:
      recallql cluster serve --path mem-cluster/ --shards 4
    """
    from recallql.cluster import ClusterError, connect

    chosen = _embedder(embedder)
    try:
        c = connect(shards=shards, path=path, embedder=chosen, num_cpus=num_cpus,
                    object_store_mb=object_store_mb, isolated=isolation)
    except ClusterError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    import ray

    out.print(f"address: {ray.get_runtime_context().gcs_address}", markup=False)
    out.print(f"path: {path}", markup=False)
    out.print(f"shards: {c.shards}", markup=False)
    out.print("join with recallql.cluster.connect(address=..., path=...) from the same network "
              "namespace; Ctrl-C stops", markup=False, highlight=False)
    _wait()
    c.close()


def _embedder(name: str) -> Any:
    from recallql.index.embedders import HashEmbedder

    choices: dict[str, Any] = {"default": "default", "none": None, "hash": HashEmbedder()}
    if name not in choices:
        raise typer.BadParameter(f"use one of: {', '.join(choices)}", param_hint="--embedder")
    return choices[name]


def _wait() -> None:
    """Block until SIGINT or SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
