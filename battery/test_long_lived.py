"""Issue 49's attacks on long-lived connections, each against a stack in a pod-like cgroup
(512 MiB, 1 CPU: harness/cgroup.py), beside a victim: keep-alive `GET /` from other addresses,
counted alone, then under the attack, in one test. Each test holds the pod's promises: no worker
is killed (no OOM kill, the same worker pids), the victim keeps 0.8 x its answers, /livez and
/readyz answer 200 throughout, and the log grows by a bounded number of lines per attacking or
refused session. Every attack is bounded in sessions, bytes and seconds, on loopback only.
The app: the service's, plus /ws (echo) and /events (apps/streams_app.py)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from harness import cgroup
from harness.clients import parse_response
from harness.processes import Processes

from .conftest import Stacks, worker_pids
from .test_websockets import handshake, tree_pss

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from harness.stack import RunningStack

    from .conftest import Identity

STREAMS_APP = "streams_app:app"
KEY = base64.b64encode(os.urandom(16)).decode()
UPGRADE = [
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Version: 13",
    f"Sec-WebSocket-Key: {KEY}",
]
VICTIM_ADDRESSES = [f"127.0.0.{n}" for n in range(2, 6)]
PROBE_ADDRESS = "127.0.0.6"
ATTACK_ADDRESS = "127.0.0.10"
# 127.0.1.x onwards: the many addresses of the pod-wide attacks, one per real client.
MANY_ADDRESSES = [f"127.0.{1 + n // 250}.{1 + n % 250}" for n in range(64)]
ALONE_S = 3.0
ATTACKED_S = 4.0
VICTIM_SHARE = 0.8
MEMORY_GROWTH_KIB = 32 * 1024  # one worker; a session paused when its writes back up costs KiBs
# Lines a refused or closed session may write (nginx's access line, the app's warning...).
LINES_PER_SESSION = 4
MIB = 1024 * 1024


@pytest.fixture
def pod() -> Iterator[cgroup.Pod]:
    """A pod-like cgroup, removed (with whatever is left in it) after the test."""
    try:
        created = cgroup.create()
    except cgroup.CgroupError as error:
        pytest.skip(str(error))
    yield created
    created.remove()


@pytest.fixture
def pod_stacks(nginx_bin: str, identity: Identity, pod: cgroup.Pod) -> Iterator[Stacks]:
    """Stacks started inside the pod: the cgroup's prefix runs before dropping root."""
    started = Stacks(nginx_bin, dataclasses.replace(identity, drop=[*pod.prefix(), *identity.drop]))
    # An attacked stack may never stop gracefully: the pod is removed after it anyway.
    started.processes = Processes(grace=10)
    yield started
    started.stop_all()


# --- the victim, the probes and the measures ---------------------------------------------------


async def _victim_connection(port: int, address: str, deadline: float, answers: list[int]) -> None:
    """One keep-alive connection sending GET / back to back until the deadline."""
    wire = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
    loop = asyncio.get_running_loop()
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    while (left := deadline - loop.time()) > 0:
        try:
            if connection is None:
                opening = asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
                connection = await asyncio.wait_for(opening, left)
            reader, writer = connection
            writer.write(wire)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), left)
            status, headers, _ = parse_response(head)
            await reader.readexactly(int(headers.get("content-length", "0")))
            answers.append(status)
            if headers.get("connection", "").lower() == "close":
                writer.close()
                connection = None
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
            answers.append(0)
            if connection is not None:
                connection[1].close()
            connection = None
            await asyncio.sleep(0.01)
    if connection is not None:
        connection[1].close()


def victim(port: int, seconds: float) -> int:
    """The victim's 200 answers in seconds: keep-alive GET / from four addresses."""
    answers: list[int] = []

    async def run() -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        await asyncio.gather(
            *(_victim_connection(port, address, deadline, answers) for address in VICTIM_ADDRESSES)
        )

    asyncio.run(run())
    return answers.count(200)


def probe(port: int, path: str) -> int:
    """One probe's status from the probe address (0: no answer within 2 s)."""
    try:
        with socket.create_connection(("127.0.0.1", port), 2, (PROBE_ADDRESS, 0)) as client:
            client.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            head = client.recv(4096)
    except OSError:
        return 0
    return parse_response(head)[0] if head.startswith(b"HTTP/1.1 ") else 0


