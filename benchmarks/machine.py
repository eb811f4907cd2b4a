"""Where and with what the benchmarks ran: date, CPU, cores, RAM, load, Python, library versions."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("recallql", "tantivy", "numpy", "onnxruntime", "tokenizers", "lark", "pydantic",
            "lancedb", "pyarrow", "bm25s", "PyStemmer")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float:
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        if package == "recallql":
            import recallql

            return getattr(recallql, "__version__", "(source tree)") + f" ({_commit()})"
        return "not installed"


def _commit() -> str:
    """The repository's commit (``git describe``), or ``"?"``."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                             text=True, cwd=Path(__file__).parent, check=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return "commit " + out.stdout.strip()


def describe() -> str:
    """A Markdown block: date (UTC), machine, load average, Python and library versions."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    versions = ", ".join(f"{p} {_version(p)}" for p in PACKAGES)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        f"- date: {now}",
        f"- machine: {_cpu_model()}, {os.cpu_count()} cores, {_ram_gib():.1f} GiB RAM, "
        f"{platform.system()} {platform.release()}",
        f"- load average at start (1, 5, 15 min): {load} (the machine is shared: timings are "
        "noisy; every comparison is measured in the same run)",
        f"- Python {platform.python_version()} ({platform.python_implementation()})",
        f"- libraries: {versions}",
    ])
