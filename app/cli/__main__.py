"""`python -m app.cli`: what autostart and the tests launch."""

import sys

from app.cli import main

sys.exit(main())