@dataclass
class Contest:
    """What one run measured: the victim alone and attacked, the probes, memory, the log."""

    alone: int = 0
    attacked: int = 0
    probes: list[int] = field(default_factory=list)
    memory_growth_kib: int = 0
    oom_kills: int = 0
    workers_before: set[int] = field(default_factory=set)
    workers_after: set[int] = field(default_factory=set)
    attack_lines: int = 0
    peak_pod_mib: int = 0
    closed: list[object] = field(default_factory=list)  # the worker's close codes, logged

    @property
    def ratio(self) -> float:
        return self.attacked / self.alone if self.alone else 0.0

    def figures(self) -> str:
        return (
            f"victim {self.alone} alone, {self.attacked} attacked ({self.ratio:.2f} x); "
            f"gunicorn PSS +{self.memory_growth_kib // 1024} MiB; OOM kills {self.oom_kills}; "
            f"workers {sorted(self.workers_before)} -> {sorted(self.workers_after)}; "
            f"probes not 200: {len([s for s in self.probes if s != 200])}/{len(self.probes)}; "
            f"attack log lines {self.attack_lines}; pod peak {self.peak_pod_mib} MiB; "
            f"sessions closed by the worker {self.closed}"
        )

    def assert_the_pod_held(self, sessions: int) -> None:
        """No worker killed, the victim's share kept, the probes up, the log bounded."""
        assert self.oom_kills == 0, self.figures()
        assert self.workers_after == self.workers_before, self.figures()
        assert self.ratio >= VICTIM_SHARE, self.figures()
        assert set(self.probes) == {200}, self.figures()
        assert self.attack_lines <= LINES_PER_SESSION * sessions + 20, self.figures()


def contest(
    stack: RunningStack,
    pod: cgroup.Pod,
    attack: Callable[[threading.Event, threading.Event], object],
) -> tuple[Contest, object]:
    """Measure the victim alone, then start attack(ready, stop) in a thread and measure the
    victim again once the attack is ready, then alone once more (its alone figure is the mean
    of both); probes and memory are sampled throughout. The attack returns what it saw (close
    codes, answers) after stop is set."""
    gunicorn = stack.child_pid("gunicorn")
    measured = Contest(workers_before=worker_pids(stack))
    pss_before = tree_pss(gunicorn)
    measured.alone = victim(stack.port, ALONE_S)
    lines_before = len(stack.log_lines())
    ready, stop, sampled = threading.Event(), threading.Event(), threading.Event()
    peak_pss = [pss_before]
    outcome: list[object] = []

    def sample() -> None:
        while not sampled.is_set():
            measured.probes += [probe(stack.port, "/livez"), probe(stack.port, "/readyz")]
            peak_pss.append(tree_pss(gunicorn))
            sampled.wait(0.25)

    def attack_then_keep() -> None:
        try:
            outcome.append(attack(ready, stop))
        finally:
            ready.set()

    samples = threading.Thread(target=sample, daemon=True)
    attacker = threading.Thread(target=attack_then_keep, daemon=True)
    samples.start()
    attacker.start()
    ready.wait(30)
    measured.attacked = victim(stack.port, ATTACKED_S)
    stop.set()
    attacker.join(30)
    sampled.set()
    samples.join(10)
    measured.memory_growth_kib = max(peak_pss) - pss_before
    measured.oom_kills = pod.oom_kills()
    measured.peak_pod_mib = pod.peak_bytes() // MIB
    measured.workers_after = worker_pids(stack)
    lines = stack.log_lines()[lines_before:]
    measured.attack_lines = len([line for line in lines if not _ordinary(line)])
    measured.closed = [line["close_code"] for line in lines if "close_code" in line]
    # Alone again, after: the mean of both is the machine's pace around the attack, not at
    # one moment of a shared machine's.
    measured.alone = (measured.alone + victim(stack.port, ALONE_S)) // 2
    print(measured.figures())
    return measured, outcome[0] if outcome else None


def _ordinary(line: dict[str, object]) -> bool:
    """A line of a request answered (the victim's, the probes', a stream or session that
    opened), which no refusal caused."""
    return line.get("status") in {200, 101}


# --- raw WebSocket frames --------------------------------------------------------------------


def frame(opcode: int, payload: bytes, *, fin: bool = True, rsv1: bool = False) -> bytes:
    """A client frame (RFC 6455 5.2), masked with a zero key: its payload goes as it is."""
    first = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", first, 0x80 | size)
    elif size < 65536:
        head = struct.pack("!BBH", first, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, size)
    return head + b"\0\0\0\0" + payload


