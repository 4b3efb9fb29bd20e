"""Entry point of the frozen app (PyInstaller): the same as the `deskhand` console script,
and the built-in engine's server when started as one (`--engine-server`)."""

import multiprocessing
import runpy
import sys

#: The first argument that makes this executable the built-in engine's model server
#: (app/core/engine/engine.py `server_command`): the bundle has no separate Python to run
#: `python -m llama_cpp.server` with.
ENGINE_SERVER = "--engine-server"


def _end_with_the_app() -> None:
    """The engine's server ends when the app that started it does: the app holds this
    process's stdin open, so end-of-file there means it is gone (even after a hard kill,
    where no signal reaches this child on macOS or Windows)."""
    import os
    import threading

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except (OSError, ValueError):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="end-with-the-app", daemon=True).start()


if __name__ == "__main__":
    # first: a knowledge indexing child (multiprocessing "spawn") starts as this executable
    multiprocessing.freeze_support()
    if len(sys.argv) > 1 and sys.argv[1] == ENGINE_SERVER:
        sys.argv = [sys.argv[0], *sys.argv[2:]]
        _end_with_the_app()
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
        sys.exit(0)
    from app.cli import main

    sys.exit(main())
