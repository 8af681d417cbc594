"""The serving stack: nginx -> unix socket -> gunicorn with uvicorn workers, as one program
(``python -m`` this package). It never imports the app, which it gets as ``APP_MODULE``."""


class ServeError(Exception):
    """A problem the stack explains in one line and exits on (never a traceback)."""