def open_session(port: int, address: str, *extra: str) -> tuple[socket.socket, bytes]:
    """A handshake to /ws from address; the socket and the answer's head."""
    return handshake(port, "/ws", *UPGRADE, *extra, source=address)


def close_code(client: socket.socket, seconds: float = 5.0, limit: int = 256 * MIB) -> int | None:
    """Read the server's frames (what is buffered first) until its close frame: its code, or
    None when none arrives within seconds and limit bytes."""
    client.settimeout(1)
    buffered, read = b"", 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and read < limit:
        try:
            chunk = client.recv(1 << 20)
        except TimeoutError:
            continue
        except OSError:
            return None
        if not chunk:
            return None
        read += len(chunk)
        buffered += chunk
        while len(buffered) >= 2:
            opcode, size, start = buffered[0] & 0x0F, buffered[1] & 0x7F, 2
            if size == 126:
                size, start = struct.unpack("!H", buffered[2:4])[0], 4
            elif size == 127:
                size, start = struct.unpack("!Q", buffered[2:10])[0], 10
            if len(buffered) < start + size:
                break
            if opcode == 0x8:
                payload = buffered[start : start + size]
                return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
            buffered = buffered[start + size :]
    return None


def flood(client: socket.socket, block: bytes, stop: threading.Event, seconds: float) -> int:
    """Write block again and again, never reading, for seconds or until stop or the end of the
    connection; the bytes written."""
    client.settimeout(0.5)
    view = memoryview(block)
    written = 0
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            # A partial write goes on where it stopped: a frame cut short would be a protocol
            # error (1002), not the attack.
            written += client.send(view[written % len(block) :])
        except TimeoutError:  # the server stopped reading: it holds the writer back
            continue
        except OSError:
            break
    return written


def flooded_session(
    port: int,
    block: bytes,
    stop: threading.Event,
    seconds: float,
    *,
    prelude: bytes = b"",
    ready: threading.Event | None = None,
) -> int | None:
    """A session from ATTACK_ADDRESS with a 4 KiB receive buffer that sends prelude, sets
    ready, then sends block again and again, never reading (flood); the server's close code."""
    client, head = open_session(port, ATTACK_ADDRESS)
    assert head.startswith(b"HTTP/1.1 101 "), head
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.sendall(prelude)
    if ready is not None:
        ready.set()
    flood(client, block, stop, seconds)
    code = close_code(client)
    client.close()
    return code


# --- 1. a session's memory ---------------------------------------------------------------------


def test_a_ping_flood_that_never_reads_is_bounded_and_closed(
    pod_stacks: Stacks, pod: cgroup.Pod
) -> None:
    """One session writing pings fast and never reading costs its worker a bounded memory and is
    closed with 1008 (policy: the message rate), killing nothing and slowing no one."""
    stack = pod_stacks.start(STREAMS_APP)
    pings = frame(0x9, b"p" * 125) * 2000

    def attack(ready: threading.Event, stop: threading.Event) -> int | None:
        return flooded_session(stack.port, pings, stop, 15, ready=ready)

    measured, code = contest(stack, pod, attack)

    assert measured.memory_growth_kib < MEMORY_GROWTH_KIB, measured.figures()
    measured.assert_the_pod_held(sessions=1)
    # The close frame reaches a client that stops flooding in time; one still writing gets a
    # reset instead (the worker closed with its frames unread): the worker's line says which.
    assert measured.closed == [1008], measured.figures()
    assert code in {1008, None}, f"close code {code}; {measured.figures()}"


def test_big_messages_whose_echo_is_never_read_are_closed_with_1009(
    pod_stacks: Stacks, pod: cgroup.Pod
) -> None:
    """Six sessions each sending a 16 MiB message to the echo and never reading are closed with
    1009 (message too big) at the default bound, the pod's memory bounded and nothing killed."""
    stack = pod_stacks.start(STREAMS_APP)
    message = frame(0x1, b"a" * 16 * MIB)

    def attack(ready: threading.Event, stop: threading.Event) -> list[int | None]:
        codes: list[int | None] = [None] * 6

        def one(number: int) -> None:
            codes[number] = flooded_session(stack.port, message, stop, 10)

        sessions = [threading.Thread(target=one, args=(n,), daemon=True) for n in range(6)]
        for session in sessions:
            session.start()
        time.sleep(1)
        ready.set()
        for session in sessions:
            session.join(30)
        return codes

    measured, codes = contest(stack, pod, attack)

    assert measured.memory_growth_kib < MEMORY_GROWTH_KIB, measured.figures()
    measured.assert_the_pod_held(sessions=6)
    assert measured.closed == [1009] * 6, measured.figures()
    assert set(codes) <= {1009, None}, f"close codes {codes}; {measured.figures()}"  # as above


