"""Body limits (api/body_limits.py) against deploy/nginx-locations.conf, read as text (no nginx
needed), and the app's OpenAPI document (no server)."""

import re
from pathlib import Path

from fastapi import FastAPI

from {{ cookiecutter.package_name }}.api.body_limits import BODY_LIMIT_KEY

NGINX_LOCATIONS = Path(__file__).resolve().parents[2] / "deploy" / "nginx-locations.conf"
# `location = /items {` or `location ~ ^/items/[^/]+$ {`, then its directives up to its `}`.
LOCATION = re.compile(r"^\s*location\s+([=~])\s*(\S+)\s*\{([^}]*)\}", re.MULTILINE)
SIZE = re.compile(r"\bclient_max_body_size\s+(\d+)([kKmM]?)\s*;")
UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}


def nginx_location(path: str) -> str:
    """The location a route's path needs: exact, or a regex where it has parameters."""
    if "{" not in path:
        return f"= {path}"
    return "~ ^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"


def test_every_declared_body_limit_has_its_nginx_location(app: FastAPI) -> None:
    """A route declaring max_body_bytes(N) has `location <path> { client_max_body_size N; }`."""
    declared = {  # each path declaring a limit: the largest of its methods'
        path: max(op[BODY_LIMIT_KEY] for op in operations.values() if BODY_LIMIT_KEY in op)
        for path, operations in app.openapi()["paths"].items()
        if any(BODY_LIMIT_KEY in op for op in operations.values())
    }
    enforced = {  # each location's limit in bytes, keyed as nginx_location() writes them
        f"{kind} {target}": int(size[1]) * UNITS[size[2].lower()]
        for kind, target, body in LOCATION.findall(NGINX_LOCATIONS.read_text(encoding="utf-8"))
        if (size := SIZE.search(body))
    }

    assert declared, "the example declares POST /items' limit (8 KiB; the battery proves it live)"
    wrong = {
        nginx_location(path): (limit, enforced.get(nginx_location(path)))
        for path, limit in declared.items()
        if enforced.get(nginx_location(path)) != limit
    }
    # {location: (declared bytes, nginx's bytes or None)}: add or fix the location in
    # deploy/nginx-locations.conf, proxy_pass http://app; inside.
    assert wrong == {}
