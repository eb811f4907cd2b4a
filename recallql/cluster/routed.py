"""The cluster's routed write and session surface: `Cluster.sessions`, `Cluster.messages`, and
what a write over several tenants or shards reports."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recallql.cluster.runtime import ClusterError
from recallql.cluster.shard import TENANT_METHODS
from recallql.index.batch import DeleteReport, IngestReport
from recallql.index.errors import IngestError, SignalRejected
from recallql.sessions.input import SessionError, SessionNotFound, many
from recallql.sessions.lineage import LineageReport
from recallql.sessions.messages import _checked as check_message
from recallql.sessions.signals import no_session, short_repr, validate_id

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
        """Create a session in its owner's database (see `Sessions.create`).

        Raises:
            SessionError: as `Sessions.create`; also when another owner holds the id (session
                ids are unique in the cluster, as in a database).
        """
        for value, what in ((id, "session id"), (agent_id, "agent id")):
            try:  # before the owner is placed: a tenant is named by a valid agent id only
                validate_id(value, what)
            except ValueError as exc:
                raise SessionError(str(exc)) from None
        held = self.owner_or_none(id)
        if held is not None and held != agent_id:
            raise SessionError(f"session {id!r} already exists")
        out = self._cluster.tenant_call(agent_id, "sessions", "create", (id, agent_id), kwargs,
                                        create=True, write=True)
        self._cluster.placement.record_session(id, agent_id)
        return out

    def list(self, agent_id: str, status: str | None = None) -> list[dict[str, Any]]:
        """A tenant's sessions (see `Sessions.list`; none for a tenant nothing was written
        for)."""
        self._cluster.check_open()
        if self._cluster.placement.tenant_shard(agent_id, place=False) is None:
            return []
        return self._cluster.tenant_call(agent_id, "sessions", "list", (agent_id, status))  # type: ignore[no-any-return]

    def owner(self, session_id: str) -> str:
        """The tenant that owns a session created through the cluster.

        Raises:
            ClusterError: no such session.
            StoreError: the connection is closed.
        """
        tenant = self.owner_or_none(session_id)
        if tenant is None:
            raise ClusterError(f"unknown session {session_id!r} (create it through the cluster)")
        return tenant

    def owner_or_none(self, session_id: object) -> str | None:
        """The owner of a session created through the cluster, or None (no such session).

        Raises:
            StoreError: the connection is closed.
        """
        self._cluster.check_open()
        if not isinstance(session_id, str):
            return None
        return self._cluster.placement.session_tenant(session_id)

    def signal_many(self, signals: Iterable[Mapping[str, Any]], *, key: str | None = None
                    ) -> int:
        """Record many signals (see `Sessions.signal_many`): one transaction per session
        owner; with an idempotency `key` (each owner's part stores ``key/owner``) the call is
        retried across a shard restart. A signal naming no session is refused before anything
        is written; one its owner's database refuses (``signal #i``, the position in this
        batch) fails that owner's part alone: parts of owners before it stay written.

        Returns:
            The number of signals recorded.
        """
        items = list(many(signals, "signals", SignalRejected))
        for i, sig in enumerate(items):  # the shape a database checks first, as it numbers it
            _signal_shape(sig, i)
        owners = [self._batch_owner(s, i, "signal", _unknown_signal) for i, s in
                  enumerate(items)]
        total = 0
        for owner, at in grouped(range(len(items)), owners.__getitem__).items():
            with numbered("signal", at):
                total += int(self._cluster.tenant_call(
                    owner, "sessions", "signal_many", ([dict(items[i]) for i in at],),
                    {"key": None if key is None else f"{key}/{owner}"}, write=key is None))
        return total

    def verify_lineage(self) -> LineageReport:
        """Walk every session's edges and compare them with the stored roots, in every
        tenant's database (see `Sessions.verify_lineage`; each tenant's in one read
        transaction of its own, not one snapshot of the cluster).

        Returns:
            One `LineageReport` as a database gives it: ``sessions`` and ``stored`` summed over
            the tenants, ``mismatches`` and ``unmaintained`` by session id (ids are unique in
            the cluster), ``max_depth`` the deepest chain of any tenant.

        Raises:
            StoreError: the connection is closed.
            ClusterError: a shard was lost (the check is a read: retried across a restart).
        """
        self._cluster.check_open()
        tenants = sorted(self._cluster.placement.tenants().items())
        parts = self._cluster.scatter(
            "call", [shard for _, shard in tenants],
            [(tenant, "sessions", "verify_lineage", (), {}, False) for tenant, _ in tenants])
        return LineageReport(
            sessions=sum(p.sessions for p in parts), stored=sum(p.stored for p in parts),
            mismatches=sorted((m for p in parts for m in p.mismatches),
                              key=lambda m: m.session_id),
            unmaintained=sorted(s for p in parts for s in p.unmaintained),
            max_depth=max((p.max_depth for p in parts), default=0))

    def _batch_owner(self, entry: object, index: int, what: str,
                     unknown: Callable[[object], Exception]) -> str:
        """The owner of a batch entry's session, or the database's error for an entry that
        names none (``<what> #index``)."""
        sid = entry.get("session_id") if isinstance(entry, Mapping) else None
        owner = self.owner_or_none(sid)
        if owner is None:
            err = unknown(sid)
            raise type(err)(f"{what} #{index}: {err}")
        return owner

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_") or method not in TENANT_METHODS["sessions"]:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {method!r}")
        write = method in {"annotate", "signal", "close", "archive"}

        def routed(session_id: str, *args: Any, **kwargs: Any) -> Any:
            owner = self.owner_or_none(session_id)
            if owner is None:  # what a database that does not hold the session answers
                if method == "get":
                    return None
                if method in UNKNOWN_SESSION:
                    raise UNKNOWN_SESSION[method](session_id)
                raise SessionNotFound(no_session(session_id))
            return self._cluster.tenant_call(owner, "sessions", method,
                                             (session_id, *args), kwargs, write=write)

        return routed


