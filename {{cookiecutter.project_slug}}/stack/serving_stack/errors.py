"""The one exception the stack explains in one line and exits on."""


class ServeError(Exception):
    """A problem the stack explains in one line and exits on (never a traceback)."""
