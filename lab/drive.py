"""Serve requests to the app in process, in forked children: what valgrind counts.

    python -m lab.drive VARIANT... [--counts 100,600] [--warmup 200] [--factory M:F]
                                     [--path /livez] [--manifest FILE]

Run by lab/cost.py under valgrind's cachegrind, in the measured project's Python. VARIANT is
``default`` (the app exactly as the factory builds it), ``bare`` (the same app with its
middleware list emptied), ``only:N`` (the bare app plus the factory's N-th middleware,
outermost first) or ``served`` (the default app inside the serving stack's ResponseGuard, as
gunicorn's workers run every app). The factory is the project's own (lab/project.py finds it:
``create_app`` beside the app gunicorn serves), so the stack measured is always the one the app
ships, middleware added later included.

Every variant is imported, built, started (lifespan) and warmed up first; then, for each
variant and each count, a forked child serves that many requests and exits. A child's
instruction count is the parent's up to the fork plus its own requests, so the difference
between two children of one variant is exactly the cost of the extra requests. A child's
event loop keeps a clock that moves REQUEST_SECONDS per request, so timers fire per request
served, not per second valgrind takes.

No server and no socket: the ASGI app is called directly, one task per request as uvicorn
does, with the headers nginx sends (serving_stack/nginx.conf). Depends on the project's package and
Starlette's types only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from starlette.types import Message, Receive, Scope, Send

    # What FastAPI and Starlette apps are: their __call__ is a coroutine function, which a
    # task can run (ASGIApp only promises an awaitable).
    App = Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]]

DEFAULT_PATH = "/livez"
# A measured child's clock moves this much per request, not with the wall. Timers fire by the
# loop's clock (the deadline middleware's sweeper wakes every 0.1 s while a request is in
# flight), so under valgrind's wall clock a loaded machine would count more wake-ups per
# request. Stepped, they fire as in a worker serving 1,000 requests a second, at any load.
REQUEST_SECONDS = 0.001

# What nginx sends, in its order: its proxy_set_header lines first (serving_stack/nginx.conf; the
# empty ones are not sent), then the client's headers. The request id included, so the
# request-id middleware takes its production path: keep a well-formed id.
_HEADERS = [
    (b"host", b"127.0.0.1:8080"),
    (b"x-forwarded-for", b"127.0.0.1"),
    (b"x-forwarded-proto", b"http"),
    (b"x-request-id", b"0123456789abcdef0123456789abcdef"),
    (b"user-agent", b"wrk"),
    (b"accept", b"*/*"),
]


def build(variant: str, factory: str) -> Any:
    """The factory's app, with its middleware list cut down as the variant says."""
    module_name, _, function = factory.partition(":")
    application = getattr(importlib.import_module(module_name), function)()
    # Starlette builds the middleware stack from `user_middleware` at the first request, so
    # editing the list before then changes what runs.
    stack = list(application.user_middleware)
    if variant == "bare":
        application.user_middleware[:] = []
    elif variant.startswith("only:"):
        application.user_middleware[:] = [stack[int(variant.removeprefix("only:"))]]
    elif variant == "served":
        # What the stack's worker adds around every app (gunicorn_config.py).
        from serving_stack.response_guard import ResponseGuard  # noqa: PLC0415 - only here needs it

        return ResponseGuard(application)
    elif variant != "default":
        raise ValueError(f"unknown variant {variant!r}: default, bare, served or only:N")
    return application


def _name(middleware: Any) -> str:
    """The middleware's class name, as main.py lists it."""
    return str(getattr(middleware.cls, "__name__", middleware.cls))


def scope(path: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": None,  # as over gunicorn's unix socket
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": _HEADERS,
        "state": {},
    }


