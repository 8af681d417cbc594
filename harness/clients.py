"""HTTP clients: raw HTTP/1.1 exchanges on fresh connections, byte for byte (hostile and
malformed requests need the bytes as written, and nginx's early refusals are read whole),
a readiness probe over TCP or a unix socket, and urllib's requests.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

Response = tuple[int, dict[str, str], bytes]  # status (0: no answer), headers, body


def exchange(port: int, payload: bytes | Sequence[bytes], timeout: float = 10.0) -> bytes:
    """Send raw bytes (pieces in order) to 127.0.0.1:port; read until it closes or goes quiet."""
    pieces = [payload] if isinstance(payload, bytes) else payload
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        # No shutdown(SHUT_WR) after sending: nginx takes a half-closed client for one that
        # gave up (499). Requests say "Connection: close", so nginx closes when done.
        try:
            for piece in pieces:
                conn.sendall(piece)
        except OSError:
            pass  # nginx may answer and close before reading everything: read what it said
        with contextlib.suppress(OSError):
            while not _complete(received) and (chunk := conn.recv(65536)):
                received += chunk
    return received


def _complete(raw: bytes) -> bool:
    """Whether raw holds a whole response (nginx may linger before closing after an error)."""
    head, found, body = raw.partition(b"\r\n\r\n")
    if not found:
        return False
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return length is not None and len(body) >= int(length.group(1))


def parse_response(raw: bytes) -> Response:
    """Status, headers (lower-case names) and body of one HTTP/1.1 response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        return 0, {}, raw
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers, body


def get(
    port: int, path: str, headers: dict[str, str] | None = None, timeout: float = 10.0
) -> Response:
    """One GET on a fresh connection; status 0 when nothing came back."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    wire = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n"
    try:
        return parse_response(exchange(port, wire.encode("latin-1"), timeout))
    except OSError:
        return 0, {}, b""


def request(  # noqa: PLR0913 - the parts of a request, all but the first three by keyword
    port: int,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> Response:
    """One request with a body on a fresh connection."""
    fields = {"Host": "localhost", "Connection": "close", "Content-Length": str(len(body))}
    fields.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return parse_response(exchange(port, (head + "\r\n").encode("latin-1") + body, timeout))


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(self.path))


def status(address: Path | tuple[str, int], path: str) -> int | None:
    """The status of GET path at a unix socket or a TCP address; None when nothing answered."""
    if isinstance(address, Path):
        connection: http.client.HTTPConnection = _UnixHTTPConnection(address)
    else:
        connection = http.client.HTTPConnection(*address, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
    except (OSError, http.client.HTTPException):
        return None
    else:
        return response.status
    finally:
        connection.close()


def fetch(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None, timeout: float = 30
) -> Response:
    """One request with urllib (a POST with data); an HTTP error status is returned, not raised."""
    request = urllib.request.Request(url, data=data, headers=headers or {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
