"""``python -m aiayn.cli``."""

import sys

from aiayn.cli.command import main

sys.exit(main())
