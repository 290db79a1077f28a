"""``python -m replaykit`` runs the command line."""

import sys

from replaykit.cli import main

sys.exit(main())
