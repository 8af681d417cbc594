{% if cookiecutter.layout == "serving-only" -%}
"""{{ cookiecutter.project_name }}: pure-ASGI middleware for an existing app (see README.md)."""
{%- else -%}
"""{{ cookiecutter.project_name }}: a FastAPI service (see README.md for the layout)."""
{%- endif %}
