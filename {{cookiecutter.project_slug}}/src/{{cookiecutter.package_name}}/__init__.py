"""{{ cookiecutter.project_name }}: a FastAPI service (see README.md for the layout)."""
