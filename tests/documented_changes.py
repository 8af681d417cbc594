"""Change a bake the way its docs say, then let its own steps run on the changed bake.

    python tests/documented_changes.py PROJECT_DIR database|jobs|streams

database (the postgresql full suite, with the project's interpreter, before that bake's
`make lint` and `make test`): adding an endpoint or a migration as documented must break no
test the user did not write. The README's way to add an endpoint: "a router module in api/
(copy items.py), included in create_app() in main.py"; docs/database.md's way to change the
schema: change db/models.py, then `alembic revision --autogenerate` against a migrated
database. Needs PostgreSQL's server binaries: the bake's own tests/pg_server.py starts a
throwaway server, as its tests do.

jobs (the jobs full suite): the database's changes, then docs/jobs.md's way to add a job: a
task in jobs/tasks.py, queued with defer() from a route of its own; the migration's
autogenerate then runs beside the job queue's tables, which it must leave alone.

streams (the image full suites, before their images are built): a WebSocket echo route, a
server-sent-event stream and an upload read as a stream in a router module of their own,
included the same way, as the README's "a WebSocket route or a streaming response" row says
and FastAPI's docs write them; the upload's larger body limit declared beside it and given its
nginx location, docs/settings.md's way. The default bake's `make lint` and `make test` then
run; tests/test_image.py talks to the routes through the container's nginx, and the rollout
rehearsal (lab/rollout.py) keeps all three busy while it replaces the containers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROUTE = '''"""Notes: how many there are (added after generation, the README's way)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import func, select

from {package}.db.models import NoteRow

from .items_db import UNAVAILABLE, Session

router = APIRouter(prefix="/notes", tags=["notes"], responses=UNAVAILABLE)


class NoteCount(BaseModel):
    """How many notes are stored."""

    count: int


@router.get("/count")
async def count_notes(db: Session) -> NoteCount:
    """Count the notes."""
    total = await db.scalar(select(func.count()).select_from(NoteRow))
    return NoteCount(count=total or 0)
'''
MODEL = '''

class NoteRow(Base):
    """A note (added after generation: its migration is `alembic revision --autogenerate`)."""

    __tablename__ = "notes"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    text: Mapped[str] = mapped_column(String(200))
'''


# FastAPI's docs' WebSocket endpoint and a StreamingResponse of server-sent events, each
# event "<n> <time it was sent>" so a client can tell it arrived before the next was sent.
STREAMS_ROUTE = '''"""A WebSocket echo and server-sent events, added after generation."""

import asyncio
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from .body_limits import max_body_bytes

router = APIRouter(tags=["live"])
# The largest upload: deploy/nginx-locations.conf's `location = /uploads` has the same.
UPLOAD_BODY_BYTES = 8 * 1024 * 1024


@router.websocket("/ws")
async def echo(websocket: WebSocket) -> None:
    """Send each text message back."""
    await websocket.accept()
    try:
        while True:
            message = await websocket.receive_text()
            await websocket.send_text(f"echo: {message}")
    except WebSocketDisconnect:
        return


@router.get("/events")
async def events(tokens: int = 10, interval: float = 0.5) -> StreamingResponse:
    """``tokens`` server-sent events, ``interval`` seconds apart."""

    async def stream() -> AsyncIterator[str]:
        for number in range(tokens):
            if number:
                await asyncio.sleep(interval)
            yield f"data: {number} {time.time():.6f}\\n\\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


@router.post("/uploads", openapi_extra=max_body_bytes(UPLOAD_BODY_BYTES))
async def upload(request: Request) -> dict[str, int]:
    """Read the body chunk by chunk as it arrives, never whole; how many bytes it held."""
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
    return {"bytes": received}
'''
UPLOADS_LOCATION = """
location = /uploads {
    client_max_body_size 8m;   # POST /uploads: UPLOAD_BODY_BYTES in api/live.py
    proxy_pass http://app;
}
"""


JOB_ROUTE = '''"""Reports, written by a job (added after generation, docs/jobs.md's way)."""

from __future__ import annotations

from fastapi import APIRouter, status

from {package}.jobs.defer import defer
from {package}.jobs.tasks import write_report

from .items_db import UNAVAILABLE, Session

router = APIRouter(prefix="/reports", tags=["reports"], responses=UNAVAILABLE)


@router.post("", status_code=status.HTTP_202_ACCEPTED)
async def request_report(db: Session) -> dict[str, int]:
    """Queue a report of the items; the id of its job."""
    job_id = await defer(db, write_report, kind="items")
    await db.commit()
    return {{"job_id": job_id}}
'''
JOB_TASK = '''

@job_queue.task(name="write_report")
async def write_report(*, kind: str) -> None:
    """Write a report of ``kind`` (added after generation, docs/jobs.md's way)."""
    logger.info("report written", extra={{"kind": kind}})
'''


def edit(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of old in path (fail loudly if the file changed shape)."""
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        sys.exit(f"{path}: expected one {old!r}")
    path.write_text(text.replace(old, new), encoding="utf-8")


def api_routers(main: Path) -> str:
    """main.py's one `from .api import ...` line, the one a new router's name joins."""
    (line,) = re.findall(r"^from \.api import .*$", main.read_text(encoding="utf-8"), re.MULTILINE)
    return line


def add_endpoint(project: Path, package: str) -> None:
    api = project / "src" / package / "api"
    (api / "notes.py").write_text(ROUTE.format(package=package), encoding="utf-8")
    main = project / "src" / package / "main.py"
    routers = api_routers(main)
    edit(main, f"{routers}\n", f"{routers}, notes\n")
    include = "    application.include_router(items_db.router)\n"
    edit(main, include, f"{include}    application.include_router(notes.router)\n")


def add_migration(project: Path, package: str) -> None:
    models = project / "src" / package / "db" / "models.py"
    models.write_text(models.read_text(encoding="utf-8") + MODEL, encoding="utf-8")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
    from harness import postgres  # the bake's own throwaway server (its tests/pg_server.py)

    server = postgres.start(project)
    try:
        env = {**os.environ, "DATABASE_URL": server.url()}
        for command in (["upgrade", "head"], ["revision", "--autogenerate", "-m", "add notes"]):
            subprocess.run(
                [sys.executable, "-m", "alembic", *command], cwd=project, env=env, check=True
            )
    finally:
        server.remove()


def add_streams(project: Path, package: str) -> None:
    api = project / "src" / package / "api"
    (api / "live.py").write_text(STREAMS_ROUTE, encoding="utf-8")
    main = project / "src" / package / "main.py"
    # The items router's module: items_db with a database.
    items = "items_db" if (api / "items_db.py").is_file() else "items"
    routers = api_routers(main)
    edit(main, f"{routers}\n", f"{routers}, live\n")
    include = f"    application.include_router({items}.router)\n"
    edit(main, include, f"{include}    application.include_router(live.router)\n")
    locations = project / "deploy" / "nginx-locations.conf"
    text = locations.read_text(encoding="utf-8")
    locations.write_text(text + UPLOADS_LOCATION, encoding="utf-8")


def add_job(project: Path, package: str) -> None:
    """docs/jobs.md's way: a task in jobs/tasks.py, queued by defer() from a new route."""
    tasks = project / "src" / package / "jobs" / "tasks.py"
    tasks.write_text(tasks.read_text(encoding="utf-8") + JOB_TASK.format(), encoding="utf-8")
    api = project / "src" / package / "api"
    (api / "reports.py").write_text(JOB_ROUTE.format(package=package), encoding="utf-8")
    main = project / "src" / package / "main.py"
    routers = api_routers(main)
    edit(main, f"{routers}\n", f"{routers}, reports\n")
    include = "    application.include_router(notes.router)\n"
    edit(main, include, f"{include}    application.include_router(reports.router)\n")


def main(project: Path, change: str) -> None:
    (package,) = [path.parent.name for path in (project / "src").glob("*/__init__.py")]
    if change == "database":
        add_endpoint(project, package)
        add_migration(project, package)
    elif change == "jobs":  # the database's changes too: autogenerate beside the queue's tables
        add_endpoint(project, package)
        add_migration(project, package)
        add_job(project, package)
    elif change == "streams":
        add_streams(project, package)
    else:
        sys.exit(f"unknown change {change!r}: database, jobs or streams")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2])
