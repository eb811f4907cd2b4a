"""Idempotency keys: a write retried with the same key writes once.

A caller that cannot tell whether a write went through (a timeout, a crash of the caller, a lost
reply) retries it with the same ``key=``. The first write stores the key, a fingerprint of the
request and the response in its own SQLite transaction (table ``request_keys``), so the key is
durable exactly when the write is. A retry finds the key and returns the stored response without
writing; a key reused for a different request is refused (`IdempotencyKeyReused`), as Stripe's
idempotency keys and AWS client tokens are. Keys are kept for the life of the database.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from recallql.index.errors import IdempotencyKeyReused, IngestError

MAX_KEY_CHARS = 256


@dataclass(frozen=True)
class Request:
    """One keyed write: the key, its kind (``ingest:<collection>``, ``messages``, ``signals``)
    and the request's fingerprint."""

    key: str
    kind: str
    digest: str


def check_key(key: object) -> str:
    """A valid idempotency key: a non-empty str of at most `MAX_KEY_CHARS` characters that
    can be stored (valid Unicode).

    Raises:
        IngestError: naming the problem (nothing is written).
    """
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise IngestError(f"key must be a non-empty string of at most {MAX_KEY_CHARS} "
                          f"characters, got {key!r:.80}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise IngestError("key is not valid Unicode (a lone surrogate)") from None
    return key


def digest(parts: Iterable[object]) -> str:
    """A fingerprint (BLAKE2b-128, hex) of the request's parts, each turned into text with
    ``repr`` (parts are plain values: str, int, float, bool, None, tuples of them)."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def request(key: object, kind: str, parts: Iterable[object]) -> Request:
    """The `Request` of a keyed write (the key checked, the parts fingerprinted).

    Raises:
        IngestError: an invalid key.
    """
    return Request(check_key(key), kind, digest(parts))


def replay(conn: sqlite3.Connection, req: Request) -> object | None:
    """The stored response (decoded JSON) of an earlier write with ``req.key``, or None when
    the key is new.

    Raises:
        IdempotencyKeyReused: the key was used for another kind of write or another request.
    """
    row = conn.execute("SELECT kind, request, response FROM request_keys WHERE key = ?",
                       (req.key,)).fetchone()
    if row is None:
        return None
    kind, stored, response = row
    if kind != req.kind or stored != req.digest:
        what = f"a {kind} write" if kind != req.kind else "a different request"
        raise IdempotencyKeyReused(
            f"key {req.key!r} was already used for {what}; a key names one request (retry "
            "with the same arguments, or use a new key)")
    return json.loads(response)


def record(conn: sqlite3.Connection, req: Request, response: object, at: float) -> None:
    """Store the key with the write's response, inside the write's transaction."""
    conn.execute("INSERT INTO request_keys (key, kind, request, response, at) VALUES (?,?,?,?,?)",
                 (req.key, req.kind, req.digest, json.dumps(response), at))
