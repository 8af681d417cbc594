"""Pure ASGI middleware, one per module; main.py decides their order."""
