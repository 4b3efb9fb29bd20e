"""Entry point of the frozen app (PyInstaller): the same as the `deskhand` console script."""

import multiprocessing
import sys

from app.cli import main

if __name__ == "__main__":
    # first: a knowledge indexing child (multiprocessing "spawn") starts as this executable
    multiprocessing.freeze_support()
    sys.exit(main())
