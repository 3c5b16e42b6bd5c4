"""`python -m toolbridge.cli`: the same as the `toolbridge` command."""

import sys

from . import main

sys.exit(main())
