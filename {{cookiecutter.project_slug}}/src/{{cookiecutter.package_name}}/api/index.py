"""``GET /``: the service's name and the paths that answer (the API docs only where served),
so its address in a browser gets links instead of a 404. Reads ``app.state.settings``."""

from fastapi import APIRouter, Request
from pydantic import BaseModel

router = APIRouter(tags=["index"])


class Index(BaseModel):
    """The service's name and the paths that answer."""

    name: str
    health: list[str]
    docs: str | None  # null unless the api_docs setting is on
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
