# gunicorn (>= 25.1): uvicorn workers on a unix socket only nginx may reach; the stack's own
# config (GUNICORN_CONF), loaded as python:serving_stack.gunicorn_conf. The values come from
# the stack's settings (README.md); classes and hooks: serving_stack.gunicorn_config.
# gunicorn's own GUNICORN_CMD_ARGS, which it applies after this file, sets any other setting:
# "--max-requests=1000 --max-requests-jitter=100" recycles workers (off here: a recycled
# uvicorn worker resets its connections, gunicorn issues 2409 and 2529).

import math

from serving_stack import gunicorn_config as stack

settings = stack.settings()

wsgi_app = stack.app_module()
bind = [f"unix:{settings.gunicorn_socket}"]
# 0660: the app's user and nginx (same user, or in the app's group) may connect; nobody else.
# Always an 0o literal: "717" as decimal is 0o1315 (socket 0462), 0o717 gives 0060.
umask = 0o117
# gunicorn >= 25.1 opens a control socket under $HOME: useless here, impossible read-only.
control_socket_disable = True
worker_tmp_dir = stack.SHM  # the heartbeat files on tmpfs, when there is one
# Only nginx reaches the socket, and it overwrites X-Forwarded-For/-Proto: trusted from any peer.
forwarded_allow_ips = "*"
proc_name = wsgi_app.partition(":")[0].partition(".")[0]
# WEB_CONCURRENCY, else the usable CPUs (affinity lowered by any cgroup quota) within 2..8.
workers = stack.workers()[0]
worker_class = stack.Worker

# A watchdog for a blocked event loop, NOT a request deadline; at least the app's deadline,
# in whole seconds rounded up.
timeout = math.ceil(settings.gunicorn_timeout)
# After SIGTERM, workers finish what they hold this long (uvicorn: the exact value, first).
graceful_timeout = math.ceil(settings.graceful_timeout)
# nginx keeps idle upstream connections 15 s less: else it may reuse a closed one (a 502).
keepalive = settings.keepalive

logger_class = stack.JsonLogger
loglevel = settings.log_level
errorlog = "-"
# No access line: nginx logs each request with its id and timings; --access-logfile=- adds one.

# The metrics directory; each worker's files allocated before it writes (never SIGBUS).
on_starting = stack.on_starting
post_fork = stack.post_fork
