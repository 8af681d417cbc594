"""The API documentation page, /docs (Swagger UI), served offline from fastapi-offline's bundle
under a Content-Security-Policy its own assets satisfy; no ReDoc, which cannot run under it
(docs/app.md, API docs). main.py calls ``add_api_docs(app)`` when ``api_docs`` is on."""

from html import escape
from pathlib import Path
from string import Template

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"

# This origin's scripts and styles only (no inline script, no eval); icons are data: URIs.
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

# The page (values HTML-escaped below) and Swagger UI's start-up: files, no inline script.
SWAGGER_PAGE = Template(Path(__file__).with_name("swagger.html").read_text(encoding="utf-8"))
SWAGGER_INIT = Path(__file__).with_name("swagger-init.js")


def add_api_docs(app: FastAPI) -> None:
    """Serve /docs and its assets for ``app``, whose ``openapi_url`` must be set."""
    openapi_url = app.openapi_url
    if openapi_url is None:
        raise ValueError("the API docs need the OpenAPI schema: create the app with openapi_url")
    title, openapi_url = escape(app.title), escape(openapi_url)
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = escape(request.scope.get("root_path", ""))
        page = SWAGGER_PAGE.substitute(
            title=title, root=root, assets=root + ASSETS_URL, openapi_url=root + openapi_url
        )
        return HTMLResponse(page, headers={"Content-Security-Policy": DOCS_CSP})

    @app.get("/docs/swagger-init.js", include_in_schema=False)
    async def swagger_init() -> FileResponse:
        return FileResponse(SWAGGER_INIT, media_type="text/javascript")