async def _lifespan(app: App) -> tuple[asyncio.Queue[Message], asyncio.Task[None]]:
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    started = asyncio.Event()

    async def receive() -> Message:
        return await inbox.get()

    async def send(message: Message) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()
        elif message["type"].endswith(".failed"):
            raise RuntimeError(f"lifespan failed: {message.get('message')}")

    task = asyncio.create_task(app({"type": "lifespan", "state": {}}, receive, send))
    await inbox.put({"type": "lifespan.startup"})
    # Whichever comes first: an app whose lifespan raises (a middleware that does not pass
    # non-HTTP scopes through, say) ends the task without ever completing the start-up.
    waiting = asyncio.ensure_future(started.wait())
    await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
    if not started.is_set():
        waiting.cancel()
        error = task.exception() if task.done() and not task.cancelled() else None
        raise SystemExit(f"error: the app's lifespan start-up did not complete: {error!r}")
    return inbox, task


class SteppedClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock serve() steps by REQUEST_SECONDS per request."""

    def __init__(self) -> None:
        super().__init__()
        self.now = time.monotonic()

    def time(self) -> float:
        return self.now


async def serve(app: App, requests: int, path: str) -> int:
    """Make `requests` requests, one task each; return how many answered 200."""
    request = {"type": "http.request", "body": b"", "more_body": False}
    loop = asyncio.get_running_loop()
    stepped = loop if isinstance(loop, SteppedClockLoop) else None
    ok = 0

    async def receive() -> Message:
        return request

    for _ in range(requests):
        if stepped is not None:
            stepped.now += REQUEST_SECONDS
        status = 0

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await loop.create_task(app(scope(path), receive, send))
        ok += status == 200
    return ok


async def _start(apps: list[App], warmup: int, path: str) -> None:
    for app in apps:
        inbox, lifespan = await _lifespan(app)
        if await serve(app, warmup, path) != warmup:
            raise SystemExit(f"error: {path} did not answer 200 during the warm-up")
        # Shut down cleanly (asyncio.run would cancel it); the logging it set up stays.
        await inbox.put({"type": "lifespan.shutdown"})
        await lifespan


def _child(app: App, requests: int, path: str) -> None:
    """In a forked child: serve, then leave at once (valgrind writes this child's count)."""
    with asyncio.Runner(loop_factory=SteppedClockLoop) as runner:
        code = 0 if runner.run(serve(app, requests, path)) == requests else 1
    os._exit(code)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.drive", description=__doc__)
    parser.add_argument(
        "variants", nargs="+", help="default, bare, served, only:N, or each (every only:N)"
    )
    parser.add_argument("--counts", default="100,600", help="requests per child [100,600]")
    parser.add_argument("--warmup", type=int, default=200, help="requests before forking [200]")
    parser.add_argument("--factory", required=True, help="the app factory, module:function")
    parser.add_argument("--path", default=DEFAULT_PATH)
    parser.add_argument("--manifest", type=Path, help="write child pid -> variant, count here")
    args = parser.parse_args(argv)
    stack = [_name(m) for m in build("default", args.factory).user_middleware]
    variants = [
        name
        for variant in args.variants
        for name in ([f"only:{i}" for i in range(len(stack))] if variant == "each" else [variant])
    ]
    apps = [build(variant, args.factory) for variant in variants]
    # Every variant is built, started and warmed up BEFORE any fork, so each child inherits
    # the same process and differs only in what it serves; see lab/cost.py.
    asyncio.run(_start(apps, args.warmup, args.path))
    # gunicorn's workers fork from a warm master too; freezing keeps the collector from
    # walking the start-up objects, so a collection costs what it costs a serving worker.
    gc.collect()
    gc.freeze()
    manifest = []
    for variant, app in zip(variants, apps, strict=True):
        for count in (int(n) for n in args.counts.split(",")):
            pid = os.fork()
            if pid == 0:
                _child(app, count, args.path)
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                print(f"error: {variant}: not every request answered 200", file=sys.stderr)
                return 1
            manifest.append({"pid": pid, "variant": variant, "requests": count})
    if args.manifest:
        document = {"stack": stack, "children": manifest}
        args.manifest.write_text(json.dumps(document), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
