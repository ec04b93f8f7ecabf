"""`python -m autotune.cli ...`: the same as `python -m autotune ...` and the `autotune` command."""

import sys

from . import main

sys.exit(main())