def test_a_message_of_endless_fragments_is_closed(pod_stacks: Stacks, pod: cgroup.Pod) -> None:
    """2-byte continuation frames that never finish a message are closed (1009: too many
    fragments, or 1008: the frame rate) long before thousands, the worker's memory bounded."""
    stack = pod_stacks.start(STREAMS_APP)
    fragments = frame(0x0, b"ab", fin=False) * 10000

    def attack(ready: threading.Event, stop: threading.Event) -> int | None:
        first = frame(0x1, b"ab", fin=False)
        return flooded_session(stack.port, fragments, stop, 15, prelude=first, ready=ready)

    measured, code = contest(stack, pod, attack)

    assert measured.memory_growth_kib < MEMORY_GROWTH_KIB, measured.figures()
    measured.assert_the_pod_held(sessions=1)
    assert len(measured.closed) == 1, measured.figures()
    assert set(measured.closed) <= {1008, 1009}, measured.figures()
    assert code in {*measured.closed, None}, f"close code {code}; {measured.figures()}"


# --- 2. compression ----------------------------------------------------------------------------


def deflated(payload: bytes) -> bytes:
    """A permessage-deflate message body (RFC 7692 7.2.1: the empty block's tail removed)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return (compressor.compress(payload) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]


# As in the pod figure (victim 0.02 x): four sessions, each inflating 16 MiB a message.
BOMBERS = 4


def test_compression_is_off_by_default_and_its_bomb_slows_no_one(
    pod_stacks: Stacks, pod: cgroup.Pod
) -> None:
    """A handshake offering permessage-deflate is answered without it, and four sessions sending
    what would inflate to 16 MiB a message (sent plainly where it is refused) leave the victim
    0.8 x its answers."""
    stack = pod_stacks.start(STREAMS_APP)
    offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"
    negotiated: list[bool] = []
    bomb = frame(0x1, deflated(b"a" * 16 * MIB), rsv1=True)
    plain = frame(0x1, b"a" * 16384)

    def attack(ready: threading.Event, stop: threading.Event) -> None:
        def one() -> None:
            client, head = open_session(stack.port, ATTACK_ADDRESS, offer)
            compressed = b"sec-websocket-extensions:" in head.lower()
            negotiated.append(compressed)
            client.settimeout(0.05)
            deadline = time.monotonic() + 15
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    client.sendall(bomb if compressed else plain)
                    while client.recv(1 << 20):  # the echoes, so no write ever backs up
                        pass
                except TimeoutError:
                    continue
                except OSError:
                    break
            client.close()

        sessions = [threading.Thread(target=one, daemon=True) for _ in range(BOMBERS)]
        for session in sessions:
            session.start()
        time.sleep(1)
        ready.set()
        for session in sessions:
            session.join(30)

    measured, _ = contest(stack, pod, attack)

    assert negotiated == [False] * BOMBERS, f"negotiated {negotiated}; {measured.figures()}"
    measured.assert_the_pod_held(sessions=BOMBERS)


# --- 3. sessions per pod -----------------------------------------------------------------------

SESSIONS_PER_ADDRESS = 32  # under WEBSOCKETS_PER_CLIENT, as real clients are
SESSIONS_PER_POD = 256


async def _answer(port: int, address: str, request: bytes) -> tuple[bytes, object]:
    """Send request from address; the answer's head (a refusal's body too) and its writer."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0)), 10
    )
    try:
        writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        if head.startswith((b"HTTP/1.1 101 ", b"HTTP/1.1 200 ")):
            return head, writer
        _, headers, _ = parse_response(head)
        body = await asyncio.wait_for(reader.read(int(headers.get("content-length", "4096"))), 10)
    except BaseException:
        writer.close()
        raise
    writer.close()
    return head + body, None


