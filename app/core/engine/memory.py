"""Free memory and fitting a model's context into it.

A model that does not fit is refused before it is loaded (a machine swapping a model in and
out is unusable, and an out-of-memory kill tells the user nothing), with the numbers. The
context is the largest that fits: the model's trained context, capped, halved until the
model file + its KV cache + a fixed overhead fit into the memory that is free now.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

from app.core.engine.gguf import GgufInfo

DEFAULT_CONTEXT = 8192
MIN_CONTEXT = 2048
# The server process itself (Python, llama.cpp, its compute buffers): measured ~150 MB with
# a 135M model; the rest is room for the compute buffers of larger models.
OVERHEAD_BYTES = 400 * 1024 * 1024
# KV bytes per token when the header does not say (an 8B GQA model's f16 cache).
FALLBACK_KV_PER_TOKEN = 128 * 1024


@dataclass(frozen=True)
class Fit:
    """The context chosen for a model, or None when even the smallest does not fit."""

    n_ctx: int | None
    needed: int  # bytes at n_ctx, or at the smallest context tried when nothing fits
    available: int


def needed_bytes(info: GgufInfo, n_ctx: int) -> int:
    """Memory a model needs at a context size: weights + KV cache + the process."""
    per_token = info.kv_bytes_per_token() or FALLBACK_KV_PER_TOKEN
    return info.size + per_token * n_ctx + OVERHEAD_BYTES


def _contexts(trained: int | None, cap: int, floor: int) -> list[int]:
    """The contexts to try, largest first: trained (capped), halved, never below the floor."""
    start = min(trained or cap, cap)
    floor = min(floor, start)
    sizes = [start]
    while sizes[-1] > floor:
        sizes.append(max(sizes[-1] // 2, floor))
    return sizes


def fit_context(
    info: GgufInfo,
    *,
    available: int | None = None,
    cap: int = DEFAULT_CONTEXT,
    floor: int = MIN_CONTEXT,
) -> Fit:
    """The largest context that fits into `available` bytes (free memory now by default)."""
    free = available_memory() if available is None else available
    need = 0
    for n_ctx in _contexts(info.context_length, cap, floor):
        need = needed_bytes(info, n_ctx)
        if need <= free:
            return Fit(n_ctx, need, free)
    return Fit(None, need, free)


def gigabytes(n: int) -> str:
    """Bytes as the user reads them: "5.1 GB"."""
    return f"{n / 1e9:.1f} GB"


def available_memory() -> int:
    """Bytes of memory a new process can use now without swapping (0 when unknown)."""
    return machine_memory()[1]


def machine_memory() -> tuple[int, int]:
    """(total, available now) bytes of this computer's memory; 0 when unknown."""
    if sys.platform.startswith("linux"):
        found = _proc_meminfo()
        if found is not None:
            return found
    if sys.platform == "win32":
        return _windows_memory()
    total = _sysconf("SC_PHYS_PAGES")
    if sys.platform == "darwin":
        return total, _mac_available()
    return total, _sysconf("SC_AVPHYS_PAGES") or total


def _sysconf(name: str) -> int:
    try:
        pages = os.sysconf(name)
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0
    return max(pages, 0) * max(page_size, 0)


def _proc_meminfo() -> tuple[int, int] | None:
    """MemTotal and MemAvailable from /proc/meminfo (Linux)."""
    values: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if key in ("MemTotal", "MemAvailable") and parts and parts[0].isdigit():
                    values[key] = int(parts[0]) * 1024
    except OSError:
        return None
    if "MemTotal" not in values:
        return None
    return values["MemTotal"], values.get("MemAvailable", values["MemTotal"])


def _mac_available() -> int:
    """Free + inactive + speculative pages from vm_stat (what macOS gives back on demand)."""
    try:
        out = subprocess.run(
            ["vm_stat"], capture_output=True, text=True, timeout=5, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    size_match = re.search(r"page size of (\d+) bytes", out)
    page = int(size_match.group(1)) if size_match else 4096
    total = 0
    for label in ("Pages free", "Pages inactive", "Pages speculative"):
        match = re.search(rf"{label}:\s+(\d+)", out)
        if match:
            total += int(match.group(1)) * page
    return total


def _windows_memory() -> tuple[int, int]:
    """ullTotalPhys and ullAvailPhys from GlobalMemoryStatusEx."""
    import ctypes

    class MemoryStatusEx(ctypes.Structure):
        _fields_ = [
            ("dwLength", ctypes.c_ulong),
            ("dwMemoryLoad", ctypes.c_ulong),
            ("ullTotalPhys", ctypes.c_ulonglong),
            ("ullAvailPhys", ctypes.c_ulonglong),
            ("ullTotalPageFile", ctypes.c_ulonglong),
            ("ullAvailPageFile", ctypes.c_ulonglong),
            ("ullTotalVirtual", ctypes.c_ulonglong),
            ("ullAvailVirtual", ctypes.c_ulonglong),
            ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
        ]

    status = MemoryStatusEx()
    status.dwLength = ctypes.sizeof(MemoryStatusEx)
    windll = getattr(ctypes, "windll", None)
    if windll is None or not windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        return 0, 0
    return int(status.ullTotalPhys), int(status.ullAvailPhys)
