"""``python -m serving_stack [serve|render|check]``: the command line (startup.py)."""

import sys

from .startup import main

sys.exit(main(sys.argv))
