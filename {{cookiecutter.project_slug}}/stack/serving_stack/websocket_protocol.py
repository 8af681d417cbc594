"""uvicorn's WebSocket protocol with the bounds it leaves open: one session must not grow its
worker without end. uvicorn answers each ping with a write whether or not the client reads, and
keeps every fragment of a message however small; the worker uses this class instead
(gunicorn_config.py), with WEBSOCKET_MAX_FRAGMENTS and WEBSOCKET_MESSAGE_RATE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.utils import get_client_addr
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

if TYPE_CHECKING:
    from uvicorn._types import ASGIReceiveEvent, ASGISendEvent
    from websockets.frames import Frame

# RFC 6455 close codes: a message over a limit, a session breaking the server's policy.
TOO_BIG = 1009
POLICY = 1008


@dataclass(frozen=True)
class SessionBounds:
    max_fragments: int  # frames one message may arrive in
    messages_per_second: int  # messages and pings, a second's worth at once; 0: no limit


class BoundedWebSocketProtocol(WebSocketsSansIOProtocol):
    """A session that reads only while its writes drain, and is closed past its bounds."""

    def __init__(self, *args: Any, bounds: SessionBounds, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bounds = bounds
        self.fragments = 0
        self.allowance = float(bounds.messages_per_second)  # a token bucket, full at first
        self.counted_at = self.loop.time()

    # Backpressure for what uvicorn writes unasked (pongs): past the transport's high-water
    # mark, the client's next frames wait in the kernel, not in this process.
    def pause_writing(self) -> None:
        super().pause_writing()
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if not self.read_paused:  # else the app has a message to take first (uvicorn's pause)
            self.transport.resume_reading()

    async def receive(self) -> ASGIReceiveEvent:
        message = await super().receive()
        if not self.writable.is_set():  # uvicorn resumed reading: writes are still backed up
            self.transport.pause_reading()
        return message

    async def send(self, message: ASGISendEvent) -> None:
        await super().send(message)
        # A handshake refused with an HTTP answer (a 401, a 400) is complete once its body is:
        # uvicorn's sansio protocol never says so, and logged an ERROR for every refusal
        # ("returned without completing handshake"; its wsproto protocol does say so).
        if message["type"] == "websocket.http.response.body" and not message.get("more_body"):
            self.handshake_complete = True

    def handle_text(self, event: Frame) -> None:
        self.fragments = 1
        if self.within_rate():
            super().handle_text(event)

    def handle_bytes(self, event: Frame) -> None:
        self.fragments = 1
        if self.within_rate():
            super().handle_bytes(event)

    def handle_cont(self, event: Frame) -> None:
        self.fragments += 1
        if self.fragments <= self.bounds.max_fragments:
            super().handle_cont(event)
        elif not self.close_sent:
            self.refuse(TOO_BIG, "message in too many fragments: WEBSOCKET_MAX_FRAGMENTS")

    def handle_ping(self) -> None:
        if self.within_rate():
            super().handle_ping()

    def handle_pong(self, event: Frame) -> None:
        if self.within_rate():
            super().handle_pong(event)

    def within_rate(self) -> bool:
        """Whether one more message fits the rate; a session past it is closed (once)."""
        if self.close_sent:
            return False
        rate = self.bounds.messages_per_second
        if not rate:
            return True
        now = self.loop.time()
        self.allowance = min(rate, self.allowance + (now - self.counted_at) * rate)
        self.counted_at = now
        if self.allowance >= 1:
            self.allowance -= 1
            return True
        self.refuse(POLICY, "messages over WEBSOCKET_MESSAGE_RATE")
        return False

    def refuse(self, code: int, reason: str) -> None:
        """Close with code and reason, as uvicorn closes a session its parser refused."""
        self.conn.fail(code, reason)
        self.handle_parser_exception()

    def handle_parser_exception(self) -> None:
        """uvicorn's close of a session past a bound (a message too big, a protocol error) or
        one of ours, plus one warning line: the client nginx named, the handshake's request id,
        the code."""
        if not self.close_sent and (closing := self.conn.close_sent) is not None:
            headers = dict(self.scope["headers"])
            said = {
                "client": get_client_addr(self.scope),
                "request_id": headers.get(b"x-request-id", b"-").decode(),
                "close_code": closing.code,
            }
            self.logger.warning("WebSocket session closed: %s", closing.reason, extra=said)
        super().handle_parser_exception()
        # The app's next send raises ClientDisconnected (its WebSocketDisconnect), not
        # uvicorn's RuntimeError for a send after the close: a refusal logs one line.
        self.disconnected = True
