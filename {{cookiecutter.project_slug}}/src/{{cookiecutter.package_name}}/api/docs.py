"""The API documentation pages, /docs (Swagger UI) and /redoc (ReDoc), served offline.

Depends on FastAPI and fastapi-offline, whose only use here is the Swagger UI and ReDoc
bundles it ships (``fastapi_offline/static``): no CDN, no Google Fonts, so the pages work on
a machine without internet and load no third-party script on the service's origin.
main.py calls ``add_api_docs(app)`` when the ``api_docs`` setting is on.

Each page carries a Content-Security-Policy that its own assets satisfy: scripts only from
this origin (the Swagger UI start-up code is a file, not an inline script), nothing fetched
from elsewhere, never framed. ``tests/serving/test_docs_browser.py`` renders both pages in
headless Chromium under these headers and fails on any CSP violation.
"""

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"

# Shared by both pages: nothing from another origin, no <base>, no form posts, no framing.
_COMMON_CSP = (
    "default-src 'none'; connect-src 'self'; img-src 'self' data:; font-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# Swagger UI: its bundle, the start-up file below and its stylesheet, all from here.
SWAGGER_CSP = f"{_COMMON_CSP}; script-src 'self'; style-src 'self'"
# ReDoc renders with styled-components, which writes <style> elements at run time (hence
# 'unsafe-inline' for styles only, never scripts), and searches in a blob: web worker.
REDOC_CSP = f"{_COMMON_CSP}; script-src 'self'; style-src 'self' 'unsafe-inline'; worker-src blob:"

# Swagger UI's start-up, as FastAPI's own page configures it, reading the schema's URL from
# the page, so the page needs no inline script.
SWAGGER_INIT_JS = """\
"use strict";
const target = document.getElementById("swagger-ui");
window.ui = SwaggerUIBundle({
  url: target.dataset.openapiUrl,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""


def _swagger_page(title: str, root: str, openapi_url: str) -> str:
    assets = escape(root + ASSETS_URL)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)} - Swagger UI</title>
<link rel="icon" href="{assets}/favicon.png">
<link rel="stylesheet" href="{assets}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{escape(root + openapi_url)}"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{escape(root)}/docs/swagger-init.js"></script>
</body>
</html>
"""


def _redoc_page(title: str, root: str, openapi_url: str) -> str:
    assets = escape(root + ASSETS_URL)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)} - ReDoc</title>
<link rel="icon" href="{assets}/favicon.png">
</head>
<body>
<redoc spec-url="{escape(root + openapi_url)}"></redoc>
<script src="{assets}/redoc.standalone.js"></script>
</body>
</html>
"""


def add_api_docs(app: FastAPI) -> None:
    """Serve /docs, /redoc and their assets for ``app``, whose ``openapi_url`` must be set."""
    openapi_url = app.openapi_url
    if openapi_url is None:
        raise ValueError("the API docs need the OpenAPI schema: create the app with openapi_url")
    title = app.title
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return HTMLResponse(
            _swagger_page(title, root, openapi_url),
            headers={"Content-Security-Policy": SWAGGER_CSP},
        )

    @app.get("/docs/swagger-init.js", include_in_schema=False)
    async def swagger_init() -> Response:
        return Response(SWAGGER_INIT_JS, media_type="text/javascript")

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return HTMLResponse(
            _redoc_page(title, root, openapi_url),
            headers={"Content-Security-Policy": REDOC_CSP},
        )
