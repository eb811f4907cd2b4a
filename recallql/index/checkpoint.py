"""Column checkpoints: a collection's in-memory columns saved as arrays, so that opening it
reads arrays instead of every row from SQLite.

Opening a collection used to read each row back from SQLite and ``json.loads`` its fields
(9 s at 1M rows). Rows are immutable once committed (a tombstone only sets ``dead_batch``,
read from SQLite's ``items_dead`` index), so the columns of rows ``0 … R-1`` never change: a
checkpoint of them stays valid for every later batch. On open the state restores the newest
checkpoint (a few array reads: ~50 MB at 1M rows) and reads only the rows committed after it
from SQLite.

A checkpoint is a cache, never the truth: it lives in ``collections/<name>/columns-<R>/``
(``manifest.json`` written last), written to ``columns-<R>.tmp/`` and renamed once every file
is fsynced; one that is missing, partial, of another field schema, or beyond the committed rows
is ignored (rows come from SQLite then). The writer's background thread
(`recallql.index.indexer`) writes a new one once `CHECKPOINT_ROWS` rows were committed since the
last, off the write path, and removes the older ones.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recallql.index.columns import Buffer, StrPool
from recallql.index.connections import fsync_dir

if TYPE_CHECKING:
    from recallql.index.snapshot import CollectionState

#: A new checkpoint once this many rows were committed after the last one: at most this many
#: rows are read from SQLite on open (about 60 ms).
CHECKPOINT_ROWS = 16_384
FORMAT = 1
PREFIX = "columns-"


def _signature(state: CollectionState) -> dict[str, Any]:
    info = state.info
    return {"format": FORMAT, "fields": {k: v.value for k, v in sorted(info.fields.items())}}


def _owners(state: CollectionState) -> dict[str, object]:
    return {**{f"c.{k}": v for k, v in state.columns.items()},
            **{f"f.{k}": v for k, v in state.fields.items()}, "has_vector": state.has_vector}


def capture(state: CollectionState) -> tuple[int, dict[str, dict[str, object]]]:
    """The state's columns at its current size (call under the writer mutex; the arrays are
    views of append-only buffers, so they stay valid after it is released)."""
    parts: dict[str, dict[str, object]] = {}
    for key, owner in _owners(state).items():
        if isinstance(owner, Buffer):
            parts[key] = {"": owner.view(owner.n)}
            continue
        found: dict[str, object] = {}
        for name, value in vars(owner).items():
            if isinstance(value, Buffer):
                found[name] = value.view(value.n)
            elif isinstance(value, StrPool):
                found[name] = list(value.vocab)
            elif isinstance(value, int) and not isinstance(value, bool):
                found[name] = value
        parts[key] = found
    return state.size, parts


def directory(state: CollectionState) -> Path | None:
    """The collection's directory (None in memory)."""
    return None if state.files.directory is None else state.files.directory.parent


def newest(state: CollectionState) -> int:
    """Rows of the newest complete checkpoint on disk (0: none)."""
    base = directory(state)
    if base is None or not base.is_dir():
        return 0
    rows = [int(p.name[len(PREFIX):]) for p in base.iterdir()
            if p.name.startswith(PREFIX) and p.name[len(PREFIX):].isdigit()
            and (p / "manifest.json").is_file()]
    return max(rows, default=0)


def write(state: CollectionState, rows: int, parts: dict[str, dict[str, object]]) -> bool:
    """Save a captured checkpoint of `rows` rows; returns False when one of that size exists.

    Raises:
        OSError: the files cannot be written (the temporary directory is removed).
    """
    base = directory(state)
    if base is None:
        return False
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # one per writer, also within a process
    final, tmp = base / f"{PREFIX}{rows}", base / f"{PREFIX}{rows}.{tag}.tmp"
    if final.exists():
        return False
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        manifest: dict[str, Any] = {"rows": rows, **_signature(state), "columns": {}}
        for key, found in parts.items():
            manifest["columns"][key] = {name: _save(tmp, f"{key}.{name}", value)
                                        for name, value in found.items()}
        _write_json(tmp / "manifest.json", manifest)
        fsync_dir(tmp)
        os.rename(tmp, final)
        fsync_dir(base)
    except (FileExistsError, OSError) as exc:
        if final.exists():  # another writer finished the same checkpoint first
            return False
        raise exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in base.iterdir():
        if old.name.startswith(PREFIX) and old != final and not old.name.endswith(".tmp"):
            shutil.rmtree(old, ignore_errors=True)
    return True


