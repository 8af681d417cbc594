"""The package never uses Starlette's base-class HTTP middleware (CONTRIBUTING.md): ruff bans
its import, this the decorator form too. Needs only the installed package's sources."""

import re
from pathlib import Path

import {{ cookiecutter.package_name }}

# Both spellings build the same slow, contextvar-breaking wrapper; the name is split so this
# file does not trip a scan of the tests themselves.
FORBIDDEN = re.compile(r"Base" + r"HTTPMiddleware|\.middleware\(\s*['\"]http['\"]\s*\)")


def test_the_package_uses_pure_asgi_middleware_only() -> None:
    """No module of the installed package imports or builds the base-class middleware."""
    sources = list(Path({{ cookiecutter.package_name }}.__file__).parent.rglob("*.py"))
    assert sources, "the scan must see the sources"
    assert FORBIDDEN.search("@app.middleware( 'http' )")
    assert [path for path in sources if FORBIDDEN.search(path.read_text("utf-8"))] == []
