"""Run `python -m autotune ...`, the same as the `autotune` command.

For an environment whose scripts folder is not on PATH.
"""

import sys

from .cli import main

sys.exit(main())
