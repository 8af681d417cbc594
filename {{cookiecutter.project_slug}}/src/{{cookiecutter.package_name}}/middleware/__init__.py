"""Pure ASGI middleware, one per module; main.py decides their order. response.py is the
send wrapper they share, so a request pays for one however many of them watch it."""
