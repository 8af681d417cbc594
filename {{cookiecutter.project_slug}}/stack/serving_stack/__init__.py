"""The serving stack: nginx -> unix socket -> gunicorn with uvicorn workers, as one program
(``python -m`` this package). It never imports the app, which it gets as ``APP_MODULE``.

What a project may import is ``__all__`` (README.md, Python API): every 0.4.x release keeps
these names; anything else in the package may change in any release."""


class ServeError(Exception):
    """A problem the stack explains in one line and exits on (never a traceback)."""


# After ServeError, which these modules import from here.
from .jsonlog import CONTRACT_KEYS, JsonFormatter, extra_fields  # noqa: E402
from .settings import (  # noqa: E402
    APP_CORS_NAME,
    APP_DEADLINE_NAME,
    DEADLINE_DEFAULT,
    DRAIN_MARGIN,
    PROXY_MARGIN,
    Deadline,
    LogLevel,
    Origins,
    misnamed,
    variable_names,
)

__all__ = [
    "APP_CORS_NAME",
    "APP_DEADLINE_NAME",
    "CONTRACT_KEYS",
    "DEADLINE_DEFAULT",
    "DRAIN_MARGIN",
    "PROXY_MARGIN",
    "Deadline",
    "JsonFormatter",
    "LogLevel",
    "Origins",
    "ServeError",
    "extra_fields",
    "misnamed",
    "variable_names",
]
