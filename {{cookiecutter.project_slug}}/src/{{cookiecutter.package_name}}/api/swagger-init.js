// Swagger UI's start-up for /docs, as FastAPI configures it: a file (served by docs.py at
// /docs/swagger-init.js) so the page runs under a CSP without inline scripts. Needs the
// swagger-ui-bundle.js the page loads first, and the OpenAPI URL in data-openapi-url.
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
