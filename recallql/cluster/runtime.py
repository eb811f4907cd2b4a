"""Ray underneath the cluster: a loopback-only local instance (or an existing one), and the
shard actors (Ray restarts a dead one, `max_restarts`; it reopens its databases from disk).

Ray's servers bind every interface even when told ``127.0.0.1``, so `start` refuses to run
outside a private network namespace that has only loopback, unless told otherwise::

    unshare -n sh -c 'ip link set lo up && exec "$@"' sh python my_app.py
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from types import ModuleType

#: Ray namespace of recallql clusters (actor names are per cluster directory inside it).
NAMESPACE = "recallql"
#: Calls that only read are retried this many times across an actor restart.
READ_RETRIES = 3
UNSHARE = "unshare -n sh -c 'ip link set lo up && exec \"$@\"' sh"


class ClusterError(RuntimeError):
    """The cluster cannot do what was asked (Ray missing, not isolated, a shard lost...)."""


def ray_module() -> ModuleType:
    """The `ray` package.

    Raises:
        ClusterError: Ray is not installed.
    """
    try:
        import ray
    except ImportError:
        raise ClusterError("the cluster mode needs Ray: pip install 'recallql[cluster]'"
                           ) from None
    return ray


def network_interfaces() -> list[str]:
    """Network interfaces of this process's network namespace other than loopback (names, from
    the kernel: `socket.if_nameindex`; `/sys/class/net` would show the host's)."""
    return sorted(name for _, name in socket.if_nameindex() if name != "lo")


def check_isolated() -> None:
    """Refuse to start Ray where it could listen beyond loopback.

    Raises:
        ClusterError: the network namespace has an interface other than loopback.
    """
    found = network_interfaces()
    if found:
        raise ClusterError(
            f"refusing to start Ray: its servers listen on every interface, and this "
            f"process's network namespace has {', '.join(found)}. Run inside a private network "
            f"namespace with only loopback: {UNSHARE} <command> (or pass isolated=False / "
            "--no-isolation on a network you trust)")


#: Where Ray keeps the token of the token authentication it turns on for a new local instance.
DEFAULT_RAY_TOKEN = Path("~/.ray/auth_token")


def join_with_token_auth() -> bool:
    """Turn on Ray's token authentication for joining a cluster when a token is at hand.

    Ray (2.60 and later) starts a new local instance with token authentication on, and writes
    its token to ``~/.ray/auth_token``. A process that joins by an explicit address, though,
    stays in the mode its environment sets, which is off. Its calls are then refused
    (``InvalidAuthToken``), so a client of ``recallql cluster serve`` on the same machine
    could not connect. An explicit ``RAY_AUTH_MODE`` is respected as set. Otherwise token
    mode is turned on, for this process and its children, when a token is available:
    ``RAY_AUTH_TOKEN``, the file named by ``RAY_AUTH_TOKEN_PATH``, or the default file.
    Ray's own `ray.init` does the same when it finds a local cluster by itself.

    Returns:
        Whether token mode is on for the join.
    """
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None:
        return mode.lower() == "token"
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or DEFAULT_RAY_TOKEN).expanduser()
    if not (os.environ.get("RAY_AUTH_TOKEN") or path.is_file()):
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    config = getattr(sys.modules.get("ray._raylet"), "Config", None)
    if config is not None:  # Ray read its settings on import: read them again, as Ray does
        config.initialize("")
    return True


def start(*, num_cpus: int | None, object_store_mb: int, isolated: bool,
          address: str | None) -> ModuleType:
    """Start a local Ray instance (loopback only, no dashboard) or join `address`."""
    ray = ray_module()
    if ray.is_initialized():
        return ray
    if address is not None:
        join_with_token_auth()
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
        return ray
    if isolated:
        check_isolated()
    ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
             _node_ip_address="127.0.0.1", object_store_memory=object_store_mb << 20,
             namespace=NAMESPACE, log_to_driver=False)
    return ray
