"""`python -m seglog.cli ...` runs the `seglog` command."""

import sys

from .main import main

sys.exit(main())
