"""A development OpenID issuer for `make run` (`make issuer`, docs/auth.md, Local development):
the tests' in-process issuer (token_issuer.py) served on this machine's loopback, its discovery
document and JWKS over plain HTTP, and GET /token?scope=... answering a signed token as text.

A development tool, never a provider: it authenticates nobody, so it refuses to listen
anywhere but loopback, and its keys die with the process (each start makes new ones)."""

import argparse
import socket
import sys
from typing import NoReturn
from urllib.parse import parse_qs, urlencode

import uvicorn
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.settings import Settings, is_loopback

from token_issuer import AUDIENCE, Issuer

# An hour: a development session's, where the tests' five minutes would expire mid-work.
LIFETIME_SECONDS = 3600


class OneLineParser(argparse.ArgumentParser):
    """Refuses a bad flag in one line (argparse's own prints its usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def port_number(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port from 1 to 65535")
    return int(text)


def loopback_host(text: str) -> str:
    if not is_loopback(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not this machine's loopback: a development issuer signs a token for"
            " anyone who asks, so it listens on 127.0.0.1, ::1 or localhost only"
        )
    return text


class DevelopmentIssuer:
    """``issuer``'s documents, plus GET /token?scope=a+b: a token for those scopes, as text."""

    def __init__(self, issuer: Issuer, scope: str) -> None:
        self.issuer, self.scope = issuer, scope

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] != "/token":
            await self.issuer(scope, receive, send)
            return
        query = parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        token = self.token(query.get("scope", [self.scope])[0])
        headers = [(b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": token.encode()})

    def token(self, scope: str) -> str:
        return self.issuer.token(scope, lifetime=LIFETIME_SECONDS, sub="developer")


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog="dev_issuer", description="a development OpenID issuer")
    parser.add_argument("--host", type=loopback_host, default="127.0.0.1")
    parser.add_argument("--port", type=port_number, default=8900)
    parser.add_argument("--scope", default="items:write", help="the printed token's scopes")
    options = parser.parse_args(argv)
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((options.host, options.port))
    except OSError as refused:
        sys.exit(f"dev_issuer: error: cannot listen on {options.host}:{options.port}: {refused}")
    host = f"[{options.host}]" if family == socket.AF_INET6 else options.host
    base = f"http://{host}:{options.port}"
    issuer = DevelopmentIssuer(Issuer(url=f"{base}/realms/service"), options.scope)
    another = f"curl -s '{base}/token?{urlencode({'scope': options.scope}, safe=':')}'"
    print(  # noqa: T201 - the command's output: what make run's shell exports
        f"# a development issuer (tests/dev_issuer.py) on {base} until Ctrl-C; for make run:\n"
        f"export {Settings.env_var('auth_issuer')}={issuer.issuer.url}\n"
        f"export {Settings.env_var('auth_audience')}={AUDIENCE}\n"
        f"# a token ({options.scope}, {LIFETIME_SECONDS // 60} min; another: {another}):\n"
        f"export TOKEN={issuer.token(options.scope)}",
        flush=True,
    )
    config = uvicorn.Config(issuer, lifespan="off", log_level="warning")
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
