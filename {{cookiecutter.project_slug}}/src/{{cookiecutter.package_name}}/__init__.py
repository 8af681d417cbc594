{% if cookiecutter.layout == "serving-only" -%}
"""Pure-ASGI middleware for an existing app (see README.md)."""
{%- else -%}
"""The service: a FastAPI app (see README.md for the layout)."""
{%- endif %}
