"""``GET /``: what this service is and where to go next, as a small JSON index.

Depends on FastAPI and pydantic; reads ``app.state.settings`` (settings.py) to list the
API docs only where they are served. Someone opening the service's address in a browser,
or ``scripts/demo``'s first link, gets the links that answer instead of a 404.
"""

from fastapi import APIRouter, Request
from pydantic import BaseModel

router = APIRouter(tags=["index"])


class Index(BaseModel):
    """The service's name and the paths that answer."""

    name: str
    health: list[str]
    # Only with the api_docs setting on (development by default); null otherwise.
    docs: str | None
    openapi: str | None


@router.get("/")
async def index(request: Request) -> Index:
    """Name the service and link its health checks and, where served, its API docs."""
    docs_on = bool(request.app.state.settings.api_docs)
    return Index(
        name=request.app.title,
        health=["/livez", "/readyz"],
        docs="/docs" if docs_on else None,
        openapi=request.app.openapi_url if docs_on else None,
    )