async def hold_many(
    port: int,
    request: bytes,
    addresses: list[str],
    per_address: int,
    stop: threading.Event,
    ready: threading.Event,
) -> tuple[list[bytes], bytes]:
    """Send request per_address times from each address, hold every connection answered 101
    or 200, then once more from another address; set ready, hold them until stop. Each
    answer's head (a refusal's body too), and the one past them."""
    gate = asyncio.Semaphore(64)
    held: list[asyncio.StreamWriter] = []

    async def one(address: str) -> bytes:
        async with gate:
            try:
                answer, writer = await _answer(port, address, request)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
                return f"no answer: {type(error).__name__}".encode()
        if isinstance(writer, asyncio.StreamWriter):
            held.append(writer)
        return answer

    answers = await asyncio.gather(
        *(one(address) for address in addresses for _ in range(per_address))
    )
    past_cap = await one(ATTACK_ADDRESS)
    ready.set()
    while not stop.is_set():
        await asyncio.sleep(0.1)
    for writer in held:
        writer.close()
    return list(answers), past_cap


def refusals(answers: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The answers that are nginx's JSON 503, and every other refusal."""
    json_503 = [
        answer
        for answer in answers
        if answer.startswith(b"HTTP/1.1 503 ") and b'"request_id"' in answer
    ]
    other = [
        answer
        for answer in answers
        if not answer.startswith((b"HTTP/1.1 101 ", b"HTTP/1.1 200 ")) and answer not in json_503
    ]
    return json_503, other


def test_sessions_past_the_pod_cap_get_the_json_503_and_requests_still_answer(
    pod_stacks: Stacks, pod: cgroup.Pod
) -> None:
    """64 addresses x 32 idle sessions (2,048, each address under its own cap): the handshakes
    past WEBSOCKETS_PER_POD get nginx's JSON 503, never uvicorn's plain one, while the probes
    and the victim keep answering."""
    stack = pod_stacks.start(STREAMS_APP, WEBSOCKETS_PER_POD=str(SESSIONS_PER_POD))
    lines = "".join(f"{line}\r\n" for line in ["Host: localhost", *UPGRADE])
    handshake = f"GET /ws HTTP/1.1\r\n{lines}\r\n".encode()

    def attack(ready: threading.Event, stop: threading.Event) -> tuple[list[bytes], bytes]:
        held = hold_many(stack.port, handshake, MANY_ADDRESSES, SESSIONS_PER_ADDRESS, stop, ready)
        return asyncio.run(held)

    measured, outcome = contest(stack, pod, attack)

    assert isinstance(outcome, tuple)
    answers, past_cap = outcome
    opened = [answer for answer in answers if answer.startswith(b"HTTP/1.1 101 ")]
    json_503, other = refusals([*answers, past_cap])
    summary = f"{len(opened)} opened, {len(json_503)} JSON 503, {len(other)} other: {other[:1]}"
    print(summary)
    assert len(opened) <= SESSIONS_PER_POD, f"{summary}; {measured.figures()}"
    assert other == [], f"{summary}; {measured.figures()}"
    measured.assert_the_pod_held(sessions=len(json_503))


# --- 4. event streams --------------------------------------------------------------------------

STREAMS_PER_ADDRESS = 32


def test_event_streams_past_their_pod_cap_leave_the_request_cap_to_requests(
    pod_stacks: Stacks, pod: cgroup.Pod
) -> None:
    """16 addresses x 32 event streams of one event a second (512, the default STREAMS_PER_POD)
    leave ordinary requests answering at 0.8 x; the stream past the cap gets the JSON 503."""
    stack = pod_stacks.start(STREAMS_APP)
    subscribe = b"GET /events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"
    addresses = MANY_ADDRESSES[:16]

    def attack(ready: threading.Event, stop: threading.Event) -> tuple[list[bytes], bytes]:
        held = hold_many(stack.port, subscribe, addresses, STREAMS_PER_ADDRESS, stop, ready)
        return asyncio.run(held)

    measured, outcome = contest(stack, pod, attack)

    assert isinstance(outcome, tuple)
    answers, past_cap = outcome
    streaming = [answer for answer in answers if answer.startswith(b"HTTP/1.1 200 ")]
    summary = f"{len(streaming)} of {len(answers)} streaming; past the cap: {past_cap[:200]!r}"
    print(summary)
    assert len(streaming) == len(answers), f"{summary}; {measured.figures()}"
    assert past_cap.startswith(b"HTTP/1.1 503 "), f"{summary}; {measured.figures()}"
    assert b'"request_id"' in past_cap, f"{summary}; {measured.figures()}"
    measured.assert_the_pod_held(sessions=1)
