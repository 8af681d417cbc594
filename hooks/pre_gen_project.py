"""Reject answers that would render a broken project, before anything is written.

cookiecutter renders this file with Jinja first. The answers arrive here as one JSON
document (``tojson`` escapes quotes, so no answer can end the string or inject code) and are
checked as data. The first bad answer stops the bake with exit status 1 and one line on
stderr naming the answer and the reason; cookiecutter then deletes the partial output.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
import unicodedata

CONTEXT: dict[str, object] = json.loads(r"""{{ cookiecutter | tojson }}""")

# Kubernetes object names, DNS labels and image names all fit in 63 characters.
MAX_NAME_LENGTH = 63
# Longer import names push the generated code's imports past ruff's 100 columns (make lint).
MAX_PACKAGE_LENGTH = 40
MAX_TEXT_LENGTH = 200
# cookiecutter.json falls back to this slug when project_name has nothing to slugify: an
# empty slug would make the project directory the output directory itself, and cookiecutter
# would stop with "directory already exists" before this hook could explain.
EMPTY_SLUG = "-"
SLUG_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
PACKAGE_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
# Deliberately simple: one "@", no spaces, a dot in the domain. Real validation is sending mail.
EMAIL_PATTERN = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
# gunicorn's "module.path:attribute". ASCII identifiers only: the answer also lands in the
# Makefile and the README, where anything else would need quoting. No factory call "f()".
IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
APP_MODULE_PATTERN = re.compile(rf"{IDENTIFIER}(?:\.{IDENTIFIER})*:{IDENTIFIER}")

# Import names the generated project depends on (runtime and dev). A package with one of
# these names would shadow the real module for every import in the project.
DEPENDENCY_MODULES = frozenset(
    {
        "anyio",
        "annotated_types",
        "click",
        "coverage",
        "fastapi",
        "gunicorn",
        "h11",
        "httptools",
        "httpx",
        "httpx2",
        "httpcore",
        "idna",
        "mypy",
        "packaging",
        "pluggy",
        "pydantic",
        "pydantic_core",
        "pydantic_settings",
        "pytest",
        "ruff",
        "sniffio",
        "starlette",
        "typing_extensions",
        "uvicorn",
        "uvicorn_worker",
        "uvloop",
        "watchfiles",
        "websockets",
        "dotenv",
        "yaml",
        "sqlalchemy",
        "asyncpg",
        "alembic",
        "greenlet",
        "mako",
        "markupsafe",
    }
)


class AnswerError(ValueError):
    """An answer that cannot produce a working project."""


def check_text(name: str, value: str, *, max_length: int = MAX_TEXT_LENGTH) -> None:
    """One line of printable text: it lands in TOML, Python strings, README and LICENSE."""
    if not value.strip():
        raise AnswerError(f"{name} must not be empty")
    if len(value) > max_length:
        raise AnswerError(f"{name} is {len(value)} characters long; the limit is {max_length}")
    for char in value:
        if unicodedata.category(char) in {"Cc", "Cs", "Zl", "Zp"}:
            raise AnswerError(f"{name} must be one line of printable text; found {char!r}")


def check_slug(value: str, project_name: str) -> None:
    if value == EMPTY_SLUG:
        raise AnswerError(
            f"project_name {project_name!r} has no letters or digits to derive project_slug "
            "from; pass project_slug=... as well"
        )
    if len(value) > MAX_NAME_LENGTH:
        raise AnswerError(
            f"project_slug {value!r} is {len(value)} characters; the limit is {MAX_NAME_LENGTH}"
        )
    if not SLUG_PATTERN.fullmatch(value):
        raise AnswerError(
            f"project_slug {value!r} must start with a letter and hold only lowercase letters, "
            "digits and single hyphens (derived from project_name; pass project_slug=... to set it)"
        )


def check_package(value: str) -> None:
    if len(value) > MAX_PACKAGE_LENGTH:
        raise AnswerError(
            f"package_name {value!r} is {len(value)} characters; the limit is {MAX_PACKAGE_LENGTH}"
        )
    if not PACKAGE_PATTERN.fullmatch(value) or not value.isidentifier():
        raise AnswerError(
            f"package_name {value!r} must be a lowercase Python identifier "
            "(a letter, then lowercase letters, digits or underscores)"
        )
    if keyword.iskeyword(value) or keyword.issoftkeyword(value):
        raise AnswerError(f"package_name {value!r} is a Python keyword")
    if value in sys.stdlib_module_names:
        raise AnswerError(f"package_name {value!r} would shadow the standard library module")
    if value in DEPENDENCY_MODULES:
        raise AnswerError(f"package_name {value!r} would shadow the dependency of the same name")


def check_email(value: str) -> None:
    if not EMAIL_PATTERN.fullmatch(value):
        raise AnswerError(f"author_email {value!r} is not an email address (name@domain.tld)")


def check_app_module(value: str, layout: str, package: str) -> None:
    check_text("app_module", value)
    if not APP_MODULE_PATTERN.fullmatch(value):
        raise AnswerError(
            f"app_module {value!r} must be module.path:attribute (Python identifiers joined "
            "by dots, a colon, then the app's name), for example app.main:app"
        )
    names = value.replace(":", ".").split(".")
    if reserved := [name for name in names if keyword.iskeyword(name)]:
        raise AnswerError(f"app_module {value!r} contains the Python keyword {reserved[0]!r}")
    if layout == "service" and value != f"{package}.main:app":
        raise AnswerError(
            f"app_module {value!r} is for layout=serving-only; layout=service serves the app "
            f"it generates, {package}.main:app"
        )


DATABASES = ("none", "postgresql")


def check_database(value: str, layout: str) -> None:
    # cookiecutter refuses a choice outside the list from the command line already; a replay
    # file or a caller's extra_context passed as data can still carry anything.
    if value not in DATABASES:
        raise AnswerError(f"database {value!r} is not one of {', '.join(DATABASES)}")
    if value != "none" and layout == "serving-only":
        raise AnswerError(
            f"database={value} needs layout=service: serving-only renders no app to store "
            "items for (add the database to your own app)"
        )


AUTHS = ("none", "oidc")
# Import names auth=oidc adds (PyJWT, its crypto backend, the JWKS fetcher).
AUTH_DEPENDENCY_MODULES = frozenset({"jwt", "cryptography", "cffi", "pycparser", "httpx"})


def check_auth(value: str, layout: str, package: str) -> None:
    if value not in AUTHS:
        raise AnswerError(f"auth {value!r} is not one of {', '.join(AUTHS)}")
    if value == "none":
        return
    if layout == "serving-only":
        raise AnswerError(
            f"auth={value} needs layout=service: serving-only renders no app to protect "
            "(verify tokens in your own app)"
        )
    if package in AUTH_DEPENDENCY_MODULES:
        raise AnswerError(f"package_name {package!r} would shadow auth={value}'s dependency")


JOBS = ("none", "procrastinate")
# Import names jobs=procrastinate adds (the library, its psycopg 3 driver and pool, its cron
# parser and what they bring, the example job's HTTP client).
JOBS_DEPENDENCY_MODULES = frozenset(
    {"procrastinate", "psycopg", "psycopg_pool", "croniter", "dateutil", "asgiref", "attr"}
    | {"attrs", "pytz", "httpx"}
)


def check_jobs(value: str, database: str, package: str) -> None:
    if value not in JOBS:
        raise AnswerError(f"jobs {value!r} is not one of {', '.join(JOBS)}")
    if value == "none":
        return
    if database != "postgresql":
        raise AnswerError(
            f"jobs={value} needs database=postgresql: the jobs are queued in the service's "
            "PostgreSQL, in the transaction of the rows that cause them"
        )
    if package in JOBS_DEPENDENCY_MODULES:
        raise AnswerError(f"package_name {package!r} would shadow jobs={value}'s dependency")


def validate(context: dict[str, object]) -> None:
    """Raise AnswerError for the first answer that would break the generated project."""
    answers = {key: str(value) for key, value in context.items() if isinstance(value, str)}
    for name in ("project_name", "description", "author_name"):
        check_text(name, answers[name])
    check_slug(answers["project_slug"], answers["project_name"])
    check_package(answers["package_name"])
    check_email(answers["author_email"])
    check_app_module(answers["app_module"], answers["layout"], answers["package_name"])
    check_database(answers["database"], answers["layout"])
    check_auth(answers.get("auth", "none"), answers["layout"], answers["package_name"])
    check_jobs(answers.get("jobs", "none"), answers["database"], answers["package_name"])


def main() -> int:
    try:
        validate(CONTEXT)
    except AnswerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
