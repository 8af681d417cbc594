"""The package never uses Starlette's base-class HTTP middleware (CONTRIBUTING.md)."""

import re
from pathlib import Path

import {{ cookiecutter.package_name }}

# Both spellings build the same slow, contextvar-breaking wrapper; the name is split so this
# file does not trip a scan of the tests themselves.
FORBIDDEN = re.compile(r"Base" + r"HTTPMiddleware|\.middleware\(\s*['\"]http['\"]\s*\)")


def offenders(root: Path) -> list[str]:
    """Every ``file:line`` under ``root`` that uses the forbidden middleware."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(root)}:{number}")
    return found


def test_the_package_uses_pure_asgi_middleware_only() -> None:
    """No module of the installed package imports or builds the base-class middleware."""
    package = Path({{ cookiecutter.package_name }}.__file__).parent
    assert list(package.rglob("*.py")), "the scan must see the sources"
    assert offenders(package) == []


def test_the_scan_finds_both_spellings(tmp_path: Path) -> None:
    """The scan itself works: it flags the import and the decorator."""
    (tmp_path / "bad.py").write_text(
        "from starlette.middleware.base import " + "Base" + "HTTPMiddleware\n"
        "@app.middleware('http')\n"
        '@app.middleware( "http" )\n',
        encoding="utf-8",
    )
    (tmp_path / "good.py").write_text("app.add_middleware(RequestIdMiddleware)\n", encoding="utf-8")
    assert offenders(tmp_path) == ["bad.py:1", "bad.py:2", "bad.py:3"]
