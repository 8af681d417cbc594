"""``python -m {{ cookiecutter.package_name }}_stack [serve|render|check]``: the runner's command line."""

import sys

from .runner import main

sys.exit(main(sys.argv))
