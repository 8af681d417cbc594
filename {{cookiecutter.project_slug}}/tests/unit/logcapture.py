"""Capture log records as the JSON lines the service writes, request id included."""

import json
import logging
from typing import Any

from {{ cookiecutter.package_name }}.logs import JsonFormatter


class JsonLines(logging.Handler):
    """Formats each record with the JSON formatter as it is emitted, inside the request."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))

    def from_logger(self, name: str) -> list[dict[str, Any]]:
        """The lines one logger wrote."""
        return [line for line in self.lines if line["logger"] == name]
