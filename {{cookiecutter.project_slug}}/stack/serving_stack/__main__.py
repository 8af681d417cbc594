"""``python -m serving_stack [serve|render|check]``: the runner's command line."""

import sys

from .runner import main

sys.exit(main(sys.argv))
