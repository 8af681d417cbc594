"""Jinja filters the template needs beyond cookiecutter's defaults.

cookiecutter puts the template directory on ``sys.path`` and loads the names listed in
``cookiecutter.json``'s ``_extensions``; nothing else imports this module.
"""

import json

from cookiecutter.utils import simple_filter


@simple_filter
def string_literal(value: object) -> str:
    """Render ``value`` as a double-quoted string valid in both TOML and Python source.

    JSON escapes exactly what TOML basic strings and Python literals need (quote, backslash,
    control characters). ``ensure_ascii=False`` keeps non-ASCII text as UTF-8, because
    TOML rejects the surrogate-pair escapes that JSON uses for characters beyond the BMP.
    The pre-generation hook has already refused control characters and line breaks.
    """
    return json.dumps(str(value), ensure_ascii=False)
