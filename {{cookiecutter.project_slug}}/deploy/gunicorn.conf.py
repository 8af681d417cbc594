# gunicorn's configuration: uvicorn workers serving the ASGI app on a unix socket only nginx
# may reach; the runner starts `python -m gunicorn -c deploy/gunicorn.conf.py`. Each value
# comes from the stack's settings (docs/settings.md; a wrong value stops gunicorn with one
# line naming it); classes and hooks are serving_stack.gunicorn_config. Needs gunicorn >= 25.1.

import math

from serving_stack import gunicorn_config as stack

settings = stack.settings()

wsgi_app = stack.app_module()
bind = [f"unix:{settings.gunicorn_socket}"]
# 0660: the app's user and nginx (same user, or in the app's group) may connect; nobody else.
# Always an 0o literal: "717" as decimal is 0o1315 (socket 0462), 0o717 gives 0060.
umask = 0o117
# nginx queues at most this many connections per nginx worker beyond what gunicorn has
# accepted; a larger kernel queue absorbs bursts instead of answering 502.
backlog = settings.backlog
# gunicorn >= 25.1 opens a control socket under $HOME: useless here, impossible read-only.
control_socket_disable = True
worker_tmp_dir = settings.worker_tmp_dir or stack.SHM
# Only nginx can reach the 0660 socket, and nginx overwrites X-Forwarded-For/-Proto, so the
# headers are trusted from any socket peer (over a unix socket the peer has no address).
forwarded_allow_ips = settings.forwarded_allow_ips
proc_name = wsgi_app.partition(":")[0].partition(".")[0]
# The usable CPUs (affinity lowered by any cgroup quota) x WORKERS_PER_CORE, or WEB_CONCURRENCY.
workers = stack.workers()[0]
worker_class = stack.Worker

# Heartbeat watchdog, 60 s by default, NOT a request deadline: an async worker whose event
# loop is blocked this long is killed. At least the app's deadline (a slower `await` is the
# deadline's to cut); gunicorn takes whole seconds, rounded up so it never undercuts it.
timeout = math.ceil(settings.gunicorn_timeout)
# After SIGTERM, workers finish what they hold for this long, then are killed: at least the
# app's deadline. uvicorn gets the exact value (stack.Worker) and finishes first.
graceful_timeout = math.ceil(settings.graceful_timeout)
# nginx keeps idle upstream connections 15 s less (rendered from this value): we must keep
# them longer, or nginx may reuse a connection we just closed and answer 502.
keepalive = settings.keepalive
# Recycling is off by default: a recycled uvicorn worker resets connections holding unread
# requests (gunicorn issues 2409, 2529), which nginx retries only for idempotent methods.
max_requests = settings.max_requests
max_requests_jitter = settings.max_requests_jitter

logger_class = stack.JsonLogger
loglevel = settings.log_level
errorlog = "-"
# nginx's access log already records every request with its id and timings.
accesslog = "-" if settings.gunicorn_access_log else None

# The metrics directory; each worker's files allocated before it writes (never SIGBUS).
on_starting = stack.on_starting
post_fork = stack.post_fork
