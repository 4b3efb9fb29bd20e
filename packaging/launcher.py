"""Entry point of the frozen app (PyInstaller): the same as the `deskhand` console script."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
