"""The built-in tuning benchmark: `make bench` re-measures, on this machine, the choices the
serving stack ships with (nginx -> unix socket + keepalive -> gunicorn + UvicornWorker, the
pure-ASGI middlewares, the worker count) and says which held. See docs/benchmark.md.
"""
