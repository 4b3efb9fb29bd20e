"""The seccomp filter a no-network sandbox runs under (bubblewrap's `--seccomp FD`).

A network namespace (`--unshare-net`) hides the network and abstract Unix sockets, but not
Unix sockets that live in the file system: the system D-Bus, database, CUPS, nscd… sockets
stay reachable through the read-only root. Hiding them by name would be a list of dangers
that always misses one. Instead `socket()` is allowed only for the families a sandbox without
network needs, and refused (EAFNOSUPPORT) for every other:

- AF_INET / AF_INET6: inside the private network namespace they reach only its own loopback,
  so programs inside can still talk to each other (a test's local server).
- AF_NETLINK with NETLINK_ROUTE only: `getifaddrs` and resolvers ask it about the (private)
  interfaces.

AF_UNIX is refused, so no pathname socket can be connected to (or bound); `socketpair()` is a
separate system call and keeps working (pipes between processes, Python's
`multiprocessing.Pipe`). io_uring, which can create and connect sockets without the `socket`
system call, is refused (ENOSYS: programs fall back to ordinary calls). A system call of
another ABI (i386, x32, arm32) ends the process: its numbers mean other calls.

The program is classic BPF, built here with `struct` (no library needed); x86_64 and
aarch64 only (`program()` returns None elsewhere, and then there is no filter).
"""

from __future__ import annotations

import errno
import os
import platform
import struct
import tempfile
import threading
from pathlib import Path

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARGS = 0, 4, 16
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000

AF_INET, AF_INET6, AF_NETLINK = 2, 10, 16
NETLINK_ROUTE = 0
_X32_BIT = 0x40000000

#: machine → (audit arch, socket's number, io_uring's three numbers, has an x32 ABI)
_ARCHES = {
    "x86_64": (0xC000003E, 41, (425, 426, 427), True),
    "aarch64": (0xC00000B7, 198, (425, 426, 427), False),
}
_ARCHES["amd64"] = _ARCHES["x86_64"]
_ARCHES["arm64"] = _ARCHES["aarch64"]


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine (or `machine`), or None for an architecture not known."""
    arch = _ARCHES.get((machine or platform.machine()).lower())
    if arch is None:
        return None
    audit, nr_socket, uring, x32 = arch
    deny_family = _ERRNO | errno.EAFNOSUPPORT
    out = [
        _ins(_LD_W_ABS, _ARCH),
        _ins(_JEQ, audit, 1, 0),
        _ins(_RET, _KILL_PROCESS),
        _ins(_LD_W_ABS, _NR),
    ]
    if x32:
        out += [_ins(_JGE, _X32_BIT, 0, 1), _ins(_RET, _KILL_PROCESS)]
    for number in uring:
        out += [_ins(_JEQ, number, 0, 1), _ins(_RET, _ERRNO | errno.ENOSYS)]
    out += [
        _ins(_JEQ, nr_socket, 1, 0),
        _ins(_RET, _ALLOW),
        # socket(domain, type, protocol): the low 32 bits of args[0] and args[2]
        _ins(_LD_W_ABS, _ARGS + _low_word(0)),
        _ins(_JEQ, AF_INET, 3, 0),
        _ins(_JEQ, AF_INET6, 2, 0),
        _ins(_JEQ, AF_NETLINK, 2, 0),
        _ins(_RET, deny_family),
        _ins(_RET, _ALLOW),
        _ins(_LD_W_ABS, _ARGS + 16 + _low_word(0)),
        _ins(_JEQ, NETLINK_ROUTE, 0, 1),
        _ins(_RET, _ALLOW),
        _ins(_RET, deny_family),
    ]
    return b"".join(out)


def _low_word(offset: int) -> int:
    import sys

    return offset if sys.byteorder == "little" else offset + 4


_lock = threading.Lock()
_file: Path | None = None


def filter_file() -> Path | None:
    """A private file holding this machine's filter (written once per process, again if a
    temp cleaner removed it), or None where there is no filter for this architecture."""
    global _file
    code = program()
    if code is None:
        return None
    with _lock:
        if _file is None or not _file.is_file():
            folder = Path(tempfile.mkdtemp(prefix="deskhand-seccomp-"))
            path = folder / "no-network.bpf"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(code)
            _file = path
        return _file


#: bubblewrap reads the filter from this descriptor, opened by `launcher_argv`'s shell.
FD = 3


def launcher_argv(path: Path, argv: list[str]) -> list[str]:
    """`argv` (a bwrap command line with `--seccomp FD`) started with the filter file open
    on FD: `sh` opens it and becomes bwrap (same process, so killing it kills bwrap)."""
    return ["/bin/sh", "-c", f'exec "$@" {FD}<"$0"', str(path), *argv]
