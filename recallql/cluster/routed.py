"""The cluster's routed write and session surface: `Cluster.sessions`, `Cluster.messages`, and
what a write over several tenants or shards reports."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recallql.cluster.runtime import ClusterError
from recallql.index.batch import DeleteReport, IngestReport
from recallql.index.errors import IngestError

if TYPE_CHECKING:
    from recallql.cluster.client import Cluster


@dataclass
class ClusterWriteReport:
    """What a cluster write committed: one report per shard (shared collections) or tenant,
    each all-or-nothing on its own (like a bulk request over Elasticsearch shards).

    Attributes:
        parts: `{tenant or "shard-<i>": IngestReport | DeleteReport}`.
    """

    parts: dict[str, IngestReport | DeleteReport] = field(default_factory=dict)

    def total(self, name: str) -> int:
        """The sum of attribute `name` (``added``, ``replaced``, ``deleted``...) over parts."""
        return sum(int(getattr(p, name, 0)) for p in self.parts.values())

    @property
    def count(self) -> int:
        """Items written (added + replaced)."""
        return self.total("added") + self.total("replaced")


class ClusterSessions:
    """`Database.sessions`, routed: `create` places the session with its owner (``agent_id``);
    every other call goes to the owner of the session named first."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def create(self, id: str, agent_id: str, **kwargs: Any) -> Any:
        """Create a session in its owner's database (see `Sessions.create`)."""
        out = self._cluster.tenant_call(agent_id, "sessions", "create", (id, agent_id), kwargs,
                                        create=True, write=True)
        self._cluster.placement.record_session(id, agent_id)
        return out

    def list(self, agent_id: str, status: str | None = None) -> list[dict[str, Any]]:
        """A tenant's sessions (see `Sessions.list`)."""
        return self._cluster.tenant_call(agent_id, "sessions", "list", (agent_id, status))  # type: ignore[no-any-return]

    def owner(self, session_id: str) -> str:
        """The tenant that owns a session created through the cluster.

        Raises:
            ClusterError: no such session.
            StoreError: the connection is closed.
        """
        self._cluster.check_open()
        tenant = self._cluster.placement.session_tenant(session_id)
        if tenant is None:
            raise ClusterError(f"unknown session {session_id!r} (create it through the cluster)")
        return tenant

    def signal_many(self, signals: Iterable[Mapping[str, Any]], *, key: str | None = None
                    ) -> int:
        """Record many signals (see `Sessions.signal_many`): one transaction per session
        owner; with an idempotency `key` (each owner's part stores ``key/owner``) the call is
        retried across a shard restart.

        Returns:
            The number of signals recorded.
        """
        parts = grouped(signals, lambda s: self.owner(str(s.get("session_id"))))
        return sum(int(self._cluster.tenant_call(
            owner, "sessions", "signal_many", (part,),
            {"key": None if key is None else f"{key}/{owner}"}, write=key is None))
            for owner, part in parts.items())

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)
        write = method in {"annotate", "signal", "close", "archive"}

        def routed(session_id: str, *args: Any, **kwargs: Any) -> Any:
            return self._cluster.tenant_call(self.owner(session_id), "sessions", method,
                                             (session_id, *args), kwargs, write=write)

        return routed


class ClusterMessages:
    """`Database.messages`, routed by the session's owner."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def append(self, session_id: str, role: str, content: str, **kwargs: Any) -> Any:
        """Append one message to a session (see `Messages.append`)."""
        owner = self._cluster.sessions.owner(session_id)
        return self._cluster.tenant_call(owner, "messages", "append",
                                         (session_id, role, content), kwargs, write=True)

    def extend(self, messages: Iterable[Mapping[str, Any]], *, key: str | None = None
               ) -> list[int]:
        """Append many messages (see `Messages.extend`): one all-or-nothing batch per session
        owner. With an idempotency `key` (each owner's part stores ``key/owner``) the call is
        retried across a shard restart, and a caller may retry it too.

        Returns:
            The new message ids, in the order given (ids are per tenant database).
        """
        items = [dict(m) for m in messages]
        owners = [self._cluster.sessions.owner(str(m.get("session_id"))) for m in items]
        ids: list[int] = [0] * len(items)
        for owner in dict.fromkeys(owners):
            at = [i for i, o in enumerate(owners) if o == owner]
            part = self._cluster.tenant_call(
                owner, "messages", "extend", ([items[i] for i in at],),
                {"key": None if key is None else f"{key}/{owner}"}, write=key is None)
            for i, new in zip(at, part, strict=True):
                ids[i] = new
        return ids


@contextlib.contextmanager
def renumbered(positions: Sequence[int]) -> Iterator[None]:
    """Re-raise an `IngestError` of a part of a batch (the items at `positions` of the whole
    batch) naming the item by its position in the whole batch (``#i``), as one database
    would name it."""
    try:
        yield
    except IngestError as exc:
        item = exc.item
        if item is None or not item.startswith("#") or not item[1:].isdigit() \
                or int(item[1:]) >= len(positions):
            raise
        where = [f"item {item}"] + ([] if exc.field is None else [f"field {exc.field!r}"])
        message = str(exc).removeprefix(", ".join(where) + ": ")
        raise IngestError(message, item=f"#{positions[int(item[1:])]}", field=exc.field
                          ) from None


def grouped(items: Iterable[Any], key: Callable[[Any], Any]) -> dict[Any, list[Any]]:
    """`items` grouped by `key(item)`, in first-seen order (mappings copied to dicts)."""
    groups: dict[Any, list[Any]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(dict(item) if isinstance(item, Mapping)
                                                 else item)
    return groups
