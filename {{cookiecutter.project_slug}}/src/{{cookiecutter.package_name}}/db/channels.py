"""Channels every worker of every pod shares, on PostgreSQL's LISTEN/NOTIFY: a worker's hub
holds one connection of its own (outside the pool) that LISTENs on one fixed PostgreSQL
channel and publishes on it; each notification goes to the worker's subscribers of the app
channel its payload names (docs/streaming.md, State across workers and pods)."""

import asyncio
import contextlib
import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no types
from sqlalchemy.ext.asyncio import AsyncEngine

from {{ cookiecutter.package_name }}.settings import Settings

from .engine import APPLICATION_NAME

logger = logging.getLogger(__name__)

# One PostgreSQL channel for all: an app channel's name travels in the JSON payload, so no
# client input ever becomes an identifier in LISTEN or NOTIFY.
PG_CHANNEL = "app_channels"
# PostgreSQL refuses a NOTIFY payload of 8000 bytes or more (its default build).
PAYLOAD_BYTES = 7999
# Messages a subscriber may be behind; one further behind is closed, never queued without end.
QUEUE_MESSAGES = 256
# Seconds between pings of a quiet listener (a dead peer sends no close), and the longest wait
# between two reconnection attempts.
PING_SECONDS = 10.0
MOST_BACKOFF_SECONDS = 8.0
# Close codes (RFC 6455): a subscriber too far behind; its messages may have been missed.
TOO_SLOW = (1008, f"too slow: {QUEUE_MESSAGES} messages behind")
LOST = (1012, "the channels' database connection was lost: reconnect")


class MessageTooBigError(ValueError):
    """A message whose payload would reach PostgreSQL's NOTIFY limit."""


class ChannelsUnavailableError(RuntimeError):
    """The hub has no database connection now (none yet, or one lost)."""


# What a lost or unreachable database raises through asyncpg.
CONNECTION_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


@dataclass(eq=False)
class Subscriber:
    """One session's share of a channel: its queue, and why it must end (if it must)."""

    channel: str
    queue: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(QUEUE_MESSAGES))
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    close: tuple[int, str] = LOST

    def end(self, close: tuple[int, str]) -> None:
        if not self.ended.is_set():
            self.close = close
            self.ended.set()


class ChannelHub:
    """A worker's subscribers by channel, and its LISTEN connection, opened at the first."""

    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        # The pool's own connect arguments (host, port, user, database...): the same server.
        _, self.connect_args = engine.dialect.create_connect_args(engine.url)
        self.connect_args["timeout"] = settings.database_connect_timeout_seconds
        statement_ms = str(round(settings.database_statement_timeout_seconds * 1e3))
        server = {"application_name": APPLICATION_NAME, "statement_timeout": statement_ms}
        self.connect_args["server_settings"] = server
        self.subscribers: defaultdict[str, set[Subscriber]] = defaultdict(set)
        self.connection: Any = None  # asyncpg's Connection (asyncpg ships no types)
        self.connected = asyncio.Event()
        self.listener: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()  # one query at a time on the connection

    async def subscribe(self, channel: str) -> Subscriber:
        """A subscriber, once the listener listens; ChannelsUnavailableError if it cannot
        connect soon."""
        if self.listener is None:
            self.listener = asyncio.create_task(self.listen())
        try:
            await asyncio.wait_for(self.connected.wait(), float(self.connect_args["timeout"]))
        except TimeoutError:
            raise ChannelsUnavailableError from None
        subscriber = Subscriber(channel)
        self.subscribers[channel].add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        subscribers = self.subscribers[subscriber.channel]
        subscribers.discard(subscriber)
        if not subscribers:
            del self.subscribers[subscriber.channel]

    async def publish(self, channel: str, message: str) -> None:
        """NOTIFY every worker's subscribers of ``channel``; MessageTooBigError past
        PAYLOAD_BYTES."""
        payload = json.dumps({"channel": channel, "message": message}, ensure_ascii=False)
        if len(payload.encode()) > PAYLOAD_BYTES:
            raise MessageTooBigError
        try:
            async with self.lock:
                await self.connection.execute("SELECT pg_notify($1, $2)", PG_CHANNEL, payload)
        except CONNECTION_ERRORS as error:
            raise ChannelsUnavailableError from error

    def deliver(self, _connection: object, _pid: int, _channel: str, payload: str) -> None:
        """asyncpg's callback: the message to each local subscriber of its channel."""
        notified = json.loads(payload)
        for subscriber in self.subscribers.get(notified["channel"], ()):
            try:
                subscriber.queue.put_nowait(notified["message"])
            except asyncio.QueueFull:
                subscriber.end(TOO_SLOW)

    async def listen(self) -> None:
        """Connect and LISTEN, ping while quiet; lost: end every subscriber, reconnect."""
        backoff = 0.5
        while True:
            try:
                await self.listen_once()
                error = "closed"
            except CONNECTION_ERRORS as lost:
                error = type(lost).__name__
            if self.connected.is_set():  # it had listened: try again soon
                backoff = 0.5
            self.connected.clear()
            extra = {"error": error, "retry_seconds": backoff}
            logger.warning("channel listener lost its database connection", extra=extra)
            # What is published meanwhile never reaches this worker: its subscribers reconnect.
            for subscribers in self.subscribers.values():
                for subscriber in subscribers:
                    subscriber.end(LOST)
            await asyncio.sleep(backoff)
            backoff = min(MOST_BACKOFF_SECONDS, backoff * 2)

    async def listen_once(self) -> None:
        """One connection's life: LISTEN, then a ping each quiet PING_SECONDS until it ends."""
        terminated = asyncio.Event()
        self.connection = await asyncpg.connect(**self.connect_args)
        try:
            self.connection.add_termination_listener(lambda _: terminated.set())
            await self.connection.add_listener(PG_CHANNEL, self.deliver)
            self.connected.set()
            while True:
                try:
                    await asyncio.wait_for(terminated.wait(), PING_SECONDS)
                except TimeoutError:
                    async with self.lock:
                        ping = self.connection.fetchval("SELECT 1")
                        await asyncio.wait_for(ping, PING_SECONDS)
                else:
                    return
        finally:
            self.connection.terminate()

    async def aclose(self) -> None:
        """At shutdown: the listener stopped, its connection closed."""
        if self.listener is not None:
            self.listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.listener
