"""The ASGI application: ``create_app()`` builds it, ``app`` is what servers import."""

from fastapi import FastAPI


def create_app() -> FastAPI:
    """Build the application."""
    application = FastAPI(title={{ cookiecutter.project_name | string_literal }})

    @application.get("/livez")
    async def livez() -> dict[str, str]:
        return {"status": "ok"}

    return application


app = create_app()
