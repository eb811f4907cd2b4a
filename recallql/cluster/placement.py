"""Where data lives in a cluster: the placement table (`placement.sqlite` in the cluster root).

The coordinator is stateless: every routing decision is read from this table (and cached, since
a placement never changes once written), so any number of coordinators can serve one cluster.

* **tenants** → shard. A tenant (an agent's or user's documents, sessions, signals and messages)
  is placed when it is first written, on the shard with the fewest tenants (lowest index on a
  tie), and stays there: adding a shard routes new tenants to it, existing ones do not move.
* **sessions** → tenant (the session's owner, its ``agent_id``), recorded when the session is
  created through the cluster; statements ``FOR SESSION`` and message writes route by it.
* **collections**: each definition (text fields, fields, dim, embedder), whether it is *shared*
  (its items spread over shards by a hash of the item id, searched by scatter-gather) or
  per-tenant, and for shared ones the number of shards its items are hashed over (fixed at
  creation, so adding a shard never moves or duplicates an item).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE = "placement.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS shards (idx INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS tenants (tenant TEXT PRIMARY KEY, shard INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, tenant TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS collections (
    name TEXT PRIMARY KEY, shared INTEGER NOT NULL, spread INTEGER NOT NULL,
    definition TEXT NOT NULL);
"""


@dataclass(frozen=True)
class CollectionDef:
    """A cluster collection.

    Attributes:
        name: its name; shared: searched by scatter-gather over every shard's share of items;
        spread: shared collections: the shards its items are hashed over (indexes 0..spread-1);
        definition: `create_collection` keyword arguments (text_fields, fields as type names,
            dim, embedder name or None).
    """

    name: str
    shared: bool
    spread: int
    definition: dict[str, Any]


def item_shard(item_id: object, spread: int) -> int:
    """The shard of a shared collection's item: blake2b of the id's text, modulo `spread`
    (stable across processes and Python versions, unlike `hash`)."""
    digest = hashlib.blake2b(str(item_id).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big") % spread


class Placement:
    """The placement table of the cluster at `root` (created on first use).

    Raises:
        sqlite3.Error: the file cannot be opened (a message naming it, via `ClusterError`, from
            the callers).
    """

    def __init__(self, root: Path) -> None:
        self.path = root / FILE
        self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)
        self._tenants: dict[str, int] = {}
        self._sessions: dict[str, str] = {}
        self._collections: dict[str, CollectionDef] = {}

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- shards ---------------------------------------------------------------------------------

    def shards(self) -> int:
        """Number of shards recorded (0 for a new cluster)."""
        row = self._conn.execute("SELECT COUNT(*) FROM shards").fetchone()
        return int(row[0])

    def ensure_shards(self, count: int) -> int:
        """Record shards up to `count` (never fewer than recorded); returns the number."""
        with self._write() as conn:
            have = int(conn.execute("SELECT COUNT(*) FROM shards").fetchone()[0])
            conn.executemany("INSERT INTO shards (idx) VALUES (?)",
                             [(i,) for i in range(have, count)])
        return max(have, count)

    # -- tenants and sessions -------------------------------------------------------------------

    def tenant_shard(self, tenant: str, *, place: bool) -> int | None:
        """The shard of `tenant`; with `place`, a new tenant is placed on the shard with the
        fewest tenants. None: unknown tenant and not placed."""
        hit = self._tenants.get(tenant)
        if hit is not None:
            return hit
        row = self._conn.execute("SELECT shard FROM tenants WHERE tenant = ?",
                                 (tenant,)).fetchone()
        if row is None and place:
            with self._write() as conn:
                row = conn.execute("SELECT shard FROM tenants WHERE tenant = ?",
                                   (tenant,)).fetchone()
                if row is None:
                    row = (self._emptiest(conn),)
                    conn.execute("INSERT INTO tenants (tenant, shard) VALUES (?, ?)",
                                 (tenant, row[0]))
        if row is None:
            return None
        self._tenants[tenant] = int(row[0])
        return int(row[0])

    @staticmethod
    def _emptiest(conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "SELECT s.idx FROM shards s LEFT JOIN tenants t ON t.shard = s.idx "
            "GROUP BY s.idx ORDER BY COUNT(t.tenant), s.idx LIMIT 1").fetchone()
        if row is None:
            raise RuntimeError("the cluster has no shards")
        return int(row[0])

    def tenants(self) -> dict[str, int]:
        """Every tenant and its shard."""
        return {t: int(s) for t, s in self._conn.execute("SELECT tenant, shard FROM tenants")}

    def record_session(self, session_id: str, tenant: str) -> None:
        """Record a session's owner (idempotent; a session never changes owner)."""
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO sessions (session_id, tenant) VALUES (?, ?)",
                         (session_id, tenant))
        self._sessions.pop(session_id, None)

    def session_ids(self) -> list[str]:
        """Every session created through the cluster (for a not-found error's did-you-mean)."""
        return [str(r[0]) for r in self._conn.execute("SELECT session_id FROM sessions")]

    def session_tenant(self, session_id: str) -> str | None:
        """The owner of a session created through the cluster, or None."""
        hit = self._sessions.get(session_id)
        if hit is not None:
            return hit
        row = self._conn.execute("SELECT tenant FROM sessions WHERE session_id = ?",
                                 (session_id,)).fetchone()
        if row is None:
            return None
        self._sessions[session_id] = str(row[0])
        return str(row[0])

    # -- collections ----------------------------------------------------------------------------

    def define(self, name: str, shared: bool, spread: int, definition: dict[str, Any]
               ) -> CollectionDef:
        """Record a collection (or return the recorded one when it is the same).

        Raises:
            ValueError: it exists with another definition or sharing.
        """
        text = json.dumps(definition, sort_keys=True)
        with self._write() as conn:
            row = conn.execute("SELECT shared, spread, definition FROM collections "
                               "WHERE name = ?", (name,)).fetchone()
            if row is None:
                conn.execute("INSERT INTO collections (name, shared, spread, definition) "
                             "VALUES (?, ?, ?, ?)", (name, int(shared), spread, text))
                return CollectionDef(name, shared, spread, definition)
        if bool(row[0]) != shared or json.loads(row[2]) != json.loads(text):
            raise ValueError(f"collection {name!r} exists in the cluster with another "
                             f"definition ({'shared' if row[0] else 'per tenant'}: {row[2]})")
        return CollectionDef(name, bool(row[0]), int(row[1]), json.loads(row[2]))

    def collection(self, name: str) -> CollectionDef | None:
        """A recorded collection, or None (a recorded definition never changes: kept here once
        read)."""
        found = self._collections.get(name)
        if found is not None:
            return found
        row = self._conn.execute("SELECT shared, spread, definition FROM collections "
                                 "WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        found = self._collections[name] = CollectionDef(name, bool(row[0]), int(row[1]),
                                                        json.loads(row[2]))
        return found

    def collections(self) -> list[CollectionDef]:
        """Every recorded collection, by name."""
        rows = self._conn.execute("SELECT name, shared, spread, definition FROM collections "
                                  "ORDER BY name").fetchall()
        return [CollectionDef(n, bool(s), int(p), json.loads(d)) for n, s, p, d in rows]

    def close(self) -> None:
        self._conn.close()