def _save(folder: Path, stem: str, value: object) -> dict[str, Any]:
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, list):  # a vocabulary: UTF-8 bytes and end offsets
        encoded = [s.encode() for s in value]
        _save_array(folder / f"{stem}.ends.npy", np.cumsum([len(e) for e in encoded],
                                                          dtype=np.int64))
        _save_array(folder / f"{stem}.bytes.npy", np.frombuffer(b"".join(encoded), np.uint8))
        return {"vocab": stem}
    _save_array(folder / f"{stem}.npy", np.asarray(value))
    return {"array": f"{stem}.npy"}


def _save_array(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as out:
        np.save(out, array)
        out.flush()
        os.fsync(out.fileno())


def _write_json(path: Path, value: object) -> None:
    with open(path, "w") as out:
        json.dump(value, out)
        out.flush()
        os.fsync(out.fileno())


def restore(state: CollectionState, committed_rows: int) -> int:
    """Load the newest usable checkpoint into the (empty) state's columns; returns its rows
    (0 when there is none: nothing is changed then)."""
    rows = newest(state)
    base = directory(state)
    if rows == 0 or rows > committed_rows or base is None or state.size:
        return 0
    folder = base / f"{PREFIX}{rows}"
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("rows") != rows or {k: manifest.get(k) for k in ("format", "fields")
                                            } != _signature(state):
            return 0
        loaded = {key: {name: _load(folder, spec) for name, spec in attrs.items()}
                  for key, attrs in manifest["columns"].items()}
    except (OSError, ValueError, KeyError):
        return 0
    owners = _owners(state)
    if set(loaded) != set(owners):
        return 0
    for key, attrs in loaded.items():
        _apply(owners[key], attrs)
    return rows


def _load(folder: Path, spec: dict[str, Any]) -> object:
    if "int" in spec:
        return int(spec["int"])
    if "vocab" in spec:
        ends = np.load(folder / f"{spec['vocab']}.ends.npy")
        blob = np.load(folder / f"{spec['vocab']}.bytes.npy")
        return split_vocab(blob.tobytes(), ends)
    return np.load(folder / spec["array"])


def split_vocab(blob: bytes, ends: np.ndarray) -> list[str]:
    """The strings of a saved vocabulary: UTF-8 `blob` cut at the byte offsets `ends`
    (int64[m], the end of each string).

    Decoding 230k strings one by one cost about 0.1 s on open at 1M rows; when the blob holds
    no NUL byte (the usual case) a NUL is inserted at every boundary and the whole blob is
    decoded and split once (UTF-8 never puts a NUL inside a multi-byte character)."""
    if len(ends) == 0:
        return []
    if b"\x00" not in blob:
        joined = np.insert(np.frombuffer(blob, np.uint8), np.asarray(ends[:-1], np.int64), 0)
        return joined.tobytes().decode().split("\x00")
    cuts = ends.tolist()
    return [blob[a:b].decode() for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]


def _fill(buffer: Buffer, values: np.ndarray) -> None:
    buffer._buf = np.zeros(max(16, len(values) + len(values) // 4), buffer._buf.dtype)  # noqa: SLF001
    buffer._buf[:len(values)] = values  # noqa: SLF001
    buffer.n = len(values)


def _apply(owner: object, attrs: dict[str, object]) -> None:
    if isinstance(owner, Buffer):
        _fill(owner, attrs[""])  # type: ignore[arg-type]
        return
    for name, value in attrs.items():
        current = getattr(owner, name)
        if isinstance(current, Buffer):
            _fill(current, value)  # type: ignore[arg-type]
        elif isinstance(current, StrPool):
            current.vocab = list(value)  # type: ignore[call-overload]
            current.index = {v: i for i, v in enumerate(current.vocab)}
        else:
            setattr(owner, name, value)
