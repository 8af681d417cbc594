"""Jinja filters the template needs beyond cookiecutter's defaults.

cookiecutter puts the template directory on ``sys.path`` and loads the names listed in
``cookiecutter.json``'s ``_extensions``; nothing else imports this module.
"""

import json
import re
import unicodedata

from cookiecutter.utils import simple_filter


def _literal(value: object) -> str:
    """Render ``value`` as a double-quoted string valid in both TOML and Python source.

    JSON escapes exactly what TOML basic strings and Python literals need (quote, backslash,
    control characters). ``ensure_ascii=False`` keeps non-ASCII text as UTF-8, because
    TOML rejects the surrogate-pair escapes that JSON uses for characters beyond the BMP.
    The pre-generation hook has already refused control characters and line breaks.
    """
    return json.dumps(str(value), ensure_ascii=False)


@simple_filter
def string_literal(value: object) -> str:
    """The filter ``string_literal`` (simple_filter names a filter after its function)."""
    return _literal(value)


# ruff's line length in a bake (pyproject.toml), and how wide it counts a character: East Asian
# wide and full-width characters take two columns, as in a terminal.
LINE_LENGTH = 100


def _python_literal(text: str) -> str:
    """``text`` quoted as ruff writes a string: in double quotes unless it holds more of them
    than single quotes (the hook has refused control characters and line breaks)."""
    quote = "'" if text.count('"') > text.count("'") else '"'
    return quote + text.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def _parts(text: str, room: int) -> list[str]:
    """``text`` cut at spaces (inside a word only when one word is wider than ``room``) into
    string literals each at most ``room`` columns wide."""
    parts, current = [], ""
    for token in re.findall(r"\S+\s*|\s+", text):
        # A word wider than a part on its own is cut between its characters.
        pieces = list(token) if _columns(_python_literal(token)) > room else [token]
        for piece in pieces:
            if current and _columns(_python_literal(current + piece)) > room:
                parts.append(_python_literal(current))
                current = ""
            current += piece
    return [*parts, _python_literal(current)]


@simple_filter
def python_string(value: object, indent: int = 0, before: str = "", after: str = "") -> str:
    """``value`` as a Python string literal laid out as ``ruff format`` lays it out on a line
    of ``indent`` spaces, ``before`` the literal and ``after`` it: on the line when it fits,
    else in parentheses, alone or as implicitly concatenated parts, one a line. An answer
    of any allowed length (200 characters) then passes ruff's line length and formatter."""
    literal = _python_literal(str(value))
    if indent + _columns(before + literal + after) <= LINE_LENGTH:
        return literal
    inner = " " * (indent + 4)
    parts = _parts(str(value), LINE_LENGTH - len(inner))  # one, when it fits alone
    return "(\n" + "".join(f"{inner}{part}\n" for part in parts) + " " * indent + ")"
