"""The least each job of the shipped middleware can cost, in instructions per request.

    scripts/experiments --floors

Each row is the bake's bare app plus ONE pure-ASGI layer doing one job of the default stack
and nothing else, written as cheaply as we know how; the last row does every job of the
request id, deadline and error guard in a single layer. Counted by the lab's cost gate
(lab/cost.py: valgrind's cachegrind, GET /livez in process, forked children) in one run,
beside the shipped stacks, so the table answers: how far can pure-ASGI middleware on this Python go
below what the template ships, and what does keeping one module per middleware cost?

`create_app` is the factory lab/drive.py builds in the measured process; it finds the
bake's own factory in $LAB_FACTORY (lab/cost.py passes it on). Depends on the template's lab
and Starlette; valgrind on PATH.
"""

from __future__ import annotations

import importlib
import os
from asyncio import current_task
from time import monotonic
from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware

from lab.project import FACTORY_VARIABLE

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from fastapi import FastAPI
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from lab.project import Project

# The bake's app factory (`<package>.main:create_app`), and its package's request id.
FACTORY = os.environ[FACTORY_VARIABLE]
REQUEST_ID = importlib.import_module(FACTORY.split(".", 1)[0] + ".context").REQUEST_ID
_HEADER = b"x-request-id"


class PassThrough:
    """A layer and nothing else: the price of a coroutine frame between two others."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan passes through, as in every shipped layer
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, send)


class ContextVariable(PassThrough):
    """Sets and resets the request id's context variable (what log lines read)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = REQUEST_ID.set("0123456789abcdef0123456789abcdef")
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST_ID.reset(token)


class HeaderScan(PassThrough):
    """Finds X-Request-ID among the headers nginx sends and checks its shape."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == _HEADER:
                value.isalnum()
                break
        await self.app(scope, receive, send)


class SendWrapper(PassThrough):
    """Wraps send in a closure that notes the status: the least "has it started?" costs."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = None

        def watched(message: Message) -> Awaitable[None]:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            return send(message)

        await self.app(scope, receive, watched)


class SendWrapperAddingHeader(PassThrough):
    """The same, also adding the request id to the response's headers."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = ((_HEADER, b"0123456789abcdef0123456789abcdef"),)

        def watched(message: Message) -> Awaitable[None]:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *extra]
            return send(message)

        await self.app(scope, receive, watched)


class DeadlineRegistration(PassThrough):
    """Registers the request's task and deadline for a sweeper, and removes it after."""

    inflight: dict[Any, float] = {}  # noqa: RUF012 (one table, as the shipped sweeper has)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        task = current_task()
        inflight = self.inflight
        inflight[task] = monotonic() + 30.0
        try:
            await self.app(scope, receive, send)
        finally:
            del inflight[task]


class AllInOne(PassThrough):
    """Every job of request id, deadline and error guard in one layer, each at its floor."""

    inflight: dict[Any, float] = {}  # noqa: RUF012 (as above)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        value = b""
        for name, incoming in scope["headers"]:
            if name == _HEADER:
                value = incoming
                break
        if not value.isalnum():
            value = b"0123456789abcdef0123456789abcdef"
        extra = ((_HEADER, value),)
        status = None

        def watched(message: Message) -> Awaitable[None]:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), *extra]
            return send(message)

        token = REQUEST_ID.set(value.decode("latin-1"))
        task = current_task()
        inflight = self.inflight
        inflight[task] = monotonic() + 30.0
        # The error guard's except clause costs nothing until something is raised (zero-cost
        # exceptions since Python 3.11), so try/finally stands for it.
        try:
            await self.app(scope, receive, watched)
        finally:
            del inflight[task]
            REQUEST_ID.reset(token)


# Each layer and what its row says it does, in the table's order.
LAYERS = (
    (PassThrough, "one pure-ASGI layer doing nothing"),
    (ContextVariable, "a layer setting and resetting a context variable"),
    (HeaderScan, "a layer finding one header among nginx's six"),
    (SendWrapper, "a layer wrapping send to note the status"),
    (SendWrapperAddingHeader, "a layer wrapping send to add one header"),
    (DeadlineRegistration, "a layer registering its task with a deadline"),
    (AllInOne, "ONE layer doing all of request id, deadline and error guard"),
)


def _stack(middleware: list[Middleware]) -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory wrapping an app in a whole list, outermost first, as Starlette
    would: so a shipped stack is one more entry of the list measured one entry at a time."""

    def wrap(app: ASGIApp) -> ASGIApp:
        for cls, args, kwargs in reversed(middleware):
            app = cls(app, *args, **kwargs)
        return app

    return wrap


def create_app() -> FastAPI:
    """The bake's app with the floor layers, then its own stacks, as its middleware list.

    lab/drive.py measures each entry alone on the bare app (``only:N``): each floor layer,
    the shipped request id, deadline and error guard, and the whole shipped stack.
    """
    module, _, function = FACTORY.partition(":")
    application: FastAPI = getattr(importlib.import_module(module), function)()
    shipped = list(application.user_middleware)
    without_metrics = [m for m in shipped if getattr(m.cls, "__name__", "") != "MetricsMiddleware"]
    application.user_middleware[:] = [
        *(Middleware(layer) for layer, _ in LAYERS),
        Middleware(_stack(without_metrics)),
        Middleware(_stack(shipped)),
    ]
    return application


# What the two shipped entries after LAYERS are, in the table.
SHIPPED = (
    "shipped: request id, deadline and error guard (metrics off)",
    "shipped: the default stack, metrics included",
)


def floors(project: Project) -> str:
    """Markdown: each floor layer and the shipped stacks, against the same bare app, counted
    in one run of the bake's gate."""
    from lab.cost import measure

    floor = measure(project, factory=f"{__name__}:create_app")
    bare = floor.per_request["bare"]
    rows = [
        "| GET /livez, in process | instructions per request | vs bare |",
        "|---|---:|---:|",
        f"| bare app | {bare:,.0f} | 1.000 x |",
    ]
    labels = [f"+ {what}" for _, what in LAYERS] + list(SHIPPED)
    for index, label in enumerate(labels):
        extra = floor.per_request[f"only:{index}"] - bare
        rows.append(f"| {label} | +{extra:,.0f} | {1 + extra / bare:.3f} x |")
    return "\n".join(rows)
