"""The serving stack: nginx -> unix socket -> gunicorn with uvicorn workers, as one program
(``python -m`` this package). It never imports the app, which it gets as ``APP_MODULE``.

What a project may import is re-exported here (README.md, Python API): every 0.4.x release
keeps these names; anything else in the package may change in any release."""


class ServeError(Exception):
    """A problem the stack explains in one line and exits on (never a traceback)."""


# After ServeError, which the modules import from here; `X as X` marks a re-export.
from .jsonlog import CONTRACT_KEYS as CONTRACT_KEYS
from .jsonlog import JsonFormatter as JsonFormatter
from .jsonlog import extra_fields as extra_fields
from .settings import APP_CORS_NAME as APP_CORS_NAME
from .settings import APP_DEADLINE_NAME as APP_DEADLINE_NAME
from .settings import DEADLINE_DEFAULT as DEADLINE_DEFAULT
from .settings import DRAIN_MARGIN as DRAIN_MARGIN
from .settings import PROXY_MARGIN as PROXY_MARGIN
from .settings import Deadline as Deadline
from .settings import LogLevel as LogLevel
from .settings import Origins as Origins
from .settings import misnamed as misnamed
from .settings import variable_names as variable_names
