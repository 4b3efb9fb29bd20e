"""Started as `python -I overlay_launch.py SPEC -- ARGV…` (standard library only: it runs
before anything of Deskhand is importable). Enters a new user and mount namespace, mounts an
overlay over each writable folder (changes go to a private upper folder, `tools.shell.overlay`),
then becomes ARGV (bubblewrap): same process, so stopping it stops the sandbox.

SPEC is JSON: [[lower, upper, work], …]. Exit code 125 and one line on stderr when the
overlay cannot be made: the command then does not run at all (never unprotected)."""

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
FAILED = 125


def _fail(what: str) -> None:
    sys.stderr.write(f"deskhand: cannot set up the sandbox's overlay: {what}\n")
    sys.exit(FAILED)


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        _fail("usage")
    layers = json.loads(sys.argv[1])
    argv = sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        _fail("new namespaces: " + os.strerror(ctypes.get_errno()))
    try:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    except OSError as exc:
        _fail(f"user namespace: {exc}")
    # opened in the new mount namespace (overlayfs clones them from it), before any mount
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        opened = [
            (lower, [os.open(p, flags) for p in (lower, upper, work)])
            for lower, upper, work in layers
        ]
    except OSError as exc:
        _fail(str(exc))
    for target, (low, up, work) in opened:
        options = (
            f"lowerdir=/proc/self/fd/{low},upperdir=/proc/self/fd/{up},"
            f"workdir=/proc/self/fd/{work},userxattr"
        )
        if libc.mount(b"overlay", os.fsencode(target), b"overlay", 0, options.encode()) != 0:
            _fail(f"{target}: " + os.strerror(ctypes.get_errno()))
        for fd in (low, up, work):
            os.close(fd)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        _fail(f"{argv[0]}: {exc}")


if __name__ == "__main__":
    main()
