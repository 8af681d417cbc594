"""``python -m serving_stack [serve|render|check]``: the command line (startup.py)."""

from .startup import console

raise SystemExit(console())
