"""Append-only column files: fixed-width values in raw little-endian files, memory-mapped.

The building block of an O(1) open: a collection's per-row columns (ids, codes, positions,
created_at, ...) live in files that only ever grow, so a reader maps the first `length` values
(``np.memmap``: nothing is read until used) instead of loading every row from SQLite.

Durability is the caller's contract, not this module's: SQLite stays the source of truth. A
writer appends a batch's values without fsync (`append`) and, every so often, makes the files
durable (`sync`) and only then records in SQLite how many rows are synced. After a crash or a
power loss, values past that count are not trusted: the caller truncates the files to it and
re-appends those rows from SQLite. Values below it never change.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike


class ColumnFile:
    """One append-only column of fixed-width values.

    Args:
        path: the file (created on the first append), or ``None`` to keep the values in memory.
        dtype: the value type (stored little-endian).
    """

    def __init__(self, path: Path | None, dtype: DTypeLike):
        self.path = path
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self._memory = np.zeros(0, self.dtype)
        self._handle = None

    def __len__(self) -> int:
        """Values in the file now (committed or not)."""
        if self.path is None:
            return len(self._memory)
        try:
            return self.path.stat().st_size // self.dtype.itemsize
        except FileNotFoundError:
            return 0

    def view(self, length: int) -> np.ndarray:
        """Read-only array of the first `length` values (memory-mapped from the file).

        Raises:
            ValueError: the file holds fewer than `length` values.
        """
        have = len(self)
        if length > have:
            where = self.path or "memory"
            raise ValueError(f"column file {where} holds {have} values, {length} expected")
        if self.path is None:
            out = self._memory[:length]
        elif length == 0:
            out = np.zeros(0, self.dtype)
        else:
            out = np.memmap(self.path, dtype=self.dtype, mode="r", shape=(length,))
        out.flags.writeable = False
        return out

    def append(self, start: int, values: np.ndarray) -> int:
        """Write `values` from value offset `start`, dropping whatever followed it (what an
        unfinished batch left); returns the new length. Not durable until `sync`.

        Raises:
            ValueError: `start` is past the end of the file.
        """
        values = np.ascontiguousarray(values, self.dtype)
        if start > len(self):
            raise ValueError(f"cannot append at {start}: the column holds {len(self)} values")
        if self.path is None:
            self._memory = np.concatenate([self._memory[:start], values])
            return len(self._memory)
        handle = self._writer()
        handle.truncate(start * self.dtype.itemsize)
        handle.seek(start * self.dtype.itemsize)
        handle.write(values.data)
        handle.flush()
        return start + len(values)

    def truncate(self, length: int) -> None:
        """Drop values from `length` on (recovery); a shorter file is left alone."""
        if self.path is None:
            self._memory = self._memory[:length]
        elif len(self) > length:
            self._writer().truncate(length * self.dtype.itemsize)

    def sync(self) -> None:
        """Make every appended value durable (fsync)."""
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the writer's file handle (views stay valid)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _writer(self):
        if self._handle is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                self.path.touch()
            self._handle = open(self.path, "r+b")  # noqa: SIM115 - kept open across batches
        return self._handle


class StrFile:
    """Append-only strings: UTF-8 bytes in one `ColumnFile` and int64 end offsets in another.

    Args:
        path: the base path (``<path>.bytes`` and ``<path>.ends``), or ``None`` in memory.
    """

    def __init__(self, path: Path | None):
        self.bytes = ColumnFile(None if path is None else path.with_suffix(".bytes"), np.uint8)
        self.ends = ColumnFile(None if path is None else path.with_suffix(".ends"), np.int64)

    def append(self, start: int, values: list[str]) -> int:
        """Write `values` as strings ``start …`` (dropping any after); returns the new count."""
        ends = self.ends.view(start)
        offset = int(ends[-1]) if start else 0
        encoded = [v.encode() for v in values]
        lengths = np.fromiter((len(e) for e in encoded), np.int64, len(encoded))
        self.bytes.append(offset, np.frombuffer(b"".join(encoded), np.uint8))
        return self.ends.append(start, np.cumsum(lengths) + offset)

    def view(self, count: int) -> StrView:
        """The first `count` strings."""
        ends = self.ends.view(count)
        return StrView(self.bytes.view(int(ends[-1]) if count else 0), ends)

    def truncate(self, count: int) -> None:
        ends = self.ends.view(min(count, len(self.ends)))
        self.bytes.truncate(int(ends[-1]) if len(ends) else 0)
        self.ends.truncate(count)

    def sync(self) -> None:
        self.bytes.sync()
        self.ends.sync()

    def close(self) -> None:
        self.bytes.close()
        self.ends.close()


class StrView:
    """Read-only strings over a bytes buffer and end offsets (decoded on access)."""

    def __init__(self, data: np.ndarray, ends: np.ndarray):
        self._data, self._ends = data, ends

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> str:
        if not -len(self) <= i < len(self):
            raise IndexError(f"string {i} out of range")
        i %= len(self)
        start = int(self._ends[i - 1]) if i else 0
        return self._data[start:int(self._ends[i])].tobytes().decode()

    def take(self, rows: np.ndarray) -> list[str]:
        """The strings at `rows` (int64[m])."""
        rows = np.asarray(rows, np.int64)
        stop = self._ends[rows]
        start = np.where(rows > 0, self._ends[np.maximum(rows - 1, 0)], 0)
        data = self._data
        return [data[a:b].tobytes().decode() for a, b in zip(start.tolist(), stop.tolist(),
                                                              strict=True)]

    def values(self) -> list[str]:
        """Every string (decodes all: O(n))."""
        ends = self._ends.tolist()
        if not ends:
            return []
        blob = self._data.tobytes()
        return [blob[a:b].decode() for a, b in zip([0, *ends[:-1]], ends, strict=True)]