class ClusterMessages:
    """`Database.messages`, routed by the session's owner."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def append(self, session_id: str, role: str, content: str, **kwargs: Any) -> Any:
        """Append one message to a session (see `Messages.append`)."""
        owner = self._cluster.sessions.owner_or_none(session_id)
        if owner is None:
            raise _unknown_message(session_id)
        return self._cluster.tenant_call(owner, "messages", "append",
                                         (session_id, role, content), kwargs, write=True)

    def extend(self, messages: Iterable[Mapping[str, Any]], *, key: str | None = None
               ) -> list[int]:
        """Append many messages (see `Messages.extend`): one all-or-nothing batch per session
        owner. Every message is checked, and every session found open, before any part is
        written (the errors a database gives, ``message #i`` the position in this batch).
        With an idempotency `key` (each owner's part stores ``key/owner``) the call is
        retried across a shard restart, and a caller may retry it too.

        Returns:
            The new message ids, in the order given (ids are per tenant database).
        """
        items = [dict(m) if isinstance(m, Mapping) else m
                 for m in many(messages, "messages", SessionError)]
        for i, m in enumerate(items):  # what a database checks first, numbered as it does
            check_message(m, i)
        owners = [self._cluster.sessions._batch_owner(m, i, "message", _unknown_message)
                  for i, m in enumerate(items)]
        self._open_sessions(items, owners)
        ids: list[int] = [0] * len(items)
        for owner, at in grouped(range(len(items)), owners.__getitem__).items():
            with numbered("message", at):
                part = self._cluster.tenant_call(
                    owner, "messages", "extend", ([items[i] for i in at],),
                    {"key": None if key is None else f"{key}/{owner}"}, write=key is None)
            for i, new in zip(at, part, strict=True):
                ids[i] = new
        return ids

    def _open_sessions(self, items: list[Any], owners: list[str]) -> None:
        """Refuse a batch naming a session that is not open before any owner's part is
        written (as a database refuses the whole batch; a session closed between this check
        and its part's write still fails that part alone)."""
        seen: dict[object, int] = {}
        for i, m in enumerate(items):
            seen.setdefault(m["session_id"], i)
        if len(set(owners)) < 2:
            return  # one owner: its database refuses the whole batch itself
        for sid, i in seen.items():
            row = self._cluster.tenant_call(owners[i], "sessions", "get", (sid,))
            if row is not None and row.status != "open":
                raise _not_open(sid, row.status, i)


def _unknown_message(session_id: object) -> Exception:
    return SessionNotFound(f"cannot append: {no_session(session_id)}")


_SIGNAL_KEYS = {"session_id", "name", "value"}


def _signal_shape(sig: object, index: int) -> None:
    """Refuse a `signal_many` entry that is not a signal's mapping (`Sessions.signal_many`'s
    own first check, rule ``bad_signal``)."""
    if not isinstance(sig, Mapping) or not set(sig) >= _SIGNAL_KEYS \
            or set(sig) - _SIGNAL_KEYS - {"entity", "at"}:
        raise SignalRejected(
            f"signal #{index}: signal rejected (rule bad_signal): a signal is a mapping with "
            f"session_id, name, value and optionally entity and at, got {short_repr(sig)}")


def _unknown_signal(session_id: object) -> Exception:
    return SignalRejected(f"signal rejected (rule unknown_session): {no_session(session_id)}")


#: What a database raises when a session call names a session it does not hold (`get`
#: answers None; other calls raise `SessionNotFound`).
UNKNOWN_SESSION: dict[str, Callable[[object], Exception]] = {
    "close": lambda sid: SessionNotFound(f"cannot close: {no_session(sid)}"),
    "archive": lambda sid: SessionNotFound(f"cannot archive: {no_session(sid)}"),
    "signal": _unknown_signal,
    "annotate": lambda sid: SignalRejected(
        f"annotation rejected (rule unknown_session): {no_session(sid)}"),
}

_NUMBERED = re.compile(r"(message|signal) #(\d+): ")


@contextlib.contextmanager
def numbered(what: str, positions: Sequence[int]) -> Iterator[None]:
    """Re-raise an error of a part of a batch that names its entry (``message #j: ...``,
    ``signal #j: ...``) naming it by its position in the whole batch, as one database
    would."""
    try:
        yield
    except (SessionError, SignalRejected, IngestError) as exc:
        text = str(exc)
        found = _NUMBERED.match(text)
        if found is None or found.group(1) != what or int(found.group(2)) >= len(positions) \
                or isinstance(exc, IngestError):
            raise
        raise type(exc)(f"{what} #{positions[int(found.group(2))]}: {text[found.end():]}"
                        ) from None


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


def _not_open(session_id: object, status: str, index: int) -> SessionError:
    return SessionError(f"message #{index}: cannot append to session {session_id!r}: it is "
                        f"{status}")


def grouped(items: Iterable[Any], key: Callable[[Any], Any]) -> dict[Any, list[Any]]:
    """`items` grouped by `key(item)`, in first-seen order (mappings copied to dicts)."""
    groups: dict[Any, list[Any]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(dict(item) if isinstance(item, Mapping)
                                                 else item)
    return groups
