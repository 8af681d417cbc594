"""The API documentation page, /docs (Swagger UI), served offline from fastapi-offline's bundle
under a Content-Security-Policy its own assets satisfy; no ReDoc, which cannot run under it
(docs/app.md, API docs). main.py calls ``add_api_docs(app)`` when ``api_docs`` is on."""

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"

# This origin's scripts and styles only (no inline script, no eval); icons are data: URIs.
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

# Swagger UI's start-up as FastAPI configures it, a file so the page has no inline script.
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


def add_api_docs(app: FastAPI) -> None:
    """Serve /docs and its assets for ``app``, whose ``openapi_url`` must be set."""
    openapi_url = app.openapi_url
    if openapi_url is None:
        raise ValueError("the API docs need the OpenAPI schema: create the app with openapi_url")
    title = app.title
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return HTMLResponse(
            _swagger_page(title, root, openapi_url), headers={"Content-Security-Policy": DOCS_CSP}
        )

    @app.get("/docs/swagger-init.js", include_in_schema=False)
    async def swagger_init() -> Response:
        return Response(SWAGGER_INIT_JS, media_type="text/javascript")
